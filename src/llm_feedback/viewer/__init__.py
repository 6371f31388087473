"""The judgment viewer: static HTML sites, opened from disk, to read every judgment of an
annotate run (`feedback_site`) or of an evaluate run (`evaluation_site`), filter them, and
label a sample by hand (`labels` documents the downloaded file). Pure: no Kedro."""

from llm_feedback.viewer.evaluation import evaluation_site
from llm_feedback.viewer.feedback import feedback_site
from llm_feedback.viewer.labels import PAIRWISE_FIELDS, POINTWISE_FIELDS
from llm_feedback.viewer.site import StaticSite

__all__ = [
    "PAIRWISE_FIELDS",
    "POINTWISE_FIELDS",
    "StaticSite",
    "evaluation_site",
    "feedback_site",
]
