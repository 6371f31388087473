"""`params:report`: preference pairs, the price table, the viewer labels and the judge
requirement."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_feedback.core.errors import ConfigError
from llm_feedback.params.reader import Block, defaults_of
from llm_feedback.reporting.cache_prices import CACHE_PRICE_KEYS
from llm_feedback.reporting.pairs import LAYOUTS, SCORE_KINDS, STRATEGIES

PRICE_KEYS = ("prompt_per_1k", "completion_per_1k")
BATCH_PRICE_KEYS = ("batch_prompt_per_1k", "batch_completion_per_1k")
# Optional: prompt-cache prices (default: the provider's published rates, reporting.cache_prices).
CACHE_KEYS = tuple(f"{batch}{key}" for batch in ("", "batch_") for key in CACHE_PRICE_KEYS)


@dataclass(frozen=True)
class PairParams:
    score: str = "overall"
    strategy: str = "random_lower"
    seed: int = 42
    # trl: TRL's conversational format (prompt / chosen / rejected message lists);
    # h4: HuggingFaceH4/ultrafeedback_binarized's columns.
    layout: str = "trl"
    # Completions suspected of injection (a judge may have obeyed them) enter pairs only if true.
    include_suspected: bool = False
    # The test split: this share of the prompts with a pair (all of a prompt's pairs on one
    # side), drawn by a digest of (split_seed, prompt_id); 0: every pair in train.
    test_fraction: float = 0.1
    split_seed: int = 42

    def describe(self) -> str:
        return (
            f"score {self.score}, strategy {self.strategy}, seed {self.seed}, layout {self.layout}"
            + f", test split {self.test_fraction:g} of the prompts (seed {self.split_seed})"
            + (", suspected injections included" if self.include_suspected else "")
        )


@dataclass(frozen=True)
class IntervalParams:
    # Clustered bootstrap over prompts (llm_feedback.stats): resamples, seed, confidence.
    n_resamples: int = 1000
    seed: int = 0
    confidence: float = 0.95

    def describe(self) -> str:
        return (
            f"{self.confidence:.0%} intervals, clustered bootstrap over prompts "
            f"({self.n_resamples} resamples, seed {self.seed}) unless a table says otherwise"
        )


@dataclass(frozen=True)
class RankingParams:
    # The model the win rates are measured against; None: the first model alphabetically.
    baseline: str | None = None


@dataclass(frozen=True)
class LabelParams:
    # The judgment viewer's downloaded labels.jsonl (several reviewers' files concatenated)
    # on this run's pages: they validate annotate's judge and correct its mean ratings.
    path: str | None = None
    # The name the judge's card is filed under; None: the file's folder and name.
    validation_set: str | None = None


@dataclass(frozen=True)
class JudgeRequirement:
    """A judge card figure the report requires: its interval's lower bound at least this."""

    metric: str  # a card metric: accuracy, cohen_kappa, spearman, within_1_agreement, ...
    min_lower_bound: float
    validation_set: str | None = None  # None: every validation set the judge has a card on

    def describe(self) -> str:
        where = f" on {self.validation_set}" if self.validation_set else ""
        return f"{self.metric} lower bound >= {self.min_lower_bound:g}{where}"


@dataclass(frozen=True)
class ReportParams:
    pairs: PairParams = field(default_factory=PairParams)
    intervals: IntervalParams = field(default_factory=IntervalParams)
    ranking: RankingParams = field(default_factory=RankingParams)
    # USD per 1k tokens by model name; a model absent here costs 0 and is flagged unpriced.
    prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # Report inputs from different runs (see llm_feedback.runs.lineage) instead of refusing them.
    allow_mixed_runs: bool = False
    labels: LabelParams = field(default_factory=LabelParams)
    # What the annotate judge's card must show for the report to be written (none: no gate).
    judge_requirement: tuple[JudgeRequirement, ...] = ()


def parse_requirements(value: Any, where: str) -> tuple[JudgeRequirement, ...]:
    """`<where>` (`report.judge_requirement`, `evaluate.judge_requirement`): null, one
    {metric, min_lower_bound, validation_set} mapping, or a list of them (e.g. TPR and
    TNR); a metric no judge card measures is refused here, before any call.

    Args:
        value: the requirement(s) as written.
        where: the parameter's dotted name, for messages.

    Returns:
        The requirements (none for null).
    """
    if value is None or (isinstance(value, list | tuple) and not value):
        return ()
    # Only with a requirement: the card module brings matplotlib, which annotate runs skip.
    from llm_feedback.validation.card import CARD_METRICS  # noqa: PLC0415

    entries = list(value) if isinstance(value, list | tuple) else [value]
    found = []
    for number, entry in enumerate(entries):
        path = where + (f"[{number}]" if isinstance(value, list | tuple) else "")
        keys = ("metric", "min_lower_bound", "validation_set")
        block = Block(entry, path, keys, {"validation_set": None})
        metric = block.text("metric")
        if metric not in CARD_METRICS:
            raise ConfigError(
                f"{path}.metric: {metric!r} is not a card metric; one of {', '.join(CARD_METRICS)}"
            )
        found.append(
            JudgeRequirement(
                metric=metric,
                min_lower_bound=block.number("min_lower_bound"),
                validation_set=block.text("validation_set", nullable=True),
            )
        )
    return tuple(found)


def _test_fraction(pairs: Block) -> float:
    fraction = pairs.number("test_fraction", minimum=0, maximum=1)
    if fraction >= 1:
        raise ConfigError(
            f"{pairs.name('test_fraction')} must be below 1 (the train split needs a prompt), "
            f"got {fraction:g}"
        )
    return fraction


def parse_report(report: Any) -> ReportParams:
    """Read `params:report`.

    Args:
        report: the block (None: the defaults).

    Returns:
        The checked parameters.
    """
    block = Block(
        report,
        "report",
        (
            "pairs",
            "prices",
            "intervals",
            "ranking",
            "allow_mixed_runs",
            "labels",
            "judge_requirement",
        ),
        defaults_of(ReportParams),
    )
    pairs = block.block(
        "pairs",
        ("score", "strategy", "seed", "layout", "include_suspected", "test_fraction", "split_seed"),
        defaults_of(PairParams),
    )
    intervals = block.block(
        "intervals", ("n_resamples", "seed", "confidence"), defaults_of(IntervalParams)
    )
    ranking = block.block("ranking", ("baseline",), defaults_of(RankingParams))
    labels = block.block("labels", ("path", "validation_set"), defaults_of(LabelParams))
    prices = block.mapping("prices", nullable=True) or {}
    for model, entry in prices.items():
        where = f"report.prices.{model}"
        if (
            not isinstance(entry, Mapping)
            or not set(PRICE_KEYS) <= set(entry)
            or not set(entry) <= {*PRICE_KEYS, *BATCH_PRICE_KEYS, *CACHE_KEYS}
        ):
            raise ConfigError(
                f"{where} must be {{prompt_per_1k: ..., completion_per_1k: ...}}, optionally "
                "with batch_prompt_per_1k and batch_completion_per_1k (default: half) and "
                "cached_prompt_per_1k and cache_write_per_1k (default: the provider's "
                "published cache rates)"
            )
        for key, value in entry.items():
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or value < 0:
                raise ConfigError(f"{where}.{key} must be a number >= 0, got {value!r}")
    return ReportParams(
        pairs=PairParams(
            score=pairs.choice("score", SCORE_KINDS),
            strategy=pairs.choice("strategy", STRATEGIES),
            seed=pairs.integer("seed"),
            layout=pairs.choice("layout", LAYOUTS),
            include_suspected=pairs.boolean("include_suspected"),
            test_fraction=_test_fraction(pairs),
            split_seed=pairs.integer("split_seed"),
        ),
        prices={model: dict(entry) for model, entry in prices.items()},
        intervals=IntervalParams(
            n_resamples=intervals.integer("n_resamples", minimum=10),
            seed=intervals.integer("seed"),
            confidence=intervals.number("confidence", minimum=0.5, maximum=0.999),
        ),
        ranking=RankingParams(baseline=ranking.text("baseline", nullable=True)),
        allow_mixed_runs=block.boolean("allow_mixed_runs"),
        labels=LabelParams(
            path=labels.text("path", nullable=True),
            validation_set=labels.text("validation_set", nullable=True),
        ),
        judge_requirement=parse_requirements(
            block.raw("judge_requirement"), "report.judge_requirement"
        ),
    )
