"""notebooks/explore_feedback.ipynb runs headless against two small runs of the project."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import PROJECT_ROOT, endpoints_via

NOTEBOOK = PROJECT_ROOT / "notebooks" / "explore_feedback.ipynb"
TINY_RUN = {"sample": {"max_prompts": 4}}


def test_exploration_notebook_compares_two_versions_and_draws_the_figures(
    run_kedro, fake_llm: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    params = {**TINY_RUN, "endpoints": endpoints_via(fake_llm)}
    run_kedro("__default__", params)
    run_kedro("__default__", params)  # a second version of every dataset
    data_root = tmp_path / "data"  # where run_kedro writes
    metrics_folder = data_root / "08_reporting" / "model_aspect_metrics.parquet"
    versions = sorted(path.name for path in metrics_folder.iterdir())
    assert len(versions) == 2

    # The kernel inherits the environment; the notebook passes this on to %reload_kedro.
    monkeypatch.setenv("LLM_FEEDBACK_DATA_ROOT", str(data_root))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(cell.get("outputs") for cell in notebook.cells), "commit it without outputs"
    NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},  # the kernel's cwd, as in Jupyter
    ).execute()

    outputs = [output for cell in notebook.cells for output in cell.get("outputs", [])]
    printed = "".join(output.text for output in outputs if output.output_type == "stream")
    assert f"Comparing model_aspect_metrics {versions[0]} -> {versions[1]}" in printed
    assert "model x aspect means changed" in printed
    images = [output for output in outputs if "image/png" in output.get("data", {})]
    assert len(images) == 4
    # No log noise and no warnings: only what the notebook itself shows.
    shown = printed + "".join(
        str(output.get("data", {}).get("text/plain", "")) for output in outputs
    )
    assert "INFO" not in shown and "Warning" not in shown and "WARNING" not in shown
    assert not [o for o in outputs if o.output_type == "stream" and o.name == "stderr"]
