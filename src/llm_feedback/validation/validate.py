"""One validation run, from gold-labelled samples and a judge's verdicts to its card rows.

For the evaluate pipeline's nodes: `validate_pairwise` takes the samples as `formats` reads
them and the judge's verdicts (a verdict frame, or eval_judgments' pairwise rows), and,
when the endpoint returned top log-probabilities, the per-call probabilities (`calls`:
`instance_id`, `order`, and `logprobs.pairwise_verdict`'s fields); it returns the
judge_validation rows (argmax, probability-weighted and calibrated verdicts, baselines),
the annotators' agreement and the judge against each annotator. `validate_pointwise` does
the same for scores against gold scores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from llm_feedback.core.errors import InputError, require_columns
from llm_feedback.validation.agreement import (
    annotation_table,
    annotator_agreement,
    metrics_against_annotators,
)
from llm_feedback.validation.baselines import baseline_metrics
from llm_feedback.validation.binary_rates import pairwise_rates, pointwise_rates
from llm_feedback.validation.card import card_frame
from llm_feedback.validation.logprobs import (
    LOGPROBS,
    calibrated_verdicts,
    cross_fitted_bias,
    position_bias,
    probability_verdicts,
)
from llm_feedback.validation.metric_table import DEFAULT_RESAMPLES, DEFAULT_SEED
from llm_feedback.validation.metrics import pairwise_metrics
from llm_feedback.validation.pointwise import pointwise_metrics
from llm_feedback.validation.verdicts import attach_pairs, pairs_table, verdicts_from_judgments


@dataclass(frozen=True)
class Validation:
    card: pd.DataFrame  # judge_validation rows
    annotators: pd.DataFrame  # annotator agreement (empty with one annotator)
    by_annotator: pd.DataFrame  # the judge's metrics against the majority and each annotator


def _pairwise_table(verdicts: pd.DataFrame, model: str, options: dict[str, Any]) -> pd.DataFrame:
    """The pairwise metric table with the judge's TPR and TNR (`binary_rates`)."""
    return pd.concat(
        [pairwise_metrics(verdicts, judge=model, **options), pairwise_rates(verdicts, judge=model)],
        ignore_index=True,
    )


def validate_pairwise(
    samples: pd.DataFrame,
    identity: dict[str, str],
    validation_set: str,
    *,
    created_at: str,
    judgments: pd.DataFrame | None = None,
    verdicts: pd.DataFrame | None = None,
    calls: pd.DataFrame | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Validation:
    """Validate a pairwise judge: give `judgments` (eval_judgments rows) or `verdicts`.

    Args:
        samples: the gold-labelled samples (`formats`).
        identity: the judge's identity (`identity.judge_identity`).
        validation_set: the validation set's name.
        created_at: when the card was made (ISO time).
        judgments: eval_judgments' pairwise rows.
        verdicts: a verdict frame, in their place.
        calls: per-call top log-probability verdicts, when the endpoint returned them.
        resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed.

    Returns:
        The card rows, the annotators' agreement and the judge against each annotator.
    """
    pairs = pairs_table(samples)
    if (judgments is None) == (verdicts is None):
        raise InputError("validate_pairwise: give either judgments or verdicts")
    if verdicts is None:
        verdicts = verdicts_from_judgments(judgments, pairs)
    else:
        verdicts = attach_pairs(verdicts, pairs)
    options: dict[str, Any] = {"resamples": resamples, "seed": seed}
    model = identity["judge_model"]
    tables = {"argmax": _pairwise_table(verdicts, model, options)}
    bias, usable_share = math.nan, 0.0
    if calls is not None:
        require_columns(
            calls,
            ["instance_id", "order", "p_first", "p_second", "p_tie", "margin", "source"],
            "logprob calls",
        )
        calls = attach_pairs(calls, pairs)
        usable_share = float((calls["source"] == LOGPROBS).mean())
        if usable_share > 0:
            bias, _ = position_bias(calls)
            tables["logprobs"] = _pairwise_table(probability_verdicts(calls), model, options)
            # Scored on the items it measures, the bias is cross-fitted (no item calibrates
            # itself); the card keeps the bias over all items for later runs.
            calibrated = calibrated_verdicts(calls, cross_fitted_bias(calls))
            tables["logprobs_calibrated"] = _pairwise_table(
                calibrated.drop(columns=["p_first", "p_second", "p_tie"]), model, options
            )
    card = card_frame(
        identity,
        validation_set,
        tables,
        baseline_metrics(verdicts, **options),
        created_at=created_at,
        position_bias=bias,
        usable_probability_share=usable_share,
    )
    several = pairs["gold_annotators"].map(len).max() > 1
    annotators = annotator_agreement(annotation_table(pairs)) if several else pd.DataFrame()
    by_annotator = (
        metrics_against_annotators(verdicts, pairs, judge=model, **options)
        if several
        else pd.DataFrame()
    )
    return Validation(card=card, annotators=annotators, by_annotator=by_annotator)


def validate_pointwise(
    scores: pd.DataFrame,
    identity: dict[str, str],
    validation_set: str,
    *,
    created_at: str,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Validation:
    """Validate a pointwise judge: `scores` has `instance_id`, `score` (the judge's, NaN
    when unreadable), `gold_score`, optional `category` and `expected_score` (from
    `logprobs.rating_verdict`, validated beside the argmax when present).

    Args:
        scores: instance_id, score, gold_score, optional category and expected_score.
        identity: the judge's identity (`identity.judge_identity`).
        validation_set: the validation set's name.
        created_at: when the card was made (ISO time).
        resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed.

    Returns:
        The card rows, with empty annotators' tables.
    """
    options: dict[str, Any] = {"resamples": resamples, "seed": seed}
    model = identity["judge_model"]
    tables = {
        "argmax": pd.concat(
            [
                pointwise_metrics(scores, judge=model, **options),
                pointwise_rates(scores, judge=model),
            ],
            ignore_index=True,
        )
    }
    usable_share = 0.0
    if "expected_score" in scores.columns and "source" in scores.columns:
        usable_share = float((scores["source"] == LOGPROBS).mean())
        if usable_share > 0:
            expected = scores.assign(score=scores["expected_score"])
            tables["logprobs"] = pointwise_metrics(expected, judge=model, **options)
    card = card_frame(
        identity,
        validation_set,
        tables,
        None,
        created_at=created_at,
        usable_probability_share=usable_share,
    )
    return Validation(card=card, annotators=pd.DataFrame(), by_annotator=pd.DataFrame())
