"""Judging the samples: one judge call per sample (per pair of models, in both orders, for a
comparing kind such as `pairwise`), or the status that stands in for it.

Whatever the mode, its judge kind (`config.kind`) says what to ask (`JudgeKind.ask`), which
rows need a reference, which exact matches skip the call and what columns a judgment fills
(`JudgeKind.columns`): each row of `eval_judgments` is the sample's columns, the
`Judgment`'s call columns and the kind's own, so a column every kind's rows should carry is
added in `sample_columns` (and `schema.py`) once.

Each replicate is judged by its own call (its request's `attempt`), so replicates never
share one cached judgment, while a rerun reuses every cached one. A judge reply that
cannot be read is re-asked up to `max_reasks` times (counted in `reasks`) before it is
stored as a missing judgment. The judge sees a row's images with its question, and judges
a row with the prompt of its `category` in `judge_prompts` (else `custom_prompt`, else the
built-in one). The output keeps each row's attachment sources and hashes, never their bytes.
A response suspected of injection is flagged and judged twice (`evaluation.differential`).
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.core.errors import ConfigError
from llm_feedback.evaluation.attachments import media_record
from llm_feedback.evaluation.config import EvaluateParams
from llm_feedback.evaluation.differential import flagged, kept_pair, kept_rows, without_spans
from llm_feedback.evaluation.probabilities import (
    pair_probability_columns,
    score_probability_columns,
)
from llm_feedback.judges import (
    Judge,
    JudgeItem,
    JudgeKind,
    JudgeTask,
    Judgment,
    PairJudgment,
    combine_orders,
    exact_match,
    is_unknown_reference,
)
from llm_feedback.judges.config import JudgeParams
from llm_feedback.replies.status import EXACT_MATCH, IDENTICAL, INVALID, NO_RESPONSE
from llm_feedback.storage.schema import (
    EVAL_INSTANCE_COLUMNS,
    EVAL_JUDGMENTS_COLUMN_TYPES,
    EVAL_PAIRWISE_JUDGMENTS_COLUMN_TYPES,
    EVAL_SAMPLE_KEY,
    EVAL_SAMPLES_COLUMN_TYPES,
    EVAL_SAMPLES_INTERNAL_COLUMNS,
)

logger = logging.getLogger(__name__)


def text_or_none(value: Any) -> str | None:
    """A table cell as text, None when missing.

    Args:
        value: a table cell.

    Returns:
        The text, or None.
    """
    return None if value is None or pd.isna(value) else str(value)


def known_reference(value: Any) -> str | None:
    """A reference that can be judged against, else None.

    Args:
        value: a reference cell.

    Returns:
        The reference, or None.
    """
    return None if is_unknown_reference(value) else str(value)


def judgment_column_types(kind: JudgeKind) -> dict[str, str]:
    """The columns and dtypes of `eval_judgments` for a kind: its family's table plus the
    kind's own extra columns.

    Args:
        kind: the judge kind.

    Returns:
        Column name -> dtype.
    """
    table = EVAL_PAIRWISE_JUDGMENTS_COLUMN_TYPES if kind.compares else EVAL_JUDGMENTS_COLUMN_TYPES
    return {**table, **kind.extra_columns}


def judgment_table(records: list[dict[str, Any]], kind: JudgeKind) -> pd.DataFrame:
    """Judgment records as `eval_judgments` rows, typed for their kind.

    Args:
        records: the rows.
        kind: the judge kind.

    Returns:
        The table.
    """
    types = judgment_column_types(kind)
    return pd.DataFrame(records, columns=list(types)).astype(types)


def carried_column_names(columns: Any) -> list[str]:
    """The user's sample columns beyond eval_samples' own.

    Args:
        columns: the samples' columns.

    Returns:
        The carried columns' names.
    """
    own = set(EVAL_SAMPLES_COLUMN_TYPES) | set(EVAL_SAMPLES_INTERNAL_COLUMNS)
    return [str(column) for column in columns if column not in own]


def with_carried_columns(
    judgments: pd.DataFrame, samples: pd.DataFrame, config: EvaluateParams
) -> pd.DataFrame:
    """`judgments` with the samples' own further columns (`samples.carried_columns`): by
    sample; for a comparing kind as `<column>_a` / `<column>_b` from model_a's and
    model_b's rows, the gold columns (the instance's) as they are, from model_a's row.

    Args:
        judgments: eval_judgments rows.
        samples: the samples judged.
        config: the evaluate parameters.

    Returns:
        The judgments with the carried columns.
    """
    carried = carried_column_names(samples.columns)
    if not carried or judgments.empty:
        return judgments
    if not config.kind.compares:
        keys = list(EVAL_SAMPLE_KEY)
        return judgments.merge(samples[keys + carried], on=keys, how="left", validate="m:1")
    keys = ["instance_id", "turn", "replicate", "model"]
    table = samples[keys + carried].drop_duplicates(keys)
    gold = [column for column in carried if column in EVAL_INSTANCE_COLUMNS]
    others = [column for column in carried if column not in EVAL_INSTANCE_COLUMNS]
    frame = judgments
    for side in ("a", "b"):
        named = table.rename(columns={"model": f"model_{side}"})
        columns = others + (gold if side == "a" else [])
        named = named[[*keys[:3], f"model_{side}", *columns]].rename(
            columns={column: f"{column}_{side}" for column in others}
        )
        frame = frame.merge(named, on=[*keys[:3], f"model_{side}"], how="left", validate="m:1")
    return frame


def _item(sample: Any, response: str, reference: str | None, config: EvaluateParams) -> JudgeItem:
    second_turn = sample.turn == 2
    return JudgeItem(
        question=str(sample.question),
        response=response,
        reference=reference,
        prior_question=text_or_none(sample.prior_question) if second_turn else None,
        prior_response=text_or_none(sample.prior_response) if second_turn else None,
        prior_reference=known_reference(sample.prior_reference) if second_turn else None,
        custom_prompt=config.judge_prompt_for(text_or_none(sample.category)),
    )


def _plan(sample: Any, config: EvaluateParams, judge: Judge) -> JudgeTask | str:
    """The judge call for one sample, or the status that stands in for it."""
    kind = config.kind
    response = text_or_none(sample.response)
    if response is None:
        return NO_RESPONSE
    reference = known_reference(sample.reference)
    if kind.needs_reference and reference is None:
        return INVALID
    if kind.exact_match and exact_match(response, reference):
        return EXACT_MATCH
    # Two-turn rows carry no attachments (checked with the samples).
    images = None if sample.turn == 2 else sample.images
    return judge.task(
        kind,
        _item(sample, response, reference, config),
        config.kind_options,
        attempt=int(sample.replicate),
        images=images,
    )


def sample_columns(sample: Any, config: EvaluateParams, judge_model: str) -> dict[str, Any]:
    """The columns of a judgment row that come from its sample (and the judge's name).

    Args:
        sample: one eval_samples row (a named tuple).
        config: the evaluate parameters.
        judge_model: the judge's name.

    Returns:
        Column -> value.
    """
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
        "response": text_or_none(sample.response),
        "runtime_s": sample.runtime_s,
        "recorded_score": sample.recorded_score,
        "judge_model": judge_model,
        "suspected_injection": flagged(sample),
        **media_record(sample.images, sample.audio),
    }


def judgment_rows(
    sample: Any, judgment: Judgment, config: EvaluateParams, judge_model: str
) -> list[dict[str, Any]]:
    """The rows of one sample's judgment: sample, call and kind columns (a rubric makes one
    row per criterion).

    Args:
        sample: one eval_samples row (a named tuple).
        judgment: its judgment.
        config: the evaluate parameters.
        judge_model: the judge's name.

    Returns:
        The rows.
    """
    record = {
        **sample_columns(sample, config, judge_model),
        **judgment.call_columns(),
        **score_probability_columns(judgment, config.kind, config.kind_options),
    }
    return [{**record, **own} for own in config.kind.columns(judgment, config.kind_options)]


def judgment_without_call(sample: Any, status: str, config: EvaluateParams) -> Judgment:
    """The judgment standing in for a call: an exact match passes at the top of the scale;
    a missing response or an unknown reference has no value.

    Args:
        sample: one eval_samples row (a named tuple).
        status: why no call is made (a parse status).
        config: the evaluate parameters.

    Returns:
        The judgment.
    """
    value = float(config.scale[1]) if status == EXACT_MATCH else None
    error = text_or_none(getattr(sample, "generation_error", None))
    return Judgment.without_call(status, value, error=error)


def open_judge(
    config: EvaluateParams,
    cache_path: str | Path | None,
    *,
    progress: bool = True,
    fail_loud: bool = False,
    judge: JudgeParams | None = None,
) -> Judge:
    """The judge `config` names (or `judge`, one of its panel), with its sampling, re-asks
    and `overwrite_results`.

    Args:
        config: the evaluate parameters.
        cache_path: the request cache (None: no cache).
        progress: show a progress bar.
        fail_loud: raise when too many calls fail.
        judge: one judge of the panel (None: the configured judge).

    Returns:
        The judge, open.
    """
    top_logprobs = config.judge_top_logprobs_asked if judge is None else 0
    if judge is None and config.logprobs_off_reason is not None:
        logger.info("evaluate: log-probability verdicts off: %s", config.logprobs_off_reason)
    judge = judge or config.judge
    return Judge(
        judge.endpoint,
        cache_path,
        refresh=config.overwrite_results,
        progress=progress,
        sampling=judge.sampling,
        max_reasks=config.max_reasks,
        fail_loud=fail_loud,
        top_logprobs=top_logprobs,
    )


def _steps(sample: Any, config: EvaluateParams, judge: Judge) -> list[JudgeTask | str]:
    """The sample's judge call (or the status standing in for it), and for a suspected
    injection the call without its suspicious spans (`evaluation.differential`)."""
    step = _plan(sample, config, judge)
    if not isinstance(step, JudgeTask) or not flagged(sample):
        return [step]
    return [step, _plan(without_spans(sample), config, judge)]


def judge_samples(samples: pd.DataFrame, config: EvaluateParams, judge: Judge) -> pd.DataFrame:
    """One judgment row per sample (per sample and criterion for a rubric), or per pair of
    models for a comparing kind. All requests are built before the first call.

    Args:
        samples: the samples, with responses.
        config: the evaluate parameters.
        judge: the open judge.

    Returns:
        The eval_judgments rows.
    """
    if config.kind.compares:
        return _judge_pairs(samples, config, judge)
    rows = list(samples.itertuples())
    plan = [_steps(sample, config, judge) for sample in rows]
    tasks = [step for steps in plan for step in steps if isinstance(step, JudgeTask)]
    judged = iter(judge.run(tasks, desc=f"evaluate [{config.mode}]"))
    records: list[dict[str, Any]] = []
    for sample, steps in zip(rows, plan, strict=True):
        variants = [
            judgment_rows(
                sample,
                next(judged)
                if isinstance(step, JudgeTask)
                else judgment_without_call(sample, step, config),
                config,
                judge.model,
            )
            for step in steps
        ]
        records += (
            variants[0] if len(variants) == 1 else kept_rows(*variants, config.kind.value_column)
        )
    judgments = judgment_table(records, config.kind)
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


def _pairs(samples: pd.DataFrame, mode: str) -> list[tuple[Any, Any]]:
    """Every two models' samples of one (instance, turn, replicate), in row order: the
    first row's response is "A" (model_a)."""
    pairs: list[tuple[Any, Any]] = []
    alone = 0
    for _, group in samples.groupby(["instance_id", "turn", "replicate"], sort=False):
        members = list(group.sort_index().itertuples())
        alone += len(members) == 1
        pairs += itertools.combinations(members, 2)
    if alone:
        logger.warning("evaluate (%s): %d instance replicates have one model only", mode, alone)
    return pairs


def _pair_record(
    first: Any, second: Any, judged: PairJudgment | None, config: EvaluateParams, judge_model: str
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "suspected_injection": flagged(first) or flagged(second),
        "instance_id": first.instance_id,
        "turn": first.turn,
        "replicate": first.replicate,
        "category": first.category,
        "level": first.level,
        "mode": config.mode,
        "model_a": first.model,
        "model_b": second.model,
        "judge_model": judge_model,
        **media_record(first.images, first.audio),
    }
    (own,) = config.kind.columns(judged, config.kind_options)
    own = {**own, **pair_probability_columns(judged)}
    if judged is None:
        errors = [
            text_or_none(getattr(sample, "generation_error", None)) for sample in (first, second)
        ]
        call = Judgment.without_call(NO_RESPONSE, error=next((e for e in errors if e), None))
        return record | call.call_columns() | own
    return record | judged.call_columns() | own


def _pair_tasks(first: Any, second: Any, config: EvaluateParams, judge: Judge) -> list[JudgeTask]:
    """The comparison of two samples' responses in both orders; on a second turn, of the
    two whole conversations (each model's own first answer before its second)."""
    second_turn = first.turn == 2
    item = JudgeItem(
        question=str(first.question),
        response=first.response,
        other_response=second.response,
        reference=known_reference(first.reference),
        custom_prompt=config.judge_prompt_for(text_or_none(first.category)),
        prior_question=text_or_none(first.prior_question) if second_turn else None,
        prior_response=text_or_none(first.prior_response) if second_turn else None,
        other_prior_response=text_or_none(second.prior_response) if second_turn else None,
    )
    return judge.comparison_tasks(
        config.kind,
        item,
        config.kind_options,
        attempt=int(first.replicate),
        # Two-turn rows carry no attachments (checked with the samples).
        images=None if second_turn else first.images,
    )


# Stands for a response still to be generated when prompts are checked before any call.
_TO_BE_GENERATED = "(the response to be generated)"


def check_judge_prompts(samples: pd.DataFrame, config: EvaluateParams) -> None:
    """Build the judge prompt of one row of each kind before anything is called, so that a
    `custom_prompt` or `judge_prompts` template that lacks a field fails before generation
    pays for answers it could never judge.

    Args:
        samples: the samples.
        config: the evaluate parameters.
    """
    if config.custom_prompt is None and not config.judge_prompts:
        return
    judge = Judge(
        config.judge.endpoint,
        sampling=config.judge.sampling,
        connect=False,
        top_logprobs=config.judge_top_logprobs_asked,
    )
    probes = samples.assign(
        response=samples["response"].fillna(_TO_BE_GENERATED),
        has_reference=samples["reference"].map(lambda value: known_reference(value) is not None),
    ).drop_duplicates(["category", "turn", "has_reference"])
    for sample in probes.itertuples():
        category = text_or_none(sample.category)
        try:
            if config.kind.compares:
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


def judge_tasks(samples: pd.DataFrame, config: EvaluateParams, judge: Judge) -> list[JudgeTask]:
    """Every judge call `judge_samples` makes of `samples`, in its order (what a run plan
    prices): one per sample that needs the judge, or both orders of every pair.

    Args:
        samples: the samples.
        config: the evaluate parameters.
        judge: the judge.

    Returns:
        The tasks, in call order.
    """
    if not config.kind.compares:
        plan = [_steps(sample, config, judge) for sample in samples.itertuples()]
        return [step for steps in plan for step in steps if isinstance(step, JudgeTask)]
    return _pair_judge_tasks(_pairs(samples, config.mode), config, judge)


def _pair_step(first: Any, second: Any) -> str | None:
    """The status that stands in for a pair's two calls, None when they are needed: no
    response on a side, or the same text on both (a tie, as AlpacaEval records it)."""
    texts = text_or_none(first.response), text_or_none(second.response)
    if None in texts:
        return NO_RESPONSE
    return IDENTICAL if texts[0] == texts[1] else None


def _identical() -> PairJudgment:
    """The tie of two identical responses, in both orders, without a call."""
    tie = Judgment.without_call(IDENTICAL, {"verdict": "tie", "scores": [None, None]})
    return combine_orders(tie, tie)


def _pair_judge_tasks(
    pairs: list[tuple[Any, Any]], config: EvaluateParams, judge: Judge
) -> list[JudgeTask]:
    tasks: list[JudgeTask] = []
    for first, second in pairs:
        if _pair_step(first, second) is None:
            tasks += _pair_tasks(first, second, config, judge)
            if flagged(first) or flagged(second):  # again, the flagged ones without their spans
                tasks += _pair_tasks(*map(_shown_without_spans, (first, second)), config, judge)
    return tasks


def _shown_without_spans(sample: Any) -> Any:
    return without_spans(sample) if flagged(sample) else sample


def _judge_pairs(samples: pd.DataFrame, config: EvaluateParams, judge: Judge) -> pd.DataFrame:
    pairs = _pairs(samples, config.mode)
    tasks = _pair_judge_tasks(pairs, config, judge)
    judged = iter(judge.run(tasks, desc=f"evaluate [{config.mode}]"))
    records = []
    for first, second in pairs:
        step = _pair_step(first, second)
        combined = None
        if step is None:
            combined = combine_orders(next(judged), next(judged))
            if flagged(first) or flagged(second):
                without = combine_orders(next(judged), next(judged))
                combined = kept_pair(combined, without, flagged(first), flagged(second))
        elif step == IDENTICAL:
            combined = _identical()
        records.append(_pair_record(first, second, combined, config, judge.model))
    judgments = judgment_table(records, config.kind)
    inconsistent = int((judgments["consistent"] == False).sum())  # noqa: E712 - nullable
    logger.info(
        "evaluate (%s): %d pairs, %d with an outcome, %d position-inconsistent (ties), "
        "%d identical (a tie without a call)",
        config.mode,
        len(judgments),
        int(judgments["outcome"].notna().sum()),
        inconsistent,
        int((judgments["parse_status"] == IDENTICAL).sum()),
    )
    return judgments
