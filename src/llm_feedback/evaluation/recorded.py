"""Pairwise verdicts recorded elsewhere, read as eval_samples and judged without a call.

Formats (`evaluate.samples_format`, each also recognised by `auto`):

- `alpaca_eval`: AlpacaEval's `annotations.json` as published (a JSON list; several models'
  lists may be concatenated): `instruction`, `output_1` / `generator_1` (shown as A: the
  baseline), `output_2` / `generator_2` (B), `preference` (a number, or a number as text,
  in [1, 2]: the judge's probability-weighted preference, 2 = output_2 better, 1.5 a draw;
  0 is AlpacaEval's old spelling of a draw), optional `dataset` (kept as `category`) and
  `annotator` (the judge's name).
- `arena_hard`: Arena-Hard-Auto's `model_judgment/<judge>/<model>.jsonl` (or that folder:
  every model's file; `uid` or
  `question_id`, `model`, `judge`, `games`: two games, each with a `score` of `A>>B`,
  `A>B`, `A=B`, `B>A`, `B>>A`, the first with the baseline as A, the second swapped) read
  with the answers in the benchmark's `model_answer/*.jsonl` beside it
  (`../../model_answer` from the judgment file); the baseline (A) is
  `evaluate.ranking.baseline`, by default Arena-Hard v0.1's `gpt-4-0314`.
- `jsonl` with a `preference` field: our own pairs, one JSON object a line: `question`,
  `response_a`, `response_b`, `preference` (AlpacaEval's scale: 1 = A better, 2 = B
  better, 1.5 a draw, fractional = probability-weighted), optional `model_a`, `model_b`
  (default `response_a` / `response_b`), `instance_id`, `category`, `prompt_key`, `judge`
  (who recorded it) and `label` (a human's "A", "B" or "tie": the gold the recorded judge
  is validated against).

Every recorded pair becomes one pairwise instance (two rows, A first) carrying the pair's
recording in `RECORDED_COLUMNS` (the same on both rows) and `prompt_key`, the prompt the
pair answers (pairs of several models on one prompt share it: the unit the ranking's
intervals resample and AlpacaEval's instruction difficulty is kept by).
`recorded_judgments` turns them into eval_judgments rows: no judge is called.
"""

from __future__ import annotations

import hashlib
import math
import numbers
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.core.errors import InputError
from llm_feedback.evaluation.config import EvaluateParams
from llm_feedback.judges.metrics import is_position_consistent, pairwise_outcome
from llm_feedback.replies.status import EMPTY, OK
from llm_feedback.storage.schema import EVAL_RECORDED_COLUMN_TYPES
from llm_feedback.validation.records import Record, field, load_records, text_field
from llm_feedback.validation.verdicts import VERDICTS

ALPACA_EVAL, ARENA_HARD, OWN_JSONL = "alpaca_eval", "arena_hard", "jsonl"
PREFERENCE = "preference"
GAME_COLUMNS = ("recorded_verdict_a_first", "recorded_verdict_b_first")
RECORDED_BY = "recorded_by"
PROMPT_KEY = "prompt_key"
RECORDED_COLUMNS = tuple(EVAL_RECORDED_COLUMN_TYPES)
# Arena-Hard's five verdict levels, read from the pair's A side.
LEVELS = ("A>>B", "A>B", "A=B", "B>A", "B>>A")
_LEVEL_SPELLINGS = {"A<<B": "B>>A", "A<B": "B>A", "B=A": "A=B", "B<A": "A>B", "B<<A": "A>>B"}
_SWAPPED_LEVEL = dict(zip(LEVELS, reversed(LEVELS), strict=True))
_LEVEL_WINNER = {"A>>B": "A", "A>B": "A", "A=B": "tie", "B>A": "B", "B>>A": "B"}
_SIGNATURES = {
    ALPACA_EVAL: {"instruction", "output_1", "output_2", "generator_2", "preference"},
    ARENA_HARD: {"model", "games"},
}


def recorded_format(data: dict[str, Any]) -> str | None:
    """The recorded-verdict format whose fields the record `data` has, or None.

    Args:
        data: one record.

    Returns:
        The format's name, or None.
    """
    for name, signature in _SIGNATURES.items():
        if signature <= data.keys():
            return name
    if {"question", "response_a", "response_b", PREFERENCE} <= data.keys():
        return OWN_JSONL
    return None


def prompt_key(text: str) -> str:
    """A short stable id of a prompt's text (pairs on one prompt share it).

    Args:
        text: the prompt's text.

    Returns:
        The id.
    """
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _preference(path: Path, record: Record, name: str = PREFERENCE) -> float:
    """A preference in [1, 2] (a number or a number as text); NaN when absent."""
    value = record.data.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        return math.nan
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise InputError(
                f"{path}, {record.where}, field {name!r}: must be a number in [1, 2], got {value!r}"
            ) from None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(
            f"{path}, {record.where}, field {name!r}: must be a number in [1, 2], got {value!r}"
        )
    value = float(value)
    if math.isnan(value):
        return value
    if value == 0:  # AlpacaEval's older spelling of a draw
        return 1.5
    if not 1 <= value <= 2:
        raise InputError(
            f"{path}, {record.where}, field {name!r}: must be a number in [1, 2] (1: the "
            f"first response better, 2: the second, 1.5: a draw), got {value!r}"
        )
    return value


def _pair(
    instance_id: str,
    question: str,
    first: tuple[str, str],
    second: tuple[str, str],
    recording: dict[str, Any],
    *,
    category: str | None,
) -> list[dict[str, Any]]:
    return [
        {
            "instance_id": instance_id,
            "question": question,
            "response": response,
            "model": model,
            "category": category,
            **recording,
        }
        for model, response in (first, second)
    ]


def _alpaca_eval(path: Path, records: list[Record]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for record in records:
        question = text_field(path, record, "instruction")
        key = prompt_key(question)
        model_a = text_field(path, record, "generator_1", required=False) or "output_1"
        model_b = text_field(path, record, "generator_2")
        rows += _pair(
            f"{key}:{model_b}",
            question,
            (model_a, text_field(path, record, "output_1", allow_empty=True)),
            (model_b, text_field(path, record, "output_2", allow_empty=True)),
            {
                PREFERENCE: _preference(path, record),
                RECORDED_BY: field(path, record, "annotator", str, required=False),
                PROMPT_KEY: key,
            },
            category=field(path, record, "dataset", str, required=False),
        )
    return rows


def _gold(path: Path, record: Record) -> dict[str, Any]:
    """A human `label` ("A", "B" or "tie") beside the recorded verdict, as the gold columns
    (the recorded judge is then validated against it); none without one."""
    label = field(path, record, "label", str, required=False)
    if label is None:
        return {}
    if label not in VERDICTS:
        raise InputError(
            f"{path}, {record.where}, field 'label': must be A, B or tie, got {label!r}"
        )
    return {"gold": label, "gold_labels": [label], "gold_annotators": ["label"]}


def _own_jsonl(path: Path, records: list[Record]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for record in records:
        question = text_field(path, record, "question")
        instance = field(path, record, "instance_id", (str, int), required=False)
        rows += _pair(
            str(instance) if instance is not None else f"item-{record.number}",
            question,
            (
                text_field(path, record, "model_a", required=False) or "response_a",
                text_field(path, record, "response_a", allow_empty=True),
            ),
            (
                text_field(path, record, "model_b", required=False) or "response_b",
                text_field(path, record, "response_b", allow_empty=True),
            ),
            {
                PREFERENCE: _preference(path, record),
                RECORDED_BY: field(path, record, "judge", str, required=False),
                PROMPT_KEY: field(path, record, PROMPT_KEY, str, required=False)
                or prompt_key(question),
                **_gold(path, record),
            },
            category=field(path, record, "category", str, required=False),
        )
    return rows


def _level(path: Path, record: Record, game: Any, number: int) -> str | None:
    """A game's verdict as one of `LEVELS` (A the game's first answer); None when the game
    or its score is missing (Arena-Hard leaves such judgments out)."""
    if not isinstance(game, dict) or game.get("score") is None:
        return None
    score = str(game["score"]).strip()
    score = _LEVEL_SPELLINGS.get(score, score)
    if score not in LEVELS:
        raise InputError(
            f"{path}, {record.where}, field 'games', game {number}: score must be one of "
            f"{', '.join(LEVELS)}, got {game['score']!r}"
        )
    return score


def _answers(folder: Path) -> dict[str, dict[str, dict[str, str]]]:
    """{model: {uid: {"question", "answer"}}} of Arena-Hard's answer files in `folder`."""
    answers: dict[str, dict[str, dict[str, str]]] = {}
    for file in sorted(folder.glob("*.jsonl")):
        for record in load_records(file):
            model = text_field(file, record, "model")
            uid = str(field(file, record, "uid", (str, int)))
            messages = field(file, record, "messages", list)
            content = messages[-1].get("content") if messages else None
            answer = content.get("answer") if isinstance(content, dict) else content
            if not isinstance(answer, str):
                raise InputError(f"{file}, {record.where}: the last message has no answer text")
            question = messages[0].get("content") if len(messages) > 1 else None
            answers.setdefault(model, {})[uid] = {"question": question, "answer": answer}
    return answers


def arena_hard_rows(
    path: Path, records: list[Record], baseline: str, answers_dir: Path | None = None
) -> list[dict[str, Any]]:
    """The pairs of Arena-Hard judgment records: A the baseline's answer, B the model's;
    game 1 as Arena-Hard played it (baseline first), game 2 turned to the pair's sides.

    Args:
        path: the judgment file, named in errors.
        records: its records.
        baseline: the baseline model.
        answers_dir: the models' answer files (default: Arena-Hard's layout beside the judgments).

    Returns:
        The eval_samples rows, two per pair.
    """
    judge_folder = path.resolve() if path.is_dir() else path.resolve().parent
    folder = answers_dir or judge_folder.parent.parent / "model_answer"
    if not folder.is_dir():
        raise InputError(
            f"{path}: Arena-Hard's answers are read from {folder} (model_answer beside "
            "model_judgment), which is not a folder"
        )
    answers = _answers(folder)
    if baseline not in answers:
        raise InputError(
            f"{path}: evaluate.arena_hard_baseline {baseline!r} has no answer file in {folder} "
            f"(models there: {', '.join(sorted(answers)) or 'none'})"
        )
    rows: list[dict[str, Any]] = []
    for record in records:
        model = text_field(path, record, "model").split("/")[-1]
        uid_field = "uid" if "uid" in record.data else "question_id"
        uid = str(field(path, record, uid_field, (str, int)))
        games = field(path, record, "games", list)
        if len(games) != 2:
            raise InputError(
                f"{path}, {record.where}, field 'games': Arena-Hard plays two games, got "
                f"{len(games)}"
            )
        first, second = (_level(path, record, game, n) for n, game in enumerate(games, 1))
        for name in (baseline, model):
            if uid not in answers.get(name, {}):
                raise InputError(f"{path}, {record.where}: no answer of {name!r} to uid {uid!r}")
        base, own = answers[baseline][uid], answers[model][uid]
        rows += _pair(
            f"{uid}:{model}",
            own["question"] or base["question"] or "",
            (baseline, base["answer"]),
            (model, own["answer"]),
            {
                GAME_COLUMNS[0]: first,
                GAME_COLUMNS[1]: None if second is None else _SWAPPED_LEVEL[second],
                RECORDED_BY: field(path, record, "judge", str, required=False),
                PROMPT_KEY: uid,
            },
            category=field(path, record, "category", str, required=False),
        )
    return rows


def read_recorded(
    where: Path, records: list[Record], chosen: str, config_baseline: str | None = None
) -> pd.DataFrame:
    """eval_samples rows (two per recorded pair) of `records` in format `chosen`.

    Args:
        where: the file or folder read, named in errors.
        records: its records.
        chosen: the recorded format.
        config_baseline: Arena-Hard's baseline model (default gpt-4-0314).

    Returns:
        The eval_samples rows.
    """
    if not records:
        raise InputError(f"{where}: no records")
    if chosen == ALPACA_EVAL:
        rows = _alpaca_eval(where, records)
    elif chosen == ARENA_HARD:
        rows = arena_hard_rows(where, records, config_baseline or "gpt-4-0314")
    else:
        rows = _own_jsonl(where, records)
    frame = pd.DataFrame.from_records(rows)
    for column in RECORDED_COLUMNS:
        if column not in frame.columns:
            frame[column] = None
    frame.attrs["samples_format"] = chosen
    return frame


def has_recorded_verdicts(samples: pd.DataFrame) -> bool:
    """Whether the samples carry recorded pairwise verdicts (then nothing is judged).

    Args:
        samples: eval_samples rows.

    Returns:
        True when they do.
    """
    columns = [c for c in (PREFERENCE, *GAME_COLUMNS) if c in samples.columns]
    return bool(columns) and samples[columns].notna().any(axis=None)


def _game_winner(level: Any) -> str | None:
    return None if level is None or pd.isna(level) else _LEVEL_WINNER[level]


def recorded_judgments(samples: pd.DataFrame, config: EvaluateParams) -> list[dict[str, Any]]:
    """eval_judgments records of the recorded pairs, no call made.

    A preference p gives `prob_margin` = P(A) - P(B) = 3 - 2p and the outcome p rounded
    (1.5 a tie); two recorded games give their winners as `verdict_a_first` /
    `verdict_b_first` and the outcome as two judged orders give it. A pair without a
    recording is an `empty` row without outcome.

    Args:
        samples: the recorded pairs' eval_samples rows.
        config: the evaluate parameters.

    Returns:
        The eval_judgments records.
    """
    records = []
    for (instance_id, turn, replicate), pair in samples.groupby(
        ["instance_id", "turn", "replicate"], sort=False
    ):
        a, b = pair.iloc[0], pair.iloc[1]
        preference = pd.to_numeric(a.get(PREFERENCE), errors="coerce")
        games = [a.get(column) for column in GAME_COLUMNS]
        margin = math.nan
        first = second = outcome = consistent = None
        if preference is not None and not pd.isna(preference):
            margin = 3.0 - 2.0 * float(preference)
            outcome = "tie" if margin == 0 else ("A" if margin > 0 else "B")
            first = outcome
        elif all(g is not None and not pd.isna(g) for g in games):
            first = _game_winner(games[0])
            second = _game_winner(games[1])
            # pairwise_outcome reads the second order's verdict as shown (model_b first).
            shown = _game_winner(_SWAPPED_LEVEL[games[1]])
            outcome = pairwise_outcome(first, shown)
            consistent = is_position_consistent(first, shown)
        read = outcome is not None
        records.append(
            {
                "instance_id": instance_id,
                "turn": turn,
                "replicate": replicate,
                "category": a["category"],
                "level": a["level"],
                "mode": config.mode,
                "model_a": a["model"],
                "model_b": b["model"],
                "verdict_a_first": first,
                "verdict_b_first": second,
                "outcome": outcome,
                "consistent": consistent,
                "prob_margin": margin,
                "logprobs_usable": False,
                "parse_status": OK if read else EMPTY,
                "success": read,
                "judge_model": a.get(RECORDED_BY) if not pd.isna(a.get(RECORDED_BY)) else None,
                "cached": False,
                "error": None if read else "no recorded verdict for this pair",
                "reasks": 0,
            }
        )
    return records
