"""The lean transport and the openai SDK send the same requests and read the same results,
over real HTTP against the project's server, on success and on every error path."""

import contextlib
import json
import re
import socket
import socketserver
import threading
import urllib.parse

import pytest

from llm_feedback.backends import ChatRequest, EndpointConfig, LeanOpenAIBackend, LLMClient
from llm_feedback.backends.openai_backend import OpenAICompatibleBackend
from llm_feedback.testing.server import (
    FakeLLMServer,
    Reply,
    flaky,
    schema_responder,
    scripted,
)

SCHEMA = {
    "type": "object",
    "properties": {"rating": {"type": "integer", "enum": [1, 2, 3]}},
    "required": ["rating"],
    "additionalProperties": False,
}
REQUESTS = [
    ChatRequest.from_prompt("plain question", temperature=0.0, max_tokens=32),
    ChatRequest.from_prompt("with a system prompt", system="Be brief.", top_p=0.6, seed=7),
    ChatRequest.from_prompt("stop here", stop=["###", "\n\n"], max_tokens=8),
    ChatRequest.from_prompt("rate it", json_schema=SCHEMA, temperature=0.0),
    ChatRequest.from_prompt('ünïcödé ✓ "quotes" \\ backslash', temperature=0.3),
]


def endpoint(server, transport, **extra):
    definition = {
        "backend": "openai",
        "model": "m",
        "base_url": server.base_url,
        "transport": transport,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.02,
        "max_failure_share": 1.0,
        **extra,
    }
    return EndpointConfig.from_dict(definition, name="t")


def run_both(responder, requests=REQUESTS, **extra):
    """(bodies, results) per transport, each against a fresh server."""
    seen = {}
    for transport in ("lean", "sdk"):
        with FakeLLMServer(responder) as server:
            with LLMClient(endpoint(server, transport, **extra), None, progress=False) as client:
                results = client.complete_many(requests, desc=None)
                retries = client.stats.retries
            # In arrival order, which concurrency shuffles: compared as sorted JSON texts.
            bodies = sorted(json.dumps(body, sort_keys=True) for body in server.requests)
        seen[transport] = (bodies, results, retries)
    return seen


def summary(result):
    return (
        result.text,
        result.finish_reason,
        result.prompt_tokens,
        result.completion_tokens,
        result.error,
    )


def test_the_default_transport_is_lean_and_sdk_is_one_setting_away():
    assert isinstance(
        LLMClient(EndpointConfig.from_dict({"backend": "openai", "model": "m"})).backend,
        LeanOpenAIBackend,
    )
    sdk = EndpointConfig.from_dict({"backend": "openai", "model": "m", "transport": "sdk"})
    backend = LLMClient(sdk).backend
    assert type(backend) is OpenAICompatibleBackend


def test_same_bodies_and_same_results_on_success():
    seen = run_both(schema_responder)
    assert seen["lean"][0] == seen["sdk"][0]
    assert [summary(r) for r in seen["lean"][1]] == [summary(r) for r in seen["sdk"][1]]
    assert all(r.ok for r in seen["lean"][1])
    structured = next(json.loads(b) for b in seen["lean"][0] if "response_format" in b)
    assert structured["response_format"]["json_schema"]["schema"] == SCHEMA


def test_same_retries_after_429_and_500():
    seen = run_both(flaky(schema_responder, failures=2, status=429, retry_after=0.01))
    assert seen["lean"][2] == seen["sdk"][2] == 2 * len(REQUESTS)
    assert [summary(r) for r in seen["lean"][1]] == [summary(r) for r in seen["sdk"][1]]
    seen = run_both(flaky(schema_responder, failures=1, status=500, retry_after=None))
    assert seen["lean"][2] == seen["sdk"][2] == len(REQUESTS)


def test_same_failure_for_a_client_error():
    seen = run_both(lambda body, ctx: Reply(status=400, error_message="bad model"))
    lean, sdk = ([summary(r) for r in seen[t][1]] for t in ("lean", "sdk"))
    assert lean == sdk
    assert lean[0][4] == "HTTP 400: Error code: 400 - bad model"
    assert seen["lean"][2] == seen["sdk"][2] == 0  # never retried


@pytest.mark.parametrize(
    "reply",
    [Reply(raw_body="{not json"), Reply(raw_body='{"choices": []}'), Reply(content=None)],
)
def test_a_malformed_body_is_retried_then_given_up_by_both(reply):
    seen = run_both(
        scripted([], default=lambda body, ctx: reply), requests=REQUESTS[:1], max_retries=2
    )
    for transport in ("lean", "sdk"):
        (result,) = seen[transport][1]
        assert not result.ok
    lean_error, sdk_error = (seen[t][1][0].error for t in ("lean", "sdk"))
    if lean_error.startswith("gave up"):
        assert sdk_error.startswith("gave up after 3 attempts: malformed response")
        assert lean_error.startswith("gave up after 3 attempts: malformed response")
    else:  # a reply without content is an answer, not a transport fault
        assert lean_error == sdk_error == "empty reply"


def test_a_timeout_is_retried_by_both():
    replies = scripted(
        [],
        default=lambda body, ctx: (
            Reply(content="late", delay_s=1.0) if ctx.key_call_index == 0 else "in time"
        ),
    )
    seen = run_both(replies, requests=REQUESTS[:2], timeout_s=0.3)
    for transport in ("lean", "sdk"):
        assert [r.text for r in seen[transport][1]] == ["in time", "in time"]
        assert seen[transport][2] == 2


def test_azure_deployment_urls_and_keys(monkeypatch):
    monkeypatch.setenv("AZURE_API_KEY", "azure-key-0123456789")
    with FakeLLMServer(schema_responder, api_key="azure-key-0123456789") as server:
        for transport in ("lean", "sdk"):
            config = EndpointConfig.from_dict(
                {
                    "backend": "azure",
                    "model": "my-deployment",
                    "azure_endpoint": server.base_url.removesuffix("/v1"),
                    "transport": transport,
                },
                name="az",
            )
            with LLMClient(config, None, progress=False) as client:
                result = client.complete(REQUESTS[0])
                assert result.ok, result.error
                assert client.is_available()


@contextlib.contextmanager
def forwarding_proxy(upstream):
    """A plain HTTP forward proxy (one request per connection) in front of `upstream`;
    yields its URL and the absolute request targets it forwarded."""
    host, port = urllib.parse.urlsplit(upstream.base_url).netloc.split(":")
    targets = []

    class Forward(socketserver.StreamRequestHandler):
        def handle(self):
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = self.rfile.readline()
                if not line:
                    return  # a pooled connection closed unused
                head += line
            request_line, _, rest = head.partition(b"\r\n")
            method, target, version = request_line.decode().split(" ")
            targets.append(target)
            length = re.search(rb"(?im)^content-length:\s*(\d+)", rest)
            body = self.rfile.read(int(length[1])) if length else b""
            origin_form = urllib.parse.urlsplit(target)._replace(scheme="", netloc="").geturl()
            rest = re.sub(rb"(?im)^(proxy-)?connection:.*\r\n", b"", rest)
            forwarded = f"{method} {origin_form} {version}\r\nConnection: close\r\n".encode()
            with socket.create_connection((host, int(port))) as conn:
                conn.sendall(forwarded + rest + body)
                while chunk := conn.recv(65536):
                    self.wfile.write(chunk)

    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Forward) as proxy:
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{proxy.server_address[1]}", targets
        finally:
            proxy.shutdown()


def test_both_transports_go_through_the_proxy_the_environment_names(monkeypatch):
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    with FakeLLMServer(schema_responder) as server, forwarding_proxy(server) as (proxy, seen):
        monkeypatch.setenv("HTTP_PROXY", proxy)
        for transport in ("lean", "sdk"):
            # A host only the proxy can reach: the answer proves the request went through it.
            config = EndpointConfig.from_dict(
                {
                    "backend": "openai",
                    "model": "m",
                    "base_url": "http://llm.behind-the-proxy.test/v1",
                    "transport": transport,
                },
                name="proxied",
            )
            with LLMClient(config, None, progress=False) as client:
                assert client.complete(REQUESTS[0]).ok
        assert seen == ["http://llm.behind-the-proxy.test/v1/chat/completions"] * 2

        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        seen.clear()
        for transport in ("lean", "sdk"):
            with LLMClient(endpoint(server, transport), None, progress=False) as client:
                assert client.complete(REQUESTS[0]).ok
        assert seen == []  # NO_PROXY: straight to the server
