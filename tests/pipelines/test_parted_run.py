"""sample -> generate -> annotate -> report with every table written as a folder of parts
(`parquet_parts`), as the large tables of a million prompts are: each node reads its inputs
in parts, and every dataset holds what the run of one-file tables holds."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from kedro.framework.session import KedroSession

from llm_feedback.pipelines.datasets import ParquetDataset
from llm_feedback.storage.parquet_parts import PART_BYTES_ENV
from llm_feedback.storage.parquet_source import ParquetSource
from tests.conftest import PROJECT_ROOT, endpoints_via

PIPELINES = ("sample", "generate", "annotate", "report")
# What differs between two runs of the same requests: when they ran and how long calls took.
RUN_DEPENDENT = {"latency_s", "started_at", "finished_at", "created_at", "run_id", "duration_s"}


def _viewer_files(root: Path) -> dict[str, bytes]:
    """The judgment viewer's site, file by file (its one version)."""
    (site,) = (root / "08_reporting" / "judgment_viewer").glob("*/judgment_viewer")
    return {str(p.relative_to(site)): p.read_bytes() for p in site.rglob("*") if p.is_file()}


def _run_all(run_kedro, server, root: Path):
    params = {
        "data_root": str(root),
        "sample": {"max_prompts": 6},
        "endpoints": endpoints_via(server),
        "report": {"intervals": {"n_resamples": 50}},
    }
    result = None
    for name in PIPELINES:
        result = run_kedro(name, params)
    return result["catalog"]


def _tables(catalog) -> dict[str, pd.DataFrame]:
    tables = {}
    for name in catalog.keys():  # noqa: SIM118 - a DataCatalog, not a dict
        dataset = catalog.get(name)
        if not isinstance(dataset, ParquetDataset) or not dataset.exists():
            continue
        data = catalog.load(name)
        frame = data.read() if isinstance(data, ParquetSource) else data
        tables[name] = frame.drop(columns=[c for c in frame.columns if c in RUN_DEPENDENT])
    return tables


def test_a_run_of_parted_tables_holds_what_a_run_of_single_files_holds(
    run_kedro, fake_llm, tmp_path, monkeypatch
):
    whole = _tables(_run_all(run_kedro, fake_llm, tmp_path / "whole"))

    # Row groups of three rows, and a part closed after each: every table of more than
    # three rows is a folder.
    monkeypatch.setattr(ParquetDataset, "DEFAULT_SAVE_ARGS", {"row_group_size": 3})
    monkeypatch.setenv(PART_BYTES_ENV, "1")
    parted_root = tmp_path / "parted"
    parted = _tables(_run_all(run_kedro, fake_llm, parted_root))

    folders = {
        path.parent.name.removesuffix(".parquet")
        for path in parted_root.rglob("part-00001.parquet")
    }
    assert {"sampled_prompts", "completions", "aspect_annotations", "critiques"} <= folders
    assert {
        "overall_scores",
        "ultrafeedback",
        "preference_pairs",
        "model_aspect_metrics",
    } <= folders
    assert set(parted) == set(whole)
    for name, table in whole.items():
        pd.testing.assert_frame_equal(parted[name], table, obj=name)
    # The viewer read the judge tables in parts into the same site.
    assert _viewer_files(parted_root) == _viewer_files(tmp_path / "whole")
    # kedro-viz's previews read the first rows of a folder as of a file.
    runtime_params = {"data_root": str(parted_root)}
    with KedroSession.create(project_path=PROJECT_ROOT, runtime_params=runtime_params) as session:
        catalog = session.load_context().catalog
    for name in ("aspect_annotations", "ultrafeedback", "preference_pairs"):
        preview = catalog.get(name).preview()
        assert len(preview["data"]) == 5 and set(whole[name].columns) <= set(preview["columns"])
        json.dumps(preview)
    report = (parted_root / "08_reporting" / "report.md").read_text()
    assert "## Ratings per model and aspect" in report
