"""Reference-based LLM-as-judge evaluation of given (or generated) responses.

The library behind the `evaluate` pipeline; from a notebook, `run_evaluation` does it all:

    config = EvaluationConfig.from_params({"mode": "binary", "judge": "local"})
    samples = prepare_samples(frame, config)        # every check before any call
    samples = generate_responses(samples, config, endpoints, cache_path)
    with Judge(judge_endpoint(config, endpoints), cache_path) as judge:
        judgments = judge_samples(samples, config, judge)
    metrics = compute_metrics(judgments, config)

Input, one row per response to judge: `instance_id`, `question`, `response` (null: generate
it with `generate_with`), `model`, and optionally `reference` (nullable; required column
in the reference modes), `replicate` (default 0), `weight` (non-negative; a null weight
counts as 1) and `prior_question` / `prior_response` / `prior_reference`: the first
exchange of a two-turn conversation, which makes the row turn 2 of its instance (graded
MT-Bench multi-turn style, in mode `single_1_10`).

Modes: `binary` (correct or not against the reference: an exact match after
normalisation skips the call, an unknown reference is "invalid" with no call),
`score_0_5` (0-5 against the reference, "invalid" without one), `single_1_10` (MT-Bench
`[[N]]`, with the reference where there is one), `rubric` (a score per criterion) and
`pairwise` (every two models' responses to the same instance and replicate, judged in
both orders; orders that disagree make a tie).

Each replicate is judged by its own call (its request's `attempt`), so replicates never
share one cached judgment, while a rerun reuses every cached one. A judge reply that
cannot be read is re-asked up to `max_reasks` times (counted in `reasks`) before it is
stored as a missing judgment.
"""

from __future__ import annotations

import itertools
import logging
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient, endpoint_from_env
from llm_feedback.endpoints import resolve_endpoint
from llm_feedback.errors import ConfigError, InputError
from llm_feedback.judges import (
    BINARY_FORMATS,
    SCORE_RANGES,
    Judge,
    JudgeTask,
    aggregate_scores,
    combine_orders,
    exact_match,
    is_unknown_reference,
    pairwise_win_rates,
    pass_at_k_table,
    weighted_accuracy,
)
from llm_feedback.judges.metrics import MISSING_POLICIES

logger = logging.getLogger(__name__)

MODES = ("binary", "score_0_5", "single_1_10", "rubric", "pairwise")
REFERENCE_MODES = ("binary", "score_0_5")
DEFAULT_SCALES = {**SCORE_RANGES, "rubric": (1, 5), "pairwise": (1, 10)}
GENERATION_KEYS = ("temperature", "top_p", "max_tokens", "seed", "stop")

# Statuses of judgments made without a call, next to the parsers' and "call_failed".
EXACT_MATCH = "exact_match"
INVALID = "invalid"
NO_RESPONSE = "no_response"

REQUIRED_COLUMNS = ("instance_id", "question", "response", "model")
PRIOR_COLUMNS = ("prior_question", "prior_response", "prior_reference")

SAMPLE_DTYPES = {
    "instance_id": "string",
    "turn": "int64",
    "model": "string",
    "replicate": "int64",
    "weight": "float64",
    "question": "string",
    "response": "string",
    "reference": "string",
    "prior_question": "string",
    "prior_response": "string",
    "prior_reference": "string",
}
JUDGMENT_DTYPES = {
    "instance_id": "string",
    "turn": "int64",
    "model": "string",
    "replicate": "int64",
    "weight": "float64",
    "mode": "string",
    "criterion": "string",
    "response": "string",
    "score": "float64",
    "correct": "boolean",
    "status": "string",
    "success": "bool",
    "extracted_final_answer": "string",
    "reasoning": "string",
    "confidence": "float64",
    "raw_response": "string",
    "prompt": "string",
    "judge_model": "string",
    "cached": "bool",
    "error": "string",
    "reasks": "int64",
}
PAIRWISE_DTYPES = {
    "instance_id": "string",
    "turn": "int64",
    "replicate": "int64",
    "mode": "string",
    "model_a": "string",
    "model_b": "string",
    "verdict_a_first": "string",  # both verdicts say "A" when model_a's response won
    "verdict_b_first": "string",
    "outcome": "string",
    "consistent": "boolean",
    "score_a": "float64",
    "score_b": "float64",
    "status": "string",
    "success": "bool",
    "raw_response_a_first": "string",
    "raw_response_b_first": "string",
    "prompt_a_first": "string",
    "prompt_b_first": "string",
    "judge_model": "string",
    "cached": "bool",
    "error": "string",
    "reasks": "int64",  # both orders together
}
METRIC_DTYPES = {
    "mode": "string",
    "model": "string",
    "metric": "string",
    "criterion": "string",
    "k": "Int64",
    "value": "float64",
    "n": "int64",
    "n_missing": "int64",
}
# What tells one sample (and its judge call) from another.
SAMPLE_KEYS = ("instance_id", "turn", "model", "replicate")


# --- configuration ----------------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _optional_count(name: str, value: object) -> None:
    if value is not None and not (_is_int(value) and value >= 1):
        raise ConfigError(f"evaluate.{name} must be null or an integer >= 1, got {value!r}")


def _check_sampling(name: str, sampling: object) -> None:
    if not isinstance(sampling, Mapping):
        raise ConfigError(f"evaluate.{name} must be a mapping, got {sampling!r}")
    unknown = sorted(set(sampling) - set(GENERATION_KEYS))
    if unknown:
        raise ConfigError(
            f"evaluate.{name}: unknown setting(s) {unknown}; allowed: {', '.join(GENERATION_KEYS)}"
        )


@dataclass(frozen=True)
class EvaluationConfig:
    """The `evaluate` parameters, checked before anything is called."""

    mode: str = "binary"
    judge: str | Mapping[str, Any] = "local"  # an endpoint name, "env", or an inline endpoint
    judge_sampling: Mapping[str, Any] = field(default_factory=dict)
    binary_reply: str = "graded"
    score_range: tuple[int, int] | None = None
    missing: str = "zero"
    max_reasks: int = 1
    rubric: Mapping[str, str] = field(default_factory=dict)
    custom_prompt: str | None = None
    n_replicates: int | None = None
    max_instances: int | None = None
    ks: tuple[int, ...] | None = None
    overwrite_results: bool = False
    overwrite_outputs: bool = False
    generate_with: str | Mapping[str, str] | None = None
    generation: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"evaluate.mode must be one of {MODES}, got {self.mode!r}")
        if self.missing not in MISSING_POLICIES:
            raise ConfigError(
                f"evaluate.missing must be one of {MISSING_POLICIES}, got {self.missing!r}"
            )
        if self.binary_reply not in BINARY_FORMATS:
            raise ConfigError(
                f"evaluate.binary_reply must be one of {BINARY_FORMATS}, got {self.binary_reply!r}"
            )
        if not isinstance(self.judge, str | Mapping):
            raise ConfigError(f"evaluate.judge must be an endpoint name or mapping: {self.judge!r}")
        if not (_is_int(self.max_reasks) and self.max_reasks >= 0):
            raise ConfigError(
                f"evaluate.max_reasks must be an integer >= 0, got {self.max_reasks!r}"
            )
        _check_sampling("judge_sampling", self.judge_sampling)
        _check_sampling("generation", self.generation)
        self._check_score_range()
        if self.mode == "rubric" and (not isinstance(self.rubric, Mapping) or not self.rubric):
            raise ConfigError("evaluate.rubric must map criterion names to descriptions")
        if self.custom_prompt is not None and not isinstance(self.custom_prompt, str):
            raise ConfigError("evaluate.custom_prompt must be null or a str.format template")
        _optional_count("n_replicates", self.n_replicates)
        _optional_count("max_instances", self.max_instances)
        if self.ks is not None:
            if isinstance(self.ks, str) or not all(_is_int(k) and k >= 1 for k in self.ks):
                raise ConfigError(f"evaluate.ks must be null or integers >= 1, got {self.ks!r}")
            object.__setattr__(self, "ks", tuple(self.ks))
        for flag in ("overwrite_results", "overwrite_outputs"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"evaluate.{flag} must be true or false")
        if self.overwrite_outputs and not self.overwrite_results:
            raise ConfigError(
                "evaluate.overwrite_outputs regenerates the responses, which makes every "
                "stored judgment of them stale: set evaluate.overwrite_results: true as well"
            )
        self._check_generate_with()

    def _check_score_range(self) -> None:
        if self.score_range is None:
            return
        value = self.score_range
        if (
            isinstance(value, str)
            or not isinstance(value, Sequence)
            or len(value) != 2
            or not all(_is_int(bound) for bound in value)
            or value[0] >= value[1]
        ):
            raise ConfigError(f"evaluate.score_range must be [low, high] integers, got {value!r}")
        scale = (value[0], value[1])
        if self.mode in SCORE_RANGES and scale != SCORE_RANGES[self.mode]:
            raise ConfigError(
                f"evaluate.score_range: mode {self.mode} grades on the fixed scale "
                f"{list(SCORE_RANGES[self.mode])}, got {list(scale)}; leave it null"
            )
        object.__setattr__(self, "score_range", scale)

    def _check_generate_with(self) -> None:
        target = self.generate_with
        if target is None or isinstance(target, str):
            return
        if not isinstance(target, Mapping) or not all(
            isinstance(name, str) for name in target.values()
        ):
            raise ConfigError(
                "evaluate.generate_with must be null, an endpoint name, or a mapping "
                f"{{model: endpoint name}}; got {target!r}"
            )

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> EvaluationConfig:
        params = dict(params or {})
        allowed = [item.name for item in fields(cls)]
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise ConfigError(
                f"evaluate: unknown parameter(s) {unknown}; allowed: {', '.join(allowed)}"
            )
        return cls(**params)

    @property
    def scale(self) -> tuple[int, int]:
        """The score scale: fixed for binary / 0-5 / 1-10, `score_range` or default else."""
        return self.score_range or DEFAULT_SCALES[self.mode]

    def generator_for(self, model: str) -> str | None:
        """The endpoint that generates `model`'s missing responses, or None."""
        if isinstance(self.generate_with, Mapping):
            return self.generate_with.get(model)
        return self.generate_with


def judge_endpoint(config: EvaluationConfig, endpoints: Mapping[str, Any]) -> EndpointConfig:
    """The judge's endpoint: a name from `endpoints`, "env" (environment), or inline."""
    if config.judge == "env" and "env" not in (endpoints or {}):
        return endpoint_from_env()
    return resolve_endpoint(config.judge, endpoints)


# --- samples ----------------------------------------------------------------------------


def _values(frame: pd.DataFrame, column: str) -> list[Any]:
    """A column as Python objects, None for every kind of missing value."""
    if column not in frame.columns:
        return [None] * len(frame)
    series = frame[column].astype(object)
    return series.where(series.notna(), None).tolist()


class _RowChecker:
    """Checks columns value by value; `fail` makes the InputError naming row and column."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self._instance_ids = _values(frame, "instance_id")

    def fail(self, row: int, column: str, problem: str) -> InputError:
        instance = self._instance_ids[row]
        where = f"eval_samples row {row}" + (f" (instance_id {instance!r})" if instance else "")
        return InputError(f"{where}, column {column!r}: {problem}")

    def text(self, values: list[Any], column: str, *, required: bool) -> list[str | None]:
        for row, value in enumerate(values):
            if value is None:
                if required:
                    raise self.fail(row, column, "is empty")
            elif not isinstance(value, str):
                raise self.fail(row, column, f"must be text, got {type(value).__name__}")
            elif required and not value.strip():
                raise self.fail(row, column, "is empty")
        return values

    def instance_ids(self, values: list[Any]) -> list[str]:
        for row, value in enumerate(values):
            if not (_is_int(value) or (isinstance(value, str) and value.strip())):
                raise self.fail(row, "instance_id", f"must be a non-empty string or an integer, "
                                                    f"got {value!r}")
        return [str(value) for value in values]

    def replicates(self, values: list[Any], present: bool) -> list[int]:
        if not present:
            return [0] * len(values)
        checked = []
        for row, value in enumerate(values):
            # JSON readers turn an integer column with a gap into floats: accept 1.0.
            is_whole = isinstance(value, numbers.Real) and not isinstance(value, bool) and (
                float(value).is_integer()
            )
            if not is_whole or value < 0:
                raise self.fail(row, "replicate", f"must be an integer >= 0, got {value!r}")
            checked.append(int(value))
        return checked

    def weights(self, values: list[Any]) -> list[float]:
        checked = []
        for row, value in enumerate(values):
            if value is None:
                checked.append(math.nan)
                continue
            if (
                not isinstance(value, numbers.Real)
                or isinstance(value, bool)
                or not math.isfinite(value)
                or value < 0
            ):
                raise self.fail(row, "weight", f"must be a number >= 0, got {value!r}")
            checked.append(float(value))
        return checked


def validate_samples(frame: pd.DataFrame, config: EvaluationConfig) -> pd.DataFrame:
    """The checked samples with the columns of `SAMPLE_DTYPES` and a `turn`.

    The index is the input's row number, which every later error names.
    """
    if not isinstance(frame, pd.DataFrame):
        raise InputError(f"eval_samples must be a DataFrame, got {type(frame).__name__}")
    required = list(REQUIRED_COLUMNS) + (["reference"] if config.mode in REFERENCE_MODES else [])
    missing = [column for column in required if column not in frame.columns]
    if missing:
        raise InputError(
            f"eval_samples: missing column(s) {missing}; it has {list(frame.columns)}"
        )
    if frame.empty:
        raise InputError("eval_samples has no rows")
    frame = frame.reset_index(drop=True)
    check = _RowChecker(frame)
    prior = {column: _values(frame, column) for column in PRIOR_COLUMNS}
    samples = pd.DataFrame(
        {
            "instance_id": check.instance_ids(_values(frame, "instance_id")),
            "model": check.text(_values(frame, "model"), "model", required=True),
            "replicate": check.replicates(
                _values(frame, "replicate"), "replicate" in frame.columns
            ),
            "weight": check.weights(_values(frame, "weight")),
            "question": check.text(_values(frame, "question"), "question", required=True),
            "response": check.text(_values(frame, "response"), "response", required=False),
            "reference": check.text(_values(frame, "reference"), "reference", required=False),
            **{
                column: check.text(values, column, required=False)
                for column, values in prior.items()
            },
        }
    )
    samples["turn"] = [1 if question is None else 2 for question in prior["prior_question"]]
    for row, (question, response) in enumerate(
        zip(prior["prior_question"], prior["prior_response"], strict=True)
    ):
        if (question is None) != (response is None):
            column = "prior_response" if response is None else "prior_question"
            raise check.fail(row, column, "prior_question and prior_response go together")
        if question is not None and config.mode != "single_1_10":
            raise check.fail(
                row, "prior_question",
                f"two-turn rows are judged in mode single_1_10 only, not {config.mode}",
            )
    _check_unique_keys(samples, check)
    _check_same_question(samples, check)
    return samples[list(SAMPLE_DTYPES)].astype(SAMPLE_DTYPES)


def _check_unique_keys(samples: pd.DataFrame, check: _RowChecker) -> None:
    keys = list(SAMPLE_KEYS)
    repeated = samples.duplicated(keys, keep=False)
    if repeated.any():
        rows = samples.index[repeated]
        first = samples.loc[rows[0], keys].tolist()
        twins = [row for row in rows if samples.loc[row, keys].tolist() == first]
        raise check.fail(int(twins[1]), "instance_id",
                         f"(instance_id, turn, model, replicate) {tuple(first)} repeats row "
                         f"{twins[0]}")


def _check_same_question(samples: pd.DataFrame, check: _RowChecker) -> None:
    for _, group in samples.groupby(["instance_id", "turn"], sort=False):
        differing = group.index[group["question"] != group["question"].iloc[0]]
        if len(differing):
            raise check.fail(int(differing[0]), "question",
                             f"differs from row {group.index[0]} of the same instance and turn")


def select_samples(samples: pd.DataFrame, config: EvaluationConfig) -> pd.DataFrame:
    """`max_instances` first instances; replicates 0..n_replicates-1 of each response.

    A missing replicate becomes a row to generate, which needs `generate_with`.
    """
    if config.max_instances is not None:
        kept = samples["instance_id"].drop_duplicates().iloc[: config.max_instances]
        samples = samples[samples["instance_id"].isin(kept)]
    if config.n_replicates is None:
        return samples
    samples = samples[samples["replicate"] < config.n_replicates]
    added = []
    for (instance_id, turn, model), group in samples.groupby(
        ["instance_id", "turn", "model"], sort=False
    ):
        absent = sorted(set(range(config.n_replicates)) - set(group["replicate"]))
        if absent and config.generator_for(model) is None:
            raise InputError(
                f"eval_samples: instance_id {instance_id!r} turn {turn} model {model!r} has "
                f"replicates {sorted(group['replicate'])} but evaluate.n_replicates is "
                f"{config.n_replicates}: set evaluate.generate_with to generate the others"
            )
        for replicate in absent:
            added.append({**group.iloc[0].to_dict(), "replicate": replicate, "response": None})
    if not added:
        return samples
    start = int(samples.index.max()) + 1
    extra = pd.DataFrame(added, index=range(start, start + len(added))).astype(SAMPLE_DTYPES)
    return pd.concat([samples, extra])


def prepare_samples(frame: pd.DataFrame, config: EvaluationConfig) -> pd.DataFrame:
    """Validate and select the samples; every row without a response must be generable."""
    samples = select_samples(validate_samples(frame, config), config)
    for row, response, model in zip(
        samples.index, samples["response"], samples["model"], strict=True
    ):
        if pd.isna(response) and config.generator_for(model) is None:
            raise InputError(
                f"eval_samples row {row} (instance_id {samples.at[row, 'instance_id']!r}), "
                f"column 'response': is empty and evaluate.generate_with names no endpoint "
                f"for model {model!r}"
            )
    return samples


# --- generation ---------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    return None if value is None or pd.isna(value) else str(value)


def _generation_request(sample: Any, sampling: Mapping[str, Any]) -> ChatRequest:
    messages: list[dict[str, str]] = []
    if sample.turn == 2:
        messages += [
            {"role": "user", "content": sample.prior_question},
            {"role": "assistant", "content": sample.prior_response},
        ]
    messages.append({"role": "user", "content": sample.question})
    settings = dict(sampling)
    stop = settings.pop("stop", None)
    # The replicate is the attempt: replicates are separate samples, each cached.
    return ChatRequest(
        messages=tuple(messages),
        stop=tuple(stop) if stop else None,
        attempt=int(sample.replicate),
        **settings,
    )


def generate_responses(
    samples: pd.DataFrame,
    config: EvaluationConfig,
    endpoints: Mapping[str, Any],
    cache_path: str | Path | None,
    progress: bool = True,
) -> pd.DataFrame:
    """Fill every empty `response` from its model's `generate_with` endpoint.

    Answers are cached like judgments; `overwrite_outputs` asks again. A failed call
    leaves the response empty and its error in `generation_error`.
    """
    samples = samples.copy()
    samples["generation_error"] = pd.Series(pd.NA, index=samples.index, dtype="string")
    todo = samples[samples["response"].isna()]
    if todo.empty:
        return samples
    generators = todo["model"].map(config.generator_for)
    for endpoint_name, rows in todo.groupby(generators, sort=True):
        endpoint = resolve_endpoint(endpoint_name, endpoints)
        requests = [_generation_request(row, config.generation) for row in rows.itertuples()]
        with LLMClient(
            endpoint, cache_path, progress=progress, refresh=config.overwrite_outputs
        ) as client:
            replies = client.complete_many(requests, desc=f"evaluate: generate [{endpoint_name}]")
        for row, reply in zip(rows.index, replies, strict=True):
            if reply.ok:
                samples.at[row, "response"] = reply.text
            else:
                samples.at[row, "generation_error"] = reply.error
    failed = int(samples["generation_error"].notna().sum())
    logger.info("evaluate: generated %d responses, %d failed", len(todo) - failed, failed)
    return samples


# --- judging ------------------------------------------------------------------------------


def _known_reference(value: Any) -> str | None:
    return None if is_unknown_reference(value) else str(value)


def _plan(sample: Any, config: EvaluationConfig, judge: Judge) -> JudgeTask | str:
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
    sample: Any, response: str, reference: str | None, config: EvaluationConfig, judge: Judge
) -> JudgeTask:
    options: dict[str, Any] = {"custom_prompt": config.custom_prompt,
                               "attempt": int(sample.replicate)}
    question = str(sample.question)
    if config.mode == "binary":
        return judge.binary_task(
            question, reference, response, output_format=config.binary_reply, **options
        )
    if config.mode == "rubric":
        return judge.rubric_task(
            question, response, config.rubric, score_range=config.scale, reference=reference,
            **options,
        )
    if sample.turn == 2:
        prior_reference = _known_reference(sample.prior_reference)
        references = (
            None if prior_reference is None or reference is None else [prior_reference, reference]
        )
        return judge.multi_turn_task(
            [str(sample.prior_question), question], [str(sample.prior_response), response],
            references=references, **options,
        )
    return judge.single_task(
        question, response, reference=reference, score_range=config.scale, **options
    )


def _sample_fields(sample: Any, config: EvaluationConfig, judge_model: str) -> dict[str, Any]:
    return {
        "instance_id": sample.instance_id,
        "turn": sample.turn,
        "model": sample.model,
        "replicate": sample.replicate,
        "weight": sample.weight,
        "mode": config.mode,
        "response": _text(sample.response),
        "judge_model": judge_model,
    }


def _records_without_call(
    sample: Any, status: str, config: EvaluationConfig, judge_model: str
) -> list[dict[str, Any]]:
    record = {
        **_sample_fields(sample, config, judge_model),
        "status": status,
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
    sample: Any, outcome: Mapping[str, Any], config: EvaluationConfig
) -> list[dict[str, Any]]:
    record = {
        **_sample_fields(sample, config, outcome["model"]),
        "status": outcome["status"],
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


def judge_samples(samples: pd.DataFrame, config: EvaluationConfig, judge: Judge) -> pd.DataFrame:
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
    judgments = pd.DataFrame(records, columns=list(JUDGMENT_DTYPES)).astype(JUDGMENT_DTYPES)
    _log_summary(judgments, config)
    return judgments


def _log_summary(judgments: pd.DataFrame, config: EvaluationConfig) -> None:
    statuses = judgments["status"]
    called = ~statuses.isin([EXACT_MATCH, INVALID, NO_RESPONSE])
    parsed = int((called & judgments["success"]).sum())
    logger.info(
        "evaluate (%s): %d judgments; %d by the judge, %d of them parsed (%.1f%%); "
        "%d exact matches, %d invalid (unknown reference), %d without a response",
        config.mode, len(judgments), int(called.sum()), parsed,
        100.0 * parsed / max(int(called.sum()), 1), int((statuses == EXACT_MATCH).sum()),
        int((statuses == INVALID).sum()), int((statuses == NO_RESPONSE).sum()),
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
        "mode": "pairwise",
        "model_a": first.model,
        "model_b": second.model,
        "judge_model": judge_model,
    }
    if combined is None:
        errors = [_text(getattr(sample, "generation_error", None)) for sample in (first, second)]
        return record | {"status": NO_RESPONSE, "success": False, "cached": False,
                         "error": next((error for error in errors if error), None),
                         "reasks": 0}
    result = combined["result"]
    return record | {
        "verdict_a_first": result["verdicts"][0],
        "verdict_b_first": result["verdicts"][1],
        "outcome": result["winner"],
        "consistent": result["consistent"],
        "score_a": result["scores"][0],
        "score_b": result["scores"][1],
        "status": combined["status"],
        "success": combined["success"],
        "raw_response_a_first": combined["raw_response"][0],
        "raw_response_b_first": combined["raw_response"][1],
        "prompt_a_first": combined["prompt"][0],
        "prompt_b_first": combined["prompt"][1],
        "cached": combined["cached"],
        "error": combined["error"],
        "reasks": combined["reasks"],
    }


def _judge_pairs(samples: pd.DataFrame, config: EvaluationConfig, judge: Judge) -> pd.DataFrame:
    pairs = _pairs(samples)
    tasks: list[JudgeTask] = []
    for first, second in pairs:
        if _text(first.response) is None or _text(second.response) is None:
            continue
        reference = _known_reference(first.reference)
        options: dict[str, Any] = {
            "context": None if reference is None else f"Reference answer: {reference}",
            "score_range": config.scale,
            "custom_prompt": config.custom_prompt,
            "attempt": int(first.replicate),
        }
        tasks += [
            judge.pairwise_task(first.question, first.response, second.response, **options),
            judge.pairwise_task(first.question, second.response, first.response, **options),
        ]
    outcomes = iter(judge.run(tasks, desc="evaluate [pairwise]"))
    records = []
    for first, second in pairs:
        judged = _text(first.response) is not None and _text(second.response) is not None
        combined = combine_orders(next(outcomes), next(outcomes)) if judged else None
        records.append(_pair_record(first, second, combined, judge.model))
    judgments = pd.DataFrame(records, columns=list(PAIRWISE_DTYPES)).astype(PAIRWISE_DTYPES)
    inconsistent = int((judgments["consistent"] == False).sum())  # noqa: E712 - nullable
    logger.info(
        "evaluate (pairwise): %d pairs, %d with an outcome, %d position-inconsistent (ties)",
        len(judgments), int(judgments["outcome"].notna().sum()), inconsistent,
    )
    return judgments


# --- metrics ------------------------------------------------------------------------------


def _metric(
    model: str,
    metric: str,
    value: float,
    *,
    n: int,
    n_missing: int = 0,
    criterion: str | None = None,
    k: int | None = None,
) -> dict[str, Any]:
    return {"model": model, "metric": metric, "criterion": criterion, "k": k, "value": value,
            "n": n, "n_missing": n_missing}


def _weighted_metrics(
    part: pd.DataFrame, config: EvaluationConfig, criterion: str | None
) -> list[dict[str, Any]]:
    """Accuracy (binary) or normalised mean (0-100) with each response's weight."""
    low, high = config.scale
    fraction = (part["score"] - low) / (high - low)
    if config.missing == "zero":
        fraction = fraction.fillna(0.0)
    weights = part["weight"].fillna(1.0)
    binary = config.mode == "binary"
    rows = []
    for model, index in part.groupby("model", sort=True).groups.items():
        value = weighted_accuracy(fraction[index], weights[index])
        rows.append(_metric(
            model,
            "weighted_accuracy" if binary else "weighted_normalised_mean",
            value if binary else 100.0 * value,
            n=int(fraction[index].notna().sum()),
            n_missing=int(part.loc[index, "score"].isna().sum()),
            criterion=criterion,
        ))
    return rows


def _pass_at_k_metrics(judged: pd.DataFrame, config: EvaluationConfig) -> list[dict[str, Any]]:
    items = judged.assign(item=judged["instance_id"] + "#" + judged["turn"].astype("string"))
    table = pass_at_k_table(items, "item", "score", config.ks, missing=config.missing)
    return [
        _metric(row.model, "pass_at_k", row.pass_at_k, n=row.n_instances,
                n_missing=row.n_missing, k=row.k)
        for row in table.itertuples()
    ]


def _pointwise_metrics(judgments: pd.DataFrame, config: EvaluationConfig) -> list[dict[str, Any]]:
    low, high = config.scale
    invalid = judgments["status"] == INVALID
    rows = []
    if config.mode in REFERENCE_MODES:
        rows += [
            _metric(model, "n_invalid", float(group_invalid.sum()), n=len(group_invalid))
            for model, group_invalid in invalid.groupby(judgments["model"], sort=True)
        ]
    judged = judgments[~invalid]
    if config.mode == "binary":
        exact = judged["status"] == EXACT_MATCH
        rows += [
            _metric(model, "n_exact_match", float(group.sum()), n=len(group))
            for model, group in exact.groupby(judged["model"], sort=True)
        ]
    parts = [(None, judged)]
    if config.mode == "rubric":
        parts = [(name, judged[judged["criterion"] == name]) for name in config.rubric] + parts
    for criterion, part in parts:
        if part.empty:
            continue
        summary = aggregate_scores(part, "score", low=low, high=high, missing=config.missing)
        for row in summary.itertuples():
            for metric in ("mean", "normalised_mean"):
                rows.append(_metric(row.model, metric, getattr(row, metric), n=row.n,
                                    n_missing=row.n_missing, criterion=criterion))
        if part["weight"].notna().any():
            rows += _weighted_metrics(part, config, criterion)
    if config.mode == "binary" and not judged.empty:
        rows += _pass_at_k_metrics(judged, config)
    # A rubric call makes one row per criterion, each with the call's re-asks: count it once.
    calls = judgments.drop_duplicates(list(SAMPLE_KEYS))
    rows += [
        _metric(model, "n_reasks", float(group.sum()), n=len(group))
        for model, group in calls["reasks"].groupby(calls["model"], sort=True)
    ]
    return rows


def _pairwise_metrics(judgments: pd.DataFrame) -> list[dict[str, Any]]:
    rows = []
    table = pairwise_win_rates(judgments, "model_a", "model_b", "outcome")
    for row in table.itertuples():
        rows.append(_metric(row.model, "win_rate", row.win_rate, n=row.n,
                            n_missing=row.n_missing))
        rows += [
            _metric(row.model, name, float(getattr(row, name)), n=row.n, n_missing=row.n_missing)
            for name in ("wins", "losses", "ties")
        ]
        involved = (judgments["model_a"] == row.model) | (judgments["model_b"] == row.model)
        inconsistent = involved & (judgments["consistent"] == False)  # noqa: E712 - nullable
        rows.append(_metric(row.model, "n_inconsistent", float(inconsistent.sum()),
                            n=int(involved.sum()), n_missing=row.n_missing))
        rows.append(_metric(row.model, "n_reasks", float(judgments.loc[involved, "reasks"].sum()),
                            n=int(involved.sum())))
    return rows


def compute_metrics(judgments: pd.DataFrame, config: EvaluationConfig) -> pd.DataFrame:
    """Long-format metrics: one row per (model, metric, criterion, k).

    Pointwise modes: `mean` and `normalised_mean` (0-100) per model (and per criterion
    in rubric mode), `weighted_accuracy` / `weighted_normalised_mean` when weights are
    given; binary and score_0_5 add `n_invalid` (unknown references), binary also
    `n_exact_match` and `pass_at_k` for each k (default 1..replicates). Pairwise:
    `win_rate`, `wins`, `losses`, `ties`, `n_inconsistent`. Every mode: `n_reasks`, the
    judge's re-asks of unreadable replies over the model's judgments (pairwise: over the
    pairs it is in, both orders).
    `n_missing` counts the judgments without a usable value (unparsed replies, failed
    calls, missing responses): as the scale minimum with `missing: zero`, left out with
    `exclude`; invalid judgments are never counted.
    """
    if config.mode == "pairwise":
        rows = _pairwise_metrics(judgments)
    else:
        rows = _pointwise_metrics(judgments, config)
    metrics = pd.DataFrame(rows, columns=list(METRIC_DTYPES))
    metrics["mode"] = config.mode
    return metrics.astype(METRIC_DTYPES)


def run_evaluation(
    eval_samples: pd.DataFrame,
    params: Mapping[str, Any],
    endpoints: Mapping[str, Any],
    cache_path: str | Path | None = None,
    progress: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The whole evaluation outside Kedro: (judgments, metrics) of `eval_samples`."""
    config = EvaluationConfig.from_params(params)
    endpoint = judge_endpoint(config, endpoints)
    samples = prepare_samples(eval_samples, config)
    samples = generate_responses(samples, config, endpoints, cache_path, progress)
    with Judge(endpoint, cache_path, refresh=config.overwrite_results, progress=progress,
               sampling=config.judge_sampling, max_reasks=config.max_reasks) as judge:
        judgments = judge_samples(samples, config, judge)
    return judgments, compute_metrics(judgments, config)
