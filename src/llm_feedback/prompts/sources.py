"""UltraFeedback's six prompt sources read in their public file formats, and its per-source
sample sizes with FLAN sampled stratified by task.

Formats (a prompt is the first user turn; its later turns are not used, as in UltraFeedback):

- `evol_instruct`: a JSON array (or JSON Lines) of {"instruction", "output"} (the 70k
  release) or of {"conversations": [{"from": "human", "value"}, ...]} (the 196k release);
- `sharegpt`: a JSON array (or JSON Lines) of {"conversations": [{"from", "value"}, ...]};
  the first turn from "human" (or "user") is the prompt; a conversation without one is
  skipped and counted in the log;
- `ultrachat`: JSON Lines of {"data": [user turn, assistant turn, ...]};
- `flan`: JSON Lines of {"inputs", "targets", "task_name" (or "task" / "_task_name")}: the
  targets become the reference answer (world knowledge for truthfulness), the task the
  stratum;
- `truthful_qa`: the TruthfulQA CSV (`Question`, `Best Answer`, `Correct Answers`,
  `Incorrect Answers`);
- `false_qa`: the FalseQA CSV (`question`, optional `label`: only the false-premise rows,
  label 1, are kept when it is there).

A prompt repeated within a source is kept once (the public dumps repeat first turns).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.prompts.raw_prompts import truthfulqa_to_raw_prompts
from llm_feedback.storage.jsonl import json_array, json_line_values

logger = logging.getLogger(__name__)

# Prompts per source in the published UltraFeedback (its README's dataset statistics).
ULTRAFEEDBACK_SOURCE_COUNTS: Mapping[str, int] = {
    "evol_instruct": 10_000,
    "false_qa": 2_339,
    "flan": 20_939,
    "sharegpt": 19_949,
    "truthful_qa": 811,
    "ultrachat": 9_928,
}
TASK = "task"  # the stratum column of FLAN prompts
_TASK_FIELDS = ("task_name", "task", "_task_name")


def _records(path: Path) -> Iterator[tuple[str, Any]]:
    """(where, record) of a JSON array or a JSON Lines file."""
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.suffix == ".json":
        for number, record in enumerate(json_array(path)):
            yield f"{path}, record {number}", record
        return
    for number, record in json_line_values(path):
        yield f"{path}, line {number}", record


def _field(record: Any, where: str, *names: str) -> Any:
    if not isinstance(record, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
    for name in names:
        if name in record:
            return record[name]
    raise InputError(f"{where}: no field {' or '.join(repr(n) for n in names)}")


def _first_human_turn(conversation: Any, where: str) -> str | None:
    if not isinstance(conversation, list):
        raise InputError(f"{where}: field 'conversations' must be a list of turns")
    for turn in conversation:
        if isinstance(turn, dict) and turn.get("from", turn.get("role")) in ("human", "user"):
            value = turn.get("value", turn.get("content"))
            return value if isinstance(value, str) and value.strip() else None
    return None


def _text(value: Any, where: str, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where}: field '{field}' must be non-empty text, got {value!r}")
    return value


def _evol_instruct(path: Path) -> Iterator[dict[str, Any]]:
    for where, record in _records(path):
        if isinstance(record, dict) and "conversations" in record:
            turn = _first_human_turn(record["conversations"], where)
            yield {"instruction": turn}
        else:
            yield {"instruction": _text(_field(record, where, "instruction"), where, "instruction")}


def _sharegpt(path: Path) -> Iterator[dict[str, Any]]:
    for where, record in _records(path):
        yield {"instruction": _first_human_turn(_field(record, where, "conversations"), where)}


def _ultrachat(path: Path) -> Iterator[dict[str, Any]]:
    for where, record in _records(path):
        turns = _field(record, where, "data")
        if not isinstance(turns, list) or not turns:
            raise InputError(f"{where}: field 'data' must be a non-empty list of turns")
        yield {"instruction": _text(turns[0], where, "data[0]")}


def _flan(path: Path) -> Iterator[dict[str, Any]]:
    for where, record in _records(path):
        targets = _field(record, where, "targets")
        yield {
            "instruction": _text(_field(record, where, "inputs"), where, "inputs"),
            "reference_answer": targets if isinstance(targets, str) else None,
            TASK: str(_field(record, where, *_TASK_FIELDS)),
        }


def _csv(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    return pd.read_csv(path)


def _false_qa(path: Path) -> Iterator[dict[str, Any]]:
    frame = _csv(path).rename(columns=str.lower)
    if "question" not in frame.columns:
        raise InputError(f"{path}: no column 'question' (columns: {', '.join(frame.columns)})")
    if "label" in frame.columns:
        frame = frame[frame["label"] == 1]
    for row, question in zip(frame.index, frame["question"], strict=True):
        yield {"instruction": _text(question, f"{path}, row {row}", "question")}


_READERS: Mapping[str, Callable[[Path], Iterator[dict[str, Any]]]] = {
    "evol_instruct": _evol_instruct,
    "sharegpt": _sharegpt,
    "ultrachat": _ultrachat,
    "flan": _flan,
    "false_qa": _false_qa,
}
SOURCES = (*_READERS, "truthful_qa")


def read_source(source: str, path: str | Path) -> pd.DataFrame:
    """One source's public file as raw prompts (`source`, `instruction`, answer columns;
    `task` for FLAN), each prompt once.

    Args:
        source: the source's name.
        path: its public file.

    Returns:
        The raw prompts.
    """
    path = Path(path)
    if source == "truthful_qa":
        return truthfulqa_to_raw_prompts(_csv(path), str(path))
    if source not in _READERS:
        raise ConfigError(f"sample.source_files: unknown source {source!r}; one of {SOURCES}")
    frame = pd.DataFrame(list(_READERS[source](path)))
    if frame.empty or frame["instruction"].isna().all():
        raise InputError(f"{path}: no {source} prompts in the file")
    kept = frame[frame["instruction"].notna()].drop_duplicates("instruction")
    dropped = len(frame) - len(kept)
    if dropped:
        logger.info(
            "%s: %d of %d records skipped (no user turn, or repeated)", path, dropped, len(frame)
        )
    return kept.assign(source=source).reset_index(drop=True)


def _rank(seed: int, frame: pd.DataFrame) -> pd.Series:
    """A draw per prompt from a hash of (seed, source, text): a prompt's rank does not depend
    on the other prompts or on a random generator's version."""
    keys = [
        hashlib.blake2b(f"{seed}\x1f{s}\x1f{i}".encode(), digest_size=8).hexdigest()
        for s, i in zip(frame["source"], frame["instruction"], strict=True)
    ]
    return pd.Series(keys, index=frame.index)


def _quotas(sizes: Mapping[str, int], total: int) -> dict[str, int]:
    """Equal shares of `total` over the strata, a small stratum's unused share passed on to
    the larger ones (smallest first, ties by name)."""
    quotas, left = {}, total
    ordered = sorted(sizes, key=lambda name: (sizes[name], name))
    for done, name in enumerate(ordered):
        quotas[name] = min(sizes[name], left // (len(ordered) - done))
        left -= quotas[name]
    return quotas


def sample_per_source(
    frame: pd.DataFrame, counts: Mapping[str, int] | None, seed: int
) -> pd.DataFrame:
    """At most `counts[source]` prompts of each source (all of a source not in `counts`),
    seeded; a frame with a `task` column is sampled in equal shares per task (FLAN).

    Args:
        frame: raw prompts of several sources.
        counts: prompts per source (None: all).
        seed: the sampling seed.

    Returns:
        The sampled prompts.
    """
    if not counts:
        return frame
    picked = []
    for source, rows in frame.groupby("source", sort=False):
        wanted = counts.get(source)
        if wanted is None or wanted >= len(rows):
            if wanted is not None:
                logger.info("%s: %d prompts asked, %d available", source, wanted, len(rows))
            picked.append(rows)
            continue
        rank = _rank(seed, rows)
        if TASK in rows.columns:
            sizes = rows.groupby(TASK).size().to_dict()
            for task, quota in _quotas(sizes, wanted).items():
                in_task = rank[rows[TASK] == task]
                picked.append(rows.loc[in_task.sort_values().index[:quota]])
        else:
            picked.append(rows.loc[rank.sort_values().index[:wanted]])
    return pd.concat(picked).sort_index()
