"""A local OpenAI-compatible chat server for tests and benchmarks: the names callers use.

The server speaks just enough HTTP/1.1 (keep-alive, Content-Length bodies) for the
`openai` client, on nothing but `asyncio.start_server`, so that it is never the bottleneck
of a benchmark. What it answers is decided by a *responder*: a callable
`(body: dict, ctx: RequestContext) -> str | Reply`. Built-in responders echo the prompt or
produce JSON that validates against the request's `response_format` schema; combinators
script answers, inject failures and play back sequences.

Two ways to run it:

* in-process, for tests: ``with FakeLLMServer(responder=echo_responder) as server:`` and
  point the client at ``server.base_url``;
* as a child process, for benchmarks, so it does not share the client's GIL:
  ``with serve_in_subprocess(latency_s=0.2) as base_url: ...`` or from a shell
  ``python -m llm_feedback.testing.server --latency 0.2 --port 0 --responder schema``,
  which prints ``LISTENING http://127.0.0.1:PORT/v1`` and serves until SIGTERM/SIGINT.

The Files and Batches routes of the OpenAI Batch API are served too (``/v1/files``,
``/v1/files/{id}/content``, ``/v1/batches``, ``/v1/batches/{id}``, ``/v1/batches/{id}/cancel``
and Azure's ``/openai/...`` forms): each line of a batch is answered by the same responder,
so its replies, failures and malformed output are scripted the same way; a `BatchScript`
sets how long a batch takes and whether it expires part-way.

Per-minute limits on requests and tokens (`RateLimits`, ``--rpm`` / ``--tpm``) are
enforced with 429s and announced in OpenAI's rate-limit headers (`rate_limits`).

Control routes: ``GET /health``, ``GET /_stats`` (``{"requests", "chat_requests",
"connections", "max_in_flight"}``, and ``rate_limited`` under rate limits; the control
routes themselves are not counted; ``max_in_flight`` is the most chat requests the server
held at once) and ``POST /_reset`` (zero the counters, forget recorded bodies and the
per-request attempt counts). In process, `FakeLLMServer.in_flight_log` has the number held
at every arrival and answer: where a client left the server's slots idle.

The parts live in the package's modules: `replies` (Reply, RequestContext, echo and schema
responders), `schema_fill` (the JSON Schema filler), `scripts` (scripted, flaky, sequence,
chaos), `protocol` (HTTP/1.1 and OpenAI bodies), `routes` (request handling and counters),
`batch_api` (Files and Batches), `in_process` (FakeLLMServer) and `cli` (the command line,
serve_in_subprocess, fetch_stats).
"""

from llm_feedback.testing.batch_api import BatchScript
from llm_feedback.testing.cli import fetch_stats, main, resolve_responder, serve_in_subprocess
from llm_feedback.testing.in_process import FakeLLMServer
from llm_feedback.testing.protocol import DEFAULT_MODEL_ID
from llm_feedback.testing.rate_limits import RateLimits
from llm_feedback.testing.replies import (
    Reply,
    RequestContext,
    Responder,
    echo_responder,
    schema_responder,
)
from llm_feedback.testing.scripts import (
    CHAOS_FAULTS,
    CHAOS_STALL_S,
    CONTEXT_REFUSALS,
    Answer,
    Matcher,
    chaos_responder,
    context_limited,
    flaky,
    scripted,
    sequence,
)

__all__ = [
    "CHAOS_FAULTS",
    "CHAOS_STALL_S",
    "CONTEXT_REFUSALS",
    "DEFAULT_MODEL_ID",
    "Answer",
    "BatchScript",
    "FakeLLMServer",
    "RateLimits",
    "Matcher",
    "Reply",
    "RequestContext",
    "Responder",
    "chaos_responder",
    "context_limited",
    "echo_responder",
    "fetch_stats",
    "flaky",
    "main",
    "resolve_responder",
    "schema_responder",
    "scripted",
    "sequence",
    "serve_in_subprocess",
]

if __name__ == "__main__":
    main()
