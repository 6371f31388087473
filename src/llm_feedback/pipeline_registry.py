"""Project pipelines."""

from kedro.framework.project import find_pipelines
from kedro.pipeline import Pipeline

# Data-flow order of the feedback pipelines; `evaluate` stands apart (own inputs).
FEEDBACK_ORDER = ("sample", "generate", "annotate", "report")


def register_pipelines() -> dict[str, Pipeline]:
    pipelines = find_pipelines(raise_errors=True)
    pipelines["__default__"] = sum(
        (pipelines[name] for name in FEEDBACK_ORDER if name in pipelines), Pipeline([])
    )
    return pipelines
