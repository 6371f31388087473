"""`JudgeKind`: everything about one kind of judgment, in one place.

A kind says how to ask (`ask`: the request, from its template and reply schema, and the
reader of the reply), how its judgment fills a row of `eval_judgments` (`columns`), and the
facts every other part of the project reads instead of a table of its own: the scale
(fixed or the caller's), whether it needs a reference, whether its verdicts are categorical,
its metric family (pointwise scores or pairwise comparisons), its extra output columns and
metrics. `JudgeItem` is what one judgment is about, `KindOptions` the settings that shape
the question (scale, rubric criteria, reply format).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from llm_feedback.backends.contract import ChatRequest
from llm_feedback.engine import Reader

POINTWISE = "pointwise"  # a score per response: means, pass@k, weighted accuracy
PAIRWISE = "pairwise"  # a verdict per two responses, judged in both orders: win rates
METRIC_FAMILIES = (POINTWISE, PAIRWISE)


@dataclass(frozen=True, slots=True)
class JudgeItem:
    """What one judgment is about. `other_response` is the second response of a comparison;
    `prior_*` the first exchange of a two-turn conversation (the item is its turn 2), and
    `other_prior_response` the first answer of the other response's conversation."""

    question: str
    response: str
    reference: str | None = None
    context: str | None = None
    other_response: str | None = None
    prior_question: str | None = None
    prior_response: str | None = None
    prior_reference: str | None = None
    custom_prompt: str | None = None
    other_prior_response: str | None = None

    @property
    def is_second_turn(self) -> bool:
        return self.prior_question is not None

    def both_orders(self) -> tuple[JudgeItem, JudgeItem]:
        """A comparison in both positions (the responses swapped), to cancel position bias:
        every both-orders request is built from these two items."""
        swapped = dataclasses.replace(
            self,
            response=self.other_response,
            other_response=self.response,
            prior_response=self.other_prior_response,
            other_prior_response=self.prior_response,
        )
        return self, swapped


@dataclass(frozen=True, slots=True)
class KindOptions:
    """The settings that shape a kind's question: its scale, rubric criteria
    ({name: description}) and reply format (binary: "0/1", "yes/no", "graded")."""

    scale: tuple[int, int]
    criteria: Mapping[str, str] = field(default_factory=dict)
    reply_format: str | None = None


@dataclass(frozen=True, slots=True)
class Asking:
    """How a judge is asked: whether replies are JSON-schema constrained and the caller's
    sampling overrides."""

    structured: bool = False
    sampling: Mapping[str, Any] = field(default_factory=dict)


# (item, options, asking) -> the request and the reader of its reply.
Ask = Callable[[JudgeItem, KindOptions, Asking], tuple[ChatRequest, Reader]]
# (judgment, options) -> the kind's columns of each row the judgment makes (a rubric makes
# one row per criterion); the judgment's value is None where nothing was read or asked.
Columns = Callable[[Any, KindOptions], list[dict[str, Any]]]
# (judgments of one model or group, options) -> extra rows of eval_metrics.
ExtraMetrics = Callable[[pd.DataFrame, KindOptions], list[dict[str, Any]]]
# (the panel's combined rows, each judge's rows) -> None: fills the kind's own columns of
# the combined rows from the combined verdicts (the value column is combined already).
PanelColumns = Callable[[pd.DataFrame, list[pd.DataFrame]], None]


def scale_labels(options: KindOptions) -> tuple[str, ...]:
    """The rating tokens of a whole-number scale: "1" ... "10".

    Args:
        options: the kind's settings (its scale).

    Returns:
        The tokens, lowest first.
    """
    low, high = options.scale
    return tuple(str(value) for value in range(int(low), int(high) + 1))


def _score_column(judgment: Any, options: KindOptions) -> list[dict[str, Any]]:
    return [{"score": judgment.value}]


@dataclass(frozen=True)
class JudgeKind:
    """One kind of judgment (see the module docstring); `name` is what `evaluate.mode` says.

    `template` is the kind's prompt: a `templates/<template>.txt` name, or the text itself.
    `default_scale` is the scale, the only one when `fixed_scale`. `passing_score`: the
    score from which a response passes pass@k unless `evaluate.pass_threshold` says
    otherwise (None: no pass@k). `exact_match`: a response equal to the reference (after
    normalisation) is scored `default_scale[1]` without a call. `uses_criteria`: one row per
    criterion of `evaluate.rubric`. `two_turn`: it judges the second turn of a conversation.
    `reply_formats`: the formats `evaluate.binary_reply` may name for it. `extra_columns`:
    columns ({name: dtype}) its rows add to `eval_judgments`; `judge_own_columns`: columns a
    panel keeps with each judge (reasons, details) rather than combining them;
    `panel_columns` fills its other columns of a panel's combined rows. `logprob_labels`
    (None: none) names the reply tokens whose probabilities give its probability verdict
    (pairwise "A", "B", "C"; a rating's scale), which a judge asking for log-probabilities
    puts on the request. `extra_metrics`
    adds rows of its own to `eval_metrics` (per model; the breakdowns follow). A comparing
    kind (`family` `pairwise`) is asked in both orders of each pair of models' responses:
    its reader's value is {"verdict": "A"|"B"|"tie"|None, "scores": [first, second]}, and
    its `columns` read the `PairJudgment` (None when no comparison was made).
    """

    name: str
    ask: Ask
    template: str
    default_scale: tuple[int, int]
    columns: Columns = _score_column
    fixed_scale: bool = True
    needs_reference: bool = False
    categorical: bool = False
    family: str = POINTWISE
    passing_score: float | None = None
    recorded_scores: bool = False
    exact_match: bool = False
    uses_criteria: bool = False
    two_turn: bool = False
    reply_formats: Sequence[str] = ()
    extra_columns: Mapping[str, str] = field(default_factory=dict)
    judge_own_columns: Sequence[str] = ()
    extra_metrics: ExtraMetrics | None = None
    panel_columns: PanelColumns | None = None
    logprob_labels: Callable[[KindOptions], Sequence[str]] | None = None

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"a judge kind's name is a plain word, got {self.name!r}")
        if self.family not in METRIC_FAMILIES:
            raise ValueError(f"judge kind {self.name}: family must be one of {METRIC_FAMILIES}")
        low, high = self.default_scale
        if not low < high:
            raise ValueError(f"judge kind {self.name}: default_scale needs low < high")

    @property
    def value_column(self) -> str:
        """The column holding a judgment's verdict: `outcome` (pairwise) or `score`."""
        return "outcome" if self.family == PAIRWISE else "score"

    @property
    def compares(self) -> bool:
        return self.family == PAIRWISE
