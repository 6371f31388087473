"""The judgment viewer's `labels.jsonl` (format `viewer`) read as gold, as reviewers make it.

A download mixes the two shapes of `llm_feedback.viewer.labels` (pairs, then scores, in the
viewer's key order), with several pairs per prompt (any two of its completions, in either
order) and a score per response; files of several reviewers (or one reviewer's downloads)
are read concatenated. Labels are grouped into items:

- a pair is the instance and its two responses, whichever was shown as A: a label given
  the other way round is flipped (A <-> B) to the first order seen. The item's
  `instance_id` is the line's `instance_id` when that instance has one pair, else
  `<instance_id>:<model_a>~<model_b>` (`#2`, `#3`... after it when two completions of one
  model are compared), so that each pair is one item of two rows;
- a score is the instance, its response and, when the line names one, its `aspect` (a
  rating of a completion on one aspect): one row, `gold_score` the mean of its scores.

A line drawn by the viewer's review queue carries `selection_probability`, the probability
its record was drawn with: the item keeps the first seen (`selection_probability` column).

Every item keeps its reviewers' labels (`gold_labels`) and names (`gold_annotators`): a
reviewer who labelled one item twice with different labels counts as `<name>#2` (as the
MT-Bench reader numbers a repeated judge); a line repeated exactly (the same download
concatenated twice) is counted once. `labelled_id` keeps the line's own `instance_id`
(the annotate run's `prompt_id`, or the evaluate run's `instance_id`).
"""

from __future__ import annotations

import logging
import math
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_feedback.core.errors import InputError
from llm_feedback.validation.records import Record, field, pair_rows, text_field
from llm_feedback.viewer.labels import ASPECT_FIELD, PAIRWISE_LABELS, SELECTION_FIELD

logger = logging.getLogger(__name__)

ANONYMOUS = "anonymous"  # what the viewer writes when the reviewer box is empty
_FLIPPED = {"A": "B", "B": "A", "tie": "tie"}


def is_pair(data: dict[str, Any]) -> bool:
    """Whether a record has the viewer's pairwise shape (a reviewer's choice of two).

    Args:
        data: one record.

    Returns:
        True for a pairwise label.
    """
    return {"response_a", "response_b", "label", "annotator"} <= data.keys()


def is_score(data: dict[str, Any]) -> bool:
    """Whether a record has the viewer's pointwise shape (a reviewer's score of one).

    Args:
        data: one record.

    Returns:
        True for a pointwise label.
    """
    return {"response", "gold_score", "annotator"} <= data.keys()


def matches(data: dict[str, Any]) -> bool:
    """Whether a record is a line of the viewer's labels file, of either shape.

    Args:
        data: one record.

    Returns:
        True for either shape.
    """
    return "instance_id" in data and (is_pair(data) or is_score(data))


@dataclass
class _Item:
    labelled_id: str
    question: str
    responses: tuple[tuple[str, str], ...]  # (model, text) per response, A first
    aspect: str | None = None
    category: str | None = None
    # The review queue's probability of drawing the item's record (None: not drawn by it).
    selection_probability: float | None = None

    def __post_init__(self) -> None:
        self.labels: list[Any] = []
        self.annotators: list[str] = []
        self.seen: set[tuple[str, Any]] = set()

    def add(self, annotator: str, label: Any) -> None:
        if (annotator, label) in self.seen:
            return  # the same click, downloaded twice
        self.seen.add((annotator, label))
        repeats = sum(n == annotator or n.startswith(f"{annotator}#") for n in self.annotators)
        self.labels.append(label)
        self.annotators.append(annotator if repeats == 0 else f"{annotator}#{repeats + 1}")


def _instance_id(path: Path, record: Record) -> str:
    value = field(path, record, "instance_id", (str, int))
    if not str(value).strip():
        raise InputError(f"{path}, {record.where}, field 'instance_id': is empty")
    return str(value)


def _annotator(path: Path, record: Record) -> str:
    name = text_field(path, record, "annotator", allow_empty=True)
    return name.strip() or ANONYMOUS


def _selection(path: Path, record: Record) -> float | None:
    """The line's `selection_probability` (the review queue's), in (0, 1]; None without."""
    value = record.data.get(SELECTION_FIELD)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value <= 1:
        raise InputError(
            f"{path}, {record.where}, field {SELECTION_FIELD!r}: a probability in (0, 1], "
            f"got {value!r:.60}"
        )
    return float(value)


def _read_pair(path: Path, record: Record, items: dict[tuple, _Item]) -> None:
    label = field(path, record, "label", str)
    if label not in PAIRWISE_LABELS:
        raise InputError(
            f"{path}, {record.where}, field 'label': labels are A, B or tie, got {label!r:.60}"
        )
    first = (
        text_field(path, record, "model_a", required=False) or "response_a",
        text_field(path, record, "response_a", allow_empty=True),
    )
    second = (
        text_field(path, record, "model_b", required=False) or "response_b",
        text_field(path, record, "response_b", allow_empty=True),
    )
    if first == second:
        raise InputError(f"{path}, {record.where}: response_a and response_b are the same one")
    labelled_id = _instance_id(path, record)
    key = ("pair", labelled_id, frozenset((first, second)))
    item = items.get(key)
    if item is None:
        item = items[key] = _Item(
            labelled_id,
            text_field(path, record, "question"),
            (first, second),
            category=text_field(path, record, "category", required=False),
            selection_probability=_selection(path, record),
        )
    # Labels follow the item's first order: a choice made the other way round is flipped.
    item.add(_annotator(path, record), label if item.responses[0] == first else _FLIPPED[label])


def _read_score(path: Path, record: Record, items: dict[tuple, _Item]) -> None:
    score = record.data["gold_score"]
    if isinstance(score, bool) or not isinstance(score, numbers.Real) or not math.isfinite(score):
        raise InputError(
            f"{path}, {record.where}, field 'gold_score': scores are numbers, got {score!r:.60}"
        )
    response = (
        text_field(path, record, "model", required=False) or "response",
        text_field(path, record, "response", allow_empty=True),
    )
    aspect = text_field(path, record, ASPECT_FIELD, required=False)
    labelled_id = _instance_id(path, record)
    key = ("score", labelled_id, response, aspect)
    item = items.get(key)
    if item is None:
        item = items[key] = _Item(
            labelled_id,
            text_field(path, record, "question"),
            (response,),
            aspect=aspect,
            category=text_field(path, record, "category", required=False),
            selection_probability=_selection(path, record),
        )
    item.add(_annotator(path, record), float(score))


def _pair_ids(pairs: list[_Item]) -> list[str]:
    """Each pair's instance id: the labelled id when its instance has one pair, else the
    id with the two models (numbered when they repeat)."""
    per_instance: dict[str, int] = {}
    for item in pairs:
        per_instance[item.labelled_id] = per_instance.get(item.labelled_id, 0) + 1
    ids: list[str] = []
    taken: set[str] = set()
    for item in pairs:
        if per_instance[item.labelled_id] == 1:
            ids.append(item.labelled_id)
            continue
        base = f"{item.labelled_id}:{item.responses[0][0]}~{item.responses[1][0]}"
        name, number = base, 1
        while name in taken:
            number += 1
            name = f"{base}#{number}"
        taken.add(name)
        ids.append(name)
    return ids


def item_rows(path: Path, records: list[Record]) -> tuple[list[dict], list[dict]]:
    """(pairwise rows, pointwise rows) of the viewer labels in `records`, read from `path`
    (which errors name with the record's line).

    Args:
        path: the labels file, named in errors.
        records: its records.

    Returns:
        (pairwise rows, pointwise rows).
    """
    items: dict[tuple, _Item] = {}
    for record in records:
        if is_pair(record.data):
            _read_pair(path, record, items)
        elif is_score(record.data):
            _read_score(path, record, items)
        else:
            raise InputError(
                f"{path}, {record.where}: not a viewer label; expected instance_id, question, "
                "response_a, response_b, label and annotator (a pair) or instance_id, "
                "question, response, gold_score and annotator (a score)"
            )
    pairs = [item for key, item in items.items() if key[0] == "pair"]
    pair_out: list[dict[str, Any]] = []
    for instance_id, item in zip(_pair_ids(pairs), pairs, strict=True):
        pair_out += pair_rows(
            instance_id,
            item.question,
            item.responses,  # type: ignore[arg-type]
            item.labels,
            item.annotators,
            category=item.category,
            labelled_id=item.labelled_id,
            **(
                {SELECTION_FIELD: item.selection_probability}
                if item.selection_probability is not None
                else {}
            ),
        )
    score_out = []
    with_aspect = any(key[0] == "score" and key[3] is not None for key in items)
    for key, item in items.items():
        if key[0] != "score":
            continue
        ((model, response),) = item.responses
        row = {
            "instance_id": item.labelled_id,
            "question": item.question,
            "response": response,
            "model": model,
            "category": item.category,
            "gold_score": sum(item.labels) / len(item.labels),
            "gold_labels": list(item.labels),
            "gold_annotators": list(item.annotators),
            "labelled_id": item.labelled_id,
        }
        if with_aspect:
            row[ASPECT_FIELD] = item.aspect
        if item.selection_probability is not None:
            row[SELECTION_FIELD] = item.selection_probability
        score_out.append(row)
    return pair_out, score_out


def rows(path: Path, records: list[Record], pairwise: bool | None = None) -> list[dict]:
    """The rows of one kind for a judge: pairs when `pairwise` (or, when None, when there
    are any), else scores; the labels of the other kind are left out, and logged.

    Args:
        path: the labels file, named in errors.
        records: its records.
        pairwise: which kind to read (None: pairs if any).

    Returns:
        The rows of that kind.
    """
    pairs, scores = item_rows(path, records)
    if pairwise is None:
        pairwise = bool(pairs)
    chosen, other = (pairs, scores) if pairwise else (scores, pairs)
    names = ("pair", "score") if pairwise else ("score", "pair")
    if other:
        # Count labels, not items: a pair item has two rows carrying the same labels.
        count = sum(len(row["gold_labels"]) for row in other) // (1 if pairwise else 2)
        logger.warning(
            "%s: %d %s labels left out (this judge is checked on %s labels)",
            path,
            count,
            names[1],
            names[0],
        )
    if not chosen:
        raise InputError(
            f"{path}: no {names[0]} labels (the file has {names[1]} labels only); a "
            f"{'pairwise' if pairwise else 'pointwise'} judge needs {names[0]} labels"
        )
    return chosen
