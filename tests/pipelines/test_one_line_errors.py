"""Each fault a user met as a raw traceback is one `error:` line on stderr naming what and
where, exit status 1, no traceback on the terminal (it goes to the log): an unknown
pipeline, a read-only request-cache folder, a truncated Parquet version, a slice whose
input tables were never written, an empty table pushed to the Hub, and a disk filling
during the report (whose figures then stay the previous run's, all of them).

Every case runs the project's CLI in a child process. The full disk is real where a small
tmpfs can be mounted (root); everywhere, the same run is also made under a file-size limit
(RLIMIT_FSIZE: writes past it fail with EFBIG, as on a full disk).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project

from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import KEDRO_CLI_ENV, PROJECT_ROOT, kedro_cli

FIGURE_NAMES = (
    "aspect_heatmap",
    "model_ranking",
    "position_bias",
    "rating_by_length",
    "rating_distribution",
    "score_scatter",
)


def _run(command: list[str], env: dict | None = None, **options) -> subprocess.CompletedProcess:
    return subprocess.run(
        command,
        cwd=PROJECT_ROOT,
        env={**KEDRO_CLI_ENV, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        **options,
    )


def _kedro_run(data_root: Path, *args: str, params: tuple[str, ...] = (), **options):
    settings = ",".join([f"data_root={data_root}", *params])
    command = [sys.executable, "-m", "kedro", "run", *args, "--params", settings]
    return _run(command, **options)


def _one_error_line(result: subprocess.CompletedProcess, *named: str) -> str:
    """The one `error:` line of a failed command's stderr, after checking the rest."""
    assert result.returncode == 1, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr[-3000:]
    # Besides it, at most the line saying where the traceback went.
    assert all(line in errors or "the traceback is in" in line for line in lines), lines
    assert "Traceback" not in result.stderr and "╭" not in result.stderr
    for text in named:
        assert text in errors[0], (text, errors[0])
    return errors[0]


@pytest.fixture(scope="module")
def run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data root holding one small run of every feedback pipeline (the fake server)."""
    root = tmp_path_factory.mktemp("one_line") / "data"
    with FakeLLMServer() as server:
        command = kedro_cli(root, server.base_url, "sample.max_prompts=3")
        result = _run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    return root


def _copy(run_root: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(run_root, copy)
    return copy


def _latest(data_root: Path, layer: str, name: str) -> Path:
    """The latest version folder of a versioned table."""
    return sorted((data_root / layer / f"{name}.parquet").iterdir())[-1]


def test_an_unknown_pipeline_lists_the_pipelines(tmp_path):
    bootstrap_project(PROJECT_ROOT)
    known = list(pipelines)
    result = _kedro_run(tmp_path / "data", "--pipelines", "anotate")
    line = _one_error_line(result, "'anotate'", "did you mean 'annotate'")
    assert known and all(name in line for name in known)
    assert not (tmp_path / "data").exists()


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder nothing can be written to: by mode bits for a user; for root (whom mode bits
    do not stop) a read-only tmpfs, or a skip where none can be mounted."""
    folder = tmp_path / "read_only"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def test_a_read_only_request_cache_folder_names_the_lock_file(tmp_path, read_only_folder):
    cache = read_only_folder / "request_cache.sqlite"
    with FakeLLMServer() as server:
        command = kedro_cli(
            tmp_path / "data", server.base_url, "sample.max_prompts=2", f"request_cache={cache}"
        )
        result = _run([*command, "--pipelines", "sample,generate"])
        assert server.request_count == 0
    _one_error_line(result, f"{cache}.lock", "cannot be written", "request_cache")


def test_a_truncated_latest_version_names_the_dataset_version_and_file(run_root, tmp_path):
    data_root = _copy(run_root, tmp_path)
    version = _latest(data_root, "03_primary", "completions")
    file = version / "completions.parquet"
    file.write_bytes(file.read_bytes()[:100])  # cut short, as by a full disk or a kill
    result = _kedro_run(data_root, "--pipelines", "report")
    _one_error_line(result, f"completions version {version.name}", str(file), "Parquet")


def test_a_slice_of_ultrafeedback_fix_without_its_input_says_how_to_provide_it(tmp_path):
    bootstrap_project(PROJECT_ROOT)
    fix = pipelines["ultrafeedback_fix"]
    first = fix.nodes[0]  # reads the published records: writes the tables the rest read
    later = next(node for node in fix.nodes if set(node.inputs) & set(first.outputs))
    result = _kedro_run(
        tmp_path / "data", "--pipelines", "ultrafeedback_fix", "--from-nodes", later.name
    )
    read = sorted(set(later.inputs) & set(first.outputs))
    _one_error_line(result, *read, "--pipelines ultrafeedback_fix", "records_path")


def test_a_dry_run_push_of_an_empty_table_names_its_version(run_root, tmp_path):
    data_root = _copy(run_root, tmp_path)
    latest = _latest(data_root, "07_model_output", "preference_pairs")
    pairs = pd.read_parquet(latest / "preference_pairs.parquet")
    empty = latest.with_name("2099-01-01T00.00.00.000Z")  # a later run that kept no pair
    empty.mkdir()
    pairs.iloc[:0].to_parquet(empty / "preference_pairs.parquet")
    command = [
        sys.executable,
        "-m",
        "kedro",
        "push-to-hub",
        "--dataset",
        "preference_pairs",
        "--repo-id",
        "someone/feedback",
        "--dry-run",
        "--params",
        f"data_root={data_root}",
    ]
    result = _run(command, env={"HF_TOKEN": "hf_test_token", "HF_HUB_OFFLINE": "1"})
    _one_error_line(result, f"preference_pairs version {empty.name}", "no rows")


def _old_figures(data_root: Path) -> dict[str, bytes]:
    """Mark every figure as a previous run's, to tell them from any the next run draws."""
    folder = data_root / "08_reporting" / "figures"
    assert sorted(p.stem for p in folder.iterdir()) == sorted(FIGURE_NAMES)
    marks = {name: f"previous run's {name}".encode() for name in FIGURE_NAMES}
    for name, mark in marks.items():
        (folder / f"{name}.png").write_bytes(mark)
    return marks


def _assert_a_full_disk_kept_the_old_figures(result, data_root: Path, marks: dict) -> None:
    line = _one_error_line(result, str(data_root), "cannot be written")
    assert "disk is full" in line or "File too large" in line, line
    folder = data_root / "08_reporting" / "figures"
    assert {p.stem: p.read_bytes() for p in folder.glob("*.png")} == marks
    assert [p.name for p in folder.iterdir() if not p.name.endswith(".png")] == []


def test_a_disk_filling_during_the_report_keeps_every_previous_figure(run_root, tmp_path):
    data_root = _copy(run_root, tmp_path)
    figures = data_root / "08_reporting" / "figures"
    saved = {p.name: p.read_bytes() for p in figures.iterdir()}
    shutil.rmtree(figures)
    figures.mkdir()
    size = sum(map(len, saved.values())) // 2  # room for the marks, not the new figures
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(figures)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode().strip()}")
    try:
        for name in saved:
            (figures / name).touch()
        marks = _old_figures(data_root)
        result = _kedro_run(data_root, "--pipelines", "report")
        _assert_a_full_disk_kept_the_old_figures(result, data_root, marks)
        assert str(figures) in result.stderr and "No space left" in result.stderr
    finally:
        subprocess.run(["umount", str(figures)], check=False)


# Under the largest figure of a 3-prompt run, over every table, report.md and log file.
FILE_SIZE_LIMIT = 45_000


def _file_size_limit() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


def test_a_failing_write_during_the_report_keeps_every_previous_figure(run_root, tmp_path):
    data_root = _copy(run_root, tmp_path)
    sizes = [p.stat().st_size for p in (data_root / "08_reporting" / "figures").iterdir()]
    assert max(sizes) > FILE_SIZE_LIMIT  # some figure cannot be written under the limit
    marks = _old_figures(data_root)
    # The run's log in a file of its own, rotated well under the limit.
    logging_config = yaml.safe_load((PROJECT_ROOT / "conf" / "logging.yml").read_text())
    log_file = logging_config["handlers"]["info_file_handler"]
    log_file.update(filename=str(tmp_path / "info.log"), maxBytes=FILE_SIZE_LIMIT // 3)
    config_path = tmp_path / "logging.yml"
    config_path.write_text(yaml.safe_dump(logging_config))
    result = _kedro_run(
        data_root,
        "--pipelines",
        "report",
        env={"KEDRO_LOGGING_CONFIG": str(config_path)},
        preexec_fn=_file_size_limit,
    )
    _assert_a_full_disk_kept_the_old_figures(result, data_root, marks)
