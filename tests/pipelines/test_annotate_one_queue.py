"""`kedro run --pipelines annotate` sends both judge stages through one queue
(`judge_completions`): a run killed while both are in flight resumes sending only the calls
the cache had not answered, and a stage that fails stops the other and writes neither
table (no half-judged run for a later node to mix with an older one)."""

import os
import signal
import sqlite3
import subprocess
import time

import pytest
from kedro.io.core import VersionNotFoundError

from llm_feedback.testing.server import (
    FakeLLMServer,
    Reply,
    fetch_stats,
    schema_responder,
    serve_in_subprocess,
)
from tests.conftest import KEDRO_CLI_ENV, PROJECT_ROOT, endpoints_via, kedro_cli, run_kedro_cli

PROMPTS = 10  # x 4 completions: 40 aspect calls and 40 critique calls, 4 in flight


def _judged_so_far(cache) -> tuple[int, int]:
    """Answers the cache holds of each judge stage: (aspect calls, critique calls)."""
    with sqlite3.connect(cache) as db:
        rows = [result for (result,) in db.execute("SELECT result FROM responses")]
    return (
        sum('\\"ratings\\"' in result for result in rows),
        sum('\\"feedback\\"' in result for result in rows),
    )


def test_a_run_killed_with_both_stages_in_flight_repeats_only_unanswered_calls(tmp_path):
    data_root = tmp_path / "data"
    cache = data_root / "02_intermediate" / "request_cache.sqlite"
    with serve_in_subprocess(latency_s=0.0, responder="echo") as url:
        first = kedro_cli(data_root, url, f"sample.max_prompts={PROMPTS}")
        run_kedro_cli(first, "sample")
        run_kedro_cli(first, "generate")
    with sqlite3.connect(cache) as db:
        generated = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    with serve_in_subprocess(latency_s=0.2, responder="schema") as url:
        annotate = kedro_cli(data_root, url, f"sample.max_prompts={PROMPTS}")
        child = subprocess.Popen(
            [*annotate, "--pipelines", "annotate"],
            cwd=PROJECT_ROOT,
            env=KEDRO_CLI_ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while fetch_stats(url)["chat_requests"] < PROMPTS * 4:
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        sent_before_kill = fetch_stats(url)["chat_requests"]
        aspects, critiques = _judged_so_far(cache)
        with sqlite3.connect(cache) as db:
            # Aspect ratings, critiques and the re-scores sent with them on the one queue.
            answered = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] - generated

        run_kedro_cli(annotate, "annotate")
        resent = fetch_stats(url)["chat_requests"] - sent_before_kill
    with sqlite3.connect(cache) as db:
        judged = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] - generated
    # The rerun sent exactly the calls the cache did not hold (the rest of both stages and
    # the score fix's): none of those answered before the kill.
    assert resent == judged - answered
    # Killed with both stages answered in part: they were running together.
    all_aspects, all_critiques = _judged_so_far(cache)
    assert all_aspects == PROMPTS * 4
    assert 0 < aspects < all_aspects and 0 < critiques < all_critiques


def failing_aspects(body, ctx):
    """Every aspect call refused; critiques answered (alone, that stage would be written)."""
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    if "ratings" in schema.get("properties", {}):
        return Reply(status=400, error_message="aspect calls are refused here")
    return schema_responder(body, ctx)


def test_a_failing_judge_stage_writes_neither_table(run_kedro):
    with FakeLLMServer() as server:
        params = {"sample": {"max_prompts": 3}, "endpoints": endpoints_via(server)}
        run_kedro("sample", params)
        catalog = run_kedro("generate", params)["catalog"]
    with FakeLLMServer(failing_aspects) as server:
        params["endpoints"] = endpoints_via(server, max_retries=0)
        with pytest.raises(Exception, match="aspect"):
            run_kedro("annotate", params)
        assert server.request_count > 0
    for name in ("aspect_annotations", "critiques"):
        with pytest.raises(VersionNotFoundError):
            catalog.get(name).resolve_load_version()
