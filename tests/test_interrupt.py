"""Ctrl-C during `kedro run`: one line, exit code 130, no traceback, and a rerun resumes."""

import sqlite3

from llm_feedback.testing.server import fetch_stats, serve_in_subprocess
from tests.conftest import (
    KEDRO_CLI_ENV,
    interrupt_after_requests,
    kedro_cli,
    kedro_cli_outcome,
    run_kedro_cli,
)


def test_ctrl_c_mid_generate_stops_cleanly_and_the_rerun_sends_only_the_rest(tmp_path):
    data_root = tmp_path / "data"
    total = 37 * 4
    with serve_in_subprocess(latency_s=0.05, responder="echo") as url:
        command = kedro_cli(data_root, url, "sample.max_prompts=null")
        run_kedro_cli(command, "sample")
        returncode, stdout, stderr = interrupt_after_requests(
            [*command, "--pipelines", "generate"], url, total // 3, KEDRO_CLI_ENV, within_s=60
        )
        sent_before = fetch_stats(url)["chat_requests"]
        cache = data_root / "02_intermediate" / "request_cache.sqlite"
        with sqlite3.connect(cache) as db:
            cached = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        rerun = kedro_cli_outcome(command, "generate")
        sent_by_rerun = fetch_stats(url)["chat_requests"] - sent_before

    output = stdout + stderr
    assert returncode == 130, output[-2000:]
    assert (
        f"interrupted: {cached:,} answered calls are cached in {cache}; run the same "
        "command to resume" in stderr
    )
    assert "Traceback" not in output and "Event loop is closed" not in output
    assert 0 < cached < total
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert sent_by_rerun == total - cached  # only the calls not answered before Ctrl-C
