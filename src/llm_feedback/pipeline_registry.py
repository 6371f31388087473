"""Project pipelines."""

import pkgutil

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


def pipeline_names() -> list[str]:
    """The names `kedro run --pipelines` accepts, without importing any pipeline: each
    package of `llm_feedback.pipelines` (what `find_pipelines` registers) and __default__.

    Returns:
        The names, sorted, __default__ last.
    """
    from llm_feedback import pipelines

    found = sorted(
        module.name for module in pkgutil.iter_modules(pipelines.__path__) if module.ispkg
    )
    return [*found, "__default__"]
