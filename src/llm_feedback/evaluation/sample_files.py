"""The samples file of `evaluate` in any of its formats, as `eval_samples` rows.

`evaluate.samples_format` names the format: `native` (our eval_samples rows, one response a
row; see `samples.py`), one of the gold-labelled formats of `validation.formats` (`llmbar`,
`pandalm`, `mtbench_human`, `jsonl`, `viewer`), a format of recorded pairwise verdicts
(`alpaca_eval`, `arena_hard`, or `jsonl` with a `preference` field: `recorded.py`), or
`auto` (the default): native when the rows have `instance_id`, `question`, `response` and
`model` and no label or score field of our JSONL, else the format whose fields the first
record has. The format chosen is logged. The
gold-labelled formats become eval_samples rows with their gold columns (pairwise: `gold`,
`gold_labels`, `gold_annotators`, two rows an instance, the first "A"; pointwise:
`gold_score` and the labels), which `samples.validate_samples` keeps. The viewer's labels
file mixes both kinds: the judge's kind picks its labels.

`read_samples_file` reads the records of a file (JSON list, JSON Lines or Parquet), naming
the file and line of anything malformed; the frame remembers its file (`SAMPLES_PATH_ATTR`)
so that a gold format is read from the file itself, errors naming the file's lines.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from llm_feedback.core.errors import InputError
from llm_feedback.evaluation.attachments import SOURCE_DIR_ATTR
from llm_feedback.evaluation.config import SAMPLES_FORMATS
from llm_feedback.evaluation.recorded import OWN_JSONL, read_recorded, recorded_format
from llm_feedback.storage.schema import EVAL_SAMPLES_REQUIRED_COLUMNS
from llm_feedback.validation.formats import detect_format, read_records
from llm_feedback.validation.records import Record, load_records

logger = logging.getLogger(__name__)

AUTO, NATIVE = SAMPLES_FORMATS[:2]
RECORDED_FORMATS = ("alpaca_eval", "arena_hard")
SAMPLES_PATH_ATTR = "samples_path"
# Fields of our gold-labelled JSONL and the viewer's labels that native eval_samples rows
# never have.
_GOLD_FIELDS = ("label", "labels", "score", "scores", "response_a", "response_b", "annotator")


_RECORD_SUFFIXES = (".json", ".jsonl", ".parquet")


def load_samples_records(path: Path) -> list[Record]:
    """The records of a samples file, or of every JSON, JSON Lines and Parquet file under a
    folder (in path order, each record named by its file: a benchmark's results as
    published, e.g. AlpacaEval's `results/<model>/<annotator>/annotations.json`).

    Args:
        path: a samples file, or a folder of them.

    Returns:
        The records.
    """
    if not path.is_dir():
        return load_records(path)
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _RECORD_SUFFIXES)
    if not files:
        raise InputError(f"{path}: a folder with no .json, .jsonl or .parquet file")
    records: list[Record] = []
    for file in files:
        for record in load_records(file):
            where = f"{file.relative_to(path)} {record.where}"
            records.append(Record(len(records), where, record.data))
    return records


def read_samples_file(path: str | Path) -> pd.DataFrame:
    """The records of `path` (a file, or a folder of them: `load_samples_records`) as they
    are, one row each (JSON's own types kept).

    Args:
        path: a samples file, or a folder of them.

    Returns:
        One row per record.
    """
    path = Path(path)
    frame = pd.DataFrame.from_records([record.data for record in load_samples_records(path)])
    frame.attrs[SAMPLES_PATH_ATTR] = str(path)
    # Paths inside the file (e.g. eval_samples' images) are relative to its folder.
    frame.attrs[SOURCE_DIR_ATTR] = str(path.resolve() if path.is_dir() else path.resolve().parent)
    return frame


def is_native(frame: pd.DataFrame) -> bool:
    """Whether a frame is already eval_samples-shaped (the required columns, no gold
    fields to convert).

    Args:
        frame: the samples as read.

    Returns:
        True when it needs no conversion.
    """
    columns = set(frame.columns)
    return set(EVAL_SAMPLES_REQUIRED_COLUMNS) <= columns and not columns & set(_GOLD_FIELDS)


def _records(frame: pd.DataFrame) -> list[Record]:
    """A frame's rows as records (for a frame given in memory, with no file to read)."""
    rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return [
        Record(number, f"row {number}", {k: v for k, v in row.items() if v is not None})
        for number, row in enumerate(rows)
    ]


def _detected(frame: pd.DataFrame, where: Path, records: Callable[[], list[Record]]) -> str:
    """The format of `frame` by its fields: native when it has eval_samples' columns and no
    gold field; a gold format when its first record has that format's fields; else native
    if it has any column of eval_samples' own (whose checks then name what is missing)."""
    if frame.empty or is_native(frame):
        return NATIVE
    recorded = recorded_format(records()[0].data)
    if recorded is not None:
        return recorded
    try:
        return detect_format(where, records())
    except InputError:
        if set(EVAL_SAMPLES_REQUIRED_COLUMNS) & set(frame.columns):
            return NATIVE
        raise


def samples_from_file(
    frame: pd.DataFrame,
    samples_format: str = AUTO,
    baseline: str | None = None,
    pairwise: bool | None = None,
) -> pd.DataFrame:
    """`frame` (from `read_samples_file`, or any frame of records) as eval_samples rows.

    Args:
        frame: The records, one a row.
        samples_format: `evaluate.samples_format`.
        baseline: The model an Arena-Hard judgment's answers are compared with (its A).
        pairwise: Whether the judge compares two responses: picks the labels of a file of
            both kinds (the viewer's).

    Returns:
        The eval_samples rows.
    """
    path = frame.attrs.get(SAMPLES_PATH_ATTR)
    where = Path(path) if path else Path("eval_samples")

    # Read from the file itself when there is one, so that errors name its lines.
    @functools.cache
    def records() -> list[Record]:
        return load_samples_records(Path(path)) if path else _records(frame)

    chosen = _detected(frame, where, records) if samples_format == AUTO else samples_format
    if samples_format == AUTO:
        logger.info("%s: samples format detected as %s", where, chosen)
    if chosen == NATIVE:
        return frame
    if chosen in RECORDED_FORMATS or (
        chosen == OWN_JSONL and records() and recorded_format(records()[0].data) == OWN_JSONL
    ):
        samples = read_recorded(where, records(), chosen, baseline)
        samples.attrs |= {k: v for k, v in frame.attrs.items() if k != "samples_format"}
        return samples
    samples = read_records(where, records(), chosen, pairwise)
    samples.attrs |= {key: value for key, value in frame.attrs.items() if key != "samples_format"}
    return samples
