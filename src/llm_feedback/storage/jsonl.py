"""Reading JSON Lines input (prompt files, evaluation samples) with errors that name the
file and the line: a malformed line, bytes that are not UTF-8, a line that is no object.
(Hand-written because `pandas.read_json(lines=True)` names a byte position, not the line.)

Lines are split on "\n" only, as JSON Lines defines them: a JSON string may hold a raw
U+2028, U+2029 or U+0085, which `str.splitlines()` (and text files opened
with universal newlines) would take for line ends. Every JSONL reader splits on
"\n" (`json_lines`, bytes) or opens its file with `newline="\n"`."""

from __future__ import annotations

import json
from collections.abc import Iterator
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


def json_value(
    line: str, path: str | Path, number: int, error: type[ValueError] = InputError
) -> Any:
    """The JSON value a line of a JSON Lines file holds.

    Args:
        line: The line's text.
        path: The file, named in the error.
        number: The line's number (from 1), named in the error.
        error: The error to raise (`ConfigError` for a file a parameter names).

    Returns:
        The value.

    Raises:
        error: The line is not JSON; it names the file, line and column.
    """
    try:
        return json.loads(line)
    except json.JSONDecodeError as caught:
        raise error(
            f"{path}, line {number}, column {caught.colno}: malformed JSON ({caught.msg})"
        ) from None


def json_line_values(
    path: str | Path, error: type[ValueError] = InputError
) -> Iterator[tuple[int, Any]]:
    """The values of a JSON Lines file, read a line at a time.

    Args:
        path: The file.
        error: The error to raise for a line that is not JSON.

    Returns:
        (line number, value) of each non-blank line.
    """
    with Path(path).open(encoding="utf-8", newline="\n") as lines:  # JSON Lines' own line ends
        for number, line in enumerate(lines, start=1):
            if line.strip():
                yield number, json_value(line, path, number, error)


def json_array(path: str | Path, error: type[ValueError] = InputError) -> list[Any]:
    """The values of a file that holds one JSON array.

    Args:
        path: The file.
        error: The error to raise when it is not JSON or not an array.

    Returns:
        The array's values.
    """
    try:
        values = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as caught:
        raise error(f"{path}: not JSON ({caught.msg}, line {caught.lineno})") from None
    if not isinstance(values, list):
        raise error(f"{path}: expected a JSON array of records, got {type(values).__name__}")
    return values


def json_object(line: str, path: str | Path, number: int) -> dict[str, Any] | None:
    """The JSON object a line of a JSON Lines file holds.

    Args:
        line: The line's text.
        path: The file, named in the error.
        number: The line's number (from 1), named in the error.

    Returns:
        The object, or None for a blank line.

    Raises:
        InputError: The line is not JSON, or holds a value that is not an object.
    """
    if not line.strip():
        return None
    record = json_value(line, path, number)
    if not isinstance(record, dict):
        raise InputError(
            f"{path}, line {number}: expected a JSON object, got {type(record).__name__}"
        )
    return record


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
            record = json_object(line, path, number)
            if record is not None:
                records.append(record)
    return pd.DataFrame.from_records(records)
