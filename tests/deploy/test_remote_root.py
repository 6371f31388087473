"""A data root on S3 (a real moto server): the request cache follows the root, so a second
machine with an empty disk pays for nothing twice, and nothing named `s3:` appears locally."""

from __future__ import annotations

import posixpath
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import fsspec
import pandas as pd
import pytest

from llm_feedback.core.errors import ConfigError
from llm_feedback.storage.remote_root import CACHE_DIR_ENV, CacheSync, local_root, require_local
from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import PROJECT_ROOT

TINY = "sample.max_prompts=2"
PIPELINES = "sample,generate,annotate"  # the report's S3 run is the notebook test's


def kedro_run(data_root: str, url: str, env: dict[str, str], cache_dir: Path) -> str:
    params = ",".join(
        [
            f"data_root={data_root}",
            "endpoints.local.backend=openai",
            f"endpoints.local.base_url={url}",
            "endpoints.local.model=fake",
            TINY,
        ]
    )
    result = subprocess.run(
        [sys.executable, "-m", "kedro", "run", "--pipelines", PIPELINES, "--params", params],
        cwd=PROJECT_ROOT,
        env={**env, CACHE_DIR_ENV: str(cache_dir)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    return output


def named_s3(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.name.startswith("s3:")]


def test_a_second_clone_with_an_empty_disk_reruns_on_the_bucket_sending_nothing(
    bucket, s3_env, tmp_path, monkeypatch
):
    data_root = f"s3://{bucket}/data"
    first_disk, second_disk = tmp_path / "first", tmp_path / "second"
    with FakeLLMServer() as server:
        kedro_run(data_root, server.base_url, s3_env, first_disk)
        sent_by_first = server.stats()["chat_requests"]
        output = kedro_run(data_root, server.base_url, s3_env, second_disk)
        sent_by_second = server.stats()["chat_requests"] - sent_by_first

    assert sent_by_first > 0
    assert sent_by_second == 0, output[-4000:]
    s3 = fsspec.filesystem("s3", skip_instance_cache=True)
    # Both runs wrote their versions to the bucket, the cache is there, the lock is gone.
    versions = s3.ls(f"{bucket}/data/07_model_output/ultrafeedback.parquet")
    assert len(versions) == 2
    assert s3.exists(f"{bucket}/data/02_intermediate/request_cache.sqlite")
    assert not s3.exists(f"{bucket}/data/02_intermediate/request_cache.sqlite.lock")
    # The second disk's mirror holds every answer; no folder named `s3:` anywhere local.
    monkeypatch.setenv(CACHE_DIR_ENV, str(second_disk))
    mirror = Path(local_root(data_root))
    assert mirror.parent == second_disk
    with sqlite3.connect(mirror / "02_intermediate" / "request_cache.sqlite") as db:
        cached = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    assert cached == sent_by_first
    assert named_s3(tmp_path) == [] and not (PROJECT_ROOT / "s3:").exists()


def test_the_cache_sync_keeps_answers_from_both_sides(bucket, s3_env, tmp_path):
    remote = f"s3://{bucket}/data/02_intermediate/request_cache.sqlite"

    def cache_with(path: Path, keys: list[str]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, result TEXT)")
            db.executemany("INSERT INTO responses VALUES (?, '{}')", [(k,) for k in keys])

    here, there = tmp_path / "here" / "cache.sqlite", tmp_path / "there" / "cache.sqlite"
    cache_with(here, ["a", "b"])
    first = CacheSync(remote, here)
    assert first.pull() == 0  # nothing remote yet
    assert first.push() and not first.push()  # the second push has nothing new to send
    cache_with(there, ["c"])
    second = CacheSync(remote, there)
    assert second.pull() == 2
    with sqlite3.connect(there) as db:
        keys = {row[0] for row in db.execute("SELECT key FROM responses")}
    assert keys == {"a", "b", "c"}


def test_a_remote_path_where_a_local_file_is_needed_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from llm_feedback.backends.cache import RequestCache
    from llm_feedback.runs.lock import RunLock

    with pytest.raises(ConfigError, match=r"request_cache: s3://b/c\.sqlite is a remote URL"):
        RequestCache("s3://b/c.sqlite")
    with pytest.raises(ConfigError, match="run lock: s3://b/c.lock"):
        RunLock("s3://b/c.lock")
    assert require_local("file:///tmp/x", "x") == Path("/tmp/x")
    assert local_root("data") == "data"
    assert named_s3(tmp_path) == []


def dry_run_push(root: str, s3_env: dict, token: str) -> str:
    """`kedro push-to-hub --dry-run` of the preference pairs under `root`; its output."""
    result = subprocess.run(
        [
            sys.executable, "-m", "kedro", "push-to-hub", "--dataset", "preference_pairs",
            "--repo-id", "someone/feedback", "--dry-run", "--allow-mixed-runs",
            "--params", f"data_root={root}",
        ],
        cwd=PROJECT_ROOT,
        env={**s3_env, "HF_TOKEN": token, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    return output


def test_a_dry_run_push_reads_the_table_from_the_bucket_a_row_group_at_a_time(
    bucket, s3_env, tmp_path
):
    from tests.test_hub import SECRET, VERSION, preference_pairs

    pairs = preference_pairs()
    root = f"s3://{bucket}/root"
    s3 = fsspec.filesystem("s3", skip_instance_cache=True)
    target = f"{root}/07_model_output/preference_pairs.parquet/{VERSION}/preference_pairs.parquet"
    with s3.open(target, "wb") as handle:
        pairs.to_parquet(handle, row_group_size=2)
    output = dry_run_push(root, s3_env, SECRET)
    for side, rows in pairs["split"].value_counts().items():  # the pairs' train and test
        assert f"split {side}: {rows:,} rows" in output
    assert "dry run: nothing was sent" in output and SECRET not in output
    assert not named_s3(tmp_path) and not named_s3(PROJECT_ROOT)


def test_a_table_in_parts_on_the_bucket_is_written_read_and_pushed_as_one(bucket, s3_env, tmp_path):
    from kedro.io import Version

    from llm_feedback.pipelines.datasets import LatestParquetDataset, ParquetSourceDataset
    from tests.test_hub import SECRET, VERSION, preference_pairs

    pairs = preference_pairs()
    root = f"s3://{bucket}/root"
    path = f"{root}/07_model_output/preference_pairs.parquet"
    dataset = ParquetSourceDataset(
        filepath=path,
        version=Version(None, VERSION),
        save_args={"row_group_size": 2, "part_bytes": 1},  # a part per row group
    )
    s3 = fsspec.filesystem("s3", skip_instance_cache=True)
    exited = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                            capture_output=True, text=True, check=True)  # fmt: skip
    owner = f"{socket.gethostname()}-{exited.stdout.strip()}"  # a save killed mid-write
    s3.pipe(f"{path}/2026-11-30T00.00.00.000Z/.preference_pairs.parquet.0123456789ab."
            f"{owner}.partial/part-00000.parquet", b"PAR1 half a part")  # fmt: skip
    dataset.save(pairs)
    table = f"{path}/{VERSION}/preference_pairs.parquet"
    parts = sorted(posixpath.basename(p) for p in s3.ls(table))
    assert parts == [f"part-{n:05d}.parquet" for n in range((len(pairs) + 1) // 2)]
    assert not [p for p in s3.find(f"{root}/") if ".partial" in p]  # the killed one removed too
    assert s3.ls(path, detail=False) == [f"{path.removeprefix('s3://')}/{VERSION}"]

    pairs.to_parquet(tmp_path / "pairs.parquet")
    expected = pd.read_parquet(tmp_path / "pairs.parquet")  # the frame as Parquet gives it back
    source = dataset.load()
    assert source.part_paths() == [f"{table.removeprefix('s3://')}/{name}" for name in parts]
    pd.testing.assert_frame_equal(source.read(), expected)
    last = source.rows_of("prompt_id", [pairs["prompt_id"].iloc[-1]])  # from the last part
    pd.testing.assert_frame_equal(last, expected.tail(1).reset_index(drop=True))
    assert len(dataset.preview(2)["data"]) == 2
    latest = LatestParquetDataset(filepath=path, columns="JUDGE_VALIDATION_COLUMN_TYPES")
    pd.testing.assert_frame_equal(latest.load(), expected)

    output = dry_run_push(root, s3_env, SECRET)
    for side, rows in pairs["split"].value_counts().items():  # the pairs' train and test
        assert f"split {side}: {rows:,} rows" in output
    assert not named_s3(tmp_path) and not named_s3(PROJECT_ROOT)
