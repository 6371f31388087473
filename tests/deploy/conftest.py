"""A real S3 server for the remote-data-root tests: moto's, started once per session on a
free port (the dev extra installs `moto[server]`; without it these tests skip and say so)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

S3_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _moto_server() -> str | None:
    beside_python = Path(sys.executable).with_name("moto_server")
    return str(beside_python) if beside_python.is_file() else shutil.which("moto_server")


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    pytest.importorskip("s3fs", reason="the s3 extra (s3fs) is not installed")
    executable = _moto_server()
    if executable is None:
        pytest.skip("moto_server is not installed (pip install 'moto[server]')")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [executable, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                opener.open(f"{url}/moto-api/", timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"moto_server did not start on {url}")
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture
def s3_env(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """This process's environment pointed at the moto server (botocore reads
    AWS_ENDPOINT_URL), local cache mirrors under tmp_path; returned whole for children."""
    settings = {
        "AWS_ENDPOINT_URL": moto_endpoint,
        "LLM_FEEDBACK_CACHE_DIR": str(tmp_path / "cache"),
        **S3_CREDENTIALS,
    }
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"}


@pytest.fixture
def bucket(s3_env: dict[str, str]) -> str:
    """A fresh, empty bucket: its name."""
    import fsspec

    name = f"bucket-{uuid.uuid4().hex[:12]}"
    fsspec.filesystem("s3", skip_instance_cache=True).mkdir(name)
    return name
