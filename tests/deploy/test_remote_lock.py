"""One run per remote data root: the lock object in the bucket (a real moto server)."""

from __future__ import annotations

import json
import time

import fsspec
import pytest

from llm_feedback.core.errors import ConfigError, RunLocked
from llm_feedback.runs.lock import root_guard
from llm_feedback.runs.remote_lock import RemoteLock
from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import endpoints_via


def test_a_second_holder_is_refused_naming_the_first_until_it_releases(bucket, s3_env):
    url = f"s3://{bucket}/data/02_intermediate/request_cache.sqlite.lock"
    first, second = RemoteLock(url), RemoteLock(url)
    first.acquire()
    try:
        with pytest.raises(RunLocked, match=r"is held by pid \d+ on .* \(heartbeat \d+ s ago\)"):
            second.acquire()
    finally:
        first.release()
    assert not fsspec.filesystem("s3").exists(url)
    second.acquire()  # free again
    second.release()


def test_the_heartbeat_keeps_the_lock_fresh_and_a_stale_lock_is_taken_over(bucket, s3_env):
    url = f"s3://{bucket}/root.lock"
    s3 = fsspec.filesystem("s3")
    holder = RemoteLock(url, heartbeat_s=0.2, stale_after_s=5)
    holder.acquire()
    try:
        written = json.loads(s3.cat_file(url))["heartbeat"]
        time.sleep(0.8)
        s3.invalidate_cache()
        assert json.loads(s3.cat_file(url))["heartbeat"] > written
    finally:
        holder.release()

    # A holder that died: its last heartbeat is ten minutes old.
    dead = {"owner": "pid 1 on gone", "token": "x", "heartbeat": time.time() - 600}
    s3.pipe_file(url, json.dumps(dead).encode())
    taker = RemoteLock(url)
    taker.acquire()
    try:
        s3.invalidate_cache()
        assert json.loads(s3.cat_file(url))["token"] == taker._token
    finally:
        taker.release()


def test_a_run_on_a_locked_remote_root_stops_before_any_call(bucket, s3_env, run_kedro, tmp_path):
    data_root = f"s3://{bucket}/data"
    lock = RemoteLock(f"{data_root}/02_intermediate/request_cache.sqlite.lock")
    lock.acquire()
    try:
        with FakeLLMServer() as server:
            params = {
                "data_root": data_root,
                "sample": {"max_prompts": 2},
                "endpoints": endpoints_via(server),
            }
            with pytest.raises(RunLocked, match=f"s3://{bucket}/data/.* is held by pid"):
                run_kedro("__default__", params)
            assert server.stats()["chat_requests"] == 0
    finally:
        lock.release()


def test_a_bucket_that_does_not_exist_is_one_line_naming_the_data_root(s3_env, tmp_path):
    parameters = {"data_root": "s3://no-such-bucket-here/data"}
    guard = root_guard(parameters, str(tmp_path / "request_cache.sqlite"))
    with pytest.raises(ConfigError, match=r"data_root s3://no-such-bucket-here/data: cannot"):
        guard.acquire()


def test_the_remote_lock_object_and_its_refusal_mask_a_url_password(bucket, s3_env, monkeypatch):
    url = f"s3://{bucket}/data/02_intermediate/request_cache.sqlite.lock"
    argv = ["kedro", "run", "--params", "endpoints.j.base_url=https://bob:pw-s3cret@host/v1"]
    monkeypatch.setattr("sys.argv", argv)
    first = RemoteLock(url)
    first.acquire()
    try:
        stored = fsspec.filesystem("s3").cat_file(url).decode()
        with pytest.raises(RunLocked) as refusal:
            RemoteLock(url).acquire()
    finally:
        first.release()
    for shown in (stored, str(refusal.value)):
        assert "pw-s3cret" not in shown and "https://bob:***@host/v1" in shown
