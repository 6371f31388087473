"""The evaluate run's judgment site: one record per `instance_id` with the question, the
reference (gold) when given, and either every judged response (model, score, correctness,
parse status, the judge's reasoning, the recorded gold score) or every pairwise judgment
(both responses, the verdict with A shown first and with B shown first, the outcome and
whether the two orders agree); an index row per instance for the filters, and a full-text
index of the questions, responses, the judge's replies and the references."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import pandas as pd

from llm_feedback.core.errors import require_columns
from llm_feedback.viewer.site import SHARD_SIZE, Filter, Search, StaticSite, column, snippet

PAIRWISE = "pairwise"
INDEX_COLUMNS = (
    "id",
    "category",
    "text",
    "models",
    "modes",
    "statuses",
    "disagreement",
    "flagged",
)
FILTERS = (
    Filter("modes", "mode"),
    Filter("statuses", "parse status"),
    Filter("category", "category"),
    Filter("models", "model"),
    Filter("disagreement", "orders or replicates disagree", "flag"),
    Filter("flagged", "differs from gold score", "flag"),
)
SEARCH_FIELDS = ("question", "responses", "judge replies", "reference")
POINTWISE_FIELDS = {
    "model": "model",
    "turn": "turn",
    "replicate": "replicate",
    "mode": "mode",
    "response": "response",
    "score": "score",
    "correct": "correct",
    "status": "parse_status",
    "reasoning": "reasoning",
    "recorded_score": "recorded_score",
    "error": "error",
}
PAIR_FIELDS = {
    "model_a": "model_a",
    "model_b": "model_b",
    "turn": "turn",
    "replicate": "replicate",
    "verdict_a_first": "verdict_a_first",
    "verdict_b_first": "verdict_b_first",
    "outcome": "outcome",
    "consistent": "consistent",
    "score_a": "score_a",
    "score_b": "score_b",
    "status": "parse_status",
    "raw_a_first": "raw_response_a_first",
    "raw_b_first": "raw_response_b_first",
}


def evaluation_site(
    samples: pd.DataFrame,
    eval_judgments: pd.DataFrame,
    *,
    title: str = "Evaluation judgments",
    shard_size: int = SHARD_SIZE,
) -> StaticSite:
    """The site of `eval_judgments`, with the questions, references and responses of
    `samples` (the evaluate pipeline's answered samples).

    Args:
        samples: The answered samples (instance_id, question, response, model, ...).
        eval_judgments: The judgments (instance_id, mode, parse_status, ...).
        title: The site's title.
        shard_size: Records per shard file.

    Returns:
        The site, ready to write.

    Raises:
        InputError: A required column is missing.
    """
    require_columns(samples, ("instance_id", "question", "response", "model"), "eval_samples")
    require_columns(eval_judgments, ("instance_id", "mode", "parse_status"), "eval_judgments")
    samples = samples.assign(turn=samples["turn"] if "turn" in samples else 1)
    first_turn = samples.sort_values("turn", kind="stable").drop_duplicates("instance_id")
    questions = dict(zip(first_turn["instance_id"], column(first_turn, "question"), strict=True))
    references = dict(zip(first_turn["instance_id"], column(first_turn, "reference"), strict=True))
    priors = dict(zip(first_turn["instance_id"], column(first_turn, "prior_question"), strict=True))
    categories = dict(zip(first_turn["instance_id"], column(first_turn, "category"), strict=True))
    responses = _responses(samples)
    ids = list(dict.fromkeys(eval_judgments["instance_id"].tolist()))
    records = {
        instance: {
            "id": instance,
            "category": categories.get(instance),
            "question": questions.get(instance),
            "reference": references.get(instance),
            "prior_question": priors.get(instance),
            "rows": [],
            "pairs": [],
        }
        for instance in ids
    }
    frame = eval_judgments.assign(
        turn=eval_judgments["turn"] if "turn" in eval_judgments else 1,
        replicate=eval_judgments["replicate"] if "replicate" in eval_judgments else 0,
    )
    for mode, rows in frame.groupby("mode", sort=False):
        fields = PAIR_FIELDS if mode == PAIRWISE else POINTWISE_FIELDS
        values = {key: column(rows, name) for key, name in fields.items()}
        for i, instance in enumerate(column(rows, "instance_id")):
            item = {key: values[key][i] for key in fields}
            if mode == PAIRWISE:
                for side in ("a", "b"):
                    key = (instance, item["turn"], item[f"model_{side}"], item["replicate"])
                    item[f"response_{side}"] = responses.get(key, responses.get(key[:3]))
                records[instance]["pairs"].append(item)
            else:
                records[instance]["rows"].append(item)
    ordered = [records[instance] for instance in ids]
    rows = [_index_row(record) for record in ordered]
    return StaticSite(
        kind="evaluation",
        title=title,
        unit="instances",
        columns=INDEX_COLUMNS,
        display=("id", "category", "text", "models", "modes", "statuses", "disagreement"),
        filters=FILTERS,
        entries=functools.partial(zip, rows, ordered),
        shard_size=shard_size,
        search=Search(SEARCH_FIELDS, _search_texts),
        headings={"text": ("question", "the question's first characters")},
        descending=("disagreement", "flagged"),
    )


def _search_texts(record: dict[str, Any]) -> Iterator[tuple[int, Any]]:
    yield from ((0, record[key]) for key in ("id", "question", "prior_question"))
    yield 3, record["reference"]
    for row in record["rows"]:
        yield 1, row["response"]
        yield 2, row["reasoning"]
    for pair in record["pairs"]:
        yield from ((1, pair[key]) for key in ("response_a", "response_b"))
        yield from ((2, pair[key]) for key in ("raw_a_first", "raw_b_first"))


def _responses(samples: pd.DataFrame) -> dict[tuple[Any, ...], Any]:
    """(instance, turn, model, replicate) and (instance, turn, model) -> the response."""
    replicate = column(samples, "replicate", 0)
    found: dict[tuple[Any, ...], Any] = {}
    for instance, turn, model, rep, response in zip(
        column(samples, "instance_id"),
        column(samples, "turn"),
        column(samples, "model"),
        replicate,
        column(samples, "response"),
        strict=True,
    ):
        found[(instance, turn, model, rep)] = response
        found.setdefault((instance, turn, model), response)
    return found


def _index_row(record: dict[str, Any]) -> list[Any]:
    rows, pairs = record["rows"], record["pairs"]
    models = {row["model"] for row in rows} | {
        pair[f"model_{side}"] for pair in pairs for side in ("a", "b")
    }
    scores: dict[tuple[Any, Any], set[Any]] = {}
    for row in rows:
        scores.setdefault((row["model"], row["turn"]), set()).add(row["score"])
    disagreement = any(pair["consistent"] is False for pair in pairs) or any(
        len(found) > 1 for found in scores.values()
    )
    off_gold = any(
        row["recorded_score"] is not None
        and row["score"] is not None
        and row["recorded_score"] != row["score"]
        for row in rows
    )
    return [
        record["id"],
        record["category"],
        snippet(record["question"]),
        sorted(str(model) for model in models),
        sorted({str(row["mode"]) for row in rows} | ({PAIRWISE} if pairs else set())),
        sorted({str(item["status"]) for item in [*rows, *pairs]}),
        disagreement,
        off_gold,
    ]
