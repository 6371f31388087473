"""The judge card in the annotate report: the identity of annotate's judge (its endpoint,
model and model file, aspect-rating prompt templates, sampling and task), under which
`judge_validation` files a card when that judge has been validated with the same prompt;
the report's first screen shows the cards of the same model, endpoint and sampling on any
task (`validation.card.validation_standing`).

The report reads that identity from the data's lineage (`runs.record.recorded_judge`),
never from the configuration of the run that prints it: `reporting.recorded_judge` words
it.
"""

from __future__ import annotations

from llm_feedback.params import AnnotateParams
from llm_feedback.validation.identity import endpoint_name, judge_identity
from llm_feedback.validation.model_file import model_file_identity

# The templates of annotate's aspect ratings: its judge's prompt.
ANNOTATE_TEMPLATES = ("system_aspect", "aspect")


def annotate_judge_identity(annotate: AnnotateParams) -> dict[str, str]:
    """The identity columns of annotate's judge (`validation.identity.judge_identity`).

    Args:
        annotate: Annotate's parameters (endpoint, aspects, templates, sampling).

    Returns:
        The identity columns, by name.
    """
    # The templates in use (a `prompt_templates` folder's where it replaces ours).
    templates = annotate.templates
    names = [
        *ANNOTATE_TEMPLATES,
        *(f"aspect_{aspect}" for aspect in annotate.aspects if templates.has(f"aspect_{aspect}")),
    ]
    text = "".join(templates.load(name) for name in names)
    task = {"task": "annotate", "aspects": list(annotate.aspects)}
    endpoint = annotate.endpoint
    return judge_identity(
        endpoint_name(endpoint),
        endpoint.model,
        text,
        annotate.aspect_sampling,
        model_file=model_file_identity(endpoint),
        task=task,
    )
