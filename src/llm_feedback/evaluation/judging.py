"""Judging the samples: one judge call per sample (per pair of models, in both orders, in
pairwise mode), or the status that stands in for it.

Each replicate is judged by its own call (its request's `attempt`), so replicates never
share one cached judgment, while a rerun reuses every cached one. A judge reply that
cannot be read is re-asked up to `max_reasks` times (counted in `reasks`) before it is
stored as a missing judgment.

The judge sees a row's images with its question, and judges a row with the prompt of its
`category` in `judge_prompts` (else `custom_prompt`, else the built-in one). The output
keeps each row's attachment sources and hashes, never their bytes.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.errors import ConfigError
from llm_feedback.evaluation.attachments import media_record
from llm_feedback.judges import Judge, JudgeTask, combine_orders, exact_match, is_unknown_reference
from llm_feedback.params.evaluate import REFERENCE_MODES, EvaluateParams
from llm_feedback.params.judge import JudgeParams
from llm_feedback.replies.status import EXACT_MATCH, INVALID, NO_RESPONSE
from llm_feedback.schema import EVAL_JUDGMENTS_COLUMN_TYPES, EVAL_PAIRWISE_JUDGMENTS_COLUMN_TYPES

logger = logging.getLogger(__name__)


def _text(value: Any) -> str | None:
    return None if value is None or pd.isna(value) else str(value)


def _known_reference(value: Any) -> str | None:
    return None if is_unknown_reference(value) else str(value)


def _plan(sample: Any, config: EvaluateParams, judge: Judge) -> JudgeTask | str:
    """The judge call for one sample, or the status that stands in for it."""
    response = _text(sample.response)
    if response is None:
        return NO_RESPONSE
    reference = _known_reference(sample.reference)
    if config.mode in REFERENCE_MODES and reference is None:
        return INVALID
    if config.mode == "binary" and exact_match(response, reference):
        return EXACT_MATCH
    return _judge_task(sample, response, reference, config, judge)


def _judge_task(
    sample: Any, response: str, reference: str | None, config: EvaluateParams, judge: Judge
) -> JudgeTask:
    options: dict[str, Any] = {
        "custom_prompt": config.judge_prompt_for(_text(sample.category)),
        "attempt": int(sample.replicate),
    }
    question = str(sample.question)
    if sample.turn == 2:  # two-turn rows carry no attachments (checked with the samples)
        prior_reference = _known_reference(sample.prior_reference)
        references = (
            None if prior_reference is None or reference is None else [prior_reference, reference]
        )
        return judge.multi_turn_task(
            [str(sample.prior_question), question],
            [str(sample.prior_response), response],
            references=references,
            **options,
        )
    options["images"] = sample.images
    if config.mode == "binary":
        return judge.binary_task(
            question, reference, response, output_format=config.binary_reply, **options
        )
    if config.mode == "rubric":
        return judge.rubric_task(
            question,
            response,
            config.rubric,
            score_range=config.scale,
            reference=reference,
            **options,
        )
    return judge.single_task(
        question, response, reference=reference, score_range=config.scale, **options
    )


def _sample_fields(sample: Any, config: EvaluateParams, judge_model: str) -> dict[str, Any]:
    return {
        "instance_id": sample.instance_id,
        "turn": sample.turn,
        "model": sample.model,
        "replicate": sample.replicate,
        "ensemble_member": sample.ensemble_member,
        "weight": sample.weight,
        "category": sample.category,
        "level": sample.level,
        "mode": config.mode,
        "response": _text(sample.response),
        "runtime_s": sample.runtime_s,
        "recorded_score": sample.recorded_score,
        "judge_model": judge_model,
        **media_record(sample.images, sample.audio),
    }


def _records_without_call(
    sample: Any, status: str, config: EvaluateParams, judge_model: str
) -> list[dict[str, Any]]:
    record = {
        **_sample_fields(sample, config, judge_model),
        "parse_status": status,
        "success": status == EXACT_MATCH,
        "cached": False,
        "reasks": 0,
        "error": _text(getattr(sample, "generation_error", None)),
    }
    if status == EXACT_MATCH:
        record |= {"score": 1.0, "correct": True}
    criteria = list(config.rubric) if config.mode == "rubric" else [None]
    return [{**record, "criterion": criterion} for criterion in criteria]


def _records_from_outcome(
    sample: Any, outcome: Mapping[str, Any], config: EvaluateParams
) -> list[dict[str, Any]]:
    record = {
        **_sample_fields(sample, config, outcome["model"]),
        "parse_status": outcome["status"],
        "success": outcome["success"],
        "raw_response": outcome["raw_response"],
        "prompt": outcome["prompt"],
        "cached": outcome["cached"],
        "error": outcome["error"],
        "reasks": outcome["reasks"],
    }
    if config.mode == "rubric":
        return [
            {**record, "criterion": criterion, "score": score, "success": score is not None}
            for criterion, score in outcome["scores"].items()
        ]
    result = outcome["result"]
    if config.mode == "binary":
        record |= {"correct": None if result is None else bool(result)}
        record |= outcome.get("details", {})
    return [{**record, "score": result}]


def open_judge(
    config: EvaluateParams,
    cache_path: str | Path | None,
    *,
    progress: bool = True,
    fail_loud: bool = False,
    judge: JudgeParams | None = None,
) -> Judge:
    """The judge `config` names (or `judge`, one of its panel), with its sampling, re-asks
    and `overwrite_results`."""
    judge = judge or config.judge
    return Judge(
        judge.endpoint,
        cache_path,
        refresh=config.overwrite_results,
        progress=progress,
        sampling=judge.sampling,
        max_reasks=config.max_reasks,
        fail_loud=fail_loud,
    )


def judge_samples(samples: pd.DataFrame, config: EvaluateParams, judge: Judge) -> pd.DataFrame:
    """One judgment row per sample (per sample and criterion in rubric mode), or per pair
    of models in pairwise mode. All requests are built before the first call."""
    if config.mode == "pairwise":
        return _judge_pairs(samples, config, judge)
    rows = list(samples.itertuples())
    plan = [_plan(sample, config, judge) for sample in rows]
    tasks = [step for step in plan if isinstance(step, JudgeTask)]
    outcomes = iter(judge.run(tasks, desc=f"evaluate [{config.mode}]"))
    records: list[dict[str, Any]] = []
    for sample, step in zip(rows, plan, strict=True):
        if isinstance(step, JudgeTask):
            records += _records_from_outcome(sample, next(outcomes), config)
        else:
            records += _records_without_call(sample, step, config, judge.model)
    judgments = pd.DataFrame(records, columns=list(EVAL_JUDGMENTS_COLUMN_TYPES)).astype(
        EVAL_JUDGMENTS_COLUMN_TYPES
    )
    _log_summary(judgments, config)
    return judgments


def _log_summary(judgments: pd.DataFrame, config: EvaluateParams) -> None:
    statuses = judgments["parse_status"]
    called = ~statuses.isin([EXACT_MATCH, INVALID, NO_RESPONSE])
    parsed = int((called & judgments["success"]).sum())
    logger.info(
        "evaluate (%s): %d judgments; %d by the judge, %d of them parsed (%.1f%%); "
        "%d exact matches, %d invalid (unknown reference), %d without a response",
        config.mode,
        len(judgments),
        int(called.sum()),
        parsed,
        100.0 * parsed / max(int(called.sum()), 1),
        int((statuses == EXACT_MATCH).sum()),
        int((statuses == INVALID).sum()),
        int((statuses == NO_RESPONSE).sum()),
    )


def _pairs(samples: pd.DataFrame) -> list[tuple[Any, Any]]:
    """Every two models' samples of one (instance, turn, replicate), models in name order."""
    pairs: list[tuple[Any, Any]] = []
    alone = 0
    for _, group in samples.groupby(["instance_id", "turn", "replicate"], sort=False):
        members = list(group.sort_values("model").itertuples())
        alone += len(members) == 1
        pairs += itertools.combinations(members, 2)
    if alone:
        logger.warning("evaluate (pairwise): %d instance replicates have one model only", alone)
    return pairs


def _pair_record(
    first: Any, second: Any, combined: Mapping[str, Any] | None, judge_model: str
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "instance_id": first.instance_id,
        "turn": first.turn,
        "replicate": first.replicate,
        "category": first.category,
        "level": first.level,
        "mode": "pairwise",
        "model_a": first.model,
        "model_b": second.model,
        "judge_model": judge_model,
        **media_record(first.images, first.audio),
    }
    if combined is None:
        errors = [_text(getattr(sample, "generation_error", None)) for sample in (first, second)]
        return record | {
            "parse_status": NO_RESPONSE,
            "success": False,
            "cached": False,
            "error": next((error for error in errors if error), None),
            "reasks": 0,
        }
    result = combined["result"]
    return record | {
        "verdict_a_first": result["verdicts"][0],
        "verdict_b_first": result["verdicts"][1],
        "outcome": result["winner"],
        "consistent": result["consistent"],
        "score_a": result["scores"][0],
        "score_b": result["scores"][1],
        "parse_status": combined["status"],
        "success": combined["success"],
        "raw_response_a_first": combined["raw_response"][0],
        "raw_response_b_first": combined["raw_response"][1],
        "prompt_a_first": combined["prompt"][0],
        "prompt_b_first": combined["prompt"][1],
        "cached": combined["cached"],
        "error": combined["error"],
        "reasks": combined["reasks"],
    }


def _pair_tasks(first: Any, second: Any, config: EvaluateParams, judge: Judge) -> list[JudgeTask]:
    """The comparison of two samples' responses in both orders."""
    reference = _known_reference(first.reference)
    options: dict[str, Any] = {
        "context": None if reference is None else f"Reference answer: {reference}",
        "score_range": config.scale,
        "custom_prompt": config.judge_prompt_for(_text(first.category)),
        "attempt": int(first.replicate),
        "images": first.images,
    }
    return [
        judge.pairwise_task(first.question, first.response, second.response, **options),
        judge.pairwise_task(first.question, second.response, first.response, **options),
    ]


# Stands for a response still to be generated when prompts are checked before any call.
_TO_BE_GENERATED = "(the response to be generated)"


def check_judge_prompts(samples: pd.DataFrame, config: EvaluateParams) -> None:
    """Build the judge prompt of one row of each kind before anything is called, so that a
    `custom_prompt` or `judge_prompts` template that lacks a field fails before generation
    pays for answers it could never judge."""
    if config.custom_prompt is None and not config.judge_prompts:
        return
    judge = Judge(config.judge.endpoint, sampling=config.judge.sampling, connect=False)
    probes = samples.assign(
        response=samples["response"].fillna(_TO_BE_GENERATED),
        has_reference=samples["reference"].map(lambda value: _known_reference(value) is not None),
    ).drop_duplicates(["category", "turn", "has_reference"])
    for sample in probes.itertuples():
        category = _text(sample.category)
        try:
            if config.mode == "pairwise":
                _pair_tasks(sample, sample, config, judge)
            else:
                _plan(sample, config, judge)
        except ConfigError as error:
            setting = (
                f"evaluate.judge_prompts.{category}"
                if category in config.judge_prompts
                else "evaluate.custom_prompt"
            )
            raise ConfigError(f"{setting} (eval_samples row {sample.Index}): {error}") from None


def _judge_pairs(samples: pd.DataFrame, config: EvaluateParams, judge: Judge) -> pd.DataFrame:
    pairs = _pairs(samples)
    tasks: list[JudgeTask] = []
    for first, second in pairs:
        if _text(first.response) is None or _text(second.response) is None:
            continue
        tasks += _pair_tasks(first, second, config, judge)
    outcomes = iter(judge.run(tasks, desc="evaluate [pairwise]"))
    records = []
    for first, second in pairs:
        judged = _text(first.response) is not None and _text(second.response) is not None
        combined = combine_orders(next(outcomes), next(outcomes)) if judged else None
        records.append(_pair_record(first, second, combined, judge.model))
    judgments = pd.DataFrame(records, columns=list(EVAL_PAIRWISE_JUDGMENTS_COLUMN_TYPES)).astype(
        EVAL_PAIRWISE_JUDGMENTS_COLUMN_TYPES
    )
    inconsistent = int((judgments["consistent"] == False).sum())  # noqa: E712 - nullable
    logger.info(
        "evaluate (pairwise): %d pairs, %d with an outcome, %d position-inconsistent (ties)",
        len(judgments),
        int(judgments["outcome"].notna().sum()),
        inconsistent,
    )
    return judgments
