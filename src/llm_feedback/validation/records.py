"""Records of a samples file, each with where it came from, and field checks that name it.

A file is a JSON list (`item N`, counted from 0 as the list index), JSON Lines (`line N`,
counted from 1) or Parquet (`row N`, from 0). A `.json` file that does not parse as one
JSON value is read as JSON Lines, since some publishers name JSONL files `.json`.
(Hand-written rather than `pandas.read_json` because that names a byte, not the line.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from llm_feedback.core.errors import InputError
from llm_feedback.storage.jsonl import json_lines, json_object
from llm_feedback.validation.agreement import majority_label


@dataclass(frozen=True)
class Record:
    number: int  # list index, line number or row number
    where: str  # "item 3", "line 4", "row 0"
    data: dict[str, Any]


def _jsonl_records(path: Path, text: str) -> list[Record]:
    records = []
    for number, line in enumerate(json_lines(text), start=1):
        value = json_object(line, path, number)
        if value is not None:
            records.append(Record(number, f"line {number}", value))
    return records


def _plain(value: Any) -> Any:
    """Parquet's arrays of structs as the lists of dicts JSON would give."""
    if isinstance(value, np.ndarray):
        return [_plain(item) for item in value.tolist()]
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def load_records(path: Path) -> list[Record]:
    """Every record of `path`; InputError naming the line for bad bytes or bad JSON.

    Args:
        path: a JSON or JSONL file.

    Returns:
        Its records, in order.
    """
    if path.suffix == ".parquet":
        frame = pd.read_parquet(path)
        return [
            Record(number, f"row {number}", {k: _plain(v) for k, v in row.items()})
            for number, row in enumerate(frame.to_dict("records"))
        ]
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise InputError(f"{path}, line {line}: not UTF-8; save the file as UTF-8") from None
    if path.suffix == ".jsonl" or not text.lstrip().startswith("["):
        return _jsonl_records(path, text)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(
            f"{path}, line {error.lineno}, column {error.colno}: malformed JSON ({error.msg})"
        ) from None
    records = []
    for number, item in enumerate(value):
        if not isinstance(item, dict):
            raise InputError(
                f"{path}, item {number}: expected a JSON object, got {type(item).__name__}"
            )
        records.append(Record(number, f"item {number}", item))
    return records


_KIND_NAMES = {int: "an integer", str: "text", list: "a list", float: "a number", dict: "an object"}


def field(
    path: Path, record: Record, name: str, kind: type | tuple[type, ...], *, required: bool = True
) -> Any:
    """`record`'s field `name`, checked to be of `kind` (bool is no integer; a whole float
    is accepted as an integer, as JSON writers differ); None when absent and not required.

    Args:
        path: the file, named in errors.
        record: one record.
        name: the field.
        kind: the type(s) it must have.
        required: whether it must be present.

    Returns:
        The value, or None.
    """
    if name not in record.data or record.data[name] is None:
        if required:
            raise InputError(f"{path}, {record.where}: missing field {name!r}")
        return None
    value = record.data[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if int in kinds and isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, kinds):
        expected = " or ".join(_KIND_NAMES.get(k, k.__name__) for k in kinds)
        raise InputError(
            f"{path}, {record.where}, field {name!r}: expected {expected}, got {value!r:.60}"
        )
    return value


def text_field(
    path: Path, record: Record, name: str, *, allow_empty: bool = False, required: bool = True
) -> str | None:
    """A text field; empty text is refused unless `allow_empty` (a response may be empty).

    Args:
        path: the file, named in errors.
        record: one record.
        name: the field.
        allow_empty: whether empty text is accepted.
        required: whether it must be present.

    Returns:
        The text, or None.
    """
    value = field(path, record, name, str, required=required)
    if value is not None and not allow_empty and not value.strip():
        raise InputError(f"{path}, {record.where}, field {name!r}: is empty")
    return value


def pair_rows(
    instance_id: str,
    question: str,
    responses: tuple[tuple[str, str], tuple[str, str]],
    labels: list[str],
    annotators: list[str],
    *,
    category: str | None = None,
    **extra: Any,
) -> list[dict[str, Any]]:
    """The two rows of one pairwise instance: `responses` is ((model, text) shown first,
    (model, text) shown second); `extra` columns go on both rows (a value that is a pair
    of per-response values is split between them).

    Args:
        instance_id: the instance's id.
        question: the question.
        responses: ((model, text) shown first, (model, text) shown second).
        labels: the annotators' labels.
        annotators: the annotators' names, in the labels' order.
        category: the instance's category.
        **extra: more columns for both rows.

    Returns:
        The two rows.
    """
    gold = majority_label(labels)
    rows = []
    for position, (model, response) in enumerate(responses):
        row = {
            "instance_id": instance_id,
            "question": question,
            "response": response,
            "model": model,
            "category": category,
            "gold": gold,
            "gold_labels": list(labels),
            "gold_annotators": list(annotators),
        }
        for name, value in extra.items():
            row[name] = value[position] if isinstance(value, tuple) else value
        rows.append(row)
    return rows
