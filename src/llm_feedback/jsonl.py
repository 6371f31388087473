"""Reading JSON Lines input (prompt files, evaluation samples) with errors that name the
file and the line: a malformed line, bytes that are not UTF-8, a line that is no object.
(Hand-written because `pandas.read_json(lines=True)` names a byte position, not the line.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.errors import InputError


def read_jsonl(path: str | Path) -> pd.DataFrame:
    """One row per non-blank line, each value kept as JSON gave it (a "4" stays text)."""
    path = Path(path)
    records: list[dict[str, Any]] = []
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InputError(
                    f"{path}, line {number}: not UTF-8 (byte {raw[error.start]:#04x} at "
                    f"column {error.start + 1}); save the file as UTF-8"
                ) from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise InputError(
                    f"{path}, line {number}, column {error.colno}: malformed JSON ({error.msg})"
                ) from None
            if not isinstance(record, dict):
                raise InputError(
                    f"{path}, line {number}: expected a JSON object, got {type(record).__name__}"
                )
            records.append(record)
    return pd.DataFrame.from_records(records)
