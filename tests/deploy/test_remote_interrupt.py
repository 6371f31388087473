"""Ctrl-C mid-run on an S3 data root (moto): the answers received are pushed to the bucket
and its lock is released, so the next run, anywhere, resumes instead of paying again."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import fsspec

from llm_feedback.storage.remote_root import CacheSync, local_root
from llm_feedback.testing.server import serve_in_subprocess
from tests.conftest import interrupt_after_requests, kedro_cli


def test_ctrl_c_pushes_the_answers_so_far_and_frees_the_bucket(bucket, s3_env, tmp_path):
    data_root = f"s3://{bucket}/data"
    remote_cache = f"{data_root}/02_intermediate/request_cache.sqlite"
    total = 37 * 4
    with serve_in_subprocess(latency_s=0.05, responder="echo") as url:
        command = kedro_cli(data_root, url, "sample.max_prompts=null")
        returncode, stdout, stderr = interrupt_after_requests(
            [*command, "--pipelines", "sample,generate"], url, total // 3, s3_env, within_s=50
        )

    assert returncode == 130, (stdout + stderr)[-2000:]
    s3 = fsspec.filesystem("s3", skip_instance_cache=True)
    assert s3.exists(remote_cache)
    assert not s3.exists(f"{remote_cache}.lock")
    fresh_disk = tmp_path / "fresh" / "request_cache.sqlite"
    pulled = CacheSync(remote_cache, fresh_disk).pull()
    with sqlite3.connect(fresh_disk) as db:
        assert db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == pulled
    mirror = Path(local_root(data_root)) / "02_intermediate" / "request_cache.sqlite"
    with sqlite3.connect(mirror) as db:
        answered_here = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    assert 0 < pulled == answered_here < total  # every answer received went up
