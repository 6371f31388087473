"""`kedro viz build` works offline on this project: every registered pipeline, and previews
of the report's datasets once a run has written them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

from llm_feedback.pipeline_registry import register_pipelines
from tests.conftest import PROJECT_ROOT
from tests.reporting.builders import build_frames, typical_specs

KEDRO = Path(sys.executable).with_name("kedro")
PNG_BASE64_MAGIC = "iVBORw0KGgo"


@pytest.fixture
def project_copy(tmp_path: Path) -> Path:
    """The project without its data and local config, in a tmp dir: `kedro viz build`
    writes build/ into the current directory, and the catalog's relative paths resolve
    against the project root, so nothing of the checkout is read or written."""
    copy = tmp_path / "project"
    copy.mkdir()
    shutil.copy(PROJECT_ROOT / "pyproject.toml", copy)
    shutil.copytree(
        PROJECT_ROOT / "src",
        copy / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    shutil.copytree(PROJECT_ROOT / "conf", copy / "conf", ignore=shutil.ignore_patterns("local"))
    (copy / "conf" / "local").mkdir()
    shutil.copytree(PROJECT_ROOT / "data" / "01_raw", copy / "data" / "01_raw")
    return copy


def viz_build(project: Path, *options: str) -> dict[str, Any]:
    """Run `kedro viz build` in `project`; return the built main API document."""
    completed = subprocess.run(
        [str(KEDRO), "viz", "build", *options],
        cwd=project,
        env={**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0 and "Failed to build" not in output, output[-3000:]
    return json.loads((project / "build" / "api" / "main").read_text())


def built_node(project: Path, main: dict[str, Any], name: str) -> dict[str, Any]:
    node_id = next(
        node["id"] for node in main["nodes"] if node["name"] == name and node["type"] == "data"
    )
    return json.loads((project / "build" / "api" / "nodes" / node_id).read_text())


def test_viz_build_lists_every_registered_pipeline(project_copy: Path):
    bootstrap_project(PROJECT_ROOT)
    registered = set(register_pipelines())

    main = viz_build(project_copy)

    assert {pipeline["id"] for pipeline in main["pipelines"]} == registered
    for name in registered:
        assert (project_copy / "build" / "api" / "pipelines" / name).is_file(), name
    names = {node["name"] for node in main["nodes"]}
    assert {"report", "preference_pairs", "model_aspect_metrics", "aspect_heatmap_figure"} <= names


def test_viz_build_previews_tables_and_figures_of_a_report_run(project_copy: Path):
    bootstrap_project(PROJECT_ROOT)
    # Write the report's inputs and outputs where the copy's catalog reads them.
    frames = build_frames(typical_specs())
    runtime_params = {"data_root": str(project_copy / "data")}
    with KedroSession.create(project_path=PROJECT_ROOT, runtime_params=runtime_params) as session:
        catalog = session.load_context().catalog
        for name in ("completions", "aspect_annotations", "critiques", "overall_scores"):
            catalog.save(name, getattr(frames, name))
        session.run(pipeline_names=["report"])

    main = viz_build(project_copy, "--include-previews")

    table = built_node(project_copy, main, "model_aspect_metrics")
    assert table["preview_type"] == "TablePreview"
    assert "mean_rating_0_100" in table["preview"]["columns"]
    figure = built_node(project_copy, main, "aspect_heatmap_figure")
    assert figure["preview_type"] == "ImagePreview"
    assert figure["preview"].startswith(PNG_BASE64_MAGIC)
