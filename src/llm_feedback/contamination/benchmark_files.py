"""Evaluation benchmark files as plain question lists, for decontamination.

The formats read, told apart by suffix and by the fields the records hold:

- `.csv`: TruthfulQA's own CSV (a `Question` column; any CSV with a column named
  `question`, `prompt`, `instruction` or `input`, in any case).
- `.json` (a list of objects) or `.jsonl` (one object a line): MT-Bench (`turns`, each turn
  an item), Arena-Hard (`prompt`, or `turns` of `{"content": ...}`), AlpacaEval
  (`instruction`), LLMBar (`input`), or any record with `question`.
- `.txt`: one question a line; blank lines and lines starting with `#` are skipped.

An item's id is the record's `question_id`, `uid` or `id`, else its row number; an MT-Bench
turn after the first is `<id>/turn <k>`. A record with no text is skipped and counted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.core.errors import ConfigError
from llm_feedback.storage.jsonl import json_array, json_line_values

logger = logging.getLogger(__name__)

# The fields that hold a benchmark item's text, in the order they are looked for.
TEXT_FIELDS = ("turns", "prompt", "instruction", "input", "question")
ID_FIELDS = ("question_id", "uid", "id")
ITEM_COLUMNS = ("item_id", "text")


def _turn_text(turn: Any) -> str | None:
    if isinstance(turn, Mapping):  # Arena-Hard's {"content": ...} turns
        turn = turn.get("content")
    return turn if isinstance(turn, str) and turn.strip() else None


def _record_items(record: Any, row: int) -> list[tuple[str, str]]:
    """(item id, text) of one record; empty when it holds no text."""
    if not isinstance(record, Mapping):
        return []
    fields = {str(key).lower(): value for key, value in record.items()}
    ident = next((fields[key] for key in ID_FIELDS if fields.get(key) is not None), row)
    for key in TEXT_FIELDS:
        value = fields.get(key)
        if value is None:
            continue
        turns = value if isinstance(value, list) else [value]
        texts = [_turn_text(turn) for turn in turns]
        return [
            (str(ident) if k == 0 else f"{ident}/turn {k + 1}", text)
            for k, text in enumerate(texts)
            if text is not None
        ]
    return []


def _records(path: Path) -> Iterable[Any]:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        frame = pd.read_csv(path, encoding="utf-8-sig", dtype=str, keep_default_na=False)
        return frame.to_dict("records")
    if suffix == ".txt":
        lines = path.read_text(encoding="utf-8").splitlines()
        return [
            {"id": number, "question": line.strip()}
            for number, line in enumerate(lines, start=1)
            if line.strip() and not line.lstrip().startswith("#")
        ]
    if suffix == ".jsonl":
        return [record for _, record in json_line_values(path, ConfigError)]
    if suffix == ".json":
        return json_array(path, ConfigError)
    raise ConfigError(
        f"{path}: unknown benchmark format {suffix!r}; use .csv, .json, .jsonl or .txt"
    )


def read_benchmark(path: str | Path, name: str) -> pd.DataFrame:
    """The items of one benchmark file.

    Args:
        path: the file (see the module's formats).
        name: the benchmark's name, for messages.

    Returns:
        One row per item: `item_id`, `text`.

    Raises:
        ConfigError: the file is missing, unreadable, or holds no item.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"decontamination.benchmarks.{name}: {str(path)!r} is not a file")
    try:
        records = list(_records(path))
    except (OSError, UnicodeDecodeError, pd.errors.ParserError) as error:
        raise ConfigError(
            f"decontamination.benchmarks.{name}: cannot read {path}: {error}"
        ) from error
    items = [item for row, record in enumerate(records) for item in _record_items(record, row)]
    skipped = sum(1 for row, record in enumerate(records) if not _record_items(record, row))
    if skipped:
        logger.warning("benchmark %s (%s): %d record(s) hold no text, skipped", name, path, skipped)
    if not items:
        raise ConfigError(
            f"decontamination.benchmarks.{name}: {path} holds no item (no field named "
            f"{', '.join(TEXT_FIELDS)})"
        )
    return pd.DataFrame(items, columns=list(ITEM_COLUMNS))
