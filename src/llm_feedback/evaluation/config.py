"""The typed configuration of an evaluation (`EvaluateParams`) and of a panel of judges
(`PanelParams`), checked as a whole before anything is called; `params/evaluate.py` and
`params/panel.py` map the YAML onto them. The modes are the judge kinds of
`llm_feedback.judges.kinds`, which also hold their scales."""

from __future__ import annotations

import importlib
import inspect
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_feedback.backends import EndpointConfig
from llm_feedback.backends.base import kind_of
from llm_feedback.backends.contract import check_sampling
from llm_feedback.backends.token_logprobs import MAX_TOP_LOGPROBS
from llm_feedback.core.errors import ConfigError
from llm_feedback.evaluation.benchmarks import check_benchmark_prompts
from llm_feedback.judges import (
    PAIRWISE,
    JudgeKind,
    KindOptions,
    get_kind,
    kind_names,
    load_kind,
    template_fields,
)
from llm_feedback.judges.config import JudgeParams
from llm_feedback.judges.metrics import MISSING_POLICIES
from llm_feedback.params.report import JudgeRequirement

AGGREGATES = ("mean", "majority")
# `evaluate.samples_format`: native eval_samples rows, a gold-labelled format of
# `validation.formats` or recorded pairwise verdicts (`recorded`); auto detects it
# (`sample_files`).
SAMPLES_FORMATS = (
    "auto",
    "native",
    "llmbar",
    "pandalm",
    "mtbench_human",
    "jsonl",
    "viewer",
    "alpaca_eval",
    "arena_hard",
)
# Names the agreement metrics give to the aggregate, a recording and a lone judge.
PANEL, RECORDED, LONE_JUDGE = "panel", "recorded", "judge"
RESERVED_NAMES = (PANEL, RECORDED, LONE_JUDGE)


@dataclass(frozen=True)
class PanelParams:
    """The panel's judges by name, in the configured order, and how their verdicts combine:
    `mean` (of scores; of pairwise outcomes as A = +1, tie = 0, B = -1) or `majority` (the
    verdict or score most judges gave; none when the most given ones tie)."""

    judges: Mapping[str, JudgeParams]
    aggregate: str

    def __post_init__(self) -> None:
        if self.aggregate not in AGGREGATES:
            raise ConfigError(
                f"evaluate.panel.aggregate must be one of {', '.join(AGGREGATES)}, "
                f"got {self.aggregate!r}"
            )


@dataclass(frozen=True)
class EvalIntervalParams:
    # Clustered bootstrap over instance_id (llm_feedback.stats) for eval_metrics' intervals.
    n_resamples: int = 1000
    seed: int = 0
    confidence: float = 0.95

    @property
    def kwargs(self) -> dict[str, Any]:
        return {"n_resamples": self.n_resamples, "seed": self.seed, "confidence": self.confidence}


@dataclass(frozen=True)
class EvalRankingParams:
    # The model win rates and mean differences are measured against; None: first by name.
    baseline: str | None = None
    # AlpacaEval's df_gamed.csv (instruction difficulty and the gamed baselines' rows): with
    # it eval_alpaca_eval has length_controlled_v1 and the noreg difficulty is the file's.
    alpaca_eval_gamed: str | None = None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def load_evaluator(spec: str, options: Mapping[str, Any]) -> Callable[[Mapping, str], Any]:
    """`package.module:name` as a scorer `(sample, response) -> score`: a function called
    with `options` as keyword arguments, or a class built with `options` whose
    `evaluate_sample(sample, response)` scores. Errors name `evaluate.evaluator` (or
    `evaluate.evaluator_options`).

    Args:
        spec: `package.module:name`.
        options: keyword arguments for it.

    Returns:
        The scorer.
    """
    where = "evaluate.evaluator"
    module_name, _, attribute = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if not module_name or not attribute:
        raise ConfigError(f"{where} must be 'package.module:function' (or :Class), got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(f"{where}: cannot import module {module_name!r}: {error}") from error
    target = getattr(module, attribute, None)
    if target is None:
        raise ConfigError(f"{where}: module {module_name!r} has no {attribute!r}")
    if not isinstance(options, Mapping):
        raise ConfigError(f"{where}_options must be a mapping, got {options!r}")
    if inspect.isclass(target):
        if not callable(getattr(target, "evaluate_sample", None)):
            raise ConfigError(f"{where}: class {spec!r} has no evaluate_sample method")
        try:
            return target(**options).evaluate_sample
        except (TypeError, ValueError) as error:
            raise ConfigError(f"{where}_options do not suit {spec!r}: {error}") from error
    if not callable(target):
        raise ConfigError(f"{where}: {spec!r} is neither a function nor a class")
    try:
        inspect.signature(target).bind(None, None, **options)
    except TypeError as error:
        raise ConfigError(
            f"{where}_options do not suit {spec!r}, called as (sample, response, **options): "
            f"{error}"
        ) from error
    return lambda sample, response: target(sample, response, **options)


def _optional_count(name: str, value: object) -> None:
    if value is not None and not (_is_int(value) and value >= 1):
        raise ConfigError(f"evaluate.{name} must be null or an integer >= 1, got {value!r}")


@dataclass(frozen=True)
class EvaluateParams:
    """The `evaluate` parameters, checked before anything is called (see `parse_evaluate`).

    `generate_with` holds the resolved endpoint(s) that generate missing responses: one for
    every model, or one per model name. Either `judge` or `panel` is set, never both.
    `evaluator` (`package.module:function` or `:Class`, see `load_evaluator`) scores
    responses on 0-1 in place of any judge. `pass_threshold`: a score at or above it is a
    pass for pass@k (binary: 1 by default).
    """

    judge: JudgeParams | None
    mode: str = "binary"
    binary_reply: str = "graded"
    score_range: tuple[int, int] | None = None
    missing: str = "zero"
    max_reasks: int = 1
    rubric: Mapping[str, str] = field(default_factory=dict)
    custom_prompt: str | None = None
    n_replicates: int | None = None
    max_instances: int | None = None
    ks: tuple[int, ...] | None = None
    pass_threshold: float | None = None
    evaluator: str | None = None
    evaluator_options: Mapping[str, Any] = field(default_factory=dict)
    overwrite_results: bool = False
    overwrite_outputs: bool = False
    generate_with: EndpointConfig | Mapping[str, EndpointConfig] | None = None
    generation: Mapping[str, Any] = field(default_factory=dict)
    # Around each question sent to the model under test (lmms-eval's doc_to_text).
    pre_prompt: str = ""
    post_prompt: str = ""
    # The benchmark of rows that name none (null: the samples file's name), and a
    # {benchmark: {pre_prompt, post_prompt}} template per benchmark (`evaluation.benchmarks`).
    benchmark: str | None = None
    benchmark_prompts: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # {category: template text or file}: the judge prompt of rows with that `category`.
    judge_prompts: Mapping[str, str] = field(default_factory=dict)
    panel: PanelParams | None = None
    # The samples file's format (`sample_files.SAMPLES_FORMATS`); auto detects and logs it.
    samples_format: str = "auto"
    # Media files of the samples must resolve inside this folder (null: the samples file's
    # folder), unless allow_media_outside.
    media_root: str | None = None
    allow_media_outside: bool = False
    # The name judge cards give the gold-labelled samples; null: the file's folder and name.
    validation_set: str | None = None
    # The judge's token probabilities, for probability verdicts beside the argmax ones:
    # "auto" asks where its backend returns them, true requires that, false never asks.
    judge_logprobs: str | bool = "auto"
    judge_top_logprobs: int = 5
    intervals: EvalIntervalParams = field(default_factory=EvalIntervalParams)
    ranking: EvalRankingParams = field(default_factory=EvalRankingParams)
    # What the judge's card must show for eval_metrics and the ranking to be written (none:
    # no gate); see `validation.gate`.
    judge_requirement: tuple[JudgeRequirement, ...] = ()
    # The loaded `evaluator` (set by the checks; None without one).
    scorer: Callable[[Mapping, str], Any] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if (self.judge is None) == (self.panel is None):
            raise ConfigError("evaluate: give one judge or a panel of judges")
        if self.judge_requirement and (self.panel is not None or self.evaluator is not None):
            raise ConfigError(
                "evaluate.judge_requirement: "
                + ("a panel of judges" if self.panel is not None else "evaluate.evaluator")
                + " has no single judge's card to check; set evaluate.judge_requirement: null"
            )
        if self.panel is not None and self.evaluator is not None:
            raise ConfigError(
                "evaluate.evaluator scores in place of any judge: set evaluate.panel: null"
            )
        # A registered kind's name, or `package.module:KIND`: imported and registered.
        kind = load_kind(self.mode, "evaluate.mode")
        object.__setattr__(self, "mode", kind.name)
        if (
            self.panel is not None
            and self.panel.aggregate == "mean"
            and kind.categorical
            and kind.family != PAIRWISE
        ):
            raise ConfigError(
                f"evaluate.panel.aggregate: the mean of {kind.name} verdicts is not a verdict "
                "(pass@k counts 0/1); use majority, with an odd number of judges to avoid ties"
            )
        if self.missing not in MISSING_POLICIES:
            raise ConfigError(
                f"evaluate.missing must be one of {MISSING_POLICIES}, got {self.missing!r}"
            )
        # The reply format of the kinds that have several (binary's "0/1", "yes/no", "graded").
        if kind.reply_formats and self.binary_reply not in kind.reply_formats:
            raise ConfigError(
                f"evaluate.binary_reply must be one of {tuple(kind.reply_formats)}, "
                f"got {self.binary_reply!r}"
            )
        if not (_is_int(self.max_reasks) and self.max_reasks >= 0):
            raise ConfigError(
                f"evaluate.max_reasks must be an integer >= 0, got {self.max_reasks!r}"
            )
        object.__setattr__(
            self, "generation", check_sampling(self.generation, "evaluate.generation")
        )
        self._check_score_range()
        if kind.uses_criteria and (not isinstance(self.rubric, Mapping) or not self.rubric):
            raise ConfigError("evaluate.rubric must map criterion names to descriptions")
        if self.custom_prompt is not None and not isinstance(self.custom_prompt, str):
            raise ConfigError("evaluate.custom_prompt must be null or a str.format template")
        for name in ("pre_prompt", "post_prompt"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(f"evaluate.{name} must be text, got {getattr(self, name)!r}")
        if self.benchmark is not None and not (
            isinstance(self.benchmark, str) and self.benchmark.strip()
        ):
            raise ConfigError(f"evaluate.benchmark must be null or a name, got {self.benchmark!r}")
        object.__setattr__(
            self, "benchmark_prompts", check_benchmark_prompts(self.benchmark_prompts)
        )
        _check_judge_prompts(self.judge_prompts)
        if self.samples_format not in SAMPLES_FORMATS:
            raise ConfigError(
                f"evaluate.samples_format must be one of {', '.join(SAMPLES_FORMATS)}, "
                f"got {self.samples_format!r}"
            )
        if self.validation_set is not None and not (
            isinstance(self.validation_set, str) and self.validation_set.strip()
        ):
            raise ConfigError(
                f"evaluate.validation_set must be null or a name, got {self.validation_set!r}"
            )
        if self.media_root is not None and not (
            isinstance(self.media_root, str) and self.media_root.strip()
        ):
            raise ConfigError(
                f"evaluate.media_root must be null or a folder, got {self.media_root!r}"
            )
        if not isinstance(self.allow_media_outside, bool):
            raise ConfigError(
                "evaluate.allow_media_outside must be true or false, got "
                f"{self.allow_media_outside!r}"
            )
        _optional_count("n_replicates", self.n_replicates)
        _optional_count("max_instances", self.max_instances)
        if self.ks is not None:
            if isinstance(self.ks, str) or not all(_is_int(k) and k >= 1 for k in self.ks):
                raise ConfigError(f"evaluate.ks must be null or integers >= 1, got {self.ks!r}")
            object.__setattr__(self, "ks", tuple(self.ks))
        self._check_pass_threshold()
        self._check_evaluator()
        self._check_logprobs()
        for flag in ("overwrite_results", "overwrite_outputs"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"evaluate.{flag} must be true or false")
        if self.overwrite_outputs and not self.overwrite_results:
            raise ConfigError(
                "evaluate.overwrite_outputs regenerates the responses, which makes every "
                "stored judgment of them stale: set evaluate.overwrite_results: true as well"
            )

    def _check_logprobs(self) -> None:
        if self.judge_logprobs not in ("auto", True, False):
            raise ConfigError(
                f"evaluate.judge_logprobs must be auto, true or false, got {self.judge_logprobs!r}"
            )
        top = self.judge_top_logprobs
        if not (_is_int(top) and 1 <= top <= MAX_TOP_LOGPROBS):
            raise ConfigError(
                f"evaluate.judge_top_logprobs must be an integer from 1 to {MAX_TOP_LOGPROBS}, "
                f"got {top!r}"
            )
        if self.judge_logprobs is True and self.judge is not None:
            endpoint = self.judge.endpoint
            if not kind_of(endpoint.backend).returns_logprobs(endpoint):
                reason = (
                    endpoint.reasoning_judge
                    or kind_of(endpoint.backend).logprobs_unavailable(endpoint)
                    or "model or backend"
                )
                raise ConfigError(
                    f"evaluate.judge_logprobs: true, but {endpoint.describe()} cannot return "
                    f"token probabilities ({reason}); set it to auto or false"
                )
            if self.kind.logprob_labels is None:
                having = [name for name in kind_names() if get_kind(name).logprob_labels]
                raise ConfigError(
                    f"evaluate.judge_logprobs: true, but mode {self.mode} has no verdict "
                    f"tokens to read probabilities of ({', '.join(having)} have); set it to "
                    "auto or false"
                )

    @property
    def logprobs_off_reason(self) -> str | None:
        """Why the one judge's log-probability verdicts are off although `judge_logprobs`
        allows them: a reasoning judge (`EndpointConfig.reasoning_judge`), or a backend
        that gives none (`logprobs_unavailable`); None otherwise."""
        judge = self.judge
        if self.judge_logprobs is False or judge is None or self.kind.logprob_labels is None:
            return None
        endpoint = judge.endpoint
        return endpoint.reasoning_judge or kind_of(endpoint.backend).logprobs_unavailable(endpoint)

    @property
    def judge_top_logprobs_asked(self) -> int:
        """Top log-probabilities per token the one judge's calls ask for (0: none): a panel,
        an evaluator, a kind without verdict tokens or a backend that cannot give them asks
        for none."""
        judge = self.judge
        if self.judge_logprobs is False or judge is None or self.evaluator is not None:
            return 0
        if self.kind.logprob_labels is None:
            return 0
        if not kind_of(judge.endpoint.backend).returns_logprobs(judge.endpoint):
            return 0
        return self.judge_top_logprobs

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
        if self.kind.fixed_scale and scale != self.kind.default_scale:
            raise ConfigError(
                f"evaluate.score_range: mode {self.mode} grades on the fixed scale "
                f"{list(self.kind.default_scale)}, got {list(scale)}; leave it null"
            )
        object.__setattr__(self, "score_range", scale)

    def _check_pass_threshold(self) -> None:
        value = self.pass_threshold
        if value is None:
            return
        low, high = self.scale
        if (
            not isinstance(value, numbers.Real)
            or isinstance(value, bool)
            or not math.isfinite(value)
            or not low < value <= high
        ):
            raise ConfigError(
                f"evaluate.pass_threshold must be null or a number in ({low}, {high}] "
                f"(the {self.mode} scale), got {value!r}"
            )
        if self.kind.family == PAIRWISE:
            raise ConfigError(f"evaluate.pass_threshold: {self.mode} mode has no pass@k")
        object.__setattr__(self, "pass_threshold", float(value))

    def _check_evaluator(self) -> None:
        if self.evaluator is None:
            if self.evaluator_options:
                raise ConfigError("evaluate.evaluator_options is set but evaluate.evaluator is not")
            return
        if self.mode != "binary":
            raise ConfigError(
                f"evaluate.evaluator scores on 0-1 in place of the judge: set evaluate.mode "
                f"to binary, got {self.mode}"
            )
        # Loaded once, here: the scorer of every row (evaluation/evaluators.py).
        object.__setattr__(self, "scorer", load_evaluator(self.evaluator, self.evaluator_options))

    @property
    def passing_score(self) -> float | None:
        """The score from which a response passes (pass@k), or None: no pass@k."""
        if self.pass_threshold is not None:
            return self.pass_threshold
        return self.kind.passing_score

    @property
    def kind(self) -> JudgeKind:
        """The judge kind `mode` names (registered when the parameters were checked)."""
        return get_kind(self.mode, "evaluate.mode")

    @property
    def scale(self) -> tuple[int, int]:
        """The score scale: the kind's fixed one, else `score_range` or the kind's default."""
        return self.score_range or self.kind.default_scale

    @property
    def kind_options(self) -> KindOptions:
        """What shapes the kind's question: scale, rubric criteria and reply format."""
        return KindOptions(self.scale, criteria=self.rubric, reply_format=self.binary_reply)

    def judge_prompt_for(self, category: str | None) -> str | None:
        """The judge template of rows of `category`: its `judge_prompts` entry, else
        `custom_prompt` (None: the built-in prompt).

        Args:
            category: the rows' category (None: none).

        Returns:
            The template text, or None.
        """
        return self.judge_prompts.get(category or "", self.custom_prompt)

    @property
    def judges(self) -> Mapping[str, JudgeParams]:
        """The judges by name: the panel's, or the one judge as "judge"."""
        if self.panel is not None:
            return self.panel.judges
        return {LONE_JUDGE: self.judge}

    def generator_for(self, model: str) -> EndpointConfig | None:
        """The endpoint that generates `model`'s missing responses, or None.

        Args:
            model: the model's name.

        Returns:
            The endpoint, or None.
        """
        if isinstance(self.generate_with, Mapping):
            return self.generate_with.get(model)
        return self.generate_with


def _check_judge_prompts(prompts: Any) -> None:
    """{category: template}: each a `str.format` template (params read the files)."""
    if not isinstance(prompts, Mapping):
        raise ConfigError(
            f"evaluate.judge_prompts must map categories to templates, got {prompts!r}"
        )
    for category, template in prompts.items():
        where = f"evaluate.judge_prompts.{category}"
        if not isinstance(category, str) or not category or not isinstance(template, str):
            raise ConfigError(f"{where}: needs a category name and a template text or file")
        try:
            template_fields(template)
        except ConfigError as error:
            raise ConfigError(f"{where}: {error}") from None
