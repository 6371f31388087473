"""The fake server's command line (``python -m llm_feedback.testing.server``), and
`serve_in_subprocess`/`fetch_stats`, which run it as a child process and read its counters,
so that a benchmark's client does not share the server's GIL."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Iterator, Sequence
from typing import IO
from urllib.parse import urlsplit

from llm_feedback.testing.in_process import base_url_for, serve_until_stopped
from llm_feedback.testing.rate_limits import RateLimits
from llm_feedback.testing.replies import Responder, echo_responder, schema_responder
from llm_feedback.testing.routes import FakeLLMApp
from llm_feedback.testing.scripts import chaos_responder

_LISTENING_PREFIX = "LISTENING "
_BUILTIN_RESPONDERS = {"echo": echo_responder, "schema": schema_responder, "chaos": chaos_responder}


def resolve_responder(spec: str) -> Responder:
    """``echo``, ``schema``, ``chaos`` or ``package.module:callable`` to a responder.

    Args:
        spec: the responder's name or `module:callable`.

    Returns:
        The responder.
    """
    if spec in _BUILTIN_RESPONDERS:
        return _BUILTIN_RESPONDERS[spec]
    module_name, separator, attribute = spec.partition(":")
    if not separator or not module_name or not attribute:
        raise ValueError(f"responder must be echo, schema, chaos or module:callable, got {spec!r}")
    responder = getattr(importlib.import_module(module_name), attribute)
    if not callable(responder):
        raise ValueError(f"{spec!r} is not callable")
    return responder


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m llm_feedback.testing.server`: serve until SIGTERM or SIGINT.

    Args:
        argv: the command-line arguments (None: sys.argv).
    """
    parser = argparse.ArgumentParser(
        prog="python -m llm_feedback.testing.server",
        description="Serve a fake OpenAI-compatible chat API until SIGTERM or SIGINT.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per chat request")
    parser.add_argument(
        "--responder", default="schema", help="echo, schema (default) or module:callable"
    )
    parser.add_argument("--rpm", type=float, default=None, help="requests a minute allowed")
    parser.add_argument("--tpm", type=float, default=None, help="tokens a minute allowed")
    parser.add_argument(
        "--burst", type=float, default=60.0, help="seconds of each limit its bucket holds"
    )
    args = parser.parse_args(argv)
    limits = RateLimits(args.rpm, args.tpm, args.burst) if args.rpm or args.tpm else None
    # Bodies are not recorded: nothing could read them back, and benchmarks would grow.
    app = FakeLLMApp(
        resolve_responder(args.responder), args.latency, record=False, rate_limits=limits
    )

    async def serve() -> None:
        stop_requested = asyncio.Event()
        loop = asyncio.get_running_loop()
        for stop_signal in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(stop_signal, stop_requested.set)

        def announce(port: int) -> None:
            print(f"{_LISTENING_PREFIX}{base_url_for(args.host, port)}", flush=True)

        await serve_until_stopped(app, args.host, args.port, stop_requested, announce)

    asyncio.run(serve())


@contextlib.contextmanager
def serve_in_subprocess(
    latency_s: float = 0.0,
    responder: str | None = None,
    timeout_s: float = 10,
    rate_limits: RateLimits | None = None,
) -> Iterator[str]:
    """Runs the server in a child Python process and yields its base URL.

    `responder` is a name for ``--responder`` (``echo``, ``schema``, ``module:callable``);
    `rate_limits` the per-minute limits it enforces (``--rpm``, ``--tpm``, ``--burst``).
    The child can import whatever this process can. It is terminated on exit, exceptions
    included.

    Args:
        latency_s: the delay before each answer.
        responder: the responder's name (None: the server's default, schema).
        timeout_s: how long to wait for the server to listen.
        rate_limits: the per-minute limits it enforces.

    Returns:
        The base URL, once (a context manager's value).
    """
    command = [sys.executable, "-m", "llm_feedback.testing.server"]
    command += ["--latency", repr(latency_s), "--port", "0"]
    if responder is not None:
        command += ["--responder", responder]
    if rate_limits is not None:
        for flag, value in (
            ("--rpm", rate_limits.requests_per_minute),
            ("--tpm", rate_limits.tokens_per_minute),
        ):
            if value is not None:
                command += [flag, repr(value)]
        command += ["--burst", repr(rate_limits.burst_s)]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, sys.path))}
    with tempfile.TemporaryFile() as stderr_file:
        child = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr_file, text=True, env=environment
        )
        try:
            yield _await_listening(child, timeout_s, stderr_file)
        finally:
            _terminate(child)


def _await_listening(child: subprocess.Popen[str], timeout_s: float, stderr_file: IO[bytes]) -> str:
    lines: queue.Queue[str] = queue.Queue()
    assert child.stdout is not None
    stdout = child.stdout
    # A thread, because a pipe read cannot time out portably.
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    try:
        line = lines.get(timeout=timeout_s)
    except queue.Empty:
        raise TimeoutError(f"the fake LLM server did not start within {timeout_s} s") from None
    if not line.startswith(_LISTENING_PREFIX):
        child.wait(timeout=timeout_s)
        stderr_file.seek(0)
        error_output = stderr_file.read().decode(errors="replace")
        raise RuntimeError(f"the fake LLM server failed to start:\n{line}{error_output}")
    return line[len(_LISTENING_PREFIX) :].strip()


def _terminate(child: subprocess.Popen[str]) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    if child.stdout is not None:
        child.stdout.close()


def fetch_stats(base_url: str, timeout_s: float = 5.0) -> dict[str, int]:
    """``GET /_stats`` of the server at `base_url` (its ``/v1`` suffix is ignored).

    Args:
        base_url: the server's URL.
        timeout_s: the request's timeout.

    Returns:
        The counters.
    """
    parts = urlsplit(base_url)
    # An explicit empty ProxyHandler: an HTTP(S)_PROXY in the environment must not
    # capture requests to the local server.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"{parts.scheme}://{parts.netloc}/_stats", timeout=timeout_s) as response:
        return json.loads(response.read())
