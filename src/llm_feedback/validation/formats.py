"""Gold-labelled samples read from the files as published, into eval_samples-shaped rows.

`read_samples(path, format="auto")` returns one row per response, the columns of
eval_samples (`instance_id`, `question`, `response`, `model`, `category`) plus gold columns:

- pairwise (two rows per instance, in the order shown: the first row is "A", the second
  "B"): `gold` ("A", "B" or "tie", the same on both rows: the majority of the annotators,
  a shared top count being a tie), `gold_labels` (every annotator's label, in
  `gold_annotators` order) and `gold_annotators` (their names);
- pointwise (one row per response): `gold_score` (the mean of the annotators' scores),
  `gold_labels` (the scores) and `gold_annotators`.

MT-Bench human judgments add `question_id`, `turn` and, for turn 2, `prior_question` and
`prior_response` (the first exchange, as eval_samples has them). The frame's
`attrs["samples_format"]` names the format read; "auto" logs the one it detected.

Formats (the name to pass, and what is read):

- `llmbar`: LLMBar's `dataset.json`, a JSON list of `input`, `output_1`, `output_2`,
  `label` (1 or 2). Models are named `output_1` and `output_2`.
- `pandalm`: PandaLM's test set, a JSON list of `instruction`, `input`, `response1`,
  `response2`, `annotator1`..`annotator3` (0 tie, 1 response1, 2 response2), optional
  `idx` and `motivation_app` (kept as `category`). The question is the instruction, then
  the input after a blank line when there is one.
- `mtbench_human`: FastChat's MT-Bench human judgments (JSON list, JSONL or Parquet):
  `question_id`, `model_a`, `model_b`, `winner` (`model_a`, `model_b`, `tie`,
  `tie (bothbad)`; also `tie (inconsistent)` of the GPT-4 pair split), `judge` (a judge
  seen twice on one instance becomes `judge#2`), `turn` (1 or 2), `conversation_a` /
  `conversation_b` (lists of `{role, content}`). The judgments of one question, turn and
  pair of models, by any judge and in either order, make one instance; A is model_a of its
  first judgment.
- `jsonl`: our own shape, one JSON object a line (see `own_jsonl`).
- `viewer`: the judgment viewer's `labels.jsonl` as downloaded (see `viewer_labels`): pairs
  and scores mixed, several pairs per prompt, several reviewers. A judge is checked on one
  kind: `read_records(..., pairwise=...)` picks it (by default pairs when there are any);
  `read_viewer_labels` returns both.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.core.errors import InputError
from llm_feedback.validation import own_jsonl, viewer_labels
from llm_feedback.validation.records import Record, field, load_records, pair_rows, text_field

logger = logging.getLogger(__name__)

FORMATS = ("llmbar", "pandalm", "mtbench_human", "jsonl", "viewer")
VIEWER = "viewer"
AUTO = "auto"
PAIRWISE_COLUMNS = (
    "instance_id",
    "question",
    "response",
    "model",
    "category",
    "gold",
    "gold_labels",
    "gold_annotators",
)
POINTWISE_COLUMNS = (
    "instance_id",
    "question",
    "response",
    "model",
    "category",
    "gold_score",
    "gold_labels",
    "gold_annotators",
)
_LLMBAR_LABELS = {1: "A", 2: "B"}
_PANDALM_LABELS = {0: "tie", 1: "A", 2: "B"}
_MTBENCH_WINNERS = {
    "model_a": "A",
    "model_b": "B",
    "tie": "tie",
    "tie (bothbad)": "tie",
    "tie (inconsistent)": "tie",  # FastChat's GPT-4 pair judgments: the two orders disagreed
}
_FLIPPED = {"A": "B", "B": "A", "tie": "tie"}


def _llmbar(path: Path, records: list[Record]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for record in records:
        label = field(path, record, "label", int)
        if label not in _LLMBAR_LABELS:
            raise InputError(f"{path}, {record.where}, field 'label': must be 1 or 2, got {label}")
        rows += pair_rows(
            f"llmbar-{record.number}",
            text_field(path, record, "input"),
            (
                ("output_1", text_field(path, record, "output_1", allow_empty=True)),
                ("output_2", text_field(path, record, "output_2", allow_empty=True)),
            ),
            [_LLMBAR_LABELS[label]],
            ["label"],
        )
    return rows


def _pandalm(path: Path, records: list[Record]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for record in records:
        labels = []
        for annotator in ("annotator1", "annotator2", "annotator3"):
            value = field(path, record, annotator, int)
            if value not in _PANDALM_LABELS:
                raise InputError(
                    f"{path}, {record.where}, field {annotator!r}: must be 0 (tie), 1 or 2, "
                    f"got {value}"
                )
            labels.append(_PANDALM_LABELS[value])
        instruction = text_field(path, record, "instruction")
        extra_input = text_field(path, record, "input", allow_empty=True, required=False)
        question = f"{instruction}\n\n{extra_input}" if extra_input else instruction
        number = record.data.get("idx", record.number)
        rows += pair_rows(
            f"pandalm-{number}",
            question,
            (
                ("response1", text_field(path, record, "response1", allow_empty=True)),
                ("response2", text_field(path, record, "response2", allow_empty=True)),
            ),
            labels,
            ["annotator1", "annotator2", "annotator3"],
            category=text_field(path, record, "motivation_app", required=False),
        )
    return rows


def _turn_texts(path: Path, record: Record, name: str, turn: int) -> list[str]:
    """The user and assistant texts of a conversation up to `turn`, checked."""
    conversation = field(path, record, name, list)
    if len(conversation) < 2 * turn:
        raise InputError(
            f"{path}, {record.where}, field {name!r}: {len(conversation)} messages, turn "
            f"{turn} needs {2 * turn}"
        )
    texts = []
    for position, message in enumerate(conversation[: 2 * turn]):
        role = "user" if position % 2 == 0 else "assistant"
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise InputError(
                f"{path}, {record.where}, field {name!r}[{position}]: expected "
                "{'role': ..., 'content': <text>}"
            )
        if message.get("role") != role:
            raise InputError(
                f"{path}, {record.where}, field {name!r}[{position}]: role must be {role!r}, "
                f"got {message.get('role')!r}"
            )
        texts.append(message["content"])
    return texts


def _mtbench_human(path: Path, records: list[Record]) -> list[dict[str, Any]]:
    instances: dict[tuple[Any, int, frozenset[str]], dict[str, Any]] = {}
    for record in records:
        question_id = field(path, record, "question_id", (int, str))
        model_a = text_field(path, record, "model_a")
        model_b = text_field(path, record, "model_b")
        winner = text_field(path, record, "winner")
        if winner not in _MTBENCH_WINNERS:
            raise InputError(
                f"{path}, {record.where}, field 'winner': must be one of "
                f"{', '.join(_MTBENCH_WINNERS)}, got {winner!r}"
            )
        judge = text_field(path, record, "judge")
        turn = field(path, record, "turn", int)
        if turn not in (1, 2):
            raise InputError(f"{path}, {record.where}, field 'turn': must be 1 or 2, got {turn}")
        texts = {
            model_a: _turn_texts(path, record, "conversation_a", turn),
            model_b: _turn_texts(path, record, "conversation_b", turn),
        }
        key = (question_id, turn, frozenset((model_a, model_b)))
        instance = instances.setdefault(
            key, {"models": (model_a, model_b), "texts": texts, "labels": [], "judges": []}
        )
        label = _MTBENCH_WINNERS[winner]
        # Another judge may have seen the pair the other way round: labels follow A, B.
        same_order = instance["models"][0] == model_a
        instance["labels"].append(label if same_order else _FLIPPED[label])
        # A judge who judged the same instance again is a further annotator, numbered.
        repeats = sum(name == judge or name.startswith(f"{judge}#") for name in instance["judges"])
        instance["judges"].append(judge if repeats == 0 else f"{judge}#{repeats + 1}")
    rows: list[dict[str, Any]] = []
    for (question_id, turn, _), instance in instances.items():
        first, second = instance["models"]
        texts = instance["texts"]
        extra: dict[str, Any] = {"question_id": str(question_id), "turn": turn}
        if turn == 2:
            extra["prior_question"] = texts[first][0]
            extra["prior_response"] = (texts[first][1], texts[second][1])
        rows += pair_rows(
            f"mtbench-{question_id}-turn{turn}:{first}~{second}",
            texts[first][2 * turn - 2],
            ((first, texts[first][-1]), (second, texts[second][-1])),
            instance["labels"],
            instance["judges"],
            **extra,
        )
    return rows


_READERS: dict[str, Callable[[Path, list[Record]], list[dict[str, Any]]]] = {
    "llmbar": _llmbar,
    "pandalm": _pandalm,
    "mtbench_human": _mtbench_human,
    "jsonl": own_jsonl.rows,
}
# Fields that only one format has, checked on the first record.
_SIGNATURES = {
    "llmbar": {"input", "output_1", "output_2", "label"},
    "pandalm": {"instruction", "response1", "response2", "annotator1"},
    "mtbench_human": {"question_id", "model_a", "model_b", "winner", "conversation_a"},
}


def detect_format(path: Path, records: list[Record]) -> str:
    """The format whose fields the first record has; InputError when none fits.

    Args:
        path: the file, named in errors.
        records: its records.

    Returns:
        The format's name.
    """
    first = records[0]
    for name, signature in _SIGNATURES.items():
        if signature <= first.data.keys():
            return name
    # Before our JSONL: a viewer pair line has its fields too, and the file mixes kinds.
    if viewer_labels.matches(first.data):
        return VIEWER
    if own_jsonl.matches(first.data):
        return "jsonl"
    raise InputError(
        f"{path}, {first.where}: not a known samples format (fields "
        f"{', '.join(sorted(first.data)) or 'none'}); expected LLMBar "
        "(input, output_1, output_2, label), PandaLM (instruction, response1, response2, "
        "annotator1..3), MT-Bench human judgments (question_id, model_a, model_b, winner, "
        "conversation_a/b), our JSONL (question and response_a/response_b with label(s), or "
        "response with score(s)) or the viewer's labels.jsonl (instance_id, question, "
        "response_a/response_b with label, or response with gold_score, and annotator)"
    )


def _check_unique(path: Path, rows: list[dict[str, Any]], pairwise: bool) -> None:
    """Pairwise instance ids name one item each (two rows); pointwise ones may repeat (one
    row per response of an instance)."""
    if pairwise:
        counts = Counter(row["instance_id"] for row in rows)
        repeated = next((key for key, count in counts.items() if count != 2), None)
        if repeated is not None:
            raise InputError(f"{path}: instance id {repeated!r} is used by more than one item")


def read_samples(
    path: str | Path,
    format: str = AUTO,  # noqa: A002
    pairwise: bool | None = None,
) -> pd.DataFrame:
    """Gold-labelled samples from `path` in `format` ("auto", or one of `FORMATS`); for a
    file of both kinds (the viewer's), `pairwise` picks the kind (None: pairs if any).

    Args:
        path: a JSON or JSONL file.
        format: "auto" or one of `FORMATS`.
        pairwise: for a file of both kinds, which to read (None: pairs if any).

    Returns:
        The samples, with gold columns.
    """
    path = Path(path)
    if format != AUTO and format not in FORMATS:
        raise InputError(
            f"{path}: unknown samples format {format!r}; use auto or one of {', '.join(FORMATS)}"
        )
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    records = load_records(path)
    if not records:
        raise InputError(f"{path}: no records")
    detected = detect_format(path, records) if format == AUTO else format
    if format == AUTO:
        logger.info("%s: samples format detected as %s", path, detected)
    return read_records(path, records, detected, pairwise)


def _frame(rows: list[dict[str, Any]], pairwise: bool) -> pd.DataFrame:
    columns = PAIRWISE_COLUMNS if pairwise else POINTWISE_COLUMNS
    names = dict.fromkeys(key for row in rows for key in row)
    extra = [name for name in names if name not in columns]
    return pd.DataFrame.from_records(rows, columns=[*columns, *extra])


def read_records(
    path: Path,
    records: list[Record],
    format: str,  # noqa: A002
    pairwise: bool | None = None,
) -> pd.DataFrame:
    """The samples of `records` (read from `path`, which errors name) in `format`; for a
    file of both kinds (the viewer's), `pairwise` picks the kind (None: pairs if any).

    Args:
        path: the file the records came from, named in errors.
        records: its records.
        format: one of `FORMATS`.
        pairwise: for a file of both kinds, which to read (None: pairs if any).

    Returns:
        The samples, with gold columns.
    """
    if not records:
        raise InputError(f"{path}: no records")
    if format == VIEWER:
        rows = viewer_labels.rows(path, records, pairwise)
    else:
        rows = _READERS[format](path, records)
    is_pair = "gold" in rows[0]
    _check_unique(path, rows, is_pair)
    frame = _frame(rows, is_pair)
    frame.attrs["samples_format"] = format
    return frame


@dataclass(frozen=True)
class ViewerLabels:
    """A viewer download's labels: `pairs` (two rows an item, the first "A", with `gold`)
    and `scores` (one row a response, with `gold_score`), eval_samples-shaped, each empty
    when the file has none of that kind."""

    pairs: pd.DataFrame
    scores: pd.DataFrame


def read_viewer_labels(path: str | Path) -> ViewerLabels:
    """Both kinds of labels of the viewer's `labels.jsonl` (or several concatenated).

    Args:
        path: the downloaded file.

    Returns:
        Its pairs and its scores.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    records = load_records(path)
    if not records:
        raise InputError(f"{path}: no records")
    pairs, scores = viewer_labels.item_rows(path, records)
    _check_unique(path, pairs, pairwise=True)
    return ViewerLabels(_frame(pairs, pairwise=True), _frame(scores, pairwise=False))


def is_pairwise(samples: pd.DataFrame) -> bool:
    """Whether `samples` (from `read_samples`) are pairwise (they have `gold`).

    Args:
        samples: samples from `read_samples`.

    Returns:
        True for pairs.
    """
    return "gold" in samples.columns
