"""Joining an existing Ray cluster that uses token authentication (Ray 2.60): a cluster
started by `ray start --head` with RAY_AUTH_MODE=token is joined by the ray backend only
when the joining process has RAY_AUTH_MODE=token and the token too; a plain `ray start
--head` on a machine where Ray has run before (its ~/.ray/auth_token written by a local
`ray.init()`) turns token authentication on by itself, and the README's recipe joins it as
it is."""

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
from contextlib import contextmanager
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


@contextmanager
def _head(env: dict[str, str], temp_dir: str) -> Iterator[str]:
    """The address of a one-node cluster started by `ray start --head` in `env`."""
    ray_cli = Path(sys.executable).with_name("ray")
    port = _free_port()
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
            # Where `ray start` writes ray_current_cluster, the file `auto` reads first:
            # RAY_TMPDIR/ray (with another cluster alive, `auto` may otherwise join that one).
            f"--temp-dir={Path(temp_dir) / 'ray'}",
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
                # Up: its GCS answers and `ray start` has written the file `auto` reads (last).
                started = (Path(temp_dir) / "ray" / "ray_current_cluster").is_file()
                if probe.connect_ex(("127.0.0.1", port)) == 0 and started:
                    break
            if head.poll() is not None or time.monotonic() > deadline:
                pytest.fail("ray start --head did not come up")
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
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


@pytest.fixture(scope="module")
def token_cluster(tmp_path_factory) -> Iterator[tuple[str, str, Path]]:
    """(address, token, home) of a one-node cluster with token authentication."""
    home = tmp_path_factory.mktemp("home")
    token = secrets.token_hex(32)
    # Ray's unix sockets need a short path: its session folder goes under /tmp.
    temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    env = {**_without_ray_auth(home), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    with _head(env, temp_dir) as address:
        yield address, token, home


@pytest.fixture(scope="module")
def default_cluster(tmp_path_factory) -> Iterator[tuple[str, dict[str, str]]]:
    """(address, environment of this machine's user) of a cluster started by a plain
    `ray start --head`, no RAY_AUTH_* set, after Ray has written the user's token."""
    home = tmp_path_factory.mktemp("home")
    temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    # RAY_TMPDIR: where `ray_address: auto` finds the cluster (Ray's /tmp/ray otherwise).
    env = {**_without_ray_auth(home), "RAY_TMPDIR": temp_dir}
    ray_cli = Path(sys.executable).with_name("ray")
    # What a first local `ray.init()` does on Ray 2.60: writes ~/.ray/auth_token.
    subprocess.run(
        [str(ray_cli), "get-auth-token", "--generate"],
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert (home / ".ray" / "auth_token").is_file()
    with _head(env, temp_dir) as address:
        yield address, env


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
    assert f"the Ray cluster at {address} uses token authentication" in refused.stderr
    assert "RAY_AUTH_MODE=token" in refused.stderr


@pytest.mark.parametrize("how", ["auto", "address"])
def test_a_plain_ray_start_head_is_joined_as_the_readme_says(default_cluster, how):
    """`ray_address: auto` (the README's recipe) and the head's address both join the
    cluster that turned token authentication on by itself, no variable exported; the
    workers close their HTTP sessions."""
    address, env = default_cluster
    with FakeLLMServer() as server:
        joined = _join("auto" if how == "auto" else address, env, server.base_url)
        sent = server.stats()["chat_requests"]
    assert joined.returncode == 0, joined.stderr[-3000:]
    assert "answered 4" in joined.stdout and sent == 4
    assert "Unclosed client session" not in joined.stderr
    assert "Unclosed connector" not in joined.stderr


def test_a_token_cluster_joined_without_any_token_stops_at_once_saying_what_to_export(
    default_cluster, tmp_path
):
    address, env = default_cluster
    started = time.monotonic()
    with FakeLLMServer() as server:
        refused = _join(address, {**env, "HOME": str(tmp_path)}, server.base_url)
        assert server.stats()["chat_requests"] == 0
    assert refused.returncode != 0
    assert f"the Ray cluster at {address} uses token authentication" in refused.stderr
    assert "export RAY_AUTH_MODE=token and RAY_AUTH_TOKEN" in refused.stderr
    assert time.monotonic() - started < 60  # not Ray's own time-out
