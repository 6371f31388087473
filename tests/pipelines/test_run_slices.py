"""Kedro's own run flags on every pipeline: each `--from-nodes`, `--to-nodes`, `--nodes`
and `--from-inputs` slice runs on a data root prepared once by full runs (against the
project's fake LLM server), and `--runner ParallelRunner` either runs or is refused before
its first node with the reason."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kedro.framework.project import pipelines
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project
from kedro.runner import ParallelRunner

from llm_feedback.core.errors import ConfigError
from llm_feedback.pipelines.stage_times import StageTimesHooks
from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import KEDRO_CLI_ENV, PROJECT_ROOT, endpoints_via, kedro_cli

PIPELINES = ("sample", "generate", "annotate", "report", "evaluate")
# Every slice runs on one shared data root, so a slice recomputes some tables after others
# were written by earlier slices: the report's lineage check (tests/pipelines/test_lineage.py)
# would rightly refuse those mixes; here only the slicing is under test.
SMALL = {"sample": {"max_prompts": 3}, "report": {"allow_mixed_runs": True}}
# The slices a user reported broken, on the default pipeline.
REPORTED = [
    ("__default__", {"from_nodes": ["fix_overall_scores"]}),
    ("__default__", {"from_nodes": ["export_ultrafeedback"]}),
    ("__default__", {"from_inputs": ["overall_scores"]}),
    ("__default__", {"from_nodes": ["judge_completions"], "to_nodes": ["fix_overall_scores"]}),
]


Slice = tuple[str, dict[str, list[str]], set[str]]


def _slices() -> list[Slice]:
    """(pipeline, run arguments, the nodes Kedro says the slice holds) for every node and
    every dataset of every pipeline. Taken at collection, from a fresh registry: a later
    `bootstrap_project` (the sessions') leaves `kedro.framework.project.pipelines` reset."""
    bootstrap_project(PROJECT_ROOT)
    registry = dict(pipelines)
    slices = list(REPORTED)
    for name in PIPELINES:
        pipeline = registry[name]
        for node in sorted(n.name for n in pipeline.nodes):
            for flag in ("from_nodes", "to_nodes", "node_names"):
                slices.append((name, {flag: [node]}))
        datasets = sorted(d for d in pipeline.datasets() if not d.startswith("params"))
        for dataset in datasets:
            if dataset != "parameters" and any(dataset in n.inputs for n in pipeline.nodes):
                slices.append((name, {"from_inputs": [dataset]}))
    # Slices that run the same nodes (a node's --to-nodes when nothing is upstream of it,
    # the same as its --nodes) are run once: the first flag that makes it.
    distinct: dict[tuple[str, frozenset[str]], Slice] = {}
    for name, run_args in slices:
        nodes = {node.name for node in registry[name].filter(**run_args).nodes}
        distinct.setdefault((name, frozenset(nodes)), (name, run_args, nodes))
    return list(distinct.values())


SLICES = _slices()


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


def _run(data_root: Path, server: FakeLLMServer, pipeline: str, **run_args: Any) -> set[str]:
    """Run `pipeline` (sliced by `run_args`) on `data_root`; the names of the nodes run."""
    params = {"data_root": str(data_root), "endpoints": endpoints_via(server), **SMALL}
    with KedroSession.create(project_path=PROJECT_ROOT, runtime_params=params) as session:
        session.run(pipeline_names=[pipeline], **run_args)
    return set(StageTimesHooks.last_run)


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory, server: FakeLLMServer) -> Path:
    """One data root with every persisted dataset of every pipeline, shared by all slices."""
    bootstrap_project(PROJECT_ROOT)
    root = tmp_path_factory.mktemp("slices") / "data"
    _run(root, server, "__default__")
    _run(root, server, "evaluate")
    return root


def _label(case: Slice) -> str:
    name, run_args, _ = case
    return f"{name}:" + ",".join(f"{flag}={'+'.join(v)}" for flag, v in run_args.items())


@pytest.mark.parametrize("case", SLICES, ids=[_label(case) for case in SLICES])
def test_every_slice_of_every_pipeline_runs(data_root, server, case):
    pipeline, run_args, expected = case
    assert expected  # a slice of something
    assert _run(data_root, server, pipeline, **run_args) == expected


def test_the_report_runs_under_parallel_runner(data_root, server):
    report = data_root / "08_reporting" / "report.md"
    before = report.stat().st_mtime_ns
    _run(data_root, server, "report", runner=ParallelRunner(max_workers=2))
    assert report.stat().st_mtime_ns > before
    assert report.read_text().startswith("#")


def test_parallel_runner_is_refused_before_any_call_when_the_run_calls_models(data_root, server):
    before = server.request_count
    with pytest.raises(
        ConfigError,
        match=r"--runner ParallelRunner: nodes fix_overall_scores, judge_completions.*call",
    ):
        _run(data_root, server, "annotate", runner=ParallelRunner(max_workers=2))
    assert server.request_count == before


def test_the_cli_refuses_parallel_runner_in_one_line(data_root, server):
    command = [
        *kedro_cli(data_root, server.base_url, "sample.max_prompts=3"),
        "--pipeline",
        "annotate",
        "--runner",
        "ParallelRunner",
    ]
    result = subprocess.run(
        command, cwd=PROJECT_ROOT, env=KEDRO_CLI_ENV, capture_output=True, text=True, check=False
    )
    assert result.returncode == 1
    refusal = [line for line in result.stderr.splitlines() if "ParallelRunner" in line]
    assert len(refusal) == 1 and refusal[0].startswith("error: --runner ParallelRunner: nodes")
    assert "Traceback" not in result.stderr
