"""A pairwise judge's agreement with each human vote, per turn: MT-Bench's figure.

MT-Bench (Zheng et al. 2023) compares a judge with human experts vote by vote: every
human's vote on a question, turn and pair of models is set beside the judge's outcome
for the same comparison (both orders combined; orders that disagree are a tie), and the
agreement is the share of such vote pairs that say the same. "With ties" counts every
pair; "without ties" only those where neither vote is a tie. The paper reports GPT-4
(pairwise) against humans at 66% with ties and 85% without on the first turn.

Input: `eval_judgments` of a comparing kind with the samples' `gold_labels` carried (one
human vote a label, already oriented to the pair's A and B, as `validation.formats` reads
MT-Bench's human judgments), `outcome` and `turn`. A comparison without an outcome (its
calls failed or could not be read) is left out and counted in `n_missing`.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from llm_feedback.storage.schema import EVAL_METRICS_COLUMN_TYPES

HUMANS = "humans"
TIE = "tie"
WITH_TIES = "human_agreement"
WITHOUT_TIES = "human_agreement_without_ties"


def _votes(labels: Any) -> list[str]:
    """The human votes of one comparison (a list of "A" / "B" / "tie"), [] when none."""
    if labels is None or isinstance(labels, float | str):
        return []
    return [str(label) for label in labels if label is not None]


def vote_agreement(judgments: pd.DataFrame) -> pd.DataFrame:
    """The judge's agreement with the human votes, per turn and over all turns.

    Args:
        judgments: Comparing-kind `eval_judgments` with `gold_labels`, `outcome`, `turn`.

    Returns:
        One row per turn (`turn` null: every turn) and setup: `metric` (`WITH_TIES` or
        `WITHOUT_TIES`), `value` (share of vote pairs that agree), `n` (vote pairs),
        `n_missing` (human votes on comparisons the judge gave no outcome).
    """
    pairs: list[tuple[int, bool, bool, bool]] = []  # turn, judged, agrees, has a tie
    for turn, outcome, labels in zip(
        judgments["turn"], judgments["outcome"], judgments["gold_labels"], strict=True
    ):
        judged = outcome is not None and not pd.isna(outcome)
        for vote in _votes(labels):
            agrees = judged and vote == outcome
            pairs.append((int(turn), judged, agrees, judged and TIE in (vote, outcome)))
    table = pd.DataFrame(pairs, columns=["turn", "judged", "agrees", "tie"])
    rows = []
    for turn in [*sorted(table["turn"].unique()), None]:
        part = table if turn is None else table[table["turn"] == turn]
        judged = part[part["judged"]]
        missing = len(part) - len(judged)
        for metric, counted in ((WITH_TIES, judged), (WITHOUT_TIES, judged[~judged["tie"]])):
            n = len(counted)
            value = float(counted["agrees"].mean()) if n else float("nan")
            rows.append({"turn": turn, "metric": metric, "value": value, "n": n})
            rows[-1]["n_missing"] = missing
    return pd.DataFrame(rows, columns=["turn", "metric", "value", "n", "n_missing"])


def agreement_metric_rows(judgments: pd.DataFrame, mode: str, judge: str) -> pd.DataFrame:
    """`vote_agreement` as `eval_metrics` rows (`raters` "<judge>~humans"; a turn's rows
    named `<metric>_turn<N>`), none when the judgments carry no human votes.

    Args:
        judgments: Comparing-kind `eval_judgments`.
        mode: `evaluate.mode`.
        judge: The judge's name in `raters`.

    Returns:
        The rows, typed as `eval_metrics`.
    """
    columns = list(EVAL_METRICS_COLUMN_TYPES)
    has_votes = "gold_labels" in judgments.columns and "outcome" in judgments.columns
    table = vote_agreement(judgments) if has_votes and len(judgments) else None
    if table is None or not table["n"].add(table["n_missing"]).any():
        return pd.DataFrame(columns=columns).astype(EVAL_METRICS_COLUMN_TYPES)
    names = [
        metric if turn is None or pd.isna(turn) else f"{metric}_turn{int(turn)}"
        for metric, turn in zip(table["metric"], table["turn"], strict=True)
    ]
    rows = pd.DataFrame(
        {
            "mode": mode,
            "metric": names,
            "raters": f"{judge}~{HUMANS}",
            "value": table["value"],
            "n": table["n"],
            "n_missing": table["n_missing"],
        }
    )
    return rows.reindex(columns=columns).astype(EVAL_METRICS_COLUMN_TYPES)
