"""notebooks/explore_feedback.ipynb reads a run whose data root is a bucket (moto)."""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import endpoints_via
from tests.test_notebook import NOTEBOOK


def test_the_notebook_lists_versions_and_draws_figures_from_an_s3_root(
    bucket, s3_env, run_kedro, monkeypatch: pytest.MonkeyPatch
):
    data_root = f"s3://{bucket}/data"
    with FakeLLMServer() as server:
        params = {"data_root": data_root, "sample": {"max_prompts": 2}}
        run_kedro("__default__", {**params, "endpoints": endpoints_via(server)})

    monkeypatch.setenv("LLM_FEEDBACK_DATA_ROOT", data_root)  # the kernel inherits it
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    ).execute()

    outputs = [output for cell in notebook.cells for output in cell.get("outputs", [])]
    printed = "".join(output.text for output in outputs if output.output_type == "stream")
    assert "Only one version of model_aspect_metrics" in printed
    assert "2 prompts" in printed
    (versions_cell,) = [c for c in notebook.cells if "def saved_versions" in c.source]
    (listed,) = [
        o["data"]["text/plain"] for o in versions_cell.outputs if o.output_type == "execute_result"
    ]
    assert listed.count("'") == 2  # one version, read from the bucket
    assert len([o for o in outputs if "image/png" in o.get("data", {})]) == 4
