"""The score fix's re-score calls sent ahead, on the judge stages' one queue.

A re-score depends on one prompt's aspect ratings and critiques only, so it can be asked as
soon as both judge stages have finished that prompt. `RescoreAhead` watches the two stages
(`aspect_annotations_stage`, `critiques_stage`) as they take their outcomes, plans the fix
of each finished prompt with the score fix's own functions (`collect_scores`,
`plan_score_fix`) and sends its re-score requests into the same client, under the same
concurrency limit, while the stages still have calls out: the endpoint is not left idle
through the stages' tails and then the save between the nodes.

The answers land in the request cache. The score fix node (`fix_overall_scores`) then runs as
before, on the saved tables, and finds every re-score it asks in the cache: its table is
the one it would give alone, by construction (a request planned here that it would not
send costs a call; one it sends that was not planned here is sent by it). Without a cache,
or on a backend that runs streams one after another (`engine.overlaps_stages`), nothing is
sent ahead.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from llm_feedback.annotation.critique import (
    build_rescore_request,
    critique_request,
    parse_rescore_reply,
)
from llm_feedback.annotation.score_fix import (
    ASPECT_COLUMNS_READ,
    CRITIQUE_COLUMNS_READ,
    SUSPICIOUS_OVERALL_SCORE,
    collect_scores,
    pending_reannotation,
    plan_score_fix,
    validate_thresholds,
)
from llm_feedback.backends import ChatRequest, LLMClient
from llm_feedback.engine import Outcome, Reading, Task, TaskEngine, overlaps_stages
from llm_feedback.replies.status import NO_MATCH, OK
from llm_feedback.storage.parquet_source import CHUNK_PROMPTS
from llm_feedback.templates import PACKAGE_TEMPLATES, Templates

logger = logging.getLogger(__name__)

ASPECTS_STAGE, CRITIQUES_STAGE = "aspects", "critiques"
# Finished prompts planned together: a plan costs about the same (tens of milliseconds, in
# pandas) for one prompt or a hundred, and holds the interpreter from the client's loop.
# Once the stages have handed over every call, whatever has finished is planned as soon as
# the previous plan is done: the tail is short, and its re-scores fill it.
PLAN_BATCH_PROMPTS = 64
# Prompts whose rows may wait for the slower stage (with two shuffles the aspects take twice
# the critiques' calls): beyond this many, sending ahead stops and the fix node sends the
# rest, so memory stays within a chunk of prompts however far the stages drift apart.
MAX_WAITING_PROMPTS = CHUNK_PROMPTS


def rescore_reading(text: str | None) -> Reading:
    """A re-score reply read: the new 1-10 score, or unreadable.

    Args:
        text: The reply's text (None: no reply).

    Returns:
        The reading.
    """
    score = parse_rescore_reply(text)
    if score is None:
        return Reading(None, NO_MATCH, ok=False, problem="no overall score from 1 to 10")
    return Reading(score, OK)


def rescore_request(
    row: Any,
    critique: Any,
    structured: bool,
    sampling: Mapping[str, Any],
    templates: Templates = PACKAGE_TEMPLATES,
) -> ChatRequest:
    """The re-score request of one completion: its critique request, the stored critique as
    the judge's turn, then the request for the score alone (`build_rescore_request`).

    Args:
        row: The completion's row (a named tuple or a Series: instruction, response,
            principle, system_prompt).
        critique: Its stored critique (null: an empty turn).
        structured: Whether the endpoint takes a JSON schema.
        sampling: The critique's sampling settings.
        templates: The prompt templates.

    Returns:
        The request, the same wherever it is built.
    """
    return build_rescore_request(
        critique_request(row, structured, sampling, templates),
        "" if pd.isna(critique) else str(critique),
        structured=structured,
        sampling=sampling,
        templates=templates,
    )


@dataclass(frozen=True, slots=True)
class ScoreFixAhead:
    """The score fix's settings, as its node reads them: what decides which completions it
    re-scores and how it asks."""

    flip_threshold: float
    reannotate_threshold: float
    aspects: Sequence[str] | None
    sampling: Mapping[str, Any]
    max_reasks: int

    def __post_init__(self) -> None:
        validate_thresholds(self.flip_threshold, self.reannotate_threshold)


@dataclass(frozen=True, slots=True)
class _Finished:
    """Finished prompts' rows of both judge tables, and their completions' rows."""

    aspects: list[dict[str, Any]]
    critiques: list[dict[str, Any]]
    completions: dict[str, dict[int, Any]]


@dataclass(slots=True)
class _StageWatch:
    """One stage's progress per prompt: its calls not yet final, the prompts it has moved
    past, and its rows of the prompts not yet planned."""

    outstanding: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    passed: set[str] = field(default_factory=set)
    current: str | None = None
    sent_all: bool = False
    done: bool = False
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))

    def finished(self, prompt_id: str) -> bool:
        passed = self.sent_all or prompt_id in self.passed
        return passed and not self.outstanding.get(prompt_id, 0)


class RescoreAhead:
    """Watches the judge stages and sends each finished prompt's re-scores ahead.

    The stages call `sent` as they hand a call of a prompt to the engine, `taken` as its
    outcome is final (with the rows it gave), `replaced` when a call refused as too long is
    sent again in parts, `sent_all` when their stream of calls is exhausted and `stage_done`
    when they end; the critique stage gives each completion's row (`completion`). `stage`
    is the coroutine function `run_together` runs beside them.
    """

    def __init__(
        self,
        client: LLMClient,
        fix: ScoreFixAhead,
        templates: Templates = PACKAGE_TEMPLATES,
    ) -> None:
        """Watch nothing yet: the stages call the hooks below as they go.

        Args:
            client: The judge's client, shared with the stages.
            fix: The score fix's settings.
            templates: The prompt templates (the critique stage's).
        """
        self.client = client
        self.fix = fix
        self.templates = templates
        self.structured = client.supports_json_schema
        self.watches = {ASPECTS_STAGE: _StageWatch(), CRITIQUES_STAGE: _StageWatch()}
        self.completions: dict[str, dict[int, Any]] = defaultdict(dict)
        self.ready: dict[str, None] = {}  # finished prompts not yet planned, in order
        self.wake = asyncio.Event()
        self.sent_calls = 0
        self.stopped = False

    @staticmethod
    def applies(client: LLMClient) -> bool:
        """Whether answers sent ahead reach the fix node: through a request cache it reads,
        from an endpoint that overlaps streams.

        Args:
            client: The judge's client.

        Returns:
            True when re-scores may be sent ahead.
        """
        return client.cache is not None and not client.refresh and overlaps_stages(client)

    # -- the stages' hooks ----------------------------------------------------------------

    def sent(self, stage: str, prompt_id: str) -> None:
        """A stage sent a call of `prompt_id`; a prompt it moved past may be finished.

        Args:
            stage: The stage's name.
            prompt_id: The prompt.
        """
        if self.stopped:
            return
        watch = self.watches[stage]
        watch.outstanding[prompt_id] += 1
        if watch.current != prompt_id:
            previous, watch.current = watch.current, prompt_id
            if previous is not None:
                watch.passed.add(previous)
                self._check(previous)

    def replaced(self, stage: str, prompt_id: str, parts: int) -> None:
        """A call too long for the endpoint is sent again as `parts` calls.

        Args:
            stage: The stage's name.
            prompt_id: The prompt.
            parts: How many calls replace it.
        """
        if not self.stopped:
            self.watches[stage].outstanding[prompt_id] += parts - 1

    def taken(self, stage: str, prompt_id: str, rows: Sequence[dict[str, Any]] = ()) -> None:
        """A call of `prompt_id` is final, with the table rows it gave.

        Args:
            stage: The stage's name.
            prompt_id: The prompt.
            rows: The rows its outcome added to the stage's table.
        """
        if self.stopped:
            return
        watch = self.watches[stage]
        watch.outstanding[prompt_id] -= 1
        watch.rows[prompt_id].extend(rows)
        if len(watch.rows) > MAX_WAITING_PROMPTS:
            self._stop()
            return
        self._check(prompt_id)

    def completion(self, row: Any) -> None:
        """Keep a completion's row, which a re-score request quotes.

        Args:
            row: One completion row (a named tuple).
        """
        if not self.stopped:
            self.completions[str(row.prompt_id)][int(row.completion_idx)] = row

    def sent_all(self, stage: str) -> None:
        """A stage has sent its last first call: every prompt it holds may be finished.

        Args:
            stage: The stage's name.
        """
        if self.stopped:
            return
        watch = self.watches[stage]
        watch.sent_all = True
        for prompt_id in list(watch.outstanding):
            self._check(prompt_id)

    def stage_done(self, stage: str) -> None:
        """A stage has finished (or stopped).

        Args:
            stage: The stage's name.
        """
        self.watches[stage].done = True
        if all(watch.done for watch in self.watches.values()) and not self.stopped:
            # Prompts one stage never reached (no usable completion there) are finished too.
            for watch in self.watches.values():
                for prompt_id in list(watch.rows):
                    self._check(prompt_id)
        self.wake.set()

    def _stop(self) -> None:
        """Stop sending ahead: the rows held are let go, the fix node sends the rest."""
        logger.warning(
            "score fix: more than %d prompts waited for the other judge stage; the re-scores "
            "not sent yet are left to the fix_overall_scores node",
            MAX_WAITING_PROMPTS,
        )
        self.stopped = True
        self.watches = {ASPECTS_STAGE: _StageWatch(), CRITIQUES_STAGE: _StageWatch()}
        self.completions.clear()
        self.ready.clear()
        self.wake.set()

    # -- planning -------------------------------------------------------------------------

    def _check(self, prompt_id: str) -> None:
        watches = self.watches.values()
        if prompt_id in self.ready or not all(watch.finished(prompt_id) for watch in watches):
            return
        for watch in watches:
            watch.outstanding.pop(prompt_id, None)
            watch.passed.discard(prompt_id)
        self.ready[prompt_id] = None
        if self._plan_now():
            self.wake.set()

    def _plan_now(self) -> bool:
        """Whether the finished prompts are planned now: a batch's worth, or the tail."""
        watches = self.watches.values()
        tail = all(watch.sent_all for watch in watches)
        return bool(self.ready) and (tail or len(self.ready) >= PLAN_BATCH_PROMPTS)

    def _take_ready(self) -> _Finished | None:
        """The finished prompts' rows, taken for a plan; None when none has a 10."""
        prompts, self.ready = list(self.ready), {}
        aspects, critiques = self.watches[ASPECTS_STAGE], self.watches[CRITIQUES_STAGE]
        finished = _Finished(
            [row for p in prompts for row in aspects.rows.pop(p, [])],
            [row for p in prompts for row in critiques.rows.pop(p, [])],
            {p: self.completions.pop(p, {}) for p in prompts},
        )
        # Only a 10 is ever re-scored: prompts without one need no plan.
        if any(row["overall_score"] == SUSPICIOUS_OVERALL_SCORE for row in finished.critiques):
            return finished
        return None

    def _plan(self, finished: _Finished) -> list[Task]:
        """The re-score tasks of finished prompts, as the fix node plans them (run in a
        worker thread: a plan costs tens of milliseconds, which the loop's calls keep)."""
        keys = pd.DataFrame(
            [(p, idx) for p, rows in finished.completions.items() for idx in rows],
            columns=["prompt_id", "completion_idx"],
        )
        scores = collect_scores(
            keys.assign(model=""),  # the plan does not read the model
            pd.DataFrame(finished.aspects, columns=list(ASPECT_COLUMNS_READ)),
            pd.DataFrame(finished.critiques, columns=list(CRITIQUE_COLUMNS_READ)),
            aspects=self.fix.aspects,
        )
        plan = plan_score_fix(scores, self.fix.flip_threshold, self.fix.reannotate_threshold)
        critique_of = {(row["prompt_id"], row["completion_idx"]): row for row in finished.critiques}
        return [
            Task(
                rescore_request(
                    finished.completions[prompt_id][idx],
                    critique_of[prompt_id, idx]["critique"],
                    self.structured,
                    self.fix.sampling,
                    self.templates,
                ),
                rescore_reading,
            )
            for prompt_id, idx in pending_reannotation(plan)
        ]

    # -- the stage run beside the judge stages --------------------------------------------

    async def stage(self) -> int:
        """Plan each batch of finished prompts and send its re-scores on the client's queue,
        until both judge stages are done and every re-score is answered. Returns the calls
        sent."""
        engine = TaskEngine(self.client, max_reasks=self.fix.max_reasks)
        sending: list[asyncio.Future[Any]] = []

        def count(_index: int, _outcome: Outcome) -> None:
            self.sent_calls += 1

        def done() -> bool:
            return all(watch.done for watch in self.watches.values())

        try:
            while not self.stopped and (not done() or self.ready):
                await self.wake.wait()
                self.wake.clear()
                # What finished during a plan is planned next (the prompts of a stage
                # that ended meanwhile included).
                while not self.stopped and (self._plan_now() or (done() and self.ready)):
                    finished = self._take_ready()
                    tasks = (
                        [] if finished is None else await asyncio.to_thread(self._plan, finished)
                    )
                    if tasks:
                        sending.append(asyncio.ensure_future(engine.stream_into(tasks, count)))
            await asyncio.gather(*sending)
        finally:
            for future in sending:  # a failing judge stage cancels this one: nothing left
                future.cancel()
            await asyncio.gather(*sending, return_exceptions=True)
        if self.sent_calls:
            logger.info(
                "score fix: %d re-score call(s) sent with the judge stages, on their queue "
                "(the fix_overall_scores node reads the answers from the request cache)",
                self.sent_calls,
            )
        return self.sent_calls
