"""Typed judgments: what one judge call (or the two orders of a comparison) came to, from
the engine's task (`JudgeTask`) and its `Outcome` to the row of `eval_judgments`.

A `Judgment` is one call's: the kind's parsed value, its parse status, the reply read last
(`raw_reply`), the prompt sent, and the call's facts (`cached`, `reasks`, `error`). A
`PairJudgment` joins the two orders of a comparison (`combine_orders`). `call_columns`
gives the columns every judgment row has; each kind adds its own (`JudgeKind.columns`).
lmms-eval's dict form (`as_dict`) keeps lmms-eval's key `raw_response` for the reply.
`label_logprobs` is what the reply kept of its token probabilities, for the probability
verdict beside the argmax one (`evaluation.probabilities`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_feedback.backends.media import content_text
from llm_feedback.engine import Outcome, Task
from llm_feedback.judges.metrics import is_position_consistent, pairwise_outcome
from llm_feedback.replies.status import OK

_SWAPPED_LABEL = {"A": "B", "B": "A", "tie": "tie"}


@dataclass(frozen=True, slots=True)
class JudgeTask(Task):
    """An engine task of one judgment; `kind` names its judge kind."""

    kind: str = ""

    @property
    def prompt(self) -> str:
        return content_text(self.request.messages[-1]["content"])


@dataclass(frozen=True, slots=True)
class Judgment:
    """One judge call's judgment; `value` None when it could not be read (or not asked)."""

    value: Any
    status: str
    success: bool
    raw_reply: str | None = None
    prompt: str | None = None
    model: str | None = None
    error: str | None = None
    cached: bool = False
    reasks: int = 0
    details: Mapping[str, Any] = field(default_factory=dict)
    # The top log-probabilities at the reply's label tokens (`ChatResult.label_logprobs`):
    # None when none were asked for or returned.
    label_logprobs: list[dict[str, Any]] | None = None

    @classmethod
    def of(cls, task: Task, outcome: Outcome, model: str) -> Judgment:
        """The judgment of a task's outcome once the engine is done with it.

        Args:
            task: The engine task that was run; its last message is the prompt kept.
            outcome: The engine's outcome of that task (reply, reading, call facts).
            model: The judge model's name, recorded on the judgment.

        Returns:
            The judgment holding the reading's value and status and the call's facts.
        """
        reading = outcome.reading
        return cls(
            value=reading.value,
            status=reading.status,
            success=reading.ok,
            raw_reply=outcome.text,
            prompt=content_text(task.request.messages[-1]["content"]),
            model=model,
            error=outcome.error,
            cached=outcome.cached,
            reasks=outcome.reasks,
            details=dict(reading.details or {}),
            label_logprobs=outcome.reply.label_logprobs,
        )

    @classmethod
    def without_call(
        cls, status: str, value: Any = None, *, model: str | None = None, error: str | None = None
    ) -> Judgment:
        """A judgment that needed no call (an exact match) or could not have one.

        Args:
            status: The parse status to record.
            value: The judgment's value; None marks it unsuccessful.
            model: The judge model's name, if any.
            error: Why there was no call, if it could not have one.

        Returns:
            The judgment, successful when `value` is not None.
        """
        return cls(value=value, status=status, success=value is not None, model=model, error=error)

    def call_columns(self) -> dict[str, Any]:
        """The columns of `eval_judgments` that every kind's rows have."""
        return {
            "parse_status": self.status,
            "success": self.success,
            "raw_reply": self.raw_reply,
            "prompt": self.prompt,
            "cached": self.cached,
            "error": self.error,
            "reasks": self.reasks,
        }

    def as_dict(self, result_key: str = "result") -> dict[str, Any]:
        """lmms-eval's dict: the value under `result_key` ("scores" for a rubric).

        Args:
            result_key: The key the judgment's value goes under.

        Returns:
            The judgment as lmms-eval's dict, with `details` when there are any.
        """
        record = {
            result_key: self.value,
            "raw_response": self.raw_reply,
            "model": self.model,
            "prompt": self.prompt,
            "success": self.success,
            "status": self.status,
            "error": self.error,
            "cached": self.cached,
            "reasks": self.reasks,
        }
        if self.details:
            record["details"] = dict(self.details)
        return record


@dataclass(frozen=True, slots=True)
class PairJudgment:
    """A comparison judged in one or both orders; labels refer to the original order.

    `winner` "A" (the first response), "B", "tie" or None; `verdicts` each order's verdict
    in those labels; `scores` each response's score averaged over the orders.
    """

    orders: tuple[Judgment, ...]
    winner: str | None
    consistent: bool | None
    verdicts: tuple[str | None, ...]
    scores: tuple[float | None, float | None]

    @property
    def status(self) -> str:
        return next((order.status for order in self.orders if order.status != OK), OK)

    @property
    def success(self) -> bool:
        return self.winner is not None

    @property
    def error(self) -> str | None:
        return next((order.error for order in self.orders if order.error), None)

    @property
    def cached(self) -> bool:
        return all(order.cached for order in self.orders)

    @property
    def reasks(self) -> int:
        return sum(order.reasks for order in self.orders)

    def call_columns(self) -> dict[str, Any]:
        """The columns of the pairwise `eval_judgments` that describe the calls."""
        a_first, b_first = (*self.orders, None)[:2]
        return {
            "parse_status": self.status,
            "success": self.success,
            "raw_reply_a_first": a_first.raw_reply,
            "raw_reply_b_first": None if b_first is None else b_first.raw_reply,
            "prompt_a_first": a_first.prompt,
            "prompt_b_first": None if b_first is None else b_first.prompt,
            "cached": self.cached,
            "error": self.error,
            "reasks": self.reasks,
        }

    def as_dict(self) -> dict[str, Any]:
        """lmms-eval's comparative dict; "scores" also as a top-level tuple, as it has it."""
        return {
            "result": {
                "winner": self.winner,
                "consistent": self.consistent,
                "verdicts": list(self.verdicts),
                "scores": list(self.scores),
            },
            "scores": tuple(self.scores),
            "raw_response": [order.raw_reply for order in self.orders],
            "model": self.orders[0].model,
            "prompt": [order.prompt for order in self.orders],
            "success": self.success,
            "status": self.status,
            "error": self.error,
            "cached": self.cached,
            "reasks": self.reasks,
        }


def _mean_of_known(*values: float | None) -> float | None:
    known = [value for value in values if value is not None]
    return math.fsum(known) / len(known) if known else None


def combine_orders(a_first: Judgment, b_first: Judgment) -> PairJudgment:
    """One comparison from the two orders of the same pair.

    `a_first` showed (response1, response2), `b_first` the swapped (response2, response1);
    each value is {"verdict": "A"|"B"|"tie"|None, "scores": [first shown, second shown]}.
    Orders that disagree (position bias) make a "tie"; a missing verdict makes None. The
    scores of each response are averaged over the two orders.

    Args:
        a_first: The judgment of the pair shown in its original order.
        b_first: The judgment of the pair shown swapped.

    Returns:
        The comparison, with labels in the original order.
    """
    verdict_ab, verdict_ba = a_first.value["verdict"], b_first.value["verdict"]
    scores_ab, scores_ba = a_first.value["scores"], b_first.value["scores"]
    return PairJudgment(
        orders=(a_first, b_first),
        winner=pairwise_outcome(verdict_ab, verdict_ba),
        consistent=is_position_consistent(verdict_ab, verdict_ba),
        verdicts=(verdict_ab, _SWAPPED_LABEL.get(verdict_ba)),
        scores=(
            _mean_of_known(scores_ab[0], scores_ba[1]),
            _mean_of_known(scores_ab[1], scores_ba[0]),
        ),
    )


def one_order(judgment: Judgment) -> PairJudgment:
    """A comparison shown in one order only: its verdict is the winner.

    Args:
        judgment: The judgment of the pair in its original order.

    Returns:
        The comparison of that one order.
    """
    verdict = judgment.value["verdict"]
    scores = judgment.value["scores"]
    return PairJudgment(
        orders=(judgment,),
        winner=verdict,
        consistent=None,
        verdicts=(verdict,),
        scores=(scores[0], scores[1]),
    )
