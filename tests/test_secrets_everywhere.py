"""Every configured credential and URL password is absent from every file a run and
`kedro viz build` write, and from the terminal: a key of no known shape given the way the
README gives keys (conf/local/credentials.yml), a `base_url` with `user:password@`, and a
server that echoes both back in its error bodies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import yaml

from llm_feedback.testing.replies import Reply, schema_responder
from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import PROJECT_ROOT
from tests.test_kedro_viz import project_copy  # noqa: F401 (a fixture)

KEY = "plainvaluekey7731"  # no sk- prefix: masked by its value, not by its shape
PASSWORD = "hunter@2pass!"  # characters a URL must encode
ENCODED_PASSWORD = quote(PASSWORD, safe="")


def echo_secrets(body, ctx):
    """The first attempt of each request and every fifth request fail, naming the key and
    the password; the rest are answered. A re-score (the one turn that continues a critique,
    often a stage's only call) is spared the lasting failure: a stage none of whose calls is
    answered stops the run, whatever the error says."""
    rescore = any(message.get("role") == "assistant" for message in body.get("messages", []))
    if ctx.key_call_index == 0 or (ctx.call_index % 5 == 4 and not rescore):
        status = 500 if ctx.key_call_index == 0 else 400
        echoed = f"key {KEY} and password {PASSWORD} ({ENCODED_PASSWORD}) refused"
        return Reply(status=status, error_message=echoed)
    return schema_responder(body, ctx)


def configure(project: Path, base_url: str) -> None:
    local = project / "conf" / "local"
    (local / "credentials.yml").write_text(yaml.safe_dump({"judge-key": {"api_key": KEY}}))
    host = base_url.removeprefix("http://")
    parameters = {
        "data_root": str(project / "data"),
        "sample": {"max_prompts": 2},
        "endpoints": {
            "local": {
                "backend": "openai",
                "model": "fake",
                "base_url": f"http://bob:{ENCODED_PASSWORD}@{host}",
                "credentials": "judge-key",
                "max_concurrent": 4,
                "max_failure_share": 1,
                "backoff_base_s": 0.01,
                "backoff_max_s": 0.05,
            }
        },
    }
    (local / "parameters.yml").write_text(yaml.safe_dump(parameters))


def run(project: Path, *argv: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-m", "kedro", *argv],
        cwd=project,
        env={
            **os.environ,
            "KEDRO_DISABLE_TELEMETRY": "1",
            "PYTHONPATH": str(PROJECT_ROOT / "src"),
        },
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output[-3000:]
    return output


def test_no_key_or_url_password_in_any_file_a_run_and_viz_build_write(project_copy: Path):  # noqa: F811
    with FakeLLMServer(echo_secrets) as server:
        configure(project_copy, server.base_url)
        terminal = run(project_copy, "run")
        requests = len(server.requests)
    terminal += run(project_copy, "viz", "build", "--include-previews")

    assert requests > 0 and (project_copy / "build" / "api" / "main").is_file()
    assert "refused" in terminal  # the echoes reached the log, masked
    secrets = {KEY, PASSWORD, ENCODED_PASSWORD, quote(KEY)}
    written = [
        path
        for path in project_copy.rglob("*")
        if path.is_file() and path.relative_to(project_copy).parts[0] not in {"src", "conf"}
    ]
    assert any(path.suffix == ".parquet" for path in written)
    assert any(path.name == "info.log" for path in written)
    leaks = [
        f"{path.relative_to(project_copy)}: {secret}"
        for path in written
        for secret in secrets
        if secret.encode() in path.read_bytes()
    ]
    unwrapped = "".join(terminal.split())  # Rich wraps long lines
    leaks += [f"terminal: {secret}" for secret in secrets if secret in unwrapped]
    assert not leaks, leaks
