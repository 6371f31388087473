"""The lmms-eval compatible layer of `Judge`: lmms-eval's dict-returning judge calls.

One definition per call (`forms.py`, from `factory.CompatForm`) makes its four forms: sync,
async, batch and batch-async; `inputs.py` reads the inputs lmms-eval spells differently.
"""

from llm_feedback.judges.lmms_eval_compat.forms import FORMS, LmmsEvalCompatible

__all__ = ["FORMS", "LmmsEvalCompatible"]
