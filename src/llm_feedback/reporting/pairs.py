"""Preference pairs (chosen / rejected) from scored completions, following the public
UltraFeedback binarisation recipe.

Per prompt: chosen is the highest-scoring completion (a seeded draw among ties at the top),
rejected a seeded random completion with a strictly lower score ("random_lower"), or every
ordered pair with different scores ("all_pairs"). The draw depends only on the seed and the
prompt_id, so adding or removing other prompts never changes a prompt's pair.

Two layouts (`layout`), both written with the Arrow types of the Hugging Face datasets
(schema.PREFERENCE_PAIRS_ARROW_SCHEMAS), so `datasets.load_dataset("parquet", ...)` reads
them as those datasets do:

- "trl" (default): TRL's conversational preference format with an explicit prompt.
  `prompt` is `[{"role": "user", "content": instruction}]`, `chosen` and `rejected` the
  assistant message only, `[{"role": "assistant", "content": response}]`; then
  `score_chosen`, `score_rejected`, `source`, `model_chosen`, `model_rejected`,
  `completion_idx_chosen`, `completion_idx_rejected`, `score_kind`. Every text column is a
  list of messages, so `trl.is_conversational` answers the same whichever column it looks
  at, `maybe_extract_prompt` leaves the row as it is and `prompt + chosen` is the whole
  conversation.
- "h4": HuggingFaceH4/ultrafeedback_binarized's columns and nothing else: `prompt` (the
  instruction text), `prompt_id`, `chosen` and `rejected` (user + assistant messages),
  `messages` (= chosen), `score_chosen`, `score_rejected`. `concatenate_datasets` accepts
  it with the public data. For TRL, keep `chosen` and `rejected` only (TRL then extracts
  the prompt itself): with a text `prompt` beside message lists, TRL's
  `is_conversational` depends on which column it happens to pick.

Neither layout has a system message: the principle system prompt of each completion (which
differs between chosen and rejected) is left out, as in the public recipe, and the prompts
have no system prompt of their own.

The trl layout also has `margin` (score_chosen - score_rejected, the column TRL's
RewardTrainer subtracts in its loss) and `split`: a seeded test split by prompt, so that no
prompt has pairs on both sides. A prompt is in the test split when a digest of
(split_seed, prompt_id), read as a number in [0, 1), is below test_fraction
(`pair_split`): its side depends on the seed and its id only, so adding or removing other
prompts never moves a prompt from one side to the other (a prompt in an earlier version's
test split never lands in a later version's train split). The test split holds
test_fraction of the prompts on average, not exactly: with few prompts it may be empty
(then logged). The h4 layout keeps H4's columns exactly; its Hub push derives the same
split from `prompt_id`.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import random
import re
import unicodedata
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import pandas as pd
import pyarrow as pa

from llm_feedback.core.errors import ConfigError, require_columns
from llm_feedback.reporting._frames import (
    Table,
    as_float,
    completion_chunks,
    ratings_per_completion_aspect,
    require_unique_key,
    typed_frame,
)
from llm_feedback.storage.parquet_source import CHUNK_PROMPTS
from llm_feedback.storage.schema import (
    COMPLETION_KEY,
    PAIR_COUNTS_COLUMN_TYPES,
    PAIR_DROPS_COLUMN_TYPES,
    PREFERENCE_PAIRS_ARROW_SCHEMAS,
    SchemaFrame,
    schema_frame,
)
from llm_feedback.storage.spool import ChunkedParquet

logger = logging.getLogger(__name__)

ScoreKind = Literal["overall", "mean_aspects"]
Strategy = Literal["random_lower", "all_pairs"]
Layout = Literal["trl", "h4"]
SCORE_KINDS: tuple[str, ...] = ("overall", "mean_aspects")
STRATEGIES: tuple[str, ...] = ("random_lower", "all_pairs")
LAYOUTS: tuple[str, ...] = tuple(PREFERENCE_PAIRS_ARROW_SCHEMAS)

# Why a prompt yields no pair, in the order they are checked.
DROP_REASONS = ("decontaminated", "fewer_than_two_scored", "all_scores_tied")


class PairsResult(NamedTuple):
    """`binarize_export`'s outputs: the `PairsExport`, the drops by reason, and the
    counts (one row: pairs, prompts with a pair), each a Kedro output of its own."""

    pairs: PairsExport
    dropped: pd.DataFrame
    counts: pd.DataFrame


class PreferencePairs(NamedTuple):
    """`pairs`: one row per pair (a `schema.SchemaFrame` from `binarize`, a `PairsExport`
    from `binarize_export`: `to_parquet` writes the layout's Arrow schema); `dropped`:
    prompts without a pair, counted by reason (every reason listed, 0 when none). A tuple,
    so a Kedro node can return it as two outputs."""

    pairs: Any
    dropped: pd.DataFrame


@dataclass(frozen=True, slots=True)
class _Candidate:
    completion_idx: int
    model: str
    response: str
    score: float


def normalise_instruction(text: str) -> str:
    """The form instructions are compared in for decontamination: Unicode NFKC, case-folded,
    runs of whitespace collapsed, ends stripped.

    Args:
        text: The instruction.

    Returns:
        Its normalised form.
    """
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).casefold()).strip()


def binarize(
    completions: Table, overall_scores: Table, aspect_annotations: Table, **options: Any
) -> PreferencePairs:
    """`binarize_export`'s pairs as one frame (a `schema.SchemaFrame`) with its drops, for
    tables that fit in memory.

    Args:
        completions: The completions.
        overall_scores: The overall scores per completion.
        aspect_annotations: The aspect ratings, one row per shuffle.
        **options: `binarize_export`'s keyword options.

    Returns:
        The pairs as one frame, and the drops by reason.

    Raises:
        ConfigError: An option is out of its range.
        InputError: A required column is missing, or the inputs come from different runs.
    """
    export = binarize_export(completions, overall_scores, aspect_annotations, **options)
    return PreferencePairs(export.pairs.frame(), export.dropped)


def binarize_export(
    completions: Table,
    overall_scores: Table,
    aspect_annotations: Table,
    *,
    score: ScoreKind = "overall",
    strategy: Strategy = "random_lower",
    seed: int = 42,
    decontaminate: Collection[str] = (),
    layout: Layout = "trl",
    include_suspected: bool = False,
    test_fraction: float = 0.1,
    split_seed: int = 42,
    prompts_per_chunk: int = CHUNK_PROMPTS,
) -> PairsResult:
    """Turn scored completions into chosen/rejected pairs.

    A completion with a generation error, a null or blank response, or no score never
    enters a pair. A completion suspected of injection (its aspect rows'
    `suspected_injection`: it addresses the judge or carries a verdict, so a judge may have
    obeyed it) enters no pair unless `include_suspected`.

    The pairs come as a `PairsExport` (built a chunk of prompts at a time when written, as a
    Kedro `ParquetDataset` saves a frame), with the drops and the counts, counted now by a
    first walk over the tables (the pairs' draws are seeded per prompt, so the second walk
    draws the same pairs). The tables may stay on disk (`ParquetSource`s).

    Args:
        completions: The completions, with instruction, model, response and error.
        overall_scores: The overall scores per completion (read when `score` is "overall").
        aspect_annotations: The aspect ratings, one row per shuffle.
        score: "overall" uses overall_scores.overall_score_fixed (1-10); "mean_aspects"
            the mean over aspects of the aspect ratings (each aspect's shuffles averaged
            first; N/A and failures left out).
        strategy: "random_lower" or "all_pairs" (see the module docstring).
        seed: The seed of the per-prompt draws.
        decontaminate: Instructions whose prompts are dropped (compared normalised).
        layout: The columns, "trl" or "h4" (see the module docstring).
        include_suspected: Let completions suspected of injection enter pairs.
        test_fraction: The share of prompts in the test split, on average, in [0, 1).
        split_seed: The seed of the test split (the trl layout's `split` column).
        prompts_per_chunk: How many prompts a chunk read from disk holds.

    Returns:
        The pairs' export, the drops by reason and the counts.

    Raises:
        ConfigError: `score`, `strategy`, `layout` or `test_fraction` is out of its range.
        InputError: A required column is missing, or the inputs come from different runs.
    """
    if score not in SCORE_KINDS:
        raise ConfigError(f"score: expected one of {SCORE_KINDS}, got {score!r}")
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy: expected one of {STRATEGIES}, got {strategy!r}")
    if layout not in LAYOUTS:
        raise ConfigError(f"layout: expected one of {LAYOUTS}, got {layout!r}")
    check_test_fraction(test_fraction)
    require_columns(
        completions,
        [*COMPLETION_KEY, "instruction", "model", "response", "error"],
        "completions",
    )
    _check_score_columns(overall_scores, aspect_annotations, score)
    walk = _PairWalk(
        completions,
        overall_scores,
        aspect_annotations,
        _PairRules(
            score,
            strategy,
            seed,
            frozenset(map(normalise_instruction, decontaminate)),
            layout,
            include_suspected,
            test_fraction,
            split_seed,
        ),
        prompts_per_chunk,
    )
    counted = walk.count()
    drops, n_pairs = counted.drops, counted.pairs
    if counted.suspected:
        logger.warning(
            "preference pairs: %d completion(s) suspected of injection left out "
            "(report.pairs.include_suspected: true keeps them)",
            counted.suspected,
        )
    logger.info(
        "binarize(%s, %s): %d pairs (test split: %d pairs of %d prompts); prompts dropped: %s",
        score,
        strategy,
        n_pairs,
        counted.test_pairs,
        counted.test_prompts,
        ", ".join(f"{reason}={count}" for reason, count in drops.items()),
    )
    if test_fraction > 0 and counted.prompts >= 2 and counted.test_prompts == 0:
        logger.warning(
            "preference pairs: the test split is empty: none of the %d prompts with a pair "
            "drew a place in it (test_fraction %g is a share on average; with few prompts, "
            "try another report.pairs.split_seed or more prompts)",
            counted.prompts,
            test_fraction,
        )
    dropped = pd.DataFrame({"reason": list(drops), "n_prompts": list(drops.values())})
    counts = pd.DataFrame(
        {
            "pairs": [n_pairs],
            "prompts": [counted.prompts],
            "test_pairs": [counted.test_pairs],
            "test_prompts": [counted.test_prompts],
        }
    )
    return PairsResult(
        PairsExport(walk, PREFERENCE_PAIRS_ARROW_SCHEMAS[layout], n_pairs),
        typed_frame(dropped, PAIR_DROPS_COLUMN_TYPES),
        typed_frame(counts, PAIR_COUNTS_COLUMN_TYPES),
    )


class _PairRules(NamedTuple):
    score: ScoreKind
    strategy: Strategy
    seed: int
    blocked: frozenset[str]
    layout: Layout
    include_suspected: bool
    test_fraction: float = 0.1
    split_seed: int = 42


def check_test_fraction(fraction: float) -> None:
    """Fail unless the test split's share is a number in [0, 1).

    Args:
        fraction: The share of prompts in the test split.

    Raises:
        ConfigError: It is not a number in [0, 1) (a bool is not a number here).
    """
    if isinstance(fraction, bool) or not (isinstance(fraction, int | float) and 0 <= fraction < 1):
        raise ConfigError(f"test_fraction: expected a number in [0, 1), got {fraction!r}")


def pair_split(prompt_id: str, test_fraction: float, seed: int) -> str:
    """ "test" or "train" for one prompt: "test" when the digest of (seed, prompt_id), the
    same in every process and apart from the pairs' own draws (`_prompt_rng`), read as a
    number in [0, 1), is below `test_fraction`.

    Args:
        prompt_id: The prompt's id.
        test_fraction: The share of prompts in the test split, on average.
        seed: The split's seed.

    Returns:
        "test" or "train".
    """
    digest = hashlib.sha256(f"split:{seed}:{prompt_id}".encode()).digest()
    drawn = int.from_bytes(digest[:8], "big") / 2**64
    return "test" if drawn < test_fraction else "train"


class _PairCounts(NamedTuple):
    """What `_PairWalk.count` counts."""

    drops: dict[str, int]
    pairs: int
    prompts: int
    suspected: int
    test_pairs: int
    test_prompts: int


class _PairWalk:
    """The pairs of the tables' prompts, a chunk of prompts at a time (`chunks`), with the
    drops and left-out suspected completions of each chunk."""

    def __init__(
        self,
        completions: Table,
        overall_scores: Table,
        aspect_annotations: Table,
        rules: _PairRules,
        prompts_per_chunk: int,
    ) -> None:
        self.tables = (completions, overall_scores, aspect_annotations)
        self.rules = rules
        self.prompts_per_chunk = prompts_per_chunk

    def count(self) -> _PairCounts:
        """Drops by reason, pairs and prompts with a pair (all, and in the test split: the
        h4 layout's too, as its Hub push splits it), suspected completions left out."""
        drops = dict.fromkeys(DROP_REASONS, 0)
        pairs = paired = suspected = test_pairs = test_prompts = 0
        fraction, seed = self.rules.test_fraction, self.rules.split_seed
        for rows, chunk_drops, chunk_suspected in self.chunks():
            pairs += len(rows)
            prompts = {str(row["prompt_id"]) for row in rows}
            paired += len(prompts)
            tested = {prompt for prompt in prompts if pair_split(prompt, fraction, seed) == "test"}
            test_prompts += len(tested)
            test_pairs += sum(str(row["prompt_id"]) in tested for row in rows)
            suspected += chunk_suspected
            for reason, count in chunk_drops.items():
                drops[reason] += count
        return _PairCounts(drops, pairs, paired, suspected, test_pairs, test_prompts)

    def chunks(self) -> Iterator[tuple[list[dict[str, object]], dict[str, int], int]]:
        completions, overall_scores, aspect_annotations = self.tables
        rules = self.rules
        aspect_columns = [*COMPLETION_KEY, "aspect", "rating", "is_na", "suspected_injection"]
        others = {"aspect_annotations": (aspect_annotations, aspect_columns)}
        if rules.score == "overall":
            others["overall_scores"] = (overall_scores, [*COMPLETION_KEY, "overall_score_fixed"])
        columns = [*COMPLETION_KEY, "instruction", "model", "response", "error", "source"]
        walk = completion_chunks(
            completions, columns, others, self.prompts_per_chunk, unmatched_ok=["overall_scores"]
        )
        for chunk, rows in walk:
            require_unique_key(chunk, COMPLETION_KEY, "completions")
            aspects = rows["aspect_annotations"]
            scores = _scores(rows.get("overall_scores"), aspects, rules.score)
            yield _chunk_pairs(chunk, scores, aspects, rules)


def _chunk_pairs(
    completions: pd.DataFrame, scores: pd.DataFrame, aspects: pd.DataFrame, rules: _PairRules
) -> tuple[list[dict[str, object]], dict[str, int], int]:
    completion_key = list(COMPLETION_KEY)
    scored = completions.merge(scores, on=completion_key, how="left").sort_values(completion_key)
    response = scored["response"]
    scored["usable"] = (
        scored["error"].isna()
        & response.notna()
        & response.fillna("").astype(str).str.strip().ne("")
        & scored["score"].notna()
    )
    suspected_count = 0
    if not rules.include_suspected and "suspected_injection" in aspects.columns:
        flagged = aspects.loc[
            aspects["suspected_injection"].fillna(False).astype(bool), completion_key
        ].drop_duplicates()
        suspected = pd.MultiIndex.from_frame(scored[completion_key]).isin(
            pd.MultiIndex.from_frame(flagged)
        )
        suspected_count = int(suspected.sum())
        scored["usable"] &= ~suspected

    pair_rows: list[dict[str, object]] = []
    drops = dict.fromkeys(DROP_REASONS, 0)
    # Plain tuples grouped by itertools: per-group pandas indexing costs ~1 ms a prompt.
    if "source" not in scored.columns:
        scored["source"] = None
    columns = ["prompt_id", "completion_idx", "source", "instruction", "model", "response"]
    records = scored.loc[:, [*columns, "score", "usable"]].itertuples(index=False)
    for prompt_id, prompt_records in itertools.groupby(records, key=lambda r: r.prompt_id):
        rows = list(prompt_records)
        instruction = str(rows[0].instruction)
        if normalise_instruction(instruction) in rules.blocked:
            drops["decontaminated"] += 1
            continue
        candidates = [
            _Candidate(int(row.completion_idx), str(row.model), str(row.response), row.score)
            for row in rows
            if row.usable
        ]
        if len(candidates) < 2:
            drops["fewer_than_two_scored"] += 1
            continue
        pairs = _pick_pairs(candidates, rules.strategy, _prompt_rng(rules.seed, str(prompt_id)))
        if not pairs:
            drops["all_scores_tied"] += 1
            continue
        split = pair_split(str(prompt_id), rules.test_fraction, rules.split_seed)
        prompt = _Prompt(str(prompt_id), instruction, _text_or_none(rows[0].source), split)
        make_row = _PAIR_ROWS[rules.layout]
        pair_rows += [make_row(prompt, chosen, rejected, rules.score) for chosen, rejected in pairs]
    return pair_rows, drops, suspected_count


class PairsExport(ChunkedParquet):
    """The preference pairs, built a chunk of prompts at a time straight into Arrow when
    written (`ChunkedParquet`): the file `frame().to_parquet` writes, holding one chunk.

    Args:
        walk: The walk over the tables that yields each chunk's pairs.
        schema: The layout's Arrow schema.
        n_pairs: How many pairs the walk yields (counted by a first walk).
    """

    def __init__(self, walk: _PairWalk, schema: pa.Schema, n_pairs: int) -> None:
        self._walk, self.arrow_schema, self._pairs = walk, schema, n_pairs

    def __len__(self) -> int:
        return self._pairs

    def arrow_chunks(self) -> Iterator[pa.Table]:
        for rows, _, _ in self._walk.chunks():
            yield pa.Table.from_pylist(rows, schema=self.arrow_schema)

    def frame(self) -> SchemaFrame:
        """All the pairs as one frame."""
        rows = [row for chunk, _, _ in self._walk.chunks() for row in chunk]
        return schema_frame(rows, self.arrow_schema)


def completion_scores(
    overall_scores: pd.DataFrame | None, aspect_annotations: pd.DataFrame | None, score: ScoreKind
) -> pd.DataFrame:
    """(prompt_id, completion_idx, score) for the score kind the pairs use: "overall" the
    fixed overall score (1-10), "mean_aspects" the mean aspect rating (shuffles averaged).

    Args:
        overall_scores: The overall scores per completion (needed for "overall").
        aspect_annotations: The aspect ratings (needed for "mean_aspects").
        score: The score kind.

    Returns:
        One row per scored completion.

    Raises:
        InputError: The table the kind reads lacks a required column.
    """
    return _scores(overall_scores, aspect_annotations, score)


def _check_score_columns(
    overall_scores: Table, aspect_annotations: Table, score: ScoreKind
) -> None:
    if score == "overall":
        require_columns(overall_scores, [*COMPLETION_KEY, "overall_score_fixed"], "overall_scores")
    else:
        require_columns(
            aspect_annotations,
            [*COMPLETION_KEY, "aspect", "rating", "is_na"],
            "aspect_annotations",
        )


def _scores(
    overall_scores: pd.DataFrame | None, aspect_annotations: pd.DataFrame | None, score: ScoreKind
) -> pd.DataFrame:
    """(prompt_id, completion_idx, score) for the requested score kind."""
    _check_score_columns(overall_scores, aspect_annotations, score)
    if score == "overall":
        require_unique_key(overall_scores, COMPLETION_KEY, "overall_scores")
        return overall_scores.loc[:, list(COMPLETION_KEY)].assign(
            score=as_float(overall_scores["overall_score_fixed"])
        )
    folded = ratings_per_completion_aspect(aspect_annotations)
    return folded.groupby(list(COMPLETION_KEY), as_index=False).agg(score=("rating", "mean"))


def _prompt_rng(seed: int, prompt_id: str) -> random.Random:
    # Seeded by a digest of (seed, prompt_id), not by Python's salted hash(), so the draw is
    # the same in every process.
    digest = hashlib.sha256(f"{seed}:{prompt_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _pick_pairs(
    candidates: list[_Candidate], strategy: Strategy, rng: random.Random
) -> list[tuple[_Candidate, _Candidate]]:
    """(chosen, rejected) pairs of one prompt; empty when all scores are equal."""
    if strategy == "all_pairs":
        return [
            (better, worse)
            for better in candidates
            for worse in candidates
            if better.score > worse.score
        ]
    best = max(candidate.score for candidate in candidates)
    lower = [candidate for candidate in candidates if candidate.score < best]
    if not lower:
        return []
    chosen = rng.choice([candidate for candidate in candidates if candidate.score == best])
    return [(chosen, rng.choice(lower))]


class _Prompt(NamedTuple):
    prompt_id: str
    instruction: str
    source: str | None
    split: str  # "train" or "test" (`pair_split`)


def _text_or_none(value: object) -> str | None:
    return None if value is None or pd.isna(value) else str(value)


def _message(role: str, content: str) -> dict[str, str]:
    return {"role": role, "content": content}


def _trl_row(
    prompt: _Prompt, chosen: _Candidate, rejected: _Candidate, score: ScoreKind
) -> dict[str, object]:
    return {
        "prompt_id": prompt.prompt_id,
        "prompt": [_message("user", prompt.instruction)],
        "chosen": [_message("assistant", chosen.response)],
        "rejected": [_message("assistant", rejected.response)],
        "score_chosen": chosen.score,
        "score_rejected": rejected.score,
        "margin": chosen.score - rejected.score,
        "source": prompt.source,
        "model_chosen": chosen.model,
        "model_rejected": rejected.model,
        "completion_idx_chosen": chosen.completion_idx,
        "completion_idx_rejected": rejected.completion_idx,
        "score_kind": score,
        "split": prompt.split,
    }


def _h4_row(
    prompt: _Prompt, chosen: _Candidate, rejected: _Candidate, score: ScoreKind
) -> dict[str, object]:
    def conversation(candidate: _Candidate) -> list[dict[str, str]]:
        return [_message("user", prompt.instruction), _message("assistant", candidate.response)]

    return {
        "prompt": prompt.instruction,
        "prompt_id": prompt.prompt_id,
        "chosen": conversation(chosen),
        "rejected": conversation(rejected),
        "messages": conversation(chosen),
        "score_chosen": chosen.score,
        "score_rejected": rejected.score,
    }


_PAIR_ROWS = {"trl": _trl_row, "h4": _h4_row}
