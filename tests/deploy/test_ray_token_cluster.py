"""Joining an existing Ray cluster that uses token authentication (Ray 2.60): a cluster
started by `ray start --head` with RAY_AUTH_MODE=token is joined by the ray backend only
when the joining process has RAY_AUTH_MODE=token and the token too."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import PROJECT_ROOT

pytest.importorskip("ray")
pytestmark = pytest.mark.ray

# The project's ray backend answering four questions through the cluster at argv[2].
JOIN = """
import sys
from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient
config = EndpointConfig.from_dict(
    {"backend": "ray", "model": "fake-model", "base_url": sys.argv[1],
     "ray_address": sys.argv[2], "ray_replicas": 1, "ray_batch_size": 2},
    name="cluster",
)
requests = [ChatRequest.from_prompt(f"question {n}", max_tokens=16) for n in range(4)]
with LLMClient(config, progress=False) as client:
    answers = client.complete_many(requests)
print("answered", sum(answer.ok for answer in answers))
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _without_ray_auth(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
    # HOME: no ~/.ray/auth_token of the user's is read or written.
    return {
        **env,
        "HOME": str(home),
        "PYTHONPATH": str(PROJECT_ROOT / "src"),
        "RAY_USAGE_STATS_ENABLED": "0",
    }


@pytest.fixture(scope="module")
def token_cluster(tmp_path_factory) -> Iterator[tuple[str, str, Path]]:
    """(address, token, home) of a one-node cluster with token authentication."""
    ray_cli = Path(sys.executable).with_name("ray")
    home = tmp_path_factory.mktemp("home")
    token = secrets.token_hex(32)
    # Ray's unix sockets need a short path: its session folder goes under /tmp.
    temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    port = _free_port()
    env = {**_without_ray_auth(home), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    head = subprocess.Popen(
        [
            str(ray_cli),
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp_dir}",
            f"--dashboard-agent-listen-port={_free_port()}",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the teardown ends exactly it
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if head.poll() is not None or time.monotonic() > deadline:
                pytest.fail("ray start --head did not come up")
            time.sleep(0.5)
        yield f"127.0.0.1:{port}", token, home
    finally:
        for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            try:
                os.killpg(head.pid, sig)
            except ProcessLookupError:
                break
            try:
                head.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                continue
        try:
            os.killpg(head.pid, signal.SIGKILL)  # raylet and GCS outlive a graceful head
        except ProcessLookupError:
            pass
        shutil.rmtree(temp_dir, ignore_errors=True)


def _join(address: str, env: dict[str, str], url: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", JOIN, url, address],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_ray_backend_joins_a_token_cluster_with_ray_auth_mode_token(token_cluster):
    address, token, home = token_cluster
    env = {**_without_ray_auth(home), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    with FakeLLMServer() as server:
        joined = _join(address, env, server.base_url)
        sent = server.stats()["chat_requests"]
    assert joined.returncode == 0, joined.stderr[-3000:]
    assert "answered 4" in joined.stdout
    assert sent == 4


def test_without_ray_auth_mode_the_join_fails_saying_what_to_set(token_cluster):
    address, _, home = token_cluster
    with FakeLLMServer() as server:
        refused = _join(address, _without_ray_auth(home), server.base_url)
        assert server.stats()["chat_requests"] == 0
    assert refused.returncode != 0
    assert f"cannot join the Ray cluster at {address}" in refused.stderr
    assert "RAY_AUTH_MODE=token" in refused.stderr
