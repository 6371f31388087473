"""The probability verdicts of `eval_judgments`, beside the argmax ones the replies' text gave.

Where the judge's calls asked for token probabilities (`evaluate.judge_logprobs`) and the
reply kept them at its label tokens (`Judgment.label_logprobs`), the verdict token is the
label token at the place the kind's reader takes the verdict from (`verdict_anchor`,
`rating_anchor`: the JSON field when the reply is JSON, else the marker), and
`validation.logprobs` turns its alternatives into:

- scored kinds (`single_1_10`, `score_0_5`): `expected_score`, the probability-weighted
  mean of the scale's numbers, and `logprobs_usable`;
- `pairwise`: per order, `prob_margin_<order>` = P(A) - P(B) and `p_tie_<order>` in the
  row's labels (A = model_a's response, whichever was shown first), `prob_margin` = their
  mean over both orders (the order-averaged verdict: > 0 favours A), and
  `logprobs_usable` when every order had usable probabilities.

A value without usable probabilities is NaN (and `logprobs_usable` False): the argmax
columns stand, and the judge card says "no usable probabilities: argmax only".
"""

from __future__ import annotations

import math
import re
from typing import Any

from llm_feedback.judges import JudgeKind, Judgment, KindOptions, PairJudgment
from llm_feedback.validation.logprobs import LOGPROBS, pairwise_from_labels, rating_from_labels

_JSON_VERDICT = re.compile(r'"verdict"\s*:\s*"\s*\[*\s*([ABC])', re.IGNORECASE)
_MARKED_VERDICT = re.compile(r"\[\[\s*([ABC])\s*\]\]", re.IGNORECASE)
_JSON_RATING = re.compile(r'"rating"\s*:\s*"?\s*(\d+)')
_MARKED_RATING = re.compile(r"\[\[\s*(\d+)|rating\s*:\s*\**\s*(\d+)", re.IGNORECASE)
_SHOWN = {"A": "first", "B": "second", "tie": "tie"}


def verdict_anchor(text: str | None) -> int | None:
    """Where a pairwise reply states its verdict: the JSON "verdict" (what the reader takes
    first), else the last `[[A|B|C]]`; None when neither is there.

    Args:
        text: the judge's reply (None: no reply).

    Returns:
        The verdict's character offset, or None.
    """
    if not text:
        return None
    found = _JSON_VERDICT.search(text)
    if found is None:
        marks = list(_MARKED_VERDICT.finditer(text))
        found = marks[-1] if marks else None
    return None if found is None else found.start(1)


def rating_anchor(text: str | None) -> int | None:
    """Where a rating reply states its rating: the JSON "rating", else the first `[[N]]` or
    "Rating: N"; None when none is there.

    Args:
        text: the judge's reply (None: no reply).

    Returns:
        The rating's character offset, or None.
    """
    if not text:
        return None
    found = _JSON_RATING.search(text) or _MARKED_RATING.search(text)
    if found is None:
        return None
    return found.start(1) if found.group(1) is not None else found.start(2)


def score_probability_columns(
    judgment: Judgment, kind: JudgeKind, options: KindOptions
) -> dict[str, Any]:
    """`expected_score` and `logprobs_usable` of one scored judgment.

    Args:
        judgment: the judgment, with its label log-probabilities.
        kind: the judge kind (its scale).
        options: the kind's settings.

    Returns:
        The two columns.
    """
    if kind.logprob_labels is None or judgment.label_logprobs is None:
        return {"expected_score": math.nan, "logprobs_usable": False}
    low, high = options.scale
    verdict = rating_from_labels(
        judgment.label_logprobs,
        range(int(low), int(high) + 1),
        judgment.value if isinstance(judgment.value, int | float) else None,
        rating_anchor(judgment.raw_reply),
    )
    usable = verdict["source"] == LOGPROBS
    return {
        "expected_score": verdict["expected_score"] if usable else math.nan,
        "logprobs_usable": usable,
    }


def _order_probabilities(judgment: Judgment, shown_first_is_a: bool) -> tuple[float, float]:
    """(P(A) - P(B), P(tie)) of one order in the row's labels; NaN without probabilities."""
    value = judgment.value if isinstance(judgment.value, dict) else {}
    argmax = _SHOWN.get(value.get("verdict") or "")
    verdict = pairwise_from_labels(
        judgment.label_logprobs, argmax, verdict_anchor(judgment.raw_reply), tie_label="C"
    )
    if verdict["source"] != LOGPROBS:
        return math.nan, math.nan
    margin = verdict["margin"] if shown_first_is_a else -verdict["margin"]
    return margin, verdict["p_tie"]


def pair_probability_columns(pair: PairJudgment | None) -> dict[str, Any]:
    """The probability columns of one comparison (None: no comparison was made).

    Args:
        pair: the comparison's judgments in both orders, or None.

    Returns:
        The probability columns.
    """
    columns: dict[str, Any] = {"logprobs_usable": False, "prob_margin": math.nan}
    orders = () if pair is None else pair.orders
    margins = []
    for name, position in (("a_first", 0), ("b_first", 1)):
        margin, tie = math.nan, math.nan
        if position < len(orders):
            margin, tie = _order_probabilities(orders[position], shown_first_is_a=position == 0)
        columns[f"prob_margin_{name}"], columns[f"p_tie_{name}"] = margin, tie
        margins.append(margin)
    if orders and all(math.isfinite(margin) for margin in margins[: len(orders)]):
        columns["prob_margin"] = math.fsum(margins[: len(orders)]) / len(orders)
        columns["logprobs_usable"] = True
    return columns
