"""Our own gold-labelled JSONL shape (format `jsonl`): one JSON object a line, one item each.

Pairwise (the first response is "A"):

    {"instance_id": "q1", "question": "...", "response_a": "...", "response_b": "...",
     "model_a": "m1", "model_b": "m2", "label": "A", "category": "coding"}

`label` is "A", "B" or "tie"; several annotators give `labels` instead, a list (named
annotator1, annotator2, ...) or an object {annotator: label}. Pointwise:

    {"instance_id": "q1", "question": "...", "response": "...", "model": "m1", "score": 7}

with `scores` (a list or an object) for several annotators. Optional: `instance_id`
(default `item-<line>`), `model_a` / `model_b` (default `response_a` / `response_b`),
`model` (default `response`), `category`. One file holds one kind: pairwise or pointwise.

Gold on a slice of the pairs: a pairwise line may leave its label out (no `label` /
`labels`, or null), so long as some line of the file has one; its rows get no gold (the
judge judges it; the labelled lines are the human slice that validates the judge and
corrects its win rates). The labelled share is logged.
"""

from __future__ import annotations

import logging
import numbers
from pathlib import Path
from typing import Any

from llm_feedback.core.errors import InputError
from llm_feedback.validation.records import Record, field, pair_rows, text_field

logger = logging.getLogger(__name__)

PAIRWISE_LABELS = ("A", "B", "tie")
_PAIR_LABEL_FIELDS = ("label", "labels")


def _kind(data: dict[str, Any]) -> str | None:
    if {"response_a", "response_b"} <= data.keys():
        return "pairwise"
    if "response" in data and data.keys() & {"score", "scores"}:
        return "pointwise"
    return None


def _labelled(data: dict[str, Any]) -> bool:
    """Whether a pairwise line carries a label (a null one is none)."""
    return any(data.get(name) is not None for name in _PAIR_LABEL_FIELDS)


def matches(data: dict[str, Any]) -> bool:
    """Whether a record has our JSONL shape, pairwise (labelled or not) or pointwise.

    Args:
        data: one record.

    Returns:
        True when it has our shape.
    """
    return "question" in data and _kind(data) is not None


def _annotations(path: Path, record: Record, one: str, several: str) -> tuple[list, list[str]]:
    """(values, annotator names) of `one` (a single value) or `several` (list or object)."""
    if one in record.data:
        return [record.data[one]], [one]
    values = field(path, record, several, (list, dict))
    if not values:
        raise InputError(f"{path}, {record.where}, field {several!r}: is empty")
    if isinstance(values, dict):
        return list(values.values()), [str(name) for name in values]
    return list(values), [f"annotator{number}" for number in range(1, len(values) + 1)]


def _labels(path: Path, record: Record) -> tuple[list[str], list[str]]:
    labels, annotators = _annotations(path, record, "label", "labels")
    name = "label" if "label" in record.data else "labels"
    for label in labels:
        if label not in PAIRWISE_LABELS:
            raise InputError(
                f"{path}, {record.where}, field {name!r}: labels are A, B or tie, got {label!r}"
            )
    return labels, annotators


def _scores(path: Path, record: Record) -> tuple[list[float], list[str]]:
    scores, annotators = _annotations(path, record, "score", "scores")
    name = "score" if "score" in record.data else "scores"
    for score in scores:
        if isinstance(score, bool) or not isinstance(score, numbers.Real):
            raise InputError(
                f"{path}, {record.where}, field {name!r}: scores are numbers, got {score!r}"
            )
    return [float(score) for score in scores], annotators


def _check_some_labelled(path: Path, records: list[Record], labelled: int) -> None:
    """A pairwise file needs gold on some pair (a file of none is no gold-labelled file)."""
    if not labelled:
        raise InputError(
            f"{path}, {records[0].where}: expected question with response_a, response_b and "
            "label(s) on at least one pair (no pair of the file has a label)"
        )
    if labelled < len(records):
        logger.info(
            "%s: %d of %d pairs carry gold (%.0f%%): the rest are judged, the labelled ones "
            "validate the judge and correct its win rates",
            path,
            labelled,
            len(records),
            100 * labelled / len(records),
        )


def rows(path: Path, records: list[Record]) -> list[dict[str, Any]]:
    """eval_samples-shaped rows with gold columns (see `formats`); an unlabelled pair's
    rows have none.

    Args:
        path: the file, named in errors.
        records: its records.

    Returns:
        The rows.
    """
    kind = None
    labelled = 0
    out: list[dict[str, Any]] = []
    for record in records:
        this = _kind(record.data) if "question" in record.data else None
        if this is None:
            raise InputError(
                f"{path}, {record.where}: expected question with response_a, response_b and "
                "label(s) (pairwise) or response and score(s) (pointwise)"
            )
        if kind is not None and this != kind:
            raise InputError(f"{path}, {record.where}: a {this} item in a file of {kind} items")
        kind = this
        instance_id = field(path, record, "instance_id", (str, int), required=False)
        instance_id = f"item-{record.number}" if instance_id is None else str(instance_id)
        question = text_field(path, record, "question")
        category = text_field(path, record, "category", required=False)
        if kind == "pairwise":
            labels, annotators = _labels(path, record) if _labelled(record.data) else ([], [])
            labelled += bool(labels)
            model_a = text_field(path, record, "model_a", required=False) or "response_a"
            model_b = text_field(path, record, "model_b", required=False) or "response_b"
            if model_a == model_b:
                raise InputError(f"{path}, {record.where}, field 'model_b': same as model_a")
            out += pair_rows(
                instance_id,
                question,
                (
                    (model_a, text_field(path, record, "response_a", allow_empty=True)),
                    (model_b, text_field(path, record, "response_b", allow_empty=True)),
                ),
                labels,
                annotators,
                category=category,
            )
        else:
            scores, annotators = _scores(path, record)
            out.append(
                {
                    "instance_id": instance_id,
                    "question": question,
                    "response": text_field(path, record, "response", allow_empty=True),
                    "model": text_field(path, record, "model", required=False) or "response",
                    "category": category,
                    "gold_score": sum(scores) / len(scores),
                    "gold_labels": scores,
                    "gold_annotators": annotators,
                }
            )
    if kind == "pairwise":
        _check_some_labelled(path, records, labelled)
    return out
