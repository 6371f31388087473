"""Reading JSON Lines input (prompt files, evaluation samples) with errors that name the
file and the line: a malformed line, bytes that are not UTF-8, a line that is no object.
(Hand-written because `pandas.read_json(lines=True)` names a byte position, not the line.)

Lines are split on "\n" only, as JSON Lines defines them: a JSON string may hold a raw
U+2028, U+2029 or U+0085, which `str.splitlines()` (and text files opened
with universal newlines) would take for line ends. Every JSONL reader splits on
"\n" (`json_lines`, bytes) or opens its file with `newline="\n"`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.core.errors import InputError


def json_lines(text: str) -> list[str]:
    """The lines of JSON Lines `text`, split on "\n" alone (a trailing "\r" is JSON
    whitespace, so CRLF files read the same).

    Args:
        text: The decoded content of a JSON Lines file.

    Returns:
        Its lines, without their "\n", numbered from 1 by their position + 1.
    """
    return text.split("\n")


def read_jsonl(path: str | Path) -> pd.DataFrame:
    """One row per non-blank line, each value kept as JSON gave it (a "4" stays text).

    Args:
        path: a JSON Lines file.

    Returns:
        The rows.
    """
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
