"""Shared fixtures: the project's fake LLM server and Kedro runs redirected to tmp dirs."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from llm_feedback.testing.server import FakeLLMServer, fetch_stats

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"

os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    """A fake OpenAI-compatible server whose default responder fills any JSON schema."""
    with FakeLLMServer() as server:
        yield server


def endpoints_via(server: FakeLLMServer, **extra: Any) -> dict[str, Any]:
    """Runtime params that point the project's `local` endpoint at a fake server."""
    return {
        "local": {
            "backend": "openai",
            "model": "fake-model",
            "base_url": server.base_url,
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.05,
            **extra,
        }
    }


# The user documentation: the README (the front page) and the topic pages under docs/. Tests
# that check a documented command, block or parameter read all of it, so a check still bites
# wherever its section lives.
DOCUMENTATION = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]


def documentation_text() -> str:
    """The README and every page of docs/, joined (each file as it is, in DOCUMENTATION's
    order)."""
    return "\n\n".join(path.read_text(encoding="utf-8") for path in DOCUMENTATION)


def markdown_headings(text: str) -> list[tuple[int, int, str]]:
    """(line number, level, title) of each Markdown heading, fenced code skipped (a `# ...`
    comment in a YAML or bash block is no heading)."""
    headings, fenced = [], False
    for number, line in enumerate(text.splitlines()):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"(#{1,6}) +(.*?) *#* *$", line)):
            headings.append((number, len(match[1]), match[2]))
    return headings


def documentation_section(title: str) -> str:
    """The text under the one heading of the documentation titled `title` (at any level;
    leading `#`s in `title` are ignored), up to the next heading of the same or a higher
    level in its file."""
    title = title.lstrip("#").strip()
    found = []
    for path in DOCUMENTATION:
        lines = path.read_text(encoding="utf-8").splitlines()
        headings = markdown_headings("\n".join(lines))
        for at, (number, level, heading) in enumerate(headings):
            if heading == title:
                end = next((n for n, lv, _ in headings[at + 1 :] if lv <= level), len(lines))
                found.append("\n".join(lines[number + 1 : end]) + "\n")
    assert len(found) == 1, f"{len(found)} documentation headings titled {title!r}"
    return found[0]


def readme_block(title: str) -> str:
    """The code block of the documentation whose first line is the comment `# <title>` (or
    starts with it); there must be exactly one."""
    blocks = [
        block.split("\n", 1)[1]
        for block in re.findall(r"```[\w-]*\n(.*?)```", documentation_text(), re.S)
        if block.startswith(f"# {title}")
    ]
    assert len(blocks) == 1, f"{len(blocks)} documentation code blocks start `# {title}`"
    return blocks[0]


KEDRO_CLI_ENV = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"}


def with_default_sigint(argv: list[str]) -> list[str]:
    """`argv` started with the default Ctrl-C behaviour, for a child that a test interrupts:
    Python raises KeyboardInterrupt only when SIGINT was not ignored at its start, and a
    suite launched in the background (nohup, `&`) hands SIG_IGN down to every child. The
    launcher resets SIGINT and execs `argv` (a default disposition survives exec)."""
    launcher = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    return [sys.executable, "-c", launcher, *argv]


def interrupt_after_requests(
    argv: list[str], url: str, requests: int, env: Mapping[str, str], within_s: float
) -> tuple[int, str, str]:
    """Run `argv` in a child (with the default Ctrl-C behaviour) and send it SIGINT once the
    fake server at `url` has had `requests` chat requests, which must come within
    `within_s` seconds with the child still running.

    Returns:
        The child's exit code, stdout and stderr.
    """
    child = subprocess.Popen(
        with_default_sigint(argv),
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + within_s
    while fetch_stats(url)["chat_requests"] < requests:
        assert child.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    child.send_signal(signal.SIGINT)
    stdout, stderr = child.communicate(timeout=60)
    return child.returncode, stdout, stderr


def kedro_cli(data_root: Path, url: str, *params: str) -> list[str]:
    """`kedro run` in a child process: the `local` endpoint at a fake server, outputs under
    data_root, plus `params` ("key=value"); add "--pipelines", name."""
    settings = [
        f"data_root={data_root}",
        "endpoints.local.backend=openai",
        f"endpoints.local.base_url={url}",
        "endpoints.local.model=fake",
        "endpoints.local.max_concurrent=4",
        *params,
    ]
    return [sys.executable, "-m", "kedro", "run", "--params", ",".join(settings)]


def kedro_cli_outcome(command: list[str], *pipeline: str) -> subprocess.CompletedProcess[str]:
    """`command` run for `pipeline` ("sample,generate"), its exit status left to the test.

    Returns:
        The finished process, with its output as text.
    """
    return subprocess.run(
        [*command, "--pipelines", *pipeline],
        cwd=PROJECT_ROOT,
        env=KEDRO_CLI_ENV,
        capture_output=True,
        text=True,
        check=False,
    )


def run_kedro_cli(command: list[str], *pipeline: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*command, "--pipelines", *pipeline],
        cwd=PROJECT_ROOT,
        env=KEDRO_CLI_ENV,
        check=True,
        capture_output=True,
    )


def readme_command(heading: str) -> str:
    """The first line of the first bash block under a documentation heading (`### Title` or
    `Title`: the level does not matter, see `documentation_section`)."""
    section = documentation_section(heading)
    return section.split("```bash\n", 1)[1].split("\n", 1)[0]


def dotted_params(assignments: str) -> dict[str, Any]:
    """`--params a.b=1,c=x` as the nested runtime params a KedroSession takes (values are
    strings, as on the command line)."""
    nested: dict[str, Any] = {}
    for assignment in assignments.split(","):
        key, _, value = assignment.partition("=")
        *parents, leaf = key.split(".")
        level = nested
        for parent in parents:
            level = level.setdefault(parent, {})
        level[leaf] = value
    return nested


@pytest.fixture
def run_kedro(tmp_path) -> Callable[..., dict[str, Any]]:
    """Run named pipelines of this project in one KedroSession, outputs under tmp_path.

    Returns the loaded free outputs plus a `catalog` to load any dataset by name.
    """
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(PROJECT_ROOT)

    def run(
        pipeline_name: str = "__default__",
        runtime_params: Mapping[str, Any] | None = None,
        **run_args: Any,
    ) -> dict[str, Any]:
        params = {"data_root": str(tmp_path / "data"), **(runtime_params or {})}
        with KedroSession.create(project_path=PROJECT_ROOT, runtime_params=params) as session:
            outputs = session.run(pipeline_names=[pipeline_name], **run_args)
            catalog = session.load_context().catalog
        return {"outputs": outputs, "catalog": catalog}

    return run


def peak_bytes_in_fresh_process(script: str, folder: Path) -> int:
    """Run `script` (which prints its peak memory in bytes last) in a new Python process
    with `folder` as its argument: Arrow's pool reports its peak since the process began,
    so each measurement needs a process of its own."""
    done = subprocess.run(
        [sys.executable, "-c", script, str(folder)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return int(done.stdout.strip().splitlines()[-1])
