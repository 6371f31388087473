"""A judge's pairwise verdicts lined up with the gold: the verdict frame the metrics read.

`pairs_table(samples)` turns pairwise samples (two rows per instance, the first "A") into
one row per instance: `instance_id`, `category`, `model_a`, `model_b`, `gold`,
`gold_labels`, `gold_annotators`, `len_a`, `len_b` (the responses' lengths in characters).

The verdict frame has one row per judge call: `instance_id`, `order` ("original": A shown
first; "swapped": B shown first), `verdict` ("A", "B", "tie", or None when the call failed
or its reply could not be read) in ORIGINAL labels ("A" is always the instance's first
response, whichever was shown first), optional `replicate` (default 0: the two orders of
one replicate are compared with each other), and the instance's `gold`, `len_a`, `len_b`,
`category`. Instead of `verdict`, a row may carry probabilities `p_a`, `p_b`, `p_tie`
(summing to 1, or all NaN when unreadable), e.g. from `logprobs`.

`verdicts_from_judgments` builds it from eval_judgments' pairwise rows (`instance_id`,
`model_a`, `model_b`, `verdict_a_first`, `verdict_b_first`, both verdicts in the labels of
the row's model_a / model_b, as `combine_orders` writes them); rows whose model_a is the
instance's second response are turned round. `verdicts_from_llmbar` builds it from
LLMBar's recorded `result.json`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.core.errors import InputError, require_columns

ORIGINAL = "original"
SWAPPED = "swapped"
ORDERS = (ORIGINAL, SWAPPED)
VERDICTS = ("A", "B", "tie")
FLIPPED = {"A": "B", "B": "A", "tie": "tie"}
PAIR_COLUMNS = (
    "instance_id",
    "category",
    "model_a",
    "model_b",
    "gold",
    "gold_labels",
    "gold_annotators",
    "len_a",
    "len_b",
)


def pairs_table(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per pairwise instance of `samples` (see the module docstring).

    Args:
        samples: gold-labelled pairwise samples, two rows per instance.

    Returns:
        The pairs, one row per instance.
    """
    require_columns(samples, ["instance_id", "response", "model", "gold"], "pairwise samples")
    rows: list[dict[str, Any]] = []
    for instance_id, group in samples.groupby("instance_id", sort=False):
        if len(group) != 2:
            raise InputError(
                f"pairwise samples, instance_id {instance_id!r}: {len(group)} rows, expected 2 "
                "(the first response A, the second B)"
            )
        first, second = group.iloc[0], group.iloc[1]
        if first["gold"] not in VERDICTS:
            raise InputError(
                f"pairwise samples, instance_id {instance_id!r}, column 'gold': must be A, B or "
                f"tie, got {first['gold']!r}"
            )
        rows.append(
            {
                "instance_id": instance_id,
                "category": first.get("category"),
                "model_a": first["model"],
                "model_b": second["model"],
                "gold": first["gold"],
                "gold_labels": first.get("gold_labels", [first["gold"]]),
                "gold_annotators": first.get("gold_annotators", ["gold"]),
                "len_a": len(first["response"] or ""),
                "len_b": len(second["response"] or ""),
            }
        )
    return pd.DataFrame(rows, columns=list(PAIR_COLUMNS))


def _label(value: Any) -> str | None:
    """A verdict as one of VERDICTS, None for every kind of missing or unreadable value."""
    return value if isinstance(value, str) and value in VERDICTS else None


def attach_pairs(verdicts: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """`verdicts` (instance_id, order, verdict or p_*) with the instances' gold, lengths and
    category; InputError for an instance that is not in `pairs` or an unknown order.

    Args:
        verdicts: verdict rows (instance_id, order, verdict or p_*).
        pairs: the pairs table.

    Returns:
        The verdicts with gold, len_a, len_b and category.
    """
    unknown = set(verdicts["instance_id"]) - set(pairs["instance_id"])
    if unknown:
        raise InputError(f"verdicts: instance_id {sorted(unknown)[0]!r} is not in the samples")
    bad_order = set(verdicts["order"]) - set(ORDERS)
    if bad_order:
        raise InputError(
            f"verdicts, column 'order': {sorted(bad_order)[0]!r} is not original/swapped"
        )
    frame = verdicts.drop(
        columns=[c for c in ("gold", "len_a", "len_b", "category") if c in verdicts]
    )
    frame = frame.merge(
        pairs[["instance_id", "gold", "len_a", "len_b", "category"]], on="instance_id", how="left"
    )
    if "verdict" in frame.columns:  # the merge may have turned None into NaN
        labels = [_label(value) for value in frame["verdict"].astype(object)]
        frame["verdict"] = pd.Series(labels, index=frame.index, dtype=object)
    return frame


def _second_order_asked(row: Any) -> bool:
    """Whether a pairwise judgment's second order (B shown first) was asked: it has a
    verdict, or its call left a prompt or a reply. A comparison judged in one order only (a
    recorded preference, a one-order judge) has none of them: that order was not run, and is
    no unreadable call."""
    return any(
        isinstance(getattr(row, column, None), str)
        for column in ("verdict_b_first", "prompt_b_first", "raw_reply_b_first")
    )


def verdicts_from_judgments(judgments: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """The verdict frame of eval_judgments' pairwise rows: one verdict row per order asked
    (two where the row was judged in both orders, one where its second order was not run).

    Args:
        judgments: eval_judgments rows.
        pairs: the pairs table.

    Returns:
        The verdict frame.
    """
    require_columns(
        judgments,
        ["instance_id", "model_a", "model_b", "verdict_a_first", "verdict_b_first"],
        "eval_judgments",
    )
    first_model = dict(zip(pairs["instance_id"], pairs["model_a"], strict=True))
    rows = []
    for position, row in enumerate(judgments.itertuples(index=False)):
        if row.instance_id not in first_model:
            raise InputError(
                f"eval_judgments row {position}: instance_id {row.instance_id!r} is not in the "
                "samples"
            )
        as_shown = row.model_a == first_model[row.instance_id]
        replicate = int(getattr(row, "replicate", 0) or 0)
        orders = [(True, row.verdict_a_first)]
        if _second_order_asked(row):
            orders.append((False, row.verdict_b_first))
        for shown_first, raw in orders:
            verdict = _label(raw)
            if not as_shown and verdict is not None:
                verdict = FLIPPED[verdict]
            order = ORIGINAL if shown_first == as_shown else SWAPPED
            rows.append(
                {
                    "instance_id": row.instance_id,
                    "replicate": replicate,
                    "order": order,
                    "verdict": verdict,
                }
            )
    frame = pd.DataFrame(rows, columns=["instance_id", "replicate", "order", "verdict"])
    return attach_pairs(frame.astype({"verdict": object}), pairs)


_LLMBAR_WINNERS = {"1": "A", "2": "B"}
_LLMBAR_ORDERS = {"swap = False": ORIGINAL, "swap = True": SWAPPED}


def verdicts_from_llmbar(result_path: str | Path, pairs: pd.DataFrame, *, round_index: int = 0):
    """The verdict frame of LLMBar's `result.json` (items in `dataset.json` order, each with
    `results`: rounds of {"swap = False": {"winner": "1"|"2"}, "swap = True": {...}}, the
    winner naming the original output) for the round `round_index` (Vanilla: the first).

    Args:
        result_path: LLMBar's result.json.
        pairs: the pairs table of the same dataset.
        round_index: the round read (0: the first).

    Returns:
        The verdict frame.
    """
    path = Path(result_path)
    items = json.loads(path.read_text(encoding="utf-8"))
    if len(items) != len(pairs):
        raise InputError(f"{path}: {len(items)} items, the samples have {len(pairs)}")
    rows = []
    for number, (item, instance_id) in enumerate(zip(items, pairs["instance_id"], strict=True)):
        rounds = item.get("results")
        if not isinstance(rounds, list) or len(rounds) <= round_index:
            raise InputError(f"{path}, item {number}, field 'results': no round {round_index}")
        for key, order in _LLMBAR_ORDERS.items():
            if key not in rounds[round_index]:
                raise InputError(f"{path}, item {number}, field 'results': no {key!r}")
            winner = rounds[round_index][key].get("winner")
            rows.append(
                {"instance_id": instance_id, "order": order, "verdict": _LLMBAR_WINNERS.get(winner)}
            )
    frame = pd.DataFrame(rows, columns=["instance_id", "order", "verdict"])
    return attach_pairs(frame.astype({"verdict": object}), pairs)
