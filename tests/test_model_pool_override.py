"""A `model_pool:` in conf/local replaces conf/base's pool (the embedded model's settings do
not stay beside the user's models); `null` removes a model; the run log and the plan print
the pool in use. Real `kedro run`s in child processes, on a copy of the configuration."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pandas as pd
import yaml

from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import KEDRO_CLI_ENV, PROJECT_ROOT, kedro_cli

USER_POOL = {
    "mine-a": {"endpoint": "local", "temperature": 0.3},
    "mine-b": {"endpoint": "local"},
    "mine-c": {"endpoint": "local"},
    "mine-d": {"endpoint": "local", "max_tokens": 64},
    "mine-gone": None,  # removed
}
KEPT = [name for name, definition in USER_POOL.items() if definition is not None]


def _conf_with_local_pool(tmp_path: Path, pool: dict) -> Path:
    conf = tmp_path / "conf"
    shutil.copytree(PROJECT_ROOT / "conf", conf)
    (conf / "local").mkdir(exist_ok=True)
    (conf / "local" / "parameters.yml").write_text(yaml.safe_dump({"model_pool": pool}))
    return conf


def _kedro(command: list[str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*command, *args],
        cwd=PROJECT_ROOT,
        env=KEDRO_CLI_ENV,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _base_pool() -> list[str]:
    base = yaml.safe_load((PROJECT_ROOT / "conf" / "base" / "parameters.yml").read_text())
    return list(base["model_pool"])


def _logged_pool(output: str) -> str:
    """The pool line of a run's log (Rich wraps long lines: joined back first)."""
    text = " ".join(line.strip(" │") for line in output.splitlines())
    return " ".join(text.split("Model pool (", 1)[1].split())


def test_a_pool_in_conf_local_replaces_the_base_pool_in_the_run_and_its_log(tmp_path):
    conf = _conf_with_local_pool(tmp_path, USER_POOL)
    data_root = tmp_path / "data"
    with FakeLLMServer() as server:
        command = kedro_cli(data_root, server.base_url, "sample.max_prompts=3")
        result = _kedro(command, "--conf-source", str(conf), "--pipelines", "sample,generate")
        sent = {body["temperature"] for body in server.requests}
    assert result.returncode == 0, result.stderr[-3000:]
    logged = _logged_pool(result.stdout + result.stderr)
    assert logged.startswith(f"{len(KEPT)}): ")
    for name in KEPT:
        assert f"{name} (local: fake)" in logged
    assert not any(name in logged for name in [*_base_pool(), "mine-gone"])
    completions = pd.read_parquet(next((data_root / "03_primary").glob("completions.parquet/*")))
    assert set(completions["model"]) == set(KEPT)
    assert 0.3 in sent  # mine-a's own setting reached the server


def test_the_plan_prints_the_pool_and_params_edit_or_remove_a_model(tmp_path):
    conf = _conf_with_local_pool(tmp_path, USER_POOL)
    command = kedro_cli(
        tmp_path / "data",
        "http://127.0.0.1:9/v1",  # nothing is called: only the plan
        "plan_only=true",
        "sample.max_prompts=2",
        "sample.n_completions=2",
        "model_pool.mine-b=null",
        "model_pool.mine-e.endpoint=local",
    )
    result = _kedro(command, "--conf-source", str(conf), "--pipelines", "sample,generate")
    assert result.returncode == 0, result.stderr[-3000:]
    pool_line = next(line for line in result.stdout.splitlines() if line.startswith("Model pool"))
    expected = [name for name in KEPT if name != "mine-b"] + ["mine-e"]
    assert pool_line.startswith(f"Model pool ({len(expected)}): ")
    for name in expected:
        assert f"{name} (local: fake)" in pool_line
    assert "mine-b" not in pool_line and "smollm2" not in pool_line


def test_without_a_local_pool_params_remove_a_base_model(tmp_path):
    pool = _base_pool()
    # --params splits keys at dots: the first name without one
    removed = next(name for name in pool if "." not in name)
    kept = [name for name in pool if name != removed]
    command = kedro_cli(
        tmp_path / "data",
        "http://127.0.0.1:9/v1",
        "plan_only=true",
        "sample.max_prompts=2",
        f"model_pool.{removed}=null",
    )
    result = _kedro(command, "--pipelines", "sample,generate")
    assert result.returncode == 0, result.stderr[-3000:]
    pool_line = next(line for line in result.stdout.splitlines() if line.startswith("Model pool"))
    assert pool_line.startswith(f"Model pool ({len(kept)}): ")
    assert all(name in pool_line for name in kept) and f"{removed} " not in pool_line
