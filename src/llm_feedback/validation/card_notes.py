"""What a judge card says about its data: unreadable verdicts and a validation set too
small for its intervals to mean much.

`data_notes(rows)` reads one validation run's card rows (all items, one validation set)
and returns Markdown lines: how many calls had no readable verdict and the readable-only
figures beside LLMBar's all-items ones (or, when no verdict was readable, that the card
measures nothing), and a note naming the number of items when it is under
`SMALL_VALIDATION_SET`.
"""

from __future__ import annotations

import math

import pandas as pd

from llm_feedback.validation.metrics import READABLE

# Under this many items a bootstrap interval is rough at best: with a handful it is often
# zero-width, the same few items resampled.
SMALL_VALIDATION_SET = 30
_ARGMAX = "argmax"


def _value(rows: pd.DataFrame, metric: str) -> tuple[float, int] | None:
    found = rows[rows["metric"] == metric]
    if found.empty:
        return None
    return float(found["value"].iloc[0]), int(found["n"].iloc[0])


def _figure(value: float) -> str:
    return "undefined" if math.isnan(value) else f"{value:.3f}"


def _items(judge: pd.DataFrame) -> int:
    """The number of items judged: units in both orders (pairwise), else rows."""
    both = _value(judge, "accuracy_both_orders")
    return both[1] if both is not None else int(judge["n"].max())


def data_notes(rows: pd.DataFrame) -> list[str]:
    """The card's lines on its data for one validation run's rows (see the module doc).

    Args:
        rows: judge_validation rows of one judge's run on one validation set, all items.

    Returns:
        Markdown lines, empty when there is nothing to say.
    """
    judge = rows[(rows["kind"] == "judge") & (rows["verdict_source"] == _ARGMAX)]
    if judge.empty:
        return []
    lines = []
    unreadable = _value(judge, "unreadable_count")
    if unreadable is not None and unreadable[0] > 0:
        count, calls = int(unreadable[0]), unreadable[1]
        if count == calls:
            lines.append(
                f"**No readable verdict**: all {calls} calls of this judge gave no verdict "
                "that could be read, so this card measures nothing about its judgement."
            )
        elif _value(judge, f"accuracy{READABLE}") is None:  # scores: read ones only
            lines.append(
                f"{count} of {calls} calls gave no readable score: the figures above are "
                "over the others."
            )
        else:
            readable = [
                f"{metric} {_figure(found[0])}"
                for metric in ("accuracy", "accuracy_both_orders", "positional_agreement")
                if (found := _value(judge, f"{metric}{READABLE}")) is not None
            ]
            lines.append(
                f"{count} of {calls} calls gave no readable verdict: the figures above count "
                "each as wrong and its item as not position-consistent (LLMBar's all-items "
                "convention)"
                + (
                    f"; over the readable verdicts only: {', '.join(readable)}."
                    if readable
                    else "."
                )
            )
    items = _items(judge)
    if items < SMALL_VALIDATION_SET:
        lines.append(
            f"**Small validation set: {items} items.** Intervals from so few items mean "
            "little (a bootstrap over a handful of items can be zero-width); validate on "
            f"{SMALL_VALIDATION_SET} or more before trusting these figures."
        )
    # Each note its own Markdown paragraph, apart from the card's lines around it.
    return [*(part for line in lines for part in ("", line)), *([""] if lines else [])]
