"""`FakeLLMServer`: the fake server on a thread of the test's own process, and the asyncio
serving loop it shares with the command line."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from llm_feedback.testing.batch_api import BatchScript
from llm_feedback.testing.rate_limits import RateLimits
from llm_feedback.testing.replies import Responder, schema_responder
from llm_feedback.testing.routes import FakeLLMApp


async def serve_until_stopped(
    app: FakeLLMApp,
    host: str,
    port: int,
    stop_requested: asyncio.Event,
    on_listening: Callable[[int], None],
) -> None:
    """Serve `app` until `stop_requested` is set.

    Args:
        app: the fake server's app.
        host: the host to listen on.
        port: the port (0: a free one).
        stop_requested: set to stop.
        on_listening: gets the port once listening.
    """
    server = await asyncio.start_server(app.handle_connection, host, port)
    on_listening(server.sockets[0].getsockname()[1])
    await stop_requested.wait()
    # No wait_closed(): it would wait for idle keep-alive clients. asyncio.run cancels
    # the open connection handlers, which close their sockets on the way out.
    server.close()


def base_url_for(host: str, port: int) -> str:
    """The `/v1` base URL a client reaches the server at (a wildcard host is reached on 127.0.0.1).

    Args:
        host: the host the server listens on.
        port: its port.

    Returns:
        The URL.
    """
    reachable_host = "127.0.0.1" if host in ("", "0.0.0.0") else host
    if ":" in reachable_host:
        reachable_host = f"[{reachable_host}]"
    return f"http://{reachable_host}:{port}/v1"


class FakeLLMServer:
    """The fake server on a daemon thread with its own event loop, for tests.

    ``with FakeLLMServer(responder) as server:`` starts it; ``server.base_url`` is what to
    give the client. Counters and recorded bodies can be read from the test's thread.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        latency_s: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        record: bool = True,
        *,
        api_key: str | None = None,
        batch: BatchScript | None = None,
        count_tokens: Callable[[str], int] | None = None,
        rate_limits: RateLimits | None = None,
    ) -> None:
        """`api_key`: when given, a request with any other key gets HTTP 401; `batch`: how
        the Batch API routes behave (`batch_script` may change it between runs).
        `count_tokens`: how `usage` counts a message or reply's tokens; by default its
        whitespace-separated words. Given a tokenizer's count (where tests compare token
        figures), prompts are billed as OpenAI bills chat: plus 3 tokens a message and 3.
        `rate_limits`: per-minute limits on requests and tokens, enforced with 429s and
        announced in rate-limit headers (testing/rate_limits.py).

        Args:
            responder: answers each chat request (None: `schema_responder`).
            latency_s: the delay before each answer.
            host: the host to listen on.
            port: the port (0: a free one).
            record: keep each request body in `requests`.
            api_key: the one key accepted (None: any).
            batch: how the Batch API routes behave.
            count_tokens: how `usage` counts tokens.
            rate_limits: per-minute limits on requests and tokens.
        """
        self._app = FakeLLMApp(
            responder or schema_responder,
            latency_s,
            record,
            api_key,
            batch_script=batch,
            count_tokens=count_tokens,
            rate_limits=rate_limits,
        )
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested: asyncio.Event | None = None
        self._startup_error: BaseException | None = None

    def start(self) -> FakeLLMServer:
        """Starts serving and returns once the socket is listening."""
        if self._thread is not None:
            raise RuntimeError("the server is already running")
        listening = threading.Event()
        self._startup_error = None
        self._thread = threading.Thread(
            target=self._run, args=(listening,), name="FakeLLMServer", daemon=True
        )
        self._thread.start()
        listening.wait()
        if self._startup_error is not None:
            self._thread.join()
            self._thread = None
            raise self._startup_error
        return self

    def _run(self, listening: threading.Event) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop_requested = asyncio.Event()

            def on_listening(port: int) -> None:
                self._port = port
                listening.set()

            await serve_until_stopped(
                self._app, self._host, self._requested_port, self._stop_requested, on_listening
            )

        try:
            asyncio.run(serve())
        except BaseException as exc:  # reported to start() instead of dying on the thread
            self._startup_error = exc
        finally:
            listening.set()

    def stop(self) -> None:
        """Stops serving, closes open connections and joins the thread."""
        if self._thread is None:
            return
        if self._loop is not None and self._stop_requested is not None:
            self._loop.call_soon_threadsafe(self._stop_requested.set)
        self._thread.join()
        self._thread = self._loop = self._stop_requested = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the server has not been started")
        return self._port

    @property
    def base_url(self) -> str:
        return base_url_for(self._host, self.port)

    @property
    def request_count(self) -> int:
        """Chat completion requests received since start or the last reset."""
        return self._app.chat_requests

    @property
    def max_in_flight(self) -> int:
        """The most chat requests held at once (received, not yet answered) since start or
        the last reset: what a client's concurrency limit must bound."""
        return self._app.max_in_flight

    @property
    def in_flight_log(self) -> list[tuple[float, int]]:
        """(`time.monotonic()`, chat requests held) at every arrival and answer since start
        or the last reset (kept when `record`): whether the client kept the server full, and
        where it left slots idle."""
        return self._app.in_flight_log()

    @property
    def connection_count(self) -> int:
        """TCP connections accepted since start or the last reset."""
        return self._app.connections

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Bodies of the chat requests received (empty unless `record`), oldest first."""
        return self._app.recorded_bodies()

    @property
    def batch_script(self) -> BatchScript:
        return self._app.batch_api.script

    @batch_script.setter
    def batch_script(self, script: BatchScript) -> None:
        self._app.batch_api.script = script

    @property
    def batch_counts(self) -> dict[str, int]:
        """Files uploaded, batches created and batch lines answered since start."""
        return dict(self._app.batch_api.counts)

    @property
    def batch_retrievals(self) -> list[str]:
        """The batch ids clients polled, oldest first."""
        return list(self._app.batch_api.retrieved)

    def stats(self) -> dict[str, int]:
        """The same counters as ``GET /_stats``."""
        return self._app.stats()

    def reset(self) -> None:
        """Zeroes the counters and forgets recorded bodies and per-request attempts."""
        self._app.reset()
