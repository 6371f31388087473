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
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral

import numpy as np
import pandas as pd
import pyarrow as pa

from llm_feedback.completions.principles import (
    DEFAULT_VERBALIZED_CALIBRATION_RATE,
    HELPFULNESS,
    HONESTY,
    PRINCIPLES,
    SYSTEM_PROMPTS,
    VERBALIZED_CALIBRATION,
    validate_calibration_rate,
    validate_principle_weights,
)
from llm_feedback.core.errors import ConfigError
from llm_feedback.prompts.raw_prompts import (
    check_unique_prompt_ids,
    validate_raw_prompts,
    world_knowledge_text,
)
from llm_feedback.storage.parquet_source import ParquetSource
from llm_feedback.storage.schema import (
    ANSWER_LIST_COLUMNS,
    RAW_PROMPTS_COLUMNS,
    SAMPLED_PROMPTS_COLUMNS,
)
from llm_feedback.storage.spool import ChunkedParquet

logger = logging.getLogger(__name__)

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
    """UltraFeedback's weights with the configured sources' weights in place of theirs.

    Args:
        configured: the configured source -> {principle: weight} (None: none).

    Returns:
        The weights by source.
    """
    defaults = validate_principle_weights(None)
    if configured is None:
        return defaults
    return {**defaults, **validate_principle_weights(configured)}


def _log_unweighted_sources(unweighted: Counter[str]) -> None:
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

    Args:
        raw: the raw prompts.
        model_pool: the models' names.
        n_completions: models per prompt.
        seed: the sampling seed.
        principle_weights: source -> {principle: weight} in place of UltraFeedback's.
        verbalized_calibration_rate: the share of honesty draws made verbalized_calibration.
        max_prompts: keep a seeded subset of this many prompts (None: all).
        system_prompts: per principle its phrasings (None: ours).

    Returns:
        The sampled rows (columns above).
    """
    plan = _plan(
        model_pool,
        n_completions,
        seed,
        max_prompts=max_prompts,
        principle_weights=principle_weights,
        verbalized_calibration_rate=verbalized_calibration_rate,
        system_prompts=system_prompts,
    )
    prompts = validate_raw_prompts(raw, "raw_prompts")
    keys = _prompt_keys(plan.seed, prompts["prompt_id"].tolist())
    if max_prompts is not None and max_prompts < len(prompts):
        kept = np.flatnonzero(_kept_rows(keys, max_prompts))
        prompts = prompts.take(kept).reset_index(drop=True)
        keys = keys[kept]
    _log_unweighted_sources(Counter(_unweighted(prompts["source"], plan.weights)))
    return _assign(prompts, keys, plan)


@dataclass(frozen=True)
class _Plan:
    """The checked sampling parameters."""

    pool: list[str]
    n_completions: int
    seed: int
    weights: dict[str, dict[str, float]]
    calibration_rate: float
    system_prompts: Mapping[str, Sequence[str]]


def _plan(
    model_pool: Sequence[str],
    n_completions: int,
    seed: int,
    *,
    max_prompts: int | None,
    principle_weights: Mapping[str, Mapping[str, float]] | None,
    verbalized_calibration_rate: float,
    system_prompts: Mapping[str, Sequence[str]] | None,
) -> _Plan:
    pool = _check_sampling_config(model_pool, n_completions, seed, max_prompts)
    return _Plan(
        pool=pool,
        n_completions=n_completions,
        seed=int(seed),
        weights=principle_weight_table(principle_weights),
        calibration_rate=validate_calibration_rate(verbalized_calibration_rate),
        system_prompts=SYSTEM_PROMPTS if system_prompts is None else system_prompts,
    )


def _kept_rows(keys: np.ndarray, max_prompts: int) -> np.ndarray:
    """Which prompts a `max_prompts` subset keeps (a mask in input order): those whose
    selection draw is among the `max_prompts` smallest, ties by input order."""
    selection_order = np.argsort(_random_bits(keys, _STREAM_SELECTION, 1)[:, 0], kind="stable")
    kept = np.zeros(len(keys), dtype=bool)
    kept[selection_order[:max_prompts]] = True
    return kept


def _unweighted(sources: pd.Series, weights: Mapping[str, object]) -> list[str]:
    return [source for source in sources.tolist() if source not in weights]


def _assign(prompts: pd.DataFrame, keys: np.ndarray, plan: _Plan) -> pd.DataFrame:
    """The sampled rows of validated `prompts` (their keys `keys`)."""
    pool, n_completions, weights = plan.pool, plan.n_completions, plan.weights
    n_prompts = len(prompts)

    model_bits = _random_bits(keys, _STREAM_MODELS, len(pool))
    model_codes = np.argsort(model_bits, axis=1, kind="stable")[:, :n_completions]

    # A source without weights gets helpfulness, as UltraFeedback's generation did.
    principle_codes = np.full((n_prompts, n_completions), PRINCIPLES.index(HELPFULNESS))
    principle_draws = _uniform(keys, _STREAM_PRINCIPLES, n_completions)
    source_values = prompts["source"].to_numpy(dtype=object)
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
    calibrated = is_honesty & (calibration_draws < plan.calibration_rate)
    principle_codes[calibrated] = PRINCIPLES.index(VERBALIZED_CALIBRATION)

    # All system prompts in one flat table; a principle's variants are a contiguous block.
    system_prompts = plan.system_prompts
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
        world_knowledge_text(source, correct, incorrect, reference)
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


# ------------------------------------------------------------------- from a file on disk

SAMPLED_PROMPTS_ARROW_SCHEMA = pa.schema(
    [
        ("prompt_id", pa.large_string()),
        ("completion_idx", pa.int64()),
        ("source", pa.large_string()),
        ("instruction", pa.large_string()),
        *((column, pa.list_(pa.string())) for column in ANSWER_LIST_COLUMNS),
        ("reference_answer", pa.large_string()),
        ("world_knowledge", pa.large_string()),
        ("model", pa.large_string()),
        ("principle", pa.large_string()),
        ("system_prompt", pa.large_string()),
    ]
)


class SampledPrompts(ChunkedParquet):
    """`sample_prompts` of a raw prompt file, drawn a record batch of prompts at a time
    when written: `to_parquet` writes the table `sample_prompts(raw.read(), ...)` would
    (read back, the same DataFrame), a row group per batch, so a catalog `ParquetDataset`
    saves it as it saves a DataFrame, holding one batch of prompts whatever the file's size;
    `frame()` is the whole table."""

    arrow_schema = SAMPLED_PROMPTS_ARROW_SCHEMA

    def __init__(self, raw: ParquetSource, plan: _Plan, kept: np.ndarray | None, rows: int):
        """Keep what the draws need; nothing is drawn until written.

        Args:
            raw: the raw prompts on disk.
            plan: the checked sampling parameters.
            kept: which prompts `max_prompts` keeps (None: all).
            rows: how many rows the table will have.
        """
        self._raw, self._plan, self._kept, self._rows = raw, plan, kept, rows

    def __len__(self) -> int:
        return self._rows

    def frames(self) -> Iterator[pd.DataFrame]:
        unweighted: Counter[str] = Counter()
        for first_row, chunk in _raw_batches(self._raw):
            prompts = validate_raw_prompts(chunk, "raw_prompts", first_row)
            keys = _prompt_keys(self._plan.seed, prompts["prompt_id"].tolist())
            if self._kept is not None:
                kept = np.flatnonzero(self._kept[first_row : first_row + len(prompts)])
                prompts, keys = prompts.take(kept).reset_index(drop=True), keys[kept]
            unweighted.update(_unweighted(prompts["source"], self._plan.weights))
            yield _assign(prompts, keys, self._plan)
        _log_unweighted_sources(unweighted)

    def arrow_chunks(self) -> Iterator[pa.Table]:
        """The table a batch of prompts at a time, as `ChunkedParquet.to_parquet` writes it.

        Returns:
            An iterator of Arrow tables in `arrow_schema`.
        """
        for frame in self.frames():
            yield pa.Table.from_pandas(frame, schema=self.arrow_schema, preserve_index=False)

    def frame(self) -> pd.DataFrame:
        return pd.concat(list(self.frames()), ignore_index=True)


def sample_prompt_file(
    raw: ParquetSource,
    model_pool: Sequence[str],
    n_completions: int = 4,
    seed: int = 42,
    *,
    principle_weights: Mapping[str, Mapping[str, float]] | None = None,
    verbalized_calibration_rate: float = DEFAULT_VERBALIZED_CALIBRATION_RATE,
    max_prompts: int | None = None,
    system_prompts: Mapping[str, Sequence[str]] | None = None,
) -> SampledPrompts:
    """`sample_prompts` of raw prompts on disk (the same arguments, the same draws, the
    same table), checked now and drawn when written (`SampledPrompts`): memory holds a
    record batch of prompts and 9 bytes per prompt (its key and whether it is kept),
    whatever the number of prompts.

    The whole file is checked here, a batch at a time, before anything is drawn: the
    problems `sample_prompts` would report (those of the first batch that has any), a
    prompt_id repeated in two batches included.

    Args:
        raw: the raw prompts on disk.
        model_pool: the models' names.
        n_completions: models per prompt.
        seed: the sampling seed.
        principle_weights: source -> {principle: weight} in place of UltraFeedback's.
        verbalized_calibration_rate: the share of honesty draws made verbalized_calibration.
        max_prompts: keep a seeded subset of this many prompts (None: all).
        system_prompts: per principle its phrasings (None: ours).

    Returns:
        The sampled prompts, drawn when written.
    """
    plan = _plan(
        model_pool,
        n_completions,
        seed,
        max_prompts=max_prompts,
        principle_weights=principle_weights,
        verbalized_calibration_rate=verbalized_calibration_rate,
        system_prompts=system_prompts,
    )
    keys = [
        _prompt_keys(plan.seed, validate_raw_prompts(chunk, "raw_prompts", first)["prompt_id"])
        for first, chunk in _raw_batches(raw)
    ]
    all_keys = np.concatenate(keys) if keys else np.zeros(0, dtype=np.uint64)
    del keys
    check_unique_prompt_ids(_validated_ids(raw), _sharing_a_key(all_keys), "raw_prompts")
    kept = None
    if max_prompts is not None and max_prompts < len(all_keys):
        kept = _kept_rows(all_keys, max_prompts)
    prompts = len(all_keys) if kept is None else int(kept.sum())
    return SampledPrompts(raw, plan, kept, prompts * plan.n_completions)


def _raw_batches(raw: ParquetSource) -> Iterator[tuple[int, pd.DataFrame]]:
    """(first row, rows) of the raw prompt file, a record batch at a time; an empty file
    as one empty frame, so that its missing columns are reported."""
    empty = True
    for chunk in raw.row_batches(RAW_PROMPTS_COLUMNS):
        empty = False
        yield int(chunk.index[0]) if len(chunk) else 0, chunk.reset_index(drop=True)
    if empty:
        yield 0, raw.read(RAW_PROMPTS_COLUMNS)


def _validated_ids(raw: ParquetSource) -> Iterator[tuple[int, list[str]]]:
    for first_row, chunk in _raw_batches(raw):
        yield first_row, validate_raw_prompts(chunk, "raw_prompts", first_row)["prompt_id"].tolist()


def _sharing_a_key(keys: np.ndarray) -> set[int]:
    """The rows whose key another row has too: the only rows that can repeat a prompt_id
    (the key is a hash of the id; rows of different ids may share one, rarely)."""
    if len(keys) < 2:
        return set()
    order = np.argsort(keys, kind="stable")
    same = keys[order][1:] == keys[order][:-1]
    shared = np.concatenate([[False], same]) | np.concatenate([same, [False]])
    return set(order[shared].tolist())
