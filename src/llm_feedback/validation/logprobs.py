"""Verdicts from a judge's token probabilities, beside the argmax verdict it wrote.

Where an endpoint returns top log-probabilities (OpenAI chat format, also llama.cpp's and
vLLM's OpenAI servers: `choices[0].logprobs.content[i]` = {`token`, `logprob`,
`top_logprobs`: [{`token`, `logprob`}, ...]}), the verdict token's alternatives give a
distribution over the labels:

- the verdict position is the LAST generated token that is a label once whitespace and
  brackets, quotes, asterisks and trailing punctuation are stripped ("[[A]]" -> "A"); a
  numeric label followed directly by a digit token is not one ("1" then "0" is 10), so a
  rating the tokenizer splits cannot be read and falls back;
- a label's probability is the sum of exp(logprob) of its top tokens (" A" and "A" both
  count), renormalised over the labels; `coverage` is the mass the labels had before;
- pointwise: `expected_score` = sum of label x probability; pairwise: P(first shown),
  P(second shown), P(tie) when a tie label is given, and `margin` = P(first) - P(second).

The client keeps only the label positions of a reply (`backends.token_logprobs`);
`pairwise_from_labels` / `rating_from_labels` read those, the verdict's position being
the label token at the character where the reply's reader found the verdict (`anchor`:
in a JSON reply the "verdict" field, not an "A" in its explanation), else the last one.

No logprobs, no verdict position, or no label among the top tokens: the verdict falls back
to the argmax the reply's text gave, with `source` "argmax" and `fallback_reason`
("no logprobs", "no verdict token", "no label in top logprobs").

Calibration of the first-position bias (pairwise). On a validation set judged in both
orders, an unbiased judge's margins cancel over the two orders of an item (the same item
shown A-first gives d, B-first gives -d), so the bias is b = the mean of `margin` (first
minus second as shown) over every call of the items that have usable probabilities in
both orders. On the validation set itself b is cross-fitted, so that no item calibrates
itself: a call's b is measured on every OTHER instance (leave one instance out,
`cross_fitted_bias`; 0 where no other instance has both orders). The calibrated margin of
a call is `margin - b`; in original labels it is that margin for the original order and
its negative for the swapped one; its verdict is A above `tie_band`, B below -`tie_band`,
a tie between. `b` over all items is stored with
the judge's card and applied to later runs of the same judge. Averaging the two orders'
original-label margins removes b per item without measuring it (both orders then share
one verdict).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from llm_feedback.backends.token_logprobs import label_entries, normalise
from llm_feedback.validation.verdicts import ORIGINAL, SWAPPED

LOGPROBS = "logprobs"
ARGMAX = "argmax"
NO_LOGPROBS = "no logprobs"


def logprob_content(response: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """`choices[0].logprobs.content` of a chat completion (a dict), None when absent.

    Args:
        response: a chat completion, as a dict.

    Returns:
        The per-token entries, or None.
    """
    try:
        content = response["choices"][0]["logprobs"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    return content if isinstance(content, list) and content else None


def verdict_position(content: Sequence[Mapping[str, Any]], labels: Sequence[str]) -> int | None:
    """Index of the last generated token that is one of `labels`; None when none is.

    Args:
        content: the per-token entries.
        labels: the label tokens.

    Returns:
        The index, or None.
    """
    wanted = set(labels)
    for position in range(len(content) - 1, -1, -1):
        label = normalise(str(content[position].get("token", "")))
        if label not in wanted:
            continue
        following = content[position + 1].get("token", "") if position + 1 < len(content) else ""
        if label.isdigit() and str(following)[:1].isdigit():
            continue  # part of a longer number, as "1" in "10"
        return position
    return None


def label_distribution(
    entry: Mapping[str, Any], labels: Sequence[str]
) -> tuple[dict[str, float], float] | None:
    """(probability of each label renormalised over the labels, the labels' raw mass) at
    one position; None when no top token is a label.

    Args:
        entry: one token's entry, with its top alternatives.
        labels: the label tokens.

    Returns:
        (the distribution, the raw mass), or None.
    """
    mass = dict.fromkeys(labels, 0.0)
    alternatives = entry.get("top_logprobs") or [entry]
    for alternative in alternatives:
        label = normalise(str(alternative.get("token", "")))
        logprob = alternative.get("logprob")
        if label in mass and isinstance(logprob, (int, float)) and math.isfinite(logprob):
            mass[label] += math.exp(logprob)
    total = sum(mass.values())
    if total <= 0:
        return None
    return {label: value / total for label, value in mass.items()}, min(total, 1.0)


def chosen_entry(
    entries: Sequence[Mapping[str, Any]], anchor: int | None
) -> Mapping[str, Any] | None:
    """The verdict's label entry (`backends.token_logprobs.label_entries`): the one whose
    token covers character `anchor` of the reply (where the reader found the verdict),
    else the last one; None when there is none.

    Args:
        entries: the label entries.
        anchor: the verdict's character offset in the reply (None: take the last).

    Returns:
        The entry, or None.
    """
    if not entries:
        return None
    if anchor is not None:
        for entry in entries:
            if entry["offset"] <= anchor < entry["offset"] + max(len(entry["token"]), 1):
                return entry
    return entries[-1]


def _distribution(
    entries: Sequence[Mapping[str, Any]] | None, labels: Sequence[str], anchor: int | None
) -> tuple[dict[str, float] | None, float, str | None]:
    if entries is None:
        return None, 0.0, NO_LOGPROBS
    entry = chosen_entry(entries, anchor)
    if entry is None:
        return None, 0.0, "no verdict token"
    found = label_distribution(entry, labels)
    if found is None:
        return None, 0.0, "no label in top logprobs"
    return found[0], found[1], None


def _entries(content: Sequence[Mapping[str, Any]] | None, labels: Sequence[str]):
    return label_entries({"content": list(content)} if content else None, labels)


def rating_verdict(
    content: Sequence[Mapping[str, Any]] | None,
    scale: Sequence[int],
    argmax_score: float | None,
) -> dict[str, Any]:
    """The expected score over the rating tokens `scale` beside the argmax score, from a
    reply's whole `logprobs.content`.

    Args:
        content: the per-token entries (None: none returned).
        scale: the rating values.
        argmax_score: the reply text's rating.

    Returns:
        argmax_score, expected_score, coverage, source and fallback_reason.
    """
    labels = [str(value) for value in scale]
    return rating_from_labels(_entries(content, labels), scale, argmax_score)


def rating_from_labels(
    entries: Sequence[Mapping[str, Any]] | None,
    scale: Sequence[int],
    argmax_score: float | None,
    anchor: int | None = None,
) -> dict[str, Any]:
    """`rating_verdict` from the label entries a reply kept, the verdict at `anchor`.

    Args:
        entries: the label entries the reply kept.
        scale: the rating values.
        argmax_score: the reply text's rating.
        anchor: the verdict's character offset in the reply.

    Returns:
        As `rating_verdict`.
    """
    labels = [str(value) for value in scale]
    distribution, coverage, reason = _distribution(entries, labels, anchor)
    if distribution is None:
        return {
            "argmax_score": argmax_score,
            "expected_score": argmax_score,
            "coverage": float("nan"),
            "source": ARGMAX,
            "fallback_reason": reason,
        }
    expected = sum(float(label) * p for label, p in distribution.items())
    return {
        "argmax_score": argmax_score,
        "expected_score": expected,
        "coverage": coverage,
        "source": LOGPROBS,
        "fallback_reason": None,
    }


_ARGMAX_PROBABILITIES = {"first": (1.0, 0.0, 0.0), "second": (0.0, 1.0, 0.0), "tie": (0, 0, 1.0)}


def pairwise_verdict(
    content: Sequence[Mapping[str, Any]] | None,
    argmax_verdict: str | None,
    *,
    first_label: str = "A",
    second_label: str = "B",
    tie_label: str | None = None,
) -> dict[str, Any]:
    """P(first shown), P(second shown), P(tie) and their margin, in SHOWN positions, from
    a reply's whole `logprobs.content`.

    `argmax_verdict` is the reply text's verdict as shown ("first", "second", "tie" or
    None when unreadable); the fallback's probabilities are its one-hot (NaN when None).

    Args:
        content: the per-token entries (None: none returned).
        argmax_verdict: the reply text's verdict as shown.
        first_label: the token of the response shown first.
        second_label: the token of the response shown second.
        tie_label: the tie's token (None: no tie).

    Returns:
        The probabilities, margin, source and fallback reason.
    """
    labels = [first_label, second_label, *([tie_label] if tie_label else [])]
    return pairwise_from_labels(
        _entries(content, labels),
        argmax_verdict,
        first_label=first_label,
        second_label=second_label,
        tie_label=tie_label,
    )


def pairwise_from_labels(
    entries: Sequence[Mapping[str, Any]] | None,
    argmax_verdict: str | None,
    anchor: int | None = None,
    *,
    first_label: str = "A",
    second_label: str = "B",
    tie_label: str | None = None,
) -> dict[str, Any]:
    """`pairwise_verdict` from the label entries a reply kept, the verdict at `anchor`.

    Args:
        entries: the label entries the reply kept.
        argmax_verdict: the reply text's verdict as shown.
        anchor: the verdict's character offset in the reply.
        first_label: the token of the response shown first.
        second_label: the token of the response shown second.
        tie_label: the tie's token (None: no tie).

    Returns:
        As `pairwise_verdict`.
    """
    labels = [first_label, second_label, *([tie_label] if tie_label else [])]
    distribution, coverage, reason = _distribution(entries, labels, anchor)
    if distribution is None:
        p_first, p_second, p_tie = _ARGMAX_PROBABILITIES.get(
            argmax_verdict or "", (math.nan, math.nan, math.nan)
        )
        source = ARGMAX
        coverage = math.nan
    else:
        p_first, p_second = distribution[first_label], distribution[second_label]
        p_tie = distribution.get(tie_label, 0.0) if tie_label else 0.0
        source = LOGPROBS
    return {
        "argmax_verdict": argmax_verdict,
        "p_first": float(p_first),
        "p_second": float(p_second),
        "p_tie": float(p_tie),
        "margin": float(p_first - p_second),
        "coverage": float(coverage),
        "source": source,
        "fallback_reason": reason,
    }


def probability_verdicts(calls: pd.DataFrame) -> pd.DataFrame:
    """A verdict frame (`p_a`, `p_b`, `p_tie` in ORIGINAL labels) from calls with
    `instance_id`, `order`, `p_first`, `p_second`, `p_tie` (shown positions).

    Args:
        calls: the per-call probabilities, in shown positions.

    Returns:
        The verdict frame.
    """
    original = (calls["order"] == ORIGINAL).to_numpy()
    first, second = calls["p_first"].to_numpy(), calls["p_second"].to_numpy()
    return calls.drop(columns=["p_first", "p_second"]).assign(
        p_a=np.where(original, first, second), p_b=np.where(original, second, first)
    )


def position_bias(calls: pd.DataFrame) -> tuple[float, int]:
    """(b, the number of items it is measured on): the mean first-minus-second margin over
    both orders of every item whose two calls have usable probabilities.

    Args:
        calls: the per-call probabilities and margins.

    Returns:
        (b, the number of items).
    """
    paired, keys = _paired(calls)
    if paired.empty:
        return float("nan"), 0
    return float(paired["margin"].mean()), len(paired.drop_duplicates(keys))


def _paired(calls: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The calls with usable probabilities of the units that have both orders usable."""
    usable = calls[(calls["source"] == LOGPROBS) & calls["margin"].notna()]
    keys = ["instance_id", *(["replicate"] if "replicate" in calls.columns else [])]
    orders = usable.groupby(keys)["order"].transform("nunique")
    return usable[orders == 2], keys


def cross_fitted_bias(calls: pd.DataFrame) -> np.ndarray:
    """Per call, the position bias (`position_bias`) measured on every other instance: an
    item never calibrates itself. 0 where no other instance has both orders usable.

    Args:
        calls: the per-call probability frame (`instance_id`, `order`, `margin`, `source`,
            optional `replicate`).

    Returns:
        One bias per row of `calls`, in row order.
    """
    paired, _ = _paired(calls)
    margins = paired["margin"].astype("float64")
    own_sum = margins.groupby(paired["instance_id"]).sum()
    own_count = margins.groupby(paired["instance_id"]).size()
    others_sum = margins.sum() - calls["instance_id"].map(own_sum).fillna(0.0)
    others = len(margins) - calls["instance_id"].map(own_count).fillna(0)
    others_sum, others = others_sum.to_numpy(dtype="float64"), others.to_numpy(dtype="float64")
    return np.where(others > 0, others_sum / np.maximum(others, 1), 0.0)


def calibrated_verdicts(
    calls: pd.DataFrame, bias: float | np.ndarray, *, tie_band: float = 0.0
) -> pd.DataFrame:
    """`calls` with `calibrated_margin` (original labels: > 0 favours A) and `verdict` from
    it; calls without usable probabilities keep their argmax verdict (`source` says so).
    `bias` is one value for every call, or one per call (`cross_fitted_bias`).

    Args:
        calls: the per-call probabilities and margins.
        bias: the position bias to remove.
        tie_band: margins within it are ties.

    Returns:
        The calls with their calibrated verdicts.
    """
    shown = calls["margin"].to_numpy(dtype="float64") - np.asarray(bias, dtype="float64")
    sign = np.where((calls["order"] == SWAPPED).to_numpy(), -1.0, 1.0)
    margin = sign * shown
    from_margin = np.where(margin > tie_band, "A", np.where(margin < -tie_band, "B", "tie"))
    argmax = [
        _original_label(v, o) for v, o in zip(calls["argmax_verdict"], calls["order"], strict=True)
    ]
    usable = (calls["source"] == LOGPROBS).to_numpy() & np.isfinite(margin)
    verdict = [m if ok else a for m, ok, a in zip(from_margin, usable, argmax, strict=True)]
    return calls.assign(
        calibrated_margin=np.where(usable, margin, np.nan),
        verdict=pd.Series(verdict, index=calls.index, dtype=object),
    )


def _original_label(shown: str | None, order: str) -> str | None:
    """A shown verdict ("first", "second", "tie") in original labels; None when unreadable."""
    if not isinstance(shown, str) or shown not in ("first", "second", "tie"):
        return None
    if shown == "tie":
        return "tie"
    return "A" if (shown == "first") == (order == ORIGINAL) else "B"


def order_averaged_verdicts(calls: pd.DataFrame, *, tie_band: float = 0.0) -> pd.DataFrame:
    """Both calls of an item given the verdict of the mean of their original-label margins
    (the position bias cancels); items lacking a usable order keep their argmax verdicts.

    Args:
        calls: the per-call probabilities and margins.
        tie_band: margins within it are ties.

    Returns:
        The calls with their order-averaged verdicts.
    """
    frame = calibrated_verdicts(calls, 0.0, tie_band=tie_band)
    keys = ["instance_id", *(["replicate"] if "replicate" in calls.columns else [])]
    grouped = frame.groupby(keys)["calibrated_margin"]
    mean = grouped.transform("mean")
    complete = grouped.transform("count") == 2
    averaged = np.where(mean > tie_band, "A", np.where(mean < -tie_band, "B", "tie"))
    verdict = np.where(complete, averaged, frame["verdict"].astype(object))
    return frame.assign(verdict=pd.Series(verdict, index=frame.index, dtype=object))


def _shown_argmax(verdict: Any, row_a_first: bool) -> str | None:
    """A verdict in a row's labels ("A": model_a) as shown ("first", "second", "tie");
    None for an unreadable one (None, NaN or pd.NA alike)."""
    if not isinstance(verdict, str) or verdict not in ("A", "B", "tie"):
        return None
    if verdict == "tie":
        return "tie"
    return "first" if (verdict == "A") == row_a_first else "second"


def calls_from_judgments(judgments: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """The per-call probability frame `validate.validate_pairwise` reads (`instance_id`,
    `replicate`, `order`, `p_first`, `p_second`, `p_tie`, `margin`, `source`,
    `argmax_verdict`, in SHOWN positions) from eval_judgments' pairwise rows with their
    probability columns (`evaluation.probabilities`: P(A) - P(B) and P(tie) per order in
    the row's labels; NaN: the call's argmax verdict stands, as its one-hot).

    Args:
        judgments: eval_judgments' pairwise rows with probability columns.
        pairs: the pairs table.

    Returns:
        The per-call frame.
    """
    first_model = dict(zip(pairs["instance_id"], pairs["model_a"], strict=True))
    rows = []
    for row in judgments.itertuples(index=False):
        as_shown = row.model_a == first_model.get(row.instance_id)
        replicate = int(getattr(row, "replicate", 0) or 0)
        orders = (
            (True, row.prob_margin_a_first, row.p_tie_a_first, row.verdict_a_first),
            (False, row.prob_margin_b_first, row.p_tie_b_first, row.verdict_b_first),
        )
        for row_a_first, row_margin, row_tie, verdict in orders:
            argmax = _shown_argmax(verdict, row_a_first)
            if pd.notna(row_margin) and pd.notna(row_tie):
                margin = float(row_margin if row_a_first else -row_margin)
                tie = float(row_tie)
                # P(first) + P(second) + P(tie) = 1 and P(first) - P(second) = margin.
                p_first, p_second = (1.0 - tie + margin) / 2, (1.0 - tie - margin) / 2
                source = LOGPROBS
            else:
                p_first, p_second, tie = _ARGMAX_PROBABILITIES.get(
                    argmax or "", (math.nan, math.nan, math.nan)
                )
                source = ARGMAX
            rows.append(
                {
                    "instance_id": row.instance_id,
                    "replicate": replicate,
                    "order": ORIGINAL if row_a_first == as_shown else SWAPPED,
                    "p_first": float(p_first),
                    "p_second": float(p_second),
                    "p_tie": float(tie),
                    "margin": float(p_first - p_second),
                    "source": source,
                    "argmax_verdict": argmax,
                }
            )
    return pd.DataFrame(rows, columns=[*_CALL_COLUMNS])


_CALL_COLUMNS = (
    "instance_id",
    "replicate",
    "order",
    "p_first",
    "p_second",
    "p_tie",
    "margin",
    "source",
    "argmax_verdict",
)
