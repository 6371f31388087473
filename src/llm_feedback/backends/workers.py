"""Worker processes that send an endpoint's requests from more than one core.

At zero latency one Python process spends about a millisecond of CPU per call, so one event
loop caps a stage at a few hundred calls a second while a served model on a GPU answers far
more. A `WorkerPool` spreads the sending over processes, each with its own event loop and
connection pool, running the client's own send-with-retries code. Everything that must stay
single stays in the parent `LLMClient`: cache lookups and the one cache writer,
deduplication, accounting, the circuit breaker, progress and the engine's reading.

The endpoint's concurrency limit stays one limit: the parent holds a slot of its semaphore
for every request a worker has, and gives each worker at most its share of the limit (the
shares sum to it). Results come back under their request key. A worker that dies has its
unanswered requests sent again by the others (once each; the log says so); when none is
left, the stage fails.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import dataclasses
import logging
import multiprocessing
import multiprocessing.util
import os
import queue
import signal
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm_feedback.backends.base import EndpointConfig, register_credentials
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.backends.secrets import redact
from llm_feedback.core.errors import EndpointError

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

logger = logging.getLogger(__name__)

#: `workers: auto` uses processes once one stream has more cache misses than this.
WORKER_THRESHOLD = 4000
#: `workers: auto` uses at most this many processes (and leaves one core to the parent).
AUTO_MAX_PROCESSES = 4
#: `workers: auto` sends from one process on machines with fewer cores. Feeding a worker
#: costs the parent ~0.12 ms a call and sending costs a worker ~0.3 ms, while the parent
#: alone sends at ~0.25 ms: workers only pay when each has a core beside the parent's
#: (on 2 cores, 2 workers made 0.70x the calls/s of one process; benchmarks/RESULTS.md).
AUTO_MIN_CORES = 4
_START_TIMEOUT_S = 120.0
_STOP_TIMEOUT_S = 5.0
# 'spawn': the parent has threads (the client's loop, the cache writer), which fork copies
# in whatever state they are.
_CONTEXT = multiprocessing.get_context("spawn")


def worker_processes(config: EndpointConfig) -> int:
    """How many processes send a large stream of this endpoint (1: the client's own loop;
    always for per-minute limits, which one process paces).

    Args:
        config: The endpoint.

    Returns:
        The number of processes, at least 1 and at most the endpoint's concurrency.
    """
    if config.workers == "auto":
        if not config.kind.sends_from_worker_processes(config) or config.is_rate_limited:
            return 1
        cores = usable_cores()
        wanted = min(cores - 1, AUTO_MAX_PROCESSES) if cores >= AUTO_MIN_CORES else 1
    else:
        wanted = config.workers
    return max(1, min(wanted, config.concurrency))  # every worker needs one slot at least


def usable_cores() -> int:
    """The cores this process may run on (a container's or taskset's share, not the host's)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def concurrency_shares(limit: int, processes: int) -> list[int]:
    """`limit` split over `processes` as evenly as it goes (each >= 1 when limit >= processes).

    Args:
        limit: The endpoint's concurrency.
        processes: The number of worker processes.

    Returns:
        Each process's share, the larger ones first.
    """
    base, extra = divmod(limit, processes)
    return [base + (1 if index < extra else 0) for index in range(processes)]


@dataclass(slots=True)
class _Job:
    key: str
    request: ChatRequest
    future: asyncio.Future
    resent: bool = False


class _Worker:
    """The parent's side of one worker process: its pipes, threads and what it holds."""

    def __init__(self, index: int, share: int) -> None:
        self.index = index
        self.share = share
        self.load = 0  # requests sent to it and not answered yet
        self.jobs: dict[str, list[_Job]] = {}
        self.outbox: list[tuple[str, ChatRequest]] = []
        self.retries_seen = 0
        self.pid: int | None = None
        self.ready: asyncio.Future | None = None
        self.process: Any = None
        self.sends: queue.SimpleQueue = queue.SimpleQueue()
        self.threads: list[threading.Thread] = []

    def take(self, job: _Job) -> None:
        self.jobs.setdefault(job.key, []).append(job)
        self.load += 1
        self.outbox.append((job.key, job.request))

    def answered(self, key: str) -> _Job:
        jobs = self.jobs[key]
        job = jobs.pop(0)  # identical requests in flight get identical answers
        if not jobs:
            del self.jobs[key]
        self.load -= 1
        return job

    def describe(self) -> str:
        return f"worker process {self.index + 1} (pid {self.pid})"


class WorkerPool:
    """The worker processes of one client, started on first use and kept until `close`."""

    def __init__(
        self, config: EndpointConfig, processes: int, stats: Any, client_type: Callable[..., Any]
    ) -> None:
        """A pool whose processes start on first use.

        Args:
            config: The endpoint.
            processes: How many worker processes to start.
            stats: The client's `ClientStats`, to which retries in the workers are added.
            client_type: The client class each worker opens (`LLMClient`, which owns the pool).
        """
        self.config = config
        self.processes = processes
        self._stats = stats
        self._client_type = client_type
        self._workers: list[_Worker] = []
        self._waiting: collections.deque[_Job] = collections.deque()
        self._started: asyncio.Future | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flush_scheduled = False
        self._closing = False
        self._broken: str | None = None
        _POOLS.add(self)

    @classmethod
    def for_endpoint(
        cls, config: EndpointConfig, stats: Any, client_type: Callable[..., Any]
    ) -> WorkerPool | None:
        """The pool of an endpoint, when it sends from more than one process.

        Args:
            config: The endpoint.
            stats: The client's `ClientStats`.
            client_type: The client class each worker opens.

        Returns:
            The pool, or None when one process (the client's own loop) sends.
        """
        processes = worker_processes(config)
        return cls(config, processes, stats, client_type) if processes > 1 else None

    def takes(self, misses: int) -> bool:
        """Whether a stream with `misses` uncached requests so far is sent by the workers.

        Args:
            misses: The stream's uncached requests so far.

        Returns:
            True when the workers send it (always for a set number of workers).
        """
        return self.config.workers != "auto" or misses > WORKER_THRESHOLD

    @property
    def pids(self) -> list[int]:
        """The process ids of the live workers (none before the first request)."""
        return [worker.pid for worker in self._workers if worker.pid is not None]

    @property
    def shares(self) -> list[int]:
        return [worker.share for worker in self._workers]

    # -- on the client's event loop ----------------------------------------------------
    async def send(self, key: str, request: ChatRequest) -> ChatResult:
        """Have a worker answer `request`; the caller holds a slot of the endpoint's limit.

        Args:
            key: The request's cache key.
            request: The request.

        Returns:
            Its result.

        Raises:
            EndpointError: The workers could not start or all exited, or the backend raised
                in a worker.
        """
        if self._started is None:
            self._started = asyncio.ensure_future(self._start())
        await asyncio.shield(self._started)
        if self._broken is not None:
            raise EndpointError(self._broken)
        job = _Job(key, request, asyncio.get_running_loop().create_future())
        self._waiting.append(job)
        self._dispatch()
        return await job.future

    async def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        shares = concurrency_shares(self.config.concurrency, self.processes)
        self._workers = [_Worker(index, share) for index, share in enumerate(shares)]
        for worker in self._workers:
            worker.ready = self._loop.create_future()
        credentials = (
            {self.config.credentials: {"api_key": self.config.api_key()}}
            if self.config.credentials is not None
            else {}
        )
        await asyncio.to_thread(self._spawn_all, credentials)
        try:
            ready = asyncio.gather(*(worker.ready for worker in self._workers))
            await asyncio.wait_for(ready, _START_TIMEOUT_S)
        except (EndpointError, asyncio.TimeoutError) as error:
            self._stop_processes()
            self._workers = []
            message = str(error) or f"did not start within {_START_TIMEOUT_S:.0f} s"
            raise EndpointError(
                f"{self.config.describe()}: the worker processes could not start: {message}"
            ) from None
        logger.info(
            "%s: sending from %d worker processes (concurrency shares %s)",
            self.config.describe(),
            len(self._workers),
            self.shares,
        )

    def _spawn_all(self, credentials: dict[str, dict[str, Any]]) -> None:
        worker_config = dataclasses.replace(self.config, workers=1)  # a worker sends itself
        for worker in self._workers:
            child_reads, parent_writes = _CONTEXT.Pipe(duplex=False)
            parent_reads, child_writes = _CONTEXT.Pipe(duplex=False)
            # Credentials travel as process arguments: pickled through a pipe, never in
            # the command line, the environment of other processes, a log or a file.
            worker.process = _CONTEXT.Process(
                target=_serve,
                args=(self._client_type, worker_config, credentials, child_reads, child_writes),
                name=f"llm-worker-{self.config.name}-{worker.index + 1}",
                daemon=True,
            )
            worker.process.start()
            child_reads.close()  # closed here, so that the child's exit reads as EOF
            child_writes.close()
            worker.threads = [
                threading.Thread(target=self._send_forever, args=(worker, parent_writes)),
                threading.Thread(target=self._receive_forever, args=(worker, parent_reads)),
            ]
            for thread in worker.threads:
                thread.daemon = True
                thread.start()

    def _dispatch(self) -> None:
        """Hand waiting requests to the workers with free slots, most free first."""
        while self._waiting:
            worker = max(self._workers, key=lambda w: w.share - w.load, default=None)
            if worker is None or worker.load >= worker.share:
                return  # every slot is taken: a result will free one
            job = self._waiting.popleft()
            if job.future.done():  # its caller gave up (Ctrl-C, a tripped breaker)
                continue
            worker.take(job)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        """One message per worker for everything dispatched in this turn of the loop."""
        self._flush_scheduled = False
        for worker in self._workers:
            if worker.outbox:
                worker.sends.put(worker.outbox)
                worker.outbox = []

    def _on_message(self, worker: _Worker, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind in ("ready", "error") and worker.ready.done():
            return  # the pool gave up on starting meanwhile
        if kind == "ready":
            worker.pid = message[1]
            worker.ready.set_result(None)
        elif kind == "error":
            worker.ready.set_exception(EndpointError(f"{worker.describe()}: {message[1]}"))
        else:
            _, retries, answers = message
            self._stats.retries += retries - worker.retries_seen
            worker.retries_seen = retries
            for key, answer in answers:
                job = worker.answered(key)
                if job.future.done():
                    continue
                if isinstance(answer, ChatResult):
                    job.future.set_result(answer)
                else:  # the backend raised what it never should: as in-process, it stops
                    job.future.set_exception(EndpointError(f"{worker.describe()}: {answer}"))
            self._dispatch()

    def _on_exit(self, worker: _Worker) -> None:
        if self._closing or worker not in self._workers:
            return
        worker.process.join(1.0)
        code = worker.process.exitcode
        self._workers.remove(worker)
        orphans = [job for jobs in worker.jobs.values() for job in jobs if not job.future.done()]
        if worker.ready is not None and not worker.ready.done():
            worker.ready.set_exception(
                EndpointError(f"{worker.describe()} exited with code {code} while starting")
            )
            return
        if not self._workers:
            self._broken = (
                f"{self.config.describe()}: every worker process exited (the last, "
                f"{worker.describe()}, with code {code}); answered calls are cached: run the "
                "same command again to resume"
            )
            logger.error("%s", self._broken)
            for job in [*orphans, *self._waiting]:
                if not job.future.done():
                    job.future.set_exception(EndpointError(self._broken))
            self._waiting.clear()
            return
        # Its share goes to the others, so the stage keeps the endpoint's concurrency.
        for index, extra in enumerate(concurrency_shares(worker.share, len(self._workers))):
            self._workers[index].share += extra
        resent = [job for job in orphans if not job.resent]
        for job in orphans:
            if job.resent:
                job.future.set_result(
                    ChatResult.failure(
                        "two worker processes exited while sending this request",
                        model=self.config.model,
                    )
                )
            job.resent = True
        logger.warning(
            "%s: %s exited with code %d holding %d unanswered requests; the other %d "
            "worker(s) send %d of them again (a call it had made may be paid twice), %d "
            "fail as lost twice",
            self.config.describe(),
            worker.describe(),
            code if code is not None else -1,
            len(orphans),
            len(self._workers),
            len(resent),
            len(orphans) - len(resent),
        )
        self._waiting.extendleft(reversed(resent))
        self._dispatch()

    # -- threads -------------------------------------------------------------------------
    def _send_forever(self, worker: _Worker, connection: Connection) -> None:
        """Pipe writes block when the worker is busy: they never hold up the event loop."""
        while (batch := worker.sends.get()) is not None:
            try:
                connection.send(batch)
            except OSError:  # it exited; the receiving thread reports that
                break
        connection.close()

    def _receive_forever(self, worker: _Worker, connection: Connection) -> None:
        while True:
            try:
                message = connection.recv()
            except (EOFError, OSError):
                message = None
            try:
                if message is None:
                    self._loop.call_soon_threadsafe(self._on_exit, worker)
                    break
                self._loop.call_soon_threadsafe(self._on_message, worker, message)
            except RuntimeError:  # the client's loop is closed: nobody waits any more
                break
        connection.close()

    # -- lifecycle -----------------------------------------------------------------------
    def close(self) -> None:
        """Stop the workers (called by the client's close, from outside its loop)."""
        self._closing = True
        self._stop_processes()
        self._workers = []
        self._waiting.clear()
        self._started = None
        self._broken = None
        self._closing = False

    def _stop_processes(self) -> None:
        for worker in self._workers:
            worker.sends.put(None)
        for worker in self._workers:
            if worker.process is None:
                continue
            worker.process.join(_STOP_TIMEOUT_S)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            for thread in worker.threads:
                thread.join(_STOP_TIMEOUT_S)


_POOLS: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


@atexit.register  # after multiprocessing.util's (imported above), so it runs before it
def _stop_all_pools() -> None:
    """A client left open at exit still stops its workers, quietly: multiprocessing's own
    exit handler would terminate them first, which would read as workers dying."""
    for pool in list(_POOLS):
        pool.close()


# -- in the worker process ---------------------------------------------------------------
class _Replies:
    """On the worker client's loop: reads what the parent hands over and sends each answer
    back under its key, all of one loop turn in one message (one thread, no hand-offs)."""

    def __init__(self, client: Any, requests: Connection, results: Connection) -> None:
        self._client = client
        self._requests = requests
        self._connection = results
        self._answers: list[tuple[str, ChatResult | str]] = []
        self._tasks: set[asyncio.Task] = set()
        self._stopped: asyncio.Future | None = None

    async def serve(self) -> None:
        """Until the parent says stop, or is gone."""
        loop = asyncio.get_running_loop()
        self._stopped = loop.create_future()
        loop.add_reader(self._requests.fileno(), self._read)
        try:
            await self._stopped
        finally:
            loop.remove_reader(self._requests.fileno())

    def _read(self) -> None:
        try:
            while self._requests.poll():
                batch = self._requests.recv()
                if batch is None:  # the parent says stop
                    self._stop()
                    return
                for key, request in batch:
                    task = asyncio.ensure_future(self._answer(key, request))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
        except EOFError:  # the parent exited
            self._stop()

    def _stop(self) -> None:
        if not self._stopped.done():
            self._stopped.set_result(None)

    async def _answer(self, key: str, request: ChatRequest) -> None:
        try:
            answer: ChatResult | str = await self._client.send_uncached(request)
        except Exception as error:  # noqa: BLE001 - reported to the parent, which raises it
            answer = redact(f"{type(error).__name__}: {error}")
        self._answers.append((key, answer))
        if len(self._answers) == 1:
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        answers, self._answers = self._answers, []
        self._connection.send(("answers", self._client.stats.retries, answers))


def _serve(
    client_type: Callable[..., Any],
    config: EndpointConfig,
    credentials: dict[str, dict[str, Any]],
    requests: Connection,
    results: Connection,
) -> None:
    """A worker's life: open a client, send what the parent hands over, until told to stop
    (or the parent is gone)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    # A spawned process has no logging set up: its retry warnings still reach the terminal.
    logging.basicConfig(
        level=logging.WARNING, format="%(levelname)s [worker pid %(process)d] %(message)s"
    )
    try:
        register_credentials(credentials)
        client = client_type(config, None, progress=False)
        client.open()
    except Exception as error:  # noqa: BLE001 - the parent fails the stage with it
        results.send(("error", redact(f"{type(error).__name__}: {error}")))
        return
    results.send(("ready", os.getpid()))
    try:
        client.call(_Replies(client, requests, results).serve())
    finally:
        client.close()
