"""Evaluate's injection flag and its differential check, in every mode.

A response (or, on a second turn, the first-turn response shown with it) that addresses the
evaluator or carries a verdict that does not answer its question
(`replies.injection.suspected_injection`, read in the context of the sample's question and
category) makes its rows' `suspected_injection` true. Every pointwise judgment (binary,
score_0_5, single 1-10, rubric) already rates one response per call, so nothing of it
reaches another sample's call; what protects its own rating is the differential check: the
sample is judged as written and again with its suspicious spans left out, and its rows keep
the lower judgment (per criterion in rubric mode; the one read when the judge gave only one;
the one as written when the two agree: no penalty). In pairwise mode the pair is judged
again (both orders) with the spans left out of each flagged response; the same outcome both
ways keeps the pair as written; otherwise, when one response is flagged the outcome kept is
the worse of the two for it, when both are, the outcome without the spans. So an
instruction to the judge can lower its own text's verdict, never raise it. The price: one
more call per flagged sample, two more per pair with a flagged response; a panel pays it
per judge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from llm_feedback.annotation.isolation import written_kept
from llm_feedback.judges import PairJudgment
from llm_feedback.replies.injection import suspected_injection, without_suspicious_spans

_UNTRUSTED = ("response", "prior_response")
# How well each pairwise outcome stands for response A (B: the reverse).
_STANDING_OF_A = {"A": 2, "tie": 1, "B": 0}


def _text(value: Any) -> str | None:
    return None if value is None or (not isinstance(value, str) and pd.isna(value)) else value


def _context(sample: Any) -> tuple[str, str]:
    """The instruction and task kind a sample's responses answer: its question (after the
    first turn's on a second turn, whose answers may answer either) and its category."""
    questions = [_text(getattr(sample, "question", None)) or ""]
    if getattr(sample, "turn", 1) == 2:
        questions.insert(0, _text(getattr(sample, "prior_question", None)) or "")
    return "\n".join(questions), _text(getattr(sample, "category", None)) or ""


def flagged(sample: Any) -> bool:
    """Whether a sample's response (or, on a second turn, its first-turn response) is a
    suspected injection, read in the context of its question and category.

    Args:
        sample: a row of eval_samples (a named tuple).

    Returns:
        True when any of its untrusted texts addresses the evaluator or carries a verdict
        that does not answer its question.
    """
    context = _context(sample)
    response = _text(getattr(sample, "response", None))
    if response and suspected_injection(response, *context):
        return True
    prior = _text(getattr(sample, "prior_response", None))
    return (
        getattr(sample, "turn", 1) == 2
        and prior is not None
        and suspected_injection(prior, *context)
    )


def without_spans(sample: Any) -> Any:
    """The sample with the suspicious spans left out of its untrusted texts.

    Args:
        sample: a row of eval_samples (a named tuple).

    Returns:
        The same row with `response` and `prior_response` as the differential check shows them.
    """
    context = _context(sample)
    changes = {
        column: without_suspicious_spans(text, *context)
        for column in _UNTRUSTED
        if (text := _text(getattr(sample, column, None))) is not None
    }
    return sample._replace(**changes)


def kept_rows(
    written: Sequence[Mapping[str, Any]], without: Sequence[Mapping[str, Any]], value_column: str
) -> list[dict[str, Any]]:
    """Per row (per criterion in rubric mode), the lower of the two judgments, or the one
    read; the one as written when they agree (`annotation.isolation.written_kept`).

    Args:
        written: the rows of the sample as written.
        without: the rows of the sample without its suspicious spans, in the same order.
        value_column: the kind's verdict column (`score`).

    Returns:
        The kept rows, each with `suspected_injection` set.
    """
    kept = []
    for ours, theirs in zip(written, without, strict=True):
        lower = written_kept(ours.get(value_column), theirs.get(value_column))
        kept.append({**(ours if lower else theirs), "suspected_injection": True})
    return kept


def kept_pair(
    written: PairJudgment, without: PairJudgment, flagged_a: bool, flagged_b: bool
) -> PairJudgment:
    """The comparison kept for a pair with a flagged response: the one as written when both
    have the same outcome (no penalty) or only it has one; else the one without the spans,
    unless only one response is flagged and the pair as written stood worse for it.

    Args:
        written: the comparison of the responses as written (both orders).
        without: the comparison with the flagged responses' spans left out.
        flagged_a: whether response A (model_a's) is flagged.
        flagged_b: whether response B is flagged.

    Returns:
        One of the two comparisons.
    """
    if without.winner is None or written.winner == without.winner:
        return written  # the only outcome read, if any, or the same outcome
    if flagged_a == flagged_b or written.winner is None:
        return without
    standing = _STANDING_OF_A if flagged_a else {k: 2 - v for k, v in _STANDING_OF_A.items()}
    return written if standing[written.winner] < standing[without.winner] else without
