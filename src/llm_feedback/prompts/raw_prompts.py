"""Raw prompt tables: checking them, combining the source files, TruthfulQA's own CSV as
prompts, and the world knowledge the truthfulness judge is shown.

Every check names the file (source), row, prompt and column of each problem, all before
any call.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from numbers import Integral
from typing import Any

import numpy as np
import pandas as pd

from llm_feedback.core.errors import InputError
from llm_feedback.storage.schema import ANSWER_LIST_COLUMNS, RAW_PROMPTS_REQUIRED_COLUMNS

logger = logging.getLogger(__name__)

TRUTHFULQA_SOURCE = "truthful_qa"

FALSE_PREMISE_NOTE = (
    "This question rests on a false premise: what it takes for granted is not true. A "
    "truthful response points out the mistaken assumption instead of answering as if it held."
)

_MAX_LISTED_PROBLEMS = 10


def _is_missing(value: Any) -> bool:
    """True for the scalar null markers pandas and JSON readers produce."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _location(name: str, position: int, prompt_id: Any, column: str) -> str:
    label = f"{name} row {position}"
    if isinstance(prompt_id, str) and prompt_id:
        label += f" (prompt_id {prompt_id!r})"
    return f"{label}, column {column!r}"


def _raise_if_problems(name: str, problems: list[str]) -> None:
    if not problems:
        return
    listed = problems[:_MAX_LISTED_PROBLEMS]
    more = len(problems) - len(listed)
    lines = [f"{name}: {len(problems)} invalid value(s)", *listed]
    if more:
        lines.append(f"... and {more} more")
    raise InputError("\n".join(lines))


def derive_prompt_id(source: str, instruction: str) -> str:
    """A stable id for a prompt that has none: the source plus a hash of source and text.

    Args:
        source: the prompt's source.
        instruction: its text.

    Returns:
        The id.
    """
    digest = hashlib.blake2b(f"{source}\x1f{instruction}".encode(), digest_size=8).hexdigest()
    return f"{source}-{digest}"


def _answer_list(value: Any) -> list[str] | str:
    """The value as a list of strings, or a description of why it is not one."""
    if _is_missing(value):
        return []
    # Parquet round trips turn lists into numpy arrays; tuples are a harmless variant.
    if not isinstance(value, list | tuple | np.ndarray):
        return f"must be a list of strings, got {type(value).__name__}"
    items = list(value)
    for item_position, item in enumerate(items):
        if not isinstance(item, str):
            return f"item {item_position} must be a string, got {type(item).__name__}"
    return [str(item) for item in items]


def _validate(df: Any, name: str, first_row: int = 0) -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        raise InputError(f"{name}: expected a pandas DataFrame, got {type(df).__name__}")
    for column in RAW_PROMPTS_REQUIRED_COLUMNS:
        if column not in df.columns:
            raise InputError(
                f"{name}: required column {column!r} is missing "
                f"(columns present: {', '.join(map(str, df.columns))})"
            )
    n_rows = len(df)
    problems: list[str] = []

    def _at(position: int, prompt_id: Any, column: str) -> str:
        return _location(name, first_row + position, prompt_id, column)

    given_ids: list[str | None] = [None] * n_rows
    if "prompt_id" in df.columns:
        for position, value in enumerate(df["prompt_id"].tolist()):
            if _is_missing(value):
                continue  # derived below from source and instruction
            # JSON and CSV readers turn numeric ids into integers.
            is_integer = isinstance(value, Integral) and not isinstance(value, bool)
            prompt_id = str(int(value)) if is_integer else value
            if not isinstance(prompt_id, str) or not prompt_id.strip():
                problems.append(
                    f"{_at(position, None, 'prompt_id')}: must be a non-empty string, got {value!r}"
                )
                continue
            given_ids[position] = prompt_id

    sources = df["source"].tolist()
    instructions = df["instruction"].tolist()
    for position, (source, instruction) in enumerate(zip(sources, instructions, strict=True)):
        prompt_id = given_ids[position]
        if not isinstance(source, str) or not source.strip():
            problems.append(
                f"{_at(position, prompt_id, 'source')}: must be a non-empty string, got {source!r}"
            )
        if _is_missing(instruction):
            problems.append(f"{_at(position, prompt_id, 'instruction')}: is missing")
        elif not isinstance(instruction, str):
            problems.append(
                f"{_at(position, prompt_id, 'instruction')}: must be a string, "
                f"got {type(instruction).__name__}"
            )
        elif not instruction.strip():
            problems.append(
                f"{_at(position, prompt_id, 'instruction')}: is empty or whitespace only"
            )

    answer_lists: dict[str, list[list[str]]] = {}
    for column in ANSWER_LIST_COLUMNS:
        if column not in df.columns:
            answer_lists[column] = [[] for _ in range(n_rows)]
            continue
        checked: list[list[str]] = []
        for position, value in enumerate(df[column].tolist()):
            result = _answer_list(value)
            if isinstance(result, str):
                problems.append(f"{_at(position, given_ids[position], column)}: {result}")
                result = []
            checked.append(result)
        answer_lists[column] = checked

    references: list[str | None] = [None] * n_rows
    if "reference_answer" in df.columns:
        for position, value in enumerate(df["reference_answer"].tolist()):
            if _is_missing(value):
                continue
            if not isinstance(value, str):
                problems.append(
                    f"{_at(position, given_ids[position], 'reference_answer')}: "
                    f"must be a string, got {type(value).__name__}"
                )
            elif value.strip():
                references[position] = value

    _raise_if_problems(name, problems)

    prompt_ids = [
        given if given is not None else derive_prompt_id(source, instruction)
        for given, source, instruction in zip(given_ids, sources, instructions, strict=True)
    ]
    first_seen: dict[str, int] = {}
    for position, prompt_id in enumerate(prompt_ids):
        if prompt_id in first_seen:
            how = "" if given_ids[position] is not None else " (derived from source and text)"
            problems.append(
                f"{_at(position, prompt_id, 'prompt_id')}: duplicate prompt_id"
                f"{how}, first used at row {first_row + first_seen[prompt_id]}"
            )
        else:
            first_seen[prompt_id] = position
    _raise_if_problems(name, problems)

    return pd.DataFrame(
        {
            "prompt_id": pd.array(prompt_ids, dtype="str"),
            "source": pd.array(sources, dtype="str"),
            "instruction": pd.array(instructions, dtype="str"),
            "correct_answers": _object_series(answer_lists["correct_answers"]),
            "incorrect_answers": _object_series(answer_lists["incorrect_answers"]),
            "reference_answer": pd.array(references, dtype="str"),
        }
    )


def _object_series(values: list[Any]) -> pd.Series:
    # Filled one by one: numpy would turn equal-length lists into a 2-D array.
    array = np.empty(len(values), dtype=object)
    for position, value in enumerate(values):
        array[position] = value
    return pd.Series(array, dtype=object)


def validate_raw_prompts(
    df: pd.DataFrame, name: str = "raw_prompts", first_row: int = 0
) -> pd.DataFrame:
    """Check raw prompts and return them as a clean frame with `RAW_PROMPTS_COLUMNS`.

    Raises `InputError` naming `name`, the row (0-based position), the prompt_id where
    known and the column, for: a missing `source` or `instruction` column; an instruction
    that is not a string or is blank; a source that is not a non-empty string (any name
    is fine: `sample_prompts` weighs sources it has no weights for as helpfulness); a
    duplicate prompt_id; `correct_answers`/`incorrect_answers` cells that are not
    lists of strings. A missing prompt_id is derived from source and instruction
    (`derive_prompt_id`); missing answer lists become `[]`, a missing or blank reference
    answer becomes null. Extra columns are dropped. `df` may be a part of a larger table
    whose row `first_row` is its first: problems name the rows of the table.

    Dtypes: prompt_id, source, instruction, reference_answer `str` (reference nullable);
    correct_answers, incorrect_answers `object` holding `list[str]`.

    Args:
        df: the raw prompts (or a part of them).
        name: the dataset's name, for messages.
        first_row: the table row of `df`'s first row.

    Returns:
        The clean frame.
    """
    return _validate(df, name, first_row)


def check_unique_prompt_ids(
    batches: Iterable[tuple[int, Sequence[str]]], rows: Collection[int], name: str
) -> None:
    """Raise `InputError` naming each of `rows` whose prompt_id an earlier one of them has:
    `batches` gives a table's prompt ids a part at a time, with each part's first row.

    Args:
        batches: (first row, prompt ids) per part of the table.
        rows: the rows whose repeats are reported.
        name: the dataset's name, for messages.
    """
    if not rows:
        return
    first_seen: dict[str, int] = {}
    problems: list[str] = []
    for first_row, prompt_ids in batches:
        for offset, prompt_id in enumerate(prompt_ids):
            position = first_row + offset
            if position not in rows:
                continue
            if prompt_id in first_seen:
                problems.append(
                    f"{_location(name, position, prompt_id, 'prompt_id')}: duplicate "
                    f"prompt_id, first used at row {first_seen[prompt_id]}"
                )
            else:
                first_seen[prompt_id] = position
    _raise_if_problems(name, problems)


def combine_prompt_sources(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Validate several raw prompt datasets, keyed by dataset name, and concatenate them.

    Each frame is validated under its own name, so an error points at the right dataset;
    a prompt_id used by two datasets is reported with both.

    Args:
        frames: raw prompts, by dataset name.

    Returns:
        The validated prompts, concatenated.
    """
    if not isinstance(frames, Mapping) or not frames:
        raise InputError("combine_prompt_sources: expected at least one named prompt dataset")
    validated = {name: _validate(frame, name) for name, frame in frames.items()}

    owner: dict[str, tuple[str, int]] = {}
    problems: list[str] = []
    for name, frame in validated.items():
        for position, prompt_id in enumerate(frame["prompt_id"].tolist()):
            if prompt_id in owner:
                first_name, first_position = owner[prompt_id]
                problems.append(
                    f"{_location(name, position, prompt_id, 'prompt_id')}: duplicate prompt_id, "
                    f"also used in {first_name} row {first_position}"
                )
            else:
                owner[prompt_id] = (name, position)
    _raise_if_problems("combined prompt sources", problems)
    return pd.concat(list(validated.values()), ignore_index=True)


# ------------------------------------------------------------------------- TruthfulQA


def _split_answers(value: Any) -> list[str] | None:
    if _is_missing(value):
        return []
    if not isinstance(value, str):
        return None
    return [answer.strip() for answer in value.split(";") if answer.strip()]


def truthfulqa_to_raw_prompts(df: pd.DataFrame, name: str = "TruthfulQA") -> pd.DataFrame:
    """Turn the TruthfulQA CSV layout into validated raw prompts of source `truthful_qa`.

    Expects the columns `Question`, `Correct Answers` and `Incorrect Answers` (answers
    separated by `;`), and optionally `Best Answer`, which becomes the reference answer and
    is added to the correct answers if it is not already there. A byte-order mark or
    whitespace around header names is ignored. prompt_ids are derived from the question.

    Args:
        df: the TruthfulQA CSV's rows.
        name: the dataset's name, for messages.

    Returns:
        The raw prompts.
    """
    if not isinstance(df, pd.DataFrame):
        raise InputError(f"{name}: expected a pandas DataFrame, got {type(df).__name__}")
    df = df.rename(columns=lambda column: str(column).lstrip("\ufeff").strip())
    for column in ("Question", "Correct Answers", "Incorrect Answers"):
        if column not in df.columns:
            raise InputError(
                f"{name}: required column {column!r} is missing "
                f"(columns present: {', '.join(map(str, df.columns))})"
            )

    problems: list[str] = []
    answers: dict[str, list[list[str]]] = {}
    for column in ("Correct Answers", "Incorrect Answers"):
        parsed: list[list[str]] = []
        for position, value in enumerate(df[column].tolist()):
            split = _split_answers(value)
            if split is None:
                problems.append(
                    f"{_location(name, position, None, column)}: must be text with answers "
                    f"separated by ';', got {type(value).__name__}"
                )
                split = []
            parsed.append(split)
        answers[column] = parsed

    best_answers: list[Any] = (
        df["Best Answer"].tolist() if "Best Answer" in df.columns else [None] * len(df)
    )
    references: list[str | None] = []
    for position, best in enumerate(best_answers):
        if _is_missing(best) or (isinstance(best, str) and not best.strip()):
            references.append(None)
        elif isinstance(best, str):
            reference = best.strip()
            references.append(reference)
            if reference not in answers["Correct Answers"][position]:
                answers["Correct Answers"][position].insert(0, reference)
        else:
            problems.append(
                f"{_location(name, position, None, 'Best Answer')}: must be a string, "
                f"got {type(best).__name__}"
            )
            references.append(None)
    _raise_if_problems(name, problems)

    raw = pd.DataFrame(
        {
            "source": TRUTHFULQA_SOURCE,
            "instruction": df["Question"].tolist(),
            "correct_answers": _object_series(answers["Correct Answers"]),
            "incorrect_answers": _object_series(answers["Incorrect Answers"]),
            "reference_answer": pd.Series(references, dtype=object),
        }
    )
    return _validate(raw, name)


# --------------------------------------------------------------------- world knowledge


def world_knowledge_text(
    source: str,
    correct_answers: Sequence[str],
    incorrect_answers: Sequence[str],
    reference_answer: Any,
) -> str:
    """`world_knowledge` of a prompt's fields: the false-premise note, the answer lists,
    or the reference answer.

    Args:
        source: the prompt's source.
        correct_answers: its known correct answers.
        incorrect_answers: its known incorrect answers.
        reference_answer: its reference answer (missing: none).

    Returns:
        The text ("" when none).
    """
    parts: list[str] = []
    if source == "false_qa":
        parts.append(FALSE_PREMISE_NOTE)
    if len(correct_answers) or len(incorrect_answers):
        if len(correct_answers):
            parts.append("Answers known to be correct: " + "; ".join(correct_answers))
        if len(incorrect_answers):
            parts.append("Answers known to be wrong: " + "; ".join(incorrect_answers))
    elif isinstance(reference_answer, str) and reference_answer.strip():
        parts.append(f"Reference answer: {reference_answer}")
    return "\n".join(parts)


def world_knowledge(row: Mapping[str, Any] | pd.Series) -> str:
    """The background facts shown to the truthfulness judge for one prompt.

    false_qa prompts get a note that the question rests on a false premise. Prompts with
    known correct/incorrect answers (truthful_qa) get those lists; otherwise a reference
    answer (flan) is shown. Sources with none of these get "".

    Args:
        row: one raw or sampled prompt.

    Returns:
        The text ("" when none).
    """
    correct = row.get("correct_answers")
    incorrect = row.get("incorrect_answers")
    return world_knowledge_text(
        str(row.get("source", "")),
        [] if _is_missing(correct) else list(correct),
        [] if _is_missing(incorrect) else list(incorrect),
        row.get("reference_answer"),
    )
