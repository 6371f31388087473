"""Cards measured by the project itself and shipped with it (`measured_cards.json`): the
embedded judge's card from `benchmarks/embedded_judge_card.py`, so that a fresh data root's
report can say what is known about its default judge. A report reads them beside the data
root's own `judge_validation` (`card.add_card`); they match a judge only by identity, like
any card. `benchmarks/embedded_judge_card.py --ship` rewrites the file from a new
measurement.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pandas as pd

from llm_feedback.validation.card import normalised

MEASURED_FILE = "measured_cards.json"
# One row of a card's metric table, in the file.
ROW_COLUMNS = ("kind", "judge", "verdict_source", "metric", "value", "ci_low", "ci_high", "n")
# What one card's rows share, written once per card.
SHARED_COLUMNS = (
    "judge_key",
    "judge_endpoint",
    "judge_model",
    "judge_model_file",
    "prompt_template_sha256",
    "sampling",
    "task",
    "validation_set",
    "ci_method",
    "resamples",
    "position_bias",
    "usable_probability_share",
    "created_at",
)


def measured_cards() -> pd.DataFrame:
    """The shipped cards as judge_validation rows (over all items).

    Returns:
        The rows; empty when the file lists none.
    """
    text = resources.files("llm_feedback.validation").joinpath(MEASURED_FILE).read_text()
    frames = [
        pd.DataFrame(card["rows"], columns=list(ROW_COLUMNS)).assign(
            **{column: card[column] for column in SHARED_COLUMNS}, category=None
        )
        for card in json.loads(text)["cards"]
    ]
    return normalised(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame())


def write_measured_cards(cards: pd.DataFrame, source: str, path: Path) -> None:
    """Write `cards` (judge_validation rows; their all-items rows are kept) as the shipped
    file, one metric row a line.

    Args:
        cards: the rows of one or more validation runs.
        source: how they were measured, in words.
        path: the file to write.
    """
    rows = normalised(cards)
    rows = rows[rows["category"].isna()]
    parts = []
    for _, run in rows.groupby(["judge_key", "validation_set", "created_at"], sort=True):
        shared = {
            column: (None if pd.isna(value) else value)
            for column, value in run.iloc[0][list(SHARED_COLUMNS)].items()
        }
        lines = [
            json.dumps([None if pd.isna(value) else value for value in row], default=float)
            for row in run[list(ROW_COLUMNS)].itertuples(index=False)
        ]
        head = json.dumps(shared, indent=1, default=int)[:-2]
        parts.append(f'{head},\n "rows": [\n  ' + ",\n  ".join(lines) + "\n ]}")
    text = f'{{"source": {json.dumps(source)},\n"cards": [\n' + ",\n".join(parts) + "\n]}\n"
    json.loads(text)  # a file that does not read back is never written
    path.write_text(text, encoding="utf-8")
