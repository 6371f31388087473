"""Prompt sampling: which models answer each prompt, and under which principle.

For every prompt, `sample_prompts` draws `n_completions` distinct models from a pool and,
for each completion, a principle (by source-dependent weights) and one of that
principle's system prompts, producing one row per (prompt_id, completion_idx).

All random draws of a prompt come from a counter-based generator keyed by a hash of
(seed, prompt_id): the draws do not depend on the other prompts in the input, nor on
Python's per-process hash salt, and they are computed for all prompts at once with numpy.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any

import numpy as np
import pandas as pd

from llm_feedback.errors import ConfigError, InputError
from llm_feedback.principles import (
    DEFAULT_VERBALIZED_CALIBRATION_RATE,
    HELPFULNESS,
    HONESTY,
    PRINCIPLES,
    SYSTEM_PROMPTS,
    VERBALIZED_CALIBRATION,
    validate_calibration_rate,
    validate_principle_weights,
)
from llm_feedback.schema import (
    ANSWER_LIST_COLUMNS,
    RAW_PROMPTS_REQUIRED_COLUMNS,
    SAMPLED_PROMPTS_COLUMNS,
)

logger = logging.getLogger(__name__)

TRUTHFULQA_SOURCE = "truthful_qa"

FALSE_PREMISE_NOTE = (
    "This question rests on a false premise: what it takes for granted is not true. A "
    "truthful response points out the mistaken assumption instead of answering as if it held."
)

_MAX_LISTED_PROBLEMS = 10

# Independent random streams per prompt, one per kind of draw, so that changing e.g. the
# pool size does not shift the principle draws.
_STREAM_SELECTION = 0
_STREAM_MODELS = 1
_STREAM_PRINCIPLES = 2
_STREAM_CALIBRATION = 3
_STREAM_SYSTEM_PROMPT = 4

# SplitMix64 constants (Steele, Lea, Flood 2014).
_GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


# --------------------------------------------------------------------------- validation


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
    """A stable id for a prompt that has none: the source plus a hash of source and text."""
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


def _validate(df: Any, name: str) -> pd.DataFrame:
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
                    f"{_location(name, position, None, 'prompt_id')}: must be a non-empty "
                    f"string, got {value!r}"
                )
                continue
            given_ids[position] = prompt_id

    sources = df["source"].tolist()
    instructions = df["instruction"].tolist()
    for position, (source, instruction) in enumerate(zip(sources, instructions, strict=True)):
        prompt_id = given_ids[position]
        if not isinstance(source, str) or not source.strip():
            problems.append(
                f"{_location(name, position, prompt_id, 'source')}: must be a non-empty "
                f"string, got {source!r}"
            )
        if _is_missing(instruction):
            problems.append(f"{_location(name, position, prompt_id, 'instruction')}: is missing")
        elif not isinstance(instruction, str):
            problems.append(
                f"{_location(name, position, prompt_id, 'instruction')}: must be a string, "
                f"got {type(instruction).__name__}"
            )
        elif not instruction.strip():
            problems.append(
                f"{_location(name, position, prompt_id, 'instruction')}: is empty or "
                "whitespace only"
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
                problems.append(
                    f"{_location(name, position, given_ids[position], column)}: {result}"
                )
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
                    f"{_location(name, position, given_ids[position], 'reference_answer')}: "
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
                f"{_location(name, position, prompt_id, 'prompt_id')}: duplicate prompt_id"
                f"{how}, first used at row {first_seen[prompt_id]}"
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


def validate_raw_prompts(df: pd.DataFrame, name: str = "raw_prompts") -> pd.DataFrame:
    """Check raw prompts and return them as a clean frame with `RAW_PROMPTS_COLUMNS`.

    Raises `InputError` naming `name`, the row (0-based position), the prompt_id where
    known and the column, for: a missing `source` or `instruction` column; an instruction
    that is not a string or is blank; a source that is not a non-empty string (any name
    is fine: `sample_prompts` weighs sources it has no weights for as helpfulness); a
    duplicate prompt_id; `correct_answers`/`incorrect_answers` cells that are not
    lists of strings. A missing prompt_id is derived from source and instruction
    (`derive_prompt_id`); missing answer lists become `[]`, a missing or blank reference
    answer becomes null. Extra columns are dropped.

    Dtypes: prompt_id, source, instruction, reference_answer `str` (reference nullable);
    correct_answers, incorrect_answers `object` holding `list[str]`.
    """
    return _validate(df, name)


def combine_prompt_sources(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Validate several raw prompt datasets, keyed by dataset name, and concatenate them.

    Each frame is validated under its own name, so an error points at the right dataset;
    a prompt_id used by two datasets is reported with both.
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


def _world_knowledge_text(
    source: str,
    correct_answers: Sequence[str],
    incorrect_answers: Sequence[str],
    reference_answer: Any,
) -> str:
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
    """
    correct = row.get("correct_answers")
    incorrect = row.get("incorrect_answers")
    return _world_knowledge_text(
        str(row.get("source", "")),
        [] if _is_missing(correct) else list(correct),
        [] if _is_missing(incorrect) else list(incorrect),
        row.get("reference_answer"),
    )


# ---------------------------------------------------------------------------- sampling


def _prompt_keys(seed: int, prompt_ids: Sequence[str]) -> np.ndarray:
    """One 64-bit key per prompt from a cryptographic hash of (seed, prompt_id)."""
    digests = b"".join(
        hashlib.blake2b(f"{seed}\x1f{prompt_id}".encode(), digest_size=8).digest()
        for prompt_id in prompt_ids
    )
    return np.frombuffer(digests, dtype="<u8").astype(np.uint64)


def _random_bits(keys: np.ndarray, stream: int, width: int) -> np.ndarray:
    """`width` pseudo-random uint64 per key, shape (len(keys), width).

    Element i of a stream is SplitMix64's output for counter (stream << 32 | i) on the
    Weyl sequence that starts at the key, so it depends on nothing but key, stream and i.
    Numpy uint64 arithmetic wraps around on arrays, which is what the mixer needs.
    """
    counters = (np.uint64(stream) << np.uint64(32)) + np.arange(1, width + 1, dtype=np.uint64)
    state = keys[:, None] + counters[None, :] * _GOLDEN_GAMMA
    state = (state ^ (state >> np.uint64(30))) * _MIX_1
    state = (state ^ (state >> np.uint64(27))) * _MIX_2
    return state ^ (state >> np.uint64(31))


def _uniform(keys: np.ndarray, stream: int, width: int) -> np.ndarray:
    """Uniform floats in [0, 1) built from the top 53 bits of `_random_bits`."""
    bits = _random_bits(keys, stream, width) >> np.uint64(11)
    return bits.astype(np.float64) * (1.0 / (1 << 53))


def _check_sampling_config(
    model_pool: Sequence[str], n_completions: int, seed: int, max_prompts: int | None
) -> list[str]:
    """Check the sampling parameters; return the model pool as a list."""
    if isinstance(n_completions, bool) or not isinstance(n_completions, Integral):
        raise ConfigError(f"n_completions must be an integer, got {n_completions!r}")
    if n_completions < 1:
        raise ConfigError(f"n_completions must be at least 1, got {n_completions}")
    if isinstance(seed, bool) or not isinstance(seed, Integral):
        raise ConfigError(f"seed must be an integer, got {seed!r}")
    if max_prompts is not None and (
        isinstance(max_prompts, bool) or not isinstance(max_prompts, Integral) or max_prompts < 1
    ):
        raise ConfigError(f"max_prompts must be a positive integer or None, got {max_prompts!r}")
    if isinstance(model_pool, str) or not isinstance(model_pool, Sequence):
        raise ConfigError(f"model_pool must be a list of model names, got {model_pool!r}")
    pool = list(model_pool)
    for position, model in enumerate(pool):
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(
                f"model_pool[{position}] must be a non-empty model name, got {model!r}"
            )
    duplicates = sorted(model for model, count in Counter(pool).items() if count > 1)
    if duplicates:
        raise ConfigError(f"model_pool lists a model more than once: {', '.join(duplicates)}")
    if len(pool) < n_completions:
        raise ConfigError(
            f"model_pool has {len(pool)} model(s) but n_completions is {n_completions}; "
            "each prompt needs that many distinct models"
        )
    return pool


def principle_weight_table(
    configured: Mapping[str, Mapping[str, float]] | None,
) -> dict[str, dict[str, float]]:
    """UltraFeedback's weights with the configured sources' weights in place of theirs."""
    defaults = validate_principle_weights(None)
    if configured is None:
        return defaults
    return {**defaults, **validate_principle_weights(configured)}


def _log_unweighted_sources(sources: np.ndarray, weights: Mapping[str, object]) -> None:
    unweighted = Counter(source for source in sources.tolist() if source not in weights)
    if unweighted:
        logger.warning(
            "sample: %d prompt(s) from source(s) without principle weights use helpfulness "
            "(%s); give them weights in sample.principle_weights",
            sum(unweighted.values()),
            ", ".join(f"{source}: {count}" for source, count in sorted(unweighted.items())),
        )


def sample_prompts(
    raw: pd.DataFrame,
    model_pool: Sequence[str],
    n_completions: int = 4,
    seed: int = 42,
    *,
    principle_weights: Mapping[str, Mapping[str, float]] | None = None,
    verbalized_calibration_rate: float = DEFAULT_VERBALIZED_CALIBRATION_RATE,
    max_prompts: int | None = None,
    system_prompts: Mapping[str, Sequence[str]] | None = None,
) -> pd.DataFrame:
    """Assign models, principles and system prompts to prompts, one row per completion.

    For each prompt, `n_completions` models are drawn from `model_pool` without
    replacement; each completion draws a principle with the weights of the prompt's
    source (`principle_weights` replaces UltraFeedback's weights source by source, see
    `principle_weight_table`; a source with no weights at all gets helpfulness, and how
    many prompts did is logged), an honesty draw becomes verbalized_calibration with probability
    `verbalized_calibration_rate`, and one of the principle's system prompts is picked
    uniformly (`system_prompts`: per principle its phrasings, default ours).
    `max_prompts` keeps a seeded subset of that many prompts, in input order.

    A prompt's draws depend only on (seed, prompt_id) and the parameters, never on the
    other prompts, so adding prompts to a dataset leaves existing assignments unchanged.
    Parameters are checked (`ConfigError`) before the data (`InputError`).

    Returns columns `SAMPLED_PROMPTS_COLUMNS`: completion_idx `int64`, correct_answers and
    incorrect_answers `object` (`list[str]`), reference_answer nullable `str`, all other
    columns `str`; rows ordered by input prompt order, then completion_idx.
    """
    pool = _check_sampling_config(model_pool, n_completions, seed, max_prompts)
    weights = principle_weight_table(principle_weights)
    calibration_rate = validate_calibration_rate(verbalized_calibration_rate)
    prompts = _validate(raw, "raw_prompts")

    keys = _prompt_keys(int(seed), prompts["prompt_id"].tolist())
    if max_prompts is not None and max_prompts < len(prompts):
        selection_order = np.argsort(_random_bits(keys, _STREAM_SELECTION, 1)[:, 0], kind="stable")
        kept = np.sort(selection_order[:max_prompts])
        prompts = prompts.take(kept).reset_index(drop=True)
        keys = keys[kept]
    n_prompts = len(prompts)

    model_bits = _random_bits(keys, _STREAM_MODELS, len(pool))
    model_codes = np.argsort(model_bits, axis=1, kind="stable")[:, :n_completions]

    # A source without weights gets helpfulness, as UltraFeedback's generation did.
    principle_codes = np.full((n_prompts, n_completions), PRINCIPLES.index(HELPFULNESS))
    principle_draws = _uniform(keys, _STREAM_PRINCIPLES, n_completions)
    source_values = prompts["source"].to_numpy(dtype=object)
    _log_unweighted_sources(source_values, weights)
    for source, source_weights in weights.items():
        in_source = source_values == source
        if not in_source.any():
            continue
        codes = np.array([PRINCIPLES.index(p) for p in source_weights], dtype=np.int64)
        cumulative = np.cumsum(list(source_weights.values()))
        # Rounding could leave the total just under 1 and let a draw fall off the end.
        cumulative[-1] = 1.0
        picks = np.searchsorted(cumulative, principle_draws[in_source], side="right")
        principle_codes[in_source] = codes[picks]

    is_honesty = principle_codes == PRINCIPLES.index(HONESTY)
    calibration_draws = _uniform(keys, _STREAM_CALIBRATION, n_completions)
    calibrated = is_honesty & (calibration_draws < calibration_rate)
    principle_codes[calibrated] = PRINCIPLES.index(VERBALIZED_CALIBRATION)

    # All system prompts in one flat table; a principle's variants are a contiguous block.
    system_prompts = SYSTEM_PROMPTS if system_prompts is None else system_prompts
    variant_counts = np.array([len(system_prompts[p]) for p in PRINCIPLES], dtype=np.int64)
    block_starts = np.concatenate([[0], np.cumsum(variant_counts)[:-1]])
    flat_prompts = np.array(
        [text for principle in PRINCIPLES for text in system_prompts[principle]], dtype=object
    )
    variant_draws = _uniform(keys, _STREAM_SYSTEM_PROMPT, n_completions)
    variants = np.minimum(
        (variant_draws * variant_counts[principle_codes]).astype(np.int64),
        variant_counts[principle_codes] - 1,
    )
    system_prompt_codes = block_starts[principle_codes] + variants

    knowledge = [
        _world_knowledge_text(source, correct, incorrect, reference)
        for source, correct, incorrect, reference in zip(
            source_values,
            prompts["correct_answers"].tolist(),
            prompts["incorrect_answers"].tolist(),
            prompts["reference_answer"].tolist(),
            strict=True,
        )
    ]
    prompts["world_knowledge"] = pd.array(knowledge, dtype="str")

    rows = np.repeat(np.arange(n_prompts), n_completions)
    sampled = prompts.take(rows).reset_index(drop=True)
    completion_idx = np.tile(np.arange(n_completions, dtype=np.int64), n_prompts)
    sampled.insert(1, "completion_idx", completion_idx)
    principle_names = np.array(PRINCIPLES, dtype=object)
    sampled["model"] = pd.array(np.array(pool, dtype=object)[model_codes.ravel()], dtype="str")
    sampled["principle"] = pd.array(principle_names[principle_codes.ravel()], dtype="str")
    sampled["system_prompt"] = pd.array(flat_prompts[system_prompt_codes.ravel()], dtype="str")
    return sampled[list(SAMPLED_PROMPTS_COLUMNS)]
