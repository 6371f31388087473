"""The one engine every model call goes through: generation, aspect ratings, critiques,
the score-fix re-score, every judge kind and evaluate's generation.

The client beneath it deduplicates, caches, bounds concurrency, retries and shows progress;
the engine adds what every stage needs on top: each reply is read as it arrives, then only
the tasks whose reply could not be read are re-asked (bounded), showing the judge its reply
and what was wrong with it, with twice the token budget when the reply was cut off.

The engine runs on the client's event loop, so the synchronous `run` (Kedro nodes from any
runner, notebooks with a running loop) and the asynchronous `arun` are one implementation.

Several stages on one endpoint share one queue (`run_together`): each is a coroutine on the
client's loop feeding its own tasks (`TaskEngine.stream_into`), and every call of every stage
waits for a slot of the client's one concurrency limit, so while any stage has a call to send
no slot stays free: one stage's tail, re-asks and bookkeeping are filled by the others' calls.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass, field
from typing import TypeVar

from llm_feedback.backends.base import EndpointConfig
from llm_feedback.backends.client import LLMClient
from llm_feedback.backends.context_length import is_context_length_error
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.core.errors import ConfigError, EndpointError
from llm_feedback.engine.tasks import Merger, Outcome, Reader, Task, failed_reading
from llm_feedback.replies.status import SKIPPED_TOO_LONG

logger = logging.getLogger(__name__)

T = TypeVar("T")


def reask_request(request: ChatRequest, reply: ChatResult, problem: str) -> ChatRequest:
    """`request` one attempt later, followed by the unreadable reply and what to fix.

    Repeating the identical request at temperature 0 tends to return the identical reply,
    so the re-ask shows the judge its previous answer and says what was wrong with it; the
    higher `attempt` keeps it a distinct entry of the request cache. A reply cut off by
    max_tokens gets twice the budget: the same budget would cut the answer again.

    Args:
        request: the request asked.
        reply: its unreadable reply.
        problem: what was wrong with it.

    Returns:
        The re-ask's request.
    """
    changes: dict[str, object] = {"attempt": request.attempt + 1}
    if reply.finish_reason == "length":
        changes["max_tokens"] = 2 * request.max_tokens
    text = reply.text
    if text and text.strip():
        correction = (
            f"Your answer above could not be read: {problem or 'its format did not match'}. "
            "Answer the original request again from the start, in exactly the requested "
            "format, covering everything it asks for."
        )
        changes["messages"] = (
            *request.messages,
            {"role": "assistant", "content": text},
            {"role": "user", "content": correction},
        )
    return dataclasses.replace(request, **changes)


@dataclass
class _Running:
    """A task in flight: its latest request is kept only while a re-ask may need it (at
    UltraFeedback scale the prompts are most of the memory), so the task itself is not."""

    read: Reader
    merge: Merger | None
    reask: bool
    request: ChatRequest | None
    outcome: Outcome | None = None

    @classmethod
    def of(cls, task: Task) -> _Running:
        return cls(task.read, task.merge, task.reask, task.request)

    def needs_reask(self) -> bool:
        outcome = self.outcome
        return self.reask and outcome.error is None and not outcome.reading.ok

    def take_first(self, reply: ChatResult, may_reask: bool) -> bool:
        """Read the first reply; True when the outcome is final (no re-ask to come)."""
        read = self.read
        if reply.ok:
            reading = read(reply.text)
        elif is_context_length_error(reply.error):
            # Refused as too long for the model: the status of a request that did not fit.
            self.skip(f"{SKIPPED_TOO_LONG}: refused by the endpoint as too long ({reply.error})")
            return True
        else:
            reading = failed_reading(read, reply.error)
        self.outcome = Outcome(
            reading,
            reply,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            cached_prompt_tokens=reply.cached_prompt_tokens,
            cache_write_tokens=reply.cache_write_tokens,
            cached=reply.cached,
            error=reply.error,
        )
        final = not (may_reask and self.needs_reask())
        if final:
            self.request = None  # never re-asked: at scale its prompt is most of the memory
        return final

    def skip(self, reason: str) -> None:
        """Too long for the endpoint (not sent, or refused for context length): an outcome
        that says so."""
        reading = dataclasses.replace(failed_reading(self.read, reason), status=SKIPPED_TOO_LONG)
        self.outcome = Outcome(reading, ChatResult.failure(reason), cached=False, error=reason)
        self.request = None

    def take_reask(self, request: ChatRequest, reply: ChatResult) -> None:
        outcome = self.outcome
        outcome.reasks += 1
        outcome.add_usage(reply)
        outcome.cached = outcome.cached and reply.cached
        if not reply.ok:  # the earlier reading stays, with the reason it was not replaced
            outcome.error = reply.error
            return
        fresh = self.read(reply.text)
        merge = self.merge
        outcome.reading = fresh if merge is None else merge(outcome.reading, fresh)
        outcome.reply = reply
        self.request = request  # the next round builds on the latest exchange


@dataclass
class RunSummary:
    """What one `run` did, for the line logged at its end and the failure check."""

    tasks: int = 0
    reasked: int = 0
    unreadable: int = 0
    failed: int = 0
    skipped: int = 0  # too long to send
    # The endpoint's retries while the run was in flight: stages run together
    # (`run_together`) each count the others' too.
    retries: int = 0
    failures_by_reason: dict[str, int] = field(default_factory=dict)

    def plus(self, other: RunSummary) -> RunSummary:
        """The counts of this run and `other` together (a stage run in rounds).

        Args:
            other: another run's summary.

        Returns:
            The summed summary.
        """
        reasons = Counter(self.failures_by_reason) + Counter(other.failures_by_reason)
        return RunSummary(
            tasks=self.tasks + other.tasks,
            reasked=self.reasked + other.reasked,
            unreadable=self.unreadable + other.unreadable,
            failed=self.failed + other.failed,
            skipped=self.skipped + other.skipped,
            retries=self.retries + other.retries,
            failures_by_reason=dict(reasons),
        )

    @property
    def answered(self) -> int:
        return self.tasks - self.failed - self.skipped

    def line(self, desc: str) -> str:
        """The summary as one log line.

        Args:
            desc: the stage's label.

        Returns:
            The line: answered, re-asked and failed calls, with the failures' reasons.
        """
        reasons = ", ".join(
            f"{count} x {reason}"
            for reason, count in sorted(self.failures_by_reason.items(), key=lambda kv: -kv[1])
        )
        return (
            f"{desc}: {self.answered} of {self.tasks} answered, {self.reasked} re-asked, "
            f"{self.unreadable} still unreadable, {self.failed} failed"
            + (f" ({reasons})" if reasons else "")
            + (f", {self.skipped} skipped as too long" if self.skipped else "")
            + f", {self.retries} retries"
        )


def too_long(config: EndpointConfig, request: ChatRequest) -> str | None:
    """Why `request` is not sent to `config`'s endpoint, or None when it fits its budget.

    Args:
        config: the endpoint.
        request: the request.

    Returns:
        The reason, or None.
    """
    budget = config.input_token_budget
    if budget is None:
        return None
    needed = request.estimated_input_tokens()
    if config.kind.reply_shares_context:
        needed += request.max_tokens  # the prompt and the reply share one context
    if needed <= budget:
        return None
    return (
        f"{SKIPPED_TOO_LONG}: ~{needed} tokens (estimated) do not fit the {budget} of "
        f"endpoints.{config.name} (max_input_tokens)"
    )


def _reason(error: str) -> str:
    """A failure's kind, for counting: its text up to the first colon."""
    return error.split(":", 1)[0][:60]


class TaskEngine:
    """Runs tasks on one client: `run(tasks)` or `await arun(tasks)`, results in order."""

    def __init__(self, client: LLMClient, *, max_reasks: int = 2, fail_loud: bool = False) -> None:
        """`fail_loud`: raise `EndpointError` after a run in which a larger share of calls
        failed than the endpoint's `max_failure_share` (pipeline nodes do; a library
        caller may prefer the rows with their errors).

        Args:
            client: the client that sends the calls.
            max_reasks: re-asks of an unreadable reply.
            fail_loud: raise on too many failed calls (above).
        """
        if not isinstance(max_reasks, int) or isinstance(max_reasks, bool) or max_reasks < 0:
            raise ConfigError(f"max_reasks must be an integer >= 0, got {max_reasks!r}")
        self.client = client
        self.max_reasks = max_reasks
        self.fail_loud = fail_loud
        self.last_summary = RunSummary()

    def run(
        self, tasks: Iterable[Task], *, desc: str | None = None, total: int | None = None
    ) -> list[Outcome]:
        """Every task's outcome, in order. `tasks` may be lazy (give `total` for the bar):
        the first calls are in flight while later tasks are still being built.

        Args:
            tasks: the tasks, possibly built lazily.
            desc: the progress bar's label (None: no bar).
            total: how many tasks there are, for the bar.

        Returns:
            The outcomes, in task order.
        """
        return self.client.call(self._collect(tasks, desc, total))

    async def arun(
        self, tasks: Iterable[Task], *, desc: str | None = None, total: int | None = None
    ) -> list[Outcome]:
        """`run` for code already on an event loop.

        Args:
            tasks: the tasks, possibly built lazily.
            desc: the progress bar's label (None: no bar).
            total: how many tasks there are, for the bar.

        Returns:
            The outcomes, in task order.
        """
        return await self.client.acall(self._collect(tasks, desc, total))

    def run_into(
        self,
        tasks: Iterable[Task],
        sink: Callable[[int, Outcome], None],
        *,
        desc: str | None = None,
        total: int | None = None,
    ) -> RunSummary:
        """`sink(index, outcome)` gets each task's outcome once it is final (no re-ask
        left), in completion order, on the client's loop; nothing is kept here. At
        UltraFeedback scale a stage that turns outcomes into columns as they come holds
        its table, not a million replies and their readings as well.

        Args:
            tasks: the tasks, possibly built lazily.
            sink: gets (task index, outcome).
            desc: the progress bar's label (None: no bar).
            total: how many tasks there are, for the bar.

        Returns:
            The run's counts.
        """
        return self.client.call(self.stream_into(tasks, sink, desc=desc, total=total))

    async def stream_into(
        self,
        tasks: Iterable[Task],
        sink: Callable[[int, Outcome], None],
        *,
        desc: str | None = None,
        total: int | None = None,
    ) -> RunSummary:
        """`run_into` for code running on the client's loop (a stage of `run_together`):
        several of these at once share the client's concurrency limit, one queue.

        Args:
            tasks: the tasks, possibly built lazily.
            sink: gets (task index, outcome).
            desc: the progress bar's label (None: no bar).
            total: how many tasks there are, for the bar.

        Returns:
            The run's counts.
        """
        return await self._run(tasks, sink, desc, total)

    async def _collect(
        self, tasks: Iterable[Task], desc: str | None, total: int | None
    ) -> list[Outcome]:
        outcomes: dict[int, Outcome] = {}
        summary = await self._run(tasks, outcomes.__setitem__, desc, total)
        return [outcomes[index] for index in range(summary.tasks)]  # every task delivers

    async def _run(
        self,
        tasks: Iterable[Task],
        sink: Callable[[int, Outcome], None],
        desc: str | None,
        total: int | None,
    ) -> RunSummary:
        if total is None and isinstance(tasks, Sized):
            total = len(tasks)  # the bar's total, so that it estimates the time left
        # Task index -> its state, until its outcome is final: a stage of millions of tasks
        # holds the ones in flight or waiting for a re-ask, not one slot per task.
        running: dict[int, _Running] = {}
        may_reask = self.max_reasks > 0
        retries_before = self.client.stats.retries
        summary = RunSummary()
        failures: Counter[str] = Counter()

        def deliver(index: int) -> None:
            outcome = running.pop(index).outcome  # the sink keeps what it needs
            if outcome.reading.status == SKIPPED_TOO_LONG:
                summary.skipped += 1
            elif outcome.error is not None:
                summary.failed += 1
                failures[_reason(outcome.error)] += 1
            elif not outcome.reading.ok:
                summary.unreadable += 1
            sink(index, outcome)

        sent: dict[int, int] = {}  # the stream's index of each request in flight -> its task
        stream_indices = itertools.count()  # the client numbers requests in the order given

        def requests() -> Iterator[ChatRequest]:
            for position, task in enumerate(tasks):
                summary.tasks += 1
                item = running[position] = _Running.of(task)
                reason = too_long(self.client.config, task.request)
                if reason is not None:
                    item.skip(reason)
                    deliver(position)
                    continue
                sent[next(stream_indices)] = position
                yield task.request

        def receive(index: int, reply: ChatResult) -> None:
            # Runs as each reply arrives, so reading overlaps the calls still in flight.
            position = sent.pop(index)
            if running[position].take_first(reply, may_reask):
                deliver(position)

        await self.client.stream(
            requests(), desc=desc, on_result=receive, total=total, keep_results=False
        )
        for round_number in range(1, self.max_reasks + 1):
            pending = list(running)  # in task order: the dict keeps insertion order
            if not pending:
                break
            reasks = [
                reask_request(
                    running[i].request,
                    running[i].outcome.reply,
                    running[i].outcome.reading.problem_text,
                )
                for i in pending
            ]
            replies = await self.client.stream(
                reasks, desc=None if desc is None else f"{desc} re-ask {round_number}"
            )
            if round_number == 1:  # later rounds re-ask some of these again
                summary.reasked = len(pending)
            for index, request, reply in zip(pending, reasks, replies, strict=True):
                item = running[index]
                item.take_reask(request, reply)
                if round_number == self.max_reasks or not item.needs_reask():
                    deliver(index)
        summary.retries = self.client.stats.retries - retries_before
        summary.failures_by_reason = dict(failures)
        self.last_summary = summary
        if desc is not None and summary.tasks:
            quiet = not (summary.failed or summary.unreadable or summary.retries or summary.skipped)
            logger.log(logging.INFO if quiet else logging.WARNING, summary.line(desc))
        if self.fail_loud:
            self.raise_if_failing(summary, desc)
        return summary

    def raise_if_failing(self, summary: RunSummary, desc: str | None) -> None:
        """Raise `EndpointError` when not one task of `summary` was answered, or a larger
        share than the endpoint's `max_failure_share` failed (what `fail_loud` checks after
        each run; a stage that runs the engine more than once checks their sum).

        Args:
            summary: One run's summary, or several runs' added (`RunSummary.plus`).
            desc: What the tasks were, for the message.
        """
        share = self.client.config.max_failure_share
        if summary.tasks and not summary.answered:
            raise EndpointError(
                f"{summary.line(desc or 'calls')}: not one call was answered by "
                f"{self.client.config.describe()}"
            )
        if summary.tasks and summary.failed > share * summary.tasks:
            raise EndpointError(
                f"{summary.line(desc or 'calls')}: more than max_failure_share {share:.0%} "
                f"failed on {self.client.config.describe()}; the {summary.answered} answered "
                "calls are cached: fix the endpoint and run the same command to resume"
            )


def overlaps_stages(client: LLMClient) -> bool:
    """Whether `run_together` runs stages at once on `client`: an endpoint answered one
    request at a time under a concurrency limit (HTTP, the embedded model). A batch backend
    (in-process vLLM, Ray) or a provider's Batch API schedules each stream as a whole, and
    its stages run one after another.

    Args:
        client: the judge client.

    Returns:
        True when stages overlap.
    """
    return not client.backend.is_batch and not client.config.uses_batch_api


def run_together(client: LLMClient, stages: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run `stages` (coroutine functions, each a whole stage: its `stream_into` rounds and
    its bookkeeping) on `client`'s loop at once, so that their calls share one queue under
    the endpoint's one concurrency limit: the endpoint is never left idle by one stage's
    tail while another has calls to send. Returns each stage's result, in order.

    A stage that fails (a tripped breaker, `fail_loud`) cancels the others; every answer
    received so far is cached, so the same run resumes. Where the endpoint does not
    overlap streams (`overlaps_stages`) the stages run one after another.

    Args:
        client: the client whose loop and limit the stages share.
        stages: the stages, as coroutine functions.

    Returns:
        Each stage's result, in order.
    """
    return client.call(_together(stages, overlap=overlaps_stages(client)))


async def _together(stages: Sequence[Callable[[], Awaitable[T]]], *, overlap: bool) -> list[T]:
    if not overlap:
        return [await stage() for stage in stages]
    running = [asyncio.ensure_future(stage()) for stage in stages]
    try:
        return list(await asyncio.gather(*running))
    finally:
        # On a failure or a cancel (Ctrl-C): the other stages stop too, nothing is left
        # pending on the loop.
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
