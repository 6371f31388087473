"""The fake server's request handling: one keep-alive connection loop, the chat, model,
Batch API and control routes, and the counters tests and benchmarks read back."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from llm_feedback.testing.batch_api import BatchAPI, BatchScript, batch_route
from llm_feedback.testing.protocol import (
    CHAT_PATHS,
    DEFAULT_MODEL_ID,
    RequestHead,
    Response,
    completion,
    encode,
    error_response,
    json_response,
    models_response,
    parse_head,
    word_count,
)
from llm_feedback.testing.provider_apis import ProviderAPIs
from llm_feedback.testing.rate_limits import RateLimits, ServerRateLimiter
from llm_feedback.testing.replies import Reply, RequestContext, Responder, message_text

_AZURE_PREFIX = "/openai/deployments/"
_CHAT_SUFFIX = "/chat/completions"
_CONTROL_PATHS = frozenset({"/_stats", "/_reset"})


def _messages_key(messages: list[Any]) -> str:
    encoded = json.dumps(messages, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.blake2b(encoded, digest_size=16).hexdigest()


def _is_anthropic(head: RequestHead) -> bool:
    """A request from Anthropic's SDK (its models list shares OpenAI's path)."""
    return "anthropic-version" in head.headers


def _azure_deployment(path: str) -> str | None:
    if path.startswith(_AZURE_PREFIX):
        return path[len(_AZURE_PREFIX) : -len(_CHAT_SUFFIX)]
    return None


# OpenAI caches a prompt's prefix from this many tokens on (its prompt caching guide).
CACHE_MIN_TOKENS = 1024


class FakeLLMApp:
    """Request handling and counters, shared by the in-thread and the subprocess server."""

    def __init__(
        self,
        responder: Responder,
        latency_s: float,
        record: bool,
        api_key: str | None = None,
        *,
        batch_script: BatchScript | None = None,
        count_tokens: Callable[[str], int] | None = None,
        rate_limits: RateLimits | None = None,
    ) -> None:
        """Set up the routes and counters.

        Args:
            responder: answers each chat request.
            latency_s: the delay before each answer.
            record: keep each request body.
            api_key: the one key accepted (None: any).
            batch_script: how the Batch API routes behave.
            count_tokens: how `usage` counts tokens (None: words).
            rate_limits: per-minute limits on requests and tokens.
        """
        self.api_key = api_key  # when set, every other key is answered with 401
        # Per-minute limits on chat requests and tokens (testing/rate_limits.py).
        self.rate_limiter = ServerRateLimiter(rate_limits) if rate_limits else None
        self.count_tokens = count_tokens or word_count
        self.batch_api = BatchAPI(batch_script or BatchScript(), self.respond, self.count_tokens)
        self.providers = ProviderAPIs(
            self.answer,
            self.batch_api,
            self.count_tokens,
            lambda: self.api_key,
            lambda: self.rate_limiter,
        )
        self._responder = responder
        self._latency_s = latency_s
        self._record = record
        # Handlers run on the event loop thread while tests read and reset from theirs.
        self._lock = threading.Lock()
        self.chat_requests = 0
        self.connections = 0
        self.max_in_flight = 0
        self._total_requests = 0
        self._in_flight = 0
        # (monotonic time, chat requests held) at each change, while recording: how full
        # the client kept the server over time (`in_flight_log`).
        self._in_flight_log: list[tuple[float, int]] = []
        self._recorded: list[dict[str, Any]] = []
        self._attempts_per_key: dict[str, int] = {}
        self._cached_prompts: set[str] = set()  # system messages seen (`_automatic_cache`)
        models_route = ("GET", models_response)
        self._routes: dict[str, tuple[str, Callable[[], Response]]] = {
            "/v1/models": models_route,
            "/models": models_route,
            "/openai/models": models_route,  # Azure's models list
            "/health": ("GET", lambda: json_response(200, {"status": "ok"})),
            "/_stats": ("GET", lambda: json_response(200, self.stats())),
            "/_reset": ("POST", self._reset_route),
        }

    def stats(self) -> dict[str, int]:
        with self._lock:
            counters = {
                "requests": self._total_requests,
                "chat_requests": self.chat_requests,
                "connections": self.connections,
                "max_in_flight": self.max_in_flight,
            }
        if self.rate_limiter is not None:  # 429s sent for the rate limits
            counters["rate_limited"] = self.rate_limiter.rate_limited
        return counters

    def recorded_bodies(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._recorded)

    def in_flight_log(self) -> list[tuple[float, int]]:
        with self._lock:
            return list(self._in_flight_log)

    def reset(self) -> None:
        with self._lock:
            self._total_requests = self.chat_requests = self.connections = 0
            self.max_in_flight = self._in_flight
            self._recorded.clear()
            self._in_flight_log.clear()
            self._attempts_per_key.clear()
        if self.rate_limiter is not None:
            self.rate_limiter.reset()

    async def handle_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Serve one HTTP/1.1 connection, request after request, until it closes.

        Args:
            reader: the connection's reader.
            writer: its writer.
        """
        with self._lock:
            self.connections += 1
        try:
            while True:
                try:
                    raw_head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return  # the client closed the connection between requests
                try:
                    head = parse_head(raw_head)
                except ValueError as exc:
                    writer.write(encode(error_response(400, str(exc)), keep_alive=False))
                    await writer.drain()
                    return
                length = head.content_length
                body = await reader.readexactly(length) if length else b""
                response = await self._dispatch(head, body)
                writer.write(encode(response, head.keep_alive))
                await writer.drain()
                if not head.keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client went away mid-request (e.g. after its own timeout)
        except asyncio.CancelledError:
            # The server is stopping. Ending quietly spares the traceback Python 3.11's
            # StreamReaderProtocol prints for a cancelled connection handler.
            pass
        finally:
            writer.close()

    async def _dispatch(self, head: RequestHead, body: bytes) -> Response:
        method = head.method
        path = head.target.partition("?")[0]
        if path not in _CONTROL_PATHS:
            with self._lock:
                self._total_requests += 1
        if self.providers.serves(path) or (path == "/v1/models" and _is_anthropic(head)):
            # Anthropic's and Gemini's routes check the key and answer in their own words.
            return await self._provider(head, path, body)
        if path not in _CONTROL_PATHS:
            if self.api_key is not None and head.api_key != self.api_key:
                return error_response(401, "Incorrect API key provided")
        if path in CHAT_PATHS or (path.startswith(_AZURE_PREFIX) and path.endswith(_CHAT_SUFFIX)):
            if method != "POST":
                return error_response(405, f"{method} is not allowed on {path}")
            async with self._counted_in_flight():
                return await self._chat(path, body)
        route = batch_route(path)
        if route is not None:
            return self.batch_api.handle(method, route, body)
        return self._route(method, path)

    async def _provider(self, head: RequestHead, path: str, body: bytes) -> Response:
        if not ProviderAPIs.is_chat(path):
            return await self.providers.handle(head, path, body)
        async with self._counted_in_flight():
            return await self.providers.handle(head, path, body)

    @contextlib.asynccontextmanager
    async def _counted_in_flight(self) -> AsyncIterator[None]:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            if self._record:
                self._in_flight_log.append((time.monotonic(), self._in_flight))
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
                if self._record:
                    self._in_flight_log.append((time.monotonic(), self._in_flight))

    def _route(self, method: str, path: str) -> Response:
        route = self._routes.get(path)
        if route is None:
            return error_response(404, f"no route for {method} {path}")
        allowed_method, handle = route
        if method != allowed_method:
            return error_response(405, f"{method} is not allowed on {path}")
        return handle()

    def _reset_route(self) -> Response:
        self.reset()
        return json_response(200, {"reset": True})

    async def _chat(self, path: str, raw_body: bytes) -> Response:
        try:
            body = json.loads(raw_body)
        except ValueError:
            return error_response(400, "the request body is not valid JSON")
        estimate, refusal = self._admit(body)
        if refusal is not None:
            return refusal
        call_index, reply = await self.answer(body, path)
        if reply.status != 200:
            message = reply.error_message or f"simulated error {reply.status}"
            return error_response(
                reply.status, message, reply.retry_after, reply.error_type, reply.error_code
            )
        if reply.raw_body is not None:
            return Response(200, reply.raw_body.encode())
        model = body.get("model") or _azure_deployment(path) or DEFAULT_MODEL_ID
        answer = completion(call_index, model, body, reply, self.count_tokens)
        self._automatic_cache(body, answer["usage"])
        headers = ""
        if self.rate_limiter is not None:
            self.rate_limiter.correct(estimate, answer["usage"]["total_tokens"])
            headers = self.rate_limiter.headers()
        return json_response(200, answer, headers)

    def _automatic_cache(self, body: dict[str, Any], usage: dict[str, Any]) -> None:
        """OpenAI's automatic prompt cache, as far as a judge sees it: system messages of
        at least `CACHE_MIN_TOKENS` sent before are served from the cache, counted in
        `prompt_tokens` and again in `prompt_tokens_details.cached_tokens` (billed at the
        cached rate)."""
        system = [m for m in body["messages"] if isinstance(m, dict) and m.get("role") == "system"]
        tokens = sum(self.count_tokens(message_text(m)) for m in system)
        key = json.dumps(system, sort_keys=True)
        with self._lock:
            seen = key in self._cached_prompts
            if tokens >= CACHE_MIN_TOKENS:
                self._cached_prompts.add(key)
        usage["prompt_tokens_details"] = {"cached_tokens": tokens if seen else 0}

    def _admit(self, body: Any) -> tuple[int, Response | None]:
        """(the tokens counted for a chat request, the response refusing it or None): a
        400 for a body that is not a chat request, a 429 beyond the server's rate limits."""
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return 0, error_response(400, "the request body needs a 'messages' list")
        if body.get("stream"):
            return 0, error_response(400, "streaming is not supported by the fake server")
        if self.rate_limiter is None:
            return 0, None
        # Counted as a provider counts it before the reply: the prompt and max_tokens.
        budget = body.get("max_completion_tokens") or body.get("max_tokens") or 0
        messages = [m for m in body["messages"] if isinstance(m, dict)]
        estimate = sum(self.count_tokens(message_text(m)) for m in messages) + int(budget)
        wait_s = self.rate_limiter.admit(estimate)
        if wait_s is None:
            return estimate, None
        refusal = error_response(429, "Rate limit reached; slow down", wait_s)
        return estimate, refusal._replace(
            extra_headers=refusal.extra_headers + self.rate_limiter.headers()
        )

    async def answer(self, body: dict[str, Any], path: str) -> tuple[int, Reply]:
        """One online call of any API (`body` in chat completions form): counted, answered
        by the responder and delayed by the server's latency and the reply's own.

        Args:
            body: the call's body, in chat completions form.
            path: the route it came in on.

        Returns:
            (the call's number, the reply).
        """
        with self._lock:
            call_index = self.chat_requests
            self.chat_requests += 1
        reply = self.respond(body, call_index, path)
        delay_s = self._latency_s + (reply.delay_s or 0.0)
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        return call_index, reply

    def respond(self, body: dict[str, Any], call_index: int, path: str) -> Reply:
        """The responder's reply to one chat body (from the chat route or a batch line).

        Args:
            body: the chat body.
            call_index: the call's number.
            path: the route it came in on.

        Returns:
            The reply.
        """
        key = _messages_key(body["messages"])
        with self._lock:
            key_call_index = self._attempts_per_key.get(key, 0)
            self._attempts_per_key[key] = key_call_index + 1
            if self._record:
                self._recorded.append(body)
        context = RequestContext(call_index, key_call_index, key, path)
        try:
            reply = self._responder(body, context)
        except Exception as exc:  # a broken responder is reported to the client, not lost
            reply = Reply(status=500, error_message=f"responder raised {exc!r}")
        return Reply(content=reply) if isinstance(reply, str) else reply
