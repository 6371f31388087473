"""The coverage benchmark of the prediction-powered estimates, run small: it writes its JSON
for bench.py, the figures reach the RESULTS.md section, and even at 40 repetitions the
judge-only interval misses the people's mean that the corrected ones cover."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT, SHARED_DATA

pytest.importorskip("ppi_py", reason="the ppi extra (ppi-python) is not installed")
sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import bench  # noqa: E402
import results_md  # noqa: E402


def test_a_small_run_renders_its_own_figures(tmp_path):
    env = {
        **os.environ,
        "BENCH_RESULTS_DIR": str(tmp_path),
        "PYTHONPATH": str(PROJECT_ROOT / "src"),
    }
    subprocess.run(
        [
            sys.executable,
            str(PROJECT_ROOT / "benchmarks" / "ppi_coverage.py"),
            "--items",
            "2000",
            "--labels",
            "100",
            "--repetitions",
            "40",
            "--seed",
            "7",
            "--llmbar-slices",
            "100",
        ],
        env=env,
        check=True,
        capture_output=True,
    )
    result = json.loads((tmp_path / "ppi_coverage.json").read_text())
    assert (result["items"], result["labels"], result["repetitions"]) == (2000, 100, 40)
    for judge in ("binary", "rater"):
        rows = {(r["estimator"], r["selection"]): r for r in result["judges"][judge]["estimators"]}
        assert rows[("judge", "uniform")]["coverage"] < 0.2
        assert rows[("prediction_powered", "uniform")]["coverage"] >= 0.85
        assert rows[("prediction_powered", "probability_weighted")]["coverage"] >= 0.85
        ratio = (
            rows[("prediction_powered", "uniform")]["mean_width"]
            / rows[("labels_only", "uniform")]["mean_width"]
        )
        assert ratio < 1
    llmbar = result["llmbar"]
    if (SHARED_DATA / "llmbar" / "natural" / "gpt-4" / "vanilla" / "result.json").is_file():
        # GPT-4 on LLMBar Natural, 30 gold labels a slice: the corrected share covers.
        rows = {(r["estimator"], r["selection"]): r for r in llmbar["estimators"]}
        assert (llmbar["pairs"], llmbar["labels"], llmbar["slices"]) == (100, 30, 100)
        assert rows[("prediction_powered", "uniform")]["coverage"] >= 0.94
        assert llmbar["gold_share"] == pytest.approx(0.42)
    else:
        assert "is not here" in llmbar["skipped"]
    tpr_tnr = result["judges"]["binary"]["measured_tpr_tnr"]
    assert tpr_tnr["tpr"] == pytest.approx(0.8, abs=0.03)
    assert tpr_tnr["tnr"] == pytest.approx(0.7, abs=0.03)
    section = results_md.render(
        {
            "command": "bench",
            "results_dir": "x",
            "machine": "m",
            "started": "s",
            "finished": "f",
            "repetitions": 1,
            "groups": ["ppi_coverage"],
        },
        {"ppi_coverage": [result]},
    )
    assert "<!-- ppi-coverage:start -->" in section
    binary = next(
        r
        for r in result["judges"]["binary"]["estimators"]
        if r["estimator"] == "prediction_powered"
    )
    assert f"{binary['coverage']:.1%}" in section and f"{binary['mean_width']:.3f}" in section
    assert "LLMBar Natural" in section
    assert "ppi_coverage" in bench.GROUPS and "ppi_coverage" in bench.ONCE_GROUPS
