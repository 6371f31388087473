"""Preference pairs (chosen / rejected) from scored completions, following the public
UltraFeedback binarisation recipe.

Per prompt: chosen is the highest-scoring completion (a seeded draw among ties at the top),
rejected a seeded random completion with a strictly lower score ("random_lower"), or every
ordered pair with different scores ("all_pairs"). The draw depends only on the seed and the
prompt_id, so adding or removing other prompts never changes a prompt's pair.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import random
import re
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal, NamedTuple

import pandas as pd

from llm_feedback.errors import ConfigError
from llm_feedback.reporting._frames import (
    as_float,
    ratings_per_completion_aspect,
    require_columns,
    require_unique_key,
    typed_frame,
)
from llm_feedback.schema import (
    COMPLETION_KEY,
    PAIR_DROPS_COLUMN_TYPES,
    PREFERENCE_PAIRS_COLUMN_TYPES,
)

logger = logging.getLogger(__name__)

ScoreKind = Literal["overall", "mean_aspects"]
Strategy = Literal["random_lower", "all_pairs"]
SCORE_KINDS: tuple[str, ...] = ("overall", "mean_aspects")
STRATEGIES: tuple[str, ...] = ("random_lower", "all_pairs")

# Why a prompt yields no pair, in the order they are checked.
DROP_REASONS = ("decontaminated", "fewer_than_two_scored", "all_scores_tied")


class PreferencePairs(NamedTuple):
    """`pairs`: one row per pair; `dropped`: prompts without a pair, counted by reason
    (every reason listed, 0 when none). A tuple, so a Kedro node can return it as two
    outputs."""

    pairs: pd.DataFrame
    dropped: pd.DataFrame


@dataclass(frozen=True, slots=True)
class _Candidate:
    completion_idx: int
    model: str
    response: str
    score: float


def normalise_instruction(text: str) -> str:
    """The form instructions are compared in for decontamination: Unicode NFKC, case-folded,
    runs of whitespace collapsed, ends stripped."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).casefold()).strip()


def binarize(
    completions: pd.DataFrame,
    overall_scores: pd.DataFrame,
    aspect_annotations: pd.DataFrame,
    *,
    score: ScoreKind = "overall",
    strategy: Strategy = "random_lower",
    seed: int = 42,
    decontaminate: Collection[str] = (),
) -> PreferencePairs:
    """Turn scored completions into chosen/rejected pairs.

    score: "overall" uses overall_scores.overall_score_fixed (1-10); "mean_aspects" the mean over
    aspects of the aspect ratings (each aspect's shuffles averaged first; N/A and failures
    left out). A completion with a generation error, a null or blank response, or no score
    never enters a pair. Prompts whose normalised instruction is in `decontaminate` are
    dropped. `chosen` and `rejected` are chat messages: the user prompt and the assistant
    response (the principle system prompt is left out, as in the public recipe).

    Pair columns: prompt_id, prompt, chosen, rejected, score_chosen, score_rejected,
    model_chosen, model_rejected, completion_idx_chosen, completion_idx_rejected, score_kind.
    """
    if score not in SCORE_KINDS:
        raise ConfigError(f"score: expected one of {SCORE_KINDS}, got {score!r}")
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy: expected one of {STRATEGIES}, got {strategy!r}")
    require_columns(
        completions,
        [*COMPLETION_KEY, "instruction", "model", "response", "error"],
        "completions",
    )
    require_unique_key(completions, COMPLETION_KEY, "completions")
    scores = _scores(overall_scores, aspect_annotations, score)

    completion_key = list(COMPLETION_KEY)
    scored = completions.merge(scores, on=completion_key, how="left").sort_values(completion_key)
    response = scored["response"]
    scored["usable"] = (
        scored["error"].isna()
        & response.notna()
        & response.fillna("").astype(str).str.strip().ne("")
        & scored["score"].notna()
    )
    blocked = {normalise_instruction(text) for text in decontaminate}

    pair_rows: list[dict[str, object]] = []
    drops = dict.fromkeys(DROP_REASONS, 0)
    # Plain tuples grouped by itertools: per-group pandas indexing costs ~1 ms a prompt.
    records = scored.loc[
        :, ["prompt_id", "completion_idx", "instruction", "model", "response", "score", "usable"]
    ].itertuples(index=False)
    for prompt_id, prompt_records in itertools.groupby(records, key=lambda r: r.prompt_id):
        rows = list(prompt_records)
        instruction = str(rows[0].instruction)
        if normalise_instruction(instruction) in blocked:
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
        pairs = _pick_pairs(candidates, strategy, _prompt_rng(seed, str(prompt_id)))
        if not pairs:
            drops["all_scores_tied"] += 1
            continue
        pair_rows += [
            _pair_row(str(prompt_id), instruction, chosen, rejected, score)
            for chosen, rejected in pairs
        ]

    dropped = pd.DataFrame({"reason": list(drops), "n_prompts": list(drops.values())})
    logger.info(
        "binarize(%s, %s): %d pairs; prompts dropped: %s",
        score,
        strategy,
        len(pair_rows),
        ", ".join(f"{reason}={count}" for reason, count in drops.items()),
    )
    return PreferencePairs(
        typed_frame(pd.DataFrame(pair_rows), PREFERENCE_PAIRS_COLUMN_TYPES),
        typed_frame(dropped, PAIR_DROPS_COLUMN_TYPES),
    )


def _scores(
    overall_scores: pd.DataFrame, aspect_annotations: pd.DataFrame, score: ScoreKind
) -> pd.DataFrame:
    """(prompt_id, completion_idx, score) for the requested score kind."""
    if score == "overall":
        require_columns(overall_scores, [*COMPLETION_KEY, "overall_score_fixed"], "overall_scores")
        require_unique_key(overall_scores, COMPLETION_KEY, "overall_scores")
        return overall_scores.loc[:, list(COMPLETION_KEY)].assign(
            score=as_float(overall_scores["overall_score_fixed"])
        )
    require_columns(
        aspect_annotations, [*COMPLETION_KEY, "aspect", "rating", "is_na"], "aspect_annotations"
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


def _pair_row(
    prompt_id: str, prompt: str, chosen: _Candidate, rejected: _Candidate, score: ScoreKind
) -> dict[str, object]:
    def conversation(candidate: _Candidate) -> list[dict[str, str]]:
        return [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": candidate.response},
        ]

    return {
        "prompt_id": prompt_id,
        "prompt": prompt,
        "chosen": conversation(chosen),
        "rejected": conversation(rejected),
        "score_chosen": chosen.score,
        "score_rejected": rejected.score,
        "model_chosen": chosen.model,
        "model_rejected": rejected.model,
        "completion_idx_chosen": chosen.completion_idx,
        "completion_idx_rejected": rejected.completion_idx,
        "score_kind": score,
    }
