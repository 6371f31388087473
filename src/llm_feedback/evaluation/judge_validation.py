"""The judge of an evaluation validated against the samples' gold labels: its card.

When the samples carry gold labels (pairwise `gold`, judged in both orders; pointwise
`recorded_score` / `gold_score`), `validate_evaluation` runs `validation.validate` on the
run's judgments and returns the judge's `judge_validation` rows added to the cards of
earlier runs (every earlier run kept: `card.add_card`), the annotators' agreement, and the
validation metrics as `eval_metrics` rows (the same metric names and values, with their
intervals; `raters` is "<judge>~gold" for the judge's verdicts, "<baseline>~gold" for a
baseline, "<judge>~<annotator>" against one annotator; `n_missing`: what a readable-only
figure, `*_readable`, leaves out of its all-items twin's `n`, the unreadable calls or
items). A comparing judge also gets MT-Bench's vote-by-vote agreement with the human
votes, per turn (`evaluation.human_agreement`, raters "<judge>~humans").

The judge is its endpoint (the endpoint's name, else its URL), model and model file,
prompt template (the kind's template file, or the custom prompt and per-category prompts),
sampling and task (mode, scale, reply format): `evaluation_judge_key` names its card for
the reports. A panel is not validated here.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pandas as pd

from llm_feedback.evaluation.config import EvaluateParams
from llm_feedback.evaluation.human_agreement import agreement_metric_rows
from llm_feedback.storage.schema import (
    EVAL_ANNOTATOR_AGREEMENT_COLUMN_TYPES,
    EVAL_METRICS_COLUMN_TYPES,
)
from llm_feedback.validation.agreement import MAJORITY, RATERS_SEPARATOR
from llm_feedback.validation.card import BASELINE, add_card, normalised
from llm_feedback.validation.gate import JudgeRequirementError, check_requirements
from llm_feedback.validation.identity import endpoint_name, judge_identity
from llm_feedback.validation.logprobs import ARGMAX, LOGPROBS, calls_from_judgments
from llm_feedback.validation.metrics import READABLE
from llm_feedback.validation.model_file import model_file_identity
from llm_feedback.validation.validate import Validation, validate_pairwise, validate_pointwise
from llm_feedback.validation.verdicts import pairs_table

logger = logging.getLogger(__name__)

GOLD = "gold"
_SOURCE_NAMES = {"argmax": "", "logprobs": "[logprobs]", "logprobs_calibrated": "[calibrated]"}


def prompt_template_text(config: EvaluateParams) -> str:
    """The text of the judge's prompt template: the kind's file (every part of it), or the
    custom prompt, with the per-category prompts after it.

    Args:
        config: the evaluate parameters.

    Returns:
        The text.
    """
    template = config.kind.template
    if config.custom_prompt is not None:
        text = config.custom_prompt
    elif "{" in template or "\n" in template:
        text = template
    else:
        text = resources.files("llm_feedback.templates").joinpath(f"{template}.txt").read_text()
    prompts = json.dumps(dict(config.judge_prompts), sort_keys=True) if config.judge_prompts else ""
    return text + prompts


def evaluation_identity(config: EvaluateParams) -> dict[str, str] | None:
    """The identity columns of the evaluation's one judge (None: a panel or an evaluator).

    Args:
        config: the evaluate parameters.

    Returns:
        The identity columns, or None.
    """
    if config.judge is None or config.evaluator is not None:
        return None
    judge = config.judge
    task = {"task": "evaluate", "mode": config.mode, "scale": list(config.scale)}
    if config.kind.reply_formats:
        task["reply_format"] = config.binary_reply
    return judge_identity(
        endpoint_name(judge.endpoint),
        judge.endpoint.model,
        prompt_template_text(config),
        judge.sampling,
        model_file=model_file_identity(judge.endpoint),
        task=task,
    )


def evaluation_judge_key(config: EvaluateParams) -> str | None:
    """The judge key of the evaluation's one judge.

    Args:
        config: the evaluate parameters.

    Returns:
        The key, or None for a panel or an evaluator.
    """
    identity = evaluation_identity(config)
    return None if identity is None else identity["judge_key"]


def check_judge_requirement(cards: pd.DataFrame, config: EvaluateParams) -> list[str]:
    """`evaluate.judge_requirement` checked on the judge's latest cards (`validation.gate`):
    a line per requirement met; JudgeRequirementError, naming the judge, the metric, its
    bound and the requirement, for the first one not met or without a card.

    Args:
        cards: the judge_validation cards.
        config: the evaluate parameters.

    Returns:
        One line per requirement met.
    """
    identity = evaluation_identity(config)
    if not config.judge_requirement or identity is None:  # a panel with one is refused
        return []
    return check_requirements(
        cards,
        identity,
        config.judge_requirement,
        setting="evaluate.judge_requirement",
        validate_with="samples with gold labels, as in README 'How good is my judge?'",
    )


def requirement_lines(cards: pd.DataFrame, config: EvaluateParams) -> str:
    """The judge card's lines on `evaluate.judge_requirement`: each requirement met, or the
    one that stops the run (empty without a requirement).

    Args:
        cards: the judge_validation cards.
        config: the evaluate parameters.

    Returns:
        The lines, as one text.
    """
    try:
        lines = check_judge_requirement(cards, config)
    except JudgeRequirementError as error:
        lines = [f"Requirement not met (eval_metrics and the ranking are not written): {error}"]
    return "".join(f"\n{line}\n" for line in lines)


def validation_set_name(config: EvaluateParams, samples_path: str | None) -> str:
    """`evaluate.validation_set`, else the samples file's folder and name.

    Args:
        config: the evaluate parameters.
        samples_path: the samples file (None: given in memory).

    Returns:
        The name.
    """
    if config.validation_set:
        return config.validation_set
    if not samples_path:
        return "eval_samples"
    path = Path(samples_path)
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


@dataclass(frozen=True)
class EvaluationValidation:
    cards: pd.DataFrame  # judge_validation: every judge's card, this run's replacing its own
    annotators: pd.DataFrame  # eval_annotator_agreement
    metrics: pd.DataFrame  # eval_metrics rows


def has_gold(judgments: pd.DataFrame, config: EvaluateParams) -> bool:
    """Whether the judgments carry a gold to validate the judge against.

    Args:
        judgments: eval_judgments rows.
        config: the evaluate parameters.

    Returns:
        True with a pairwise `gold` or a `recorded_score`.
    """
    if config.kind.compares:
        return GOLD in judgments.columns and bool(judgments[GOLD].notna().any())
    return "recorded_score" in judgments.columns and judgments["recorded_score"].notna().any()


def _pairwise_samples(samples: pd.DataFrame) -> pd.DataFrame:
    """The two rows per labelled instance that `validate_pairwise` reads: each instance's
    first turn and replicate, in row order (the first row A). MT-Bench's human judgments
    name each turn an instance of its own, so both turns are validated. Where only a slice
    of the pairs carries gold, only that slice is validated (its counts are the card's n)."""
    first_turn = samples.groupby("instance_id", sort=False)["turn"].transform("min")
    first = samples[(samples["turn"] == first_turn) & (samples["replicate"] == 0)]
    pairs = first.drop_duplicates(["instance_id", "model"]).copy()
    labelled = pairs[GOLD].notna()
    if not labelled.all():
        logger.info(
            "evaluate: the judge is validated on the %d of %d pairs that carry gold",
            pairs.loc[labelled, "instance_id"].nunique(),
            pairs["instance_id"].nunique(),
        )
        pairs = pairs[labelled].copy()
    pairs["response"] = pairs["response"].astype(object).where(pairs["response"].notna(), "")
    return pairs


def _metric_rows(validation: Validation, config: EvaluateParams) -> pd.DataFrame:
    card = validation.card
    judge = card.loc[card["kind"] != BASELINE, "judge"].iloc[0]
    raters = [
        f"{name}{RATERS_SEPARATOR}{GOLD}"
        if kind == BASELINE
        else f"{judge}{_SOURCE_NAMES.get(source, source)}{RATERS_SEPARATOR}{GOLD}"
        for kind, name, source in zip(
            card["kind"], card["judge"], card["verdict_source"], strict=True
        )
    ]
    frames = [card.assign(raters=raters)]
    by_annotator = validation.by_annotator
    if len(by_annotator):
        others = by_annotator[by_annotator["gold_source"] != MAJORITY]
        frames.append(
            others.assign(raters=judge + RATERS_SEPARATOR + others["gold_source"].astype(str))
        )
    rows = pd.concat(frames, ignore_index=True)
    # A readable-only figure leaves out what its all-items twin counts as wrong.
    key = ["raters", "category", "metric"]
    counted = rows.groupby(key, dropna=False)["n"].max()
    twin = rows.assign(metric=rows["metric"].str.removesuffix(READABLE)).set_index(key).index
    readable_only = rows["metric"].str.endswith(READABLE).to_numpy()
    left_out = counted.reindex(twin).to_numpy() - rows["n"].to_numpy()
    metrics = pd.DataFrame(
        {
            "mode": config.mode,
            "model": None,
            "metric": rows["metric"],
            "category": rows["category"],
            "level": None,
            "raters": rows["raters"],
            "criterion": None,
            "k": pd.NA,
            "value": rows["value"],
            "n": rows["n"],
            "n_missing": pd.Series(left_out, index=rows.index).where(readable_only, 0),
            "ci_low": rows["ci_low"],
            "ci_high": rows["ci_high"],
            "ci_method": rows["ci_method"],
        }
    )
    return metrics.reindex(columns=list(EVAL_METRICS_COLUMN_TYPES)).astype(
        EVAL_METRICS_COLUMN_TYPES
    )


def merged_cards(previous: pd.DataFrame, card: pd.DataFrame) -> pd.DataFrame:
    """`previous` cards, then `card`: every earlier run is kept (`card.add_card`).

    Args:
        previous: the cards so far.
        card: this run's card rows.

    Returns:
        All the rows.
    """
    return add_card(previous, card)


def empty_validation(previous: pd.DataFrame) -> EvaluationValidation:
    """A validation that adds nothing: the earlier cards, empty tables.

    Args:
        previous: the cards so far.

    Returns:
        The validation.
    """
    return EvaluationValidation(
        cards=normalised(previous),
        annotators=pd.DataFrame(columns=list(EVAL_ANNOTATOR_AGREEMENT_COLUMN_TYPES)).astype(
            EVAL_ANNOTATOR_AGREEMENT_COLUMN_TYPES
        ),
        metrics=pd.DataFrame(columns=list(EVAL_METRICS_COLUMN_TYPES)).astype(
            EVAL_METRICS_COLUMN_TYPES
        ),
    )


def validate_evaluation(
    judgments: pd.DataFrame,
    samples: pd.DataFrame,
    config: EvaluateParams,
    previous: pd.DataFrame,
    *,
    validation_set: str,
    created_at: str,
) -> EvaluationValidation:
    """The judge's card from this run's judgments (see the module docstring); nothing new
    when the samples have no gold or the run has no single judge. Where the judgments carry
    probability verdicts (`evaluation.probabilities`), the card has the probability-weighted
    and calibrated verdicts' metrics beside the argmax ones.

    Args:
        judgments: this run's eval_judgments.
        samples: the samples judged.
        config: the evaluate parameters.
        previous: the cards so far.
        validation_set: the validation set's name.
        created_at: when the card is made (ISO time).

    Returns:
        The cards, the annotators' agreement and the judge's metrics against each annotator.
    """
    identity = evaluation_identity(config)
    if identity is None or not has_gold(judgments, config):
        return empty_validation(previous)
    if config.kind.compares:
        pairs = _pairwise_samples(samples)
        # The judgments of the turns validated (a later turn of an instance is not).
        validated = pairs[["instance_id", "turn"]].drop_duplicates()
        first_turns = judgments.merge(validated, on=["instance_id", "turn"], how="inner")
        validation = validate_pairwise(
            pairs,
            identity,
            validation_set,
            created_at=created_at,
            judgments=first_turns,
            calls=calls_from_judgments(first_turns, pairs_table(pairs))
            if "prob_margin_a_first" in first_turns.columns
            else None,
        )
    else:
        scored = judgments[judgments["recorded_score"].notna()]
        if config.kind.uses_criteria:
            scored = scored[scored["criterion"].isna()]
        score = scored["score"].astype("float64")
        usable = (
            scored["logprobs_usable"].astype(bool)
            if "logprobs_usable" in scored.columns
            else pd.Series(False, index=scored.index)
        )
        expected = scored["expected_score"] if "expected_score" in scored.columns else score
        scores = pd.DataFrame(
            {
                "instance_id": scored["instance_id"],
                "score": score,
                "gold_score": scored["recorded_score"].astype("float64"),
                "category": scored["category"],
                # Without usable probabilities a call's expected score is its argmax score.
                "expected_score": expected.astype("float64").where(usable, score),
                "source": usable.map({True: LOGPROBS, False: ARGMAX}),
            }
        )
        validation = validate_pointwise(scores, identity, validation_set, created_at=created_at)
    annotators = validation.annotators
    if len(annotators):
        annotators = annotators.assign(
            judge_key=identity["judge_key"], validation_set=validation_set
        )
    else:
        annotators = empty_validation(previous).annotators
    logger.info(
        "evaluate: judge %s (key %s) validated on %s",
        identity["judge_model"],
        identity["judge_key"],
        validation_set,
    )
    columns = list(EVAL_ANNOTATOR_AGREEMENT_COLUMN_TYPES)
    return EvaluationValidation(
        cards=merged_cards(previous, validation.card),
        annotators=annotators[columns].astype(EVAL_ANNOTATOR_AGREEMENT_COLUMN_TYPES),
        metrics=_with_human_agreement(_metric_rows(validation, config), judgments, config),
    )


def _with_human_agreement(
    metrics: pd.DataFrame, judgments: pd.DataFrame, config: EvaluateParams
) -> pd.DataFrame:
    """`metrics` and, for a comparing judge of samples with several human votes (MT-Bench's
    human judgments), its vote-by-vote agreement with them on each turn."""
    if not config.kind.compares:
        return metrics
    judge = metrics["raters"].iloc[0].split(RATERS_SEPARATOR)[0] if len(metrics) else "judge"
    votes = agreement_metric_rows(judgments, config.mode, judge)
    return pd.concat([metrics, votes], ignore_index=True) if len(votes) else metrics
