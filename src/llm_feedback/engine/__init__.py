"""The task engine: every model call of every pipeline and judge runs through `TaskEngine`."""

from llm_feedback.engine.engine import (
    RunSummary,
    TaskEngine,
    overlaps_stages,
    reask_request,
    run_together,
)
from llm_feedback.engine.tasks import Outcome, Reader, Reading, Task, read_text

__all__ = [
    "Outcome",
    "Reader",
    "Reading",
    "RunSummary",
    "Task",
    "TaskEngine",
    "overlaps_stages",
    "read_text",
    "reask_request",
    "run_together",
]
