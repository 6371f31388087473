"""The report pipeline's intervals, run on a real catalog as tests/pipelines does: every
estimate in report.md's tables carries its interval, and the model ranking is written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llm_feedback.storage.schema import MODEL_RANKING_COLUMN_TYPES, STYLE_COEFFICIENTS_COLUMN_TYPES
from tests.pipelines import test_report_pipeline as report_runs
from tests.pipelines.test_report_pipeline import RunReport, report_path
from tests.reporting.builders import Completion, build_frames, typical_specs

# The report pipeline's fixtures: a tmp data root, seeded inputs, one run.
data_root = report_runs.data_root
seed = report_runs.seed
run_report = report_runs.run_report

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

NUMBER = r"-?[\d,]*\.?\d+(?:e[-+]?\d+)?"
BARE_NUMBER = re.compile(rf"^{NUMBER}$")
WITH_INTERVAL = re.compile(rf"^{NUMBER} \[{NUMBER}, {NUMBER}\]$")
# Columns of counts, positions and ranks: exact, no interval.
EXACT_COLUMNS = {
    "n",
    "rows",
    "parse_errors",
    "call_errors",
    "skipped_too_long",
    "reasks",
    "suspected_injections",
    "fix_count",
    "modal_score",  # the score the critiques gave most often, and how many gave it
    "modal_score_count",
    "rank",
    "resamples",
    "position",
    "length_bin",
    "length_low",
    "length_high",
    "prompt_tokens",
    "completion_tokens",
}
# Sums of recorded tokens and the dataset versions are not estimates.
EXACT_SECTIONS = {"Tokens and estimated cost", "Built from", "Run"}


def report_cells(report: str) -> list[tuple[str, str, str]]:
    """(section, column, cell) for every cell of every table in the report."""
    cells = []
    for section in report.split("\n## ")[1:]:
        title, _, body = section.partition("\n")
        for table in _tables(body):
            header = _split(table[0])
            for row in table[2:]:
                cells += list(zip([title] * len(header), header, _split(row), strict=True))
    return cells


def _tables(body: str) -> list[list[str]]:
    tables, current = [], []
    for line in [*body.splitlines(), ""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


def _split(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]


def is_exact(section: str, column: str) -> bool:
    return (
        section in EXACT_SECTIONS
        or column in EXACT_COLUMNS
        or column.startswith("n_")
        or column in {"wins", "ties", "losses"}
    )


def mixed_specs() -> list[Completion]:
    """typical_specs plus prompts where no model wins every battle and answers differ in
    length, so that every ranking figure is estimable."""
    overall = {"alpha": [8, 5, 6, 3, 7, 4], "beta": [6, 7, 4, 5, 3, 8], "gamma": [5, 6, 8, 7, 4, 3]}
    extra = [
        Completion(
            f"q{i}",
            model,
            {"helpfulness": 1 + (scores[i] % 5)},
            overall=scores[i],
            response="An answer. " * (1 + (i + len(model)) % 4),
        )
        for model, scores in overall.items()
        for i in range(6)
    ]
    return typical_specs() + extra


def test_every_number_in_the_reports_tables_has_its_interval(
    run_report: RunReport, data_root: Path
):
    run_report(build_frames(mixed_specs(), shuffles=2))
    cells = report_cells(report_path(data_root).read_text())

    bare = [
        (section, column, cell)
        for section, column, cell in cells
        if BARE_NUMBER.match(cell) and not is_exact(section, column)
    ]
    assert not bare, f"numbers without an interval: {bare[:5]}"
    with_interval = {
        (section, column) for section, column, cell in cells if WITH_INTERVAL.match(cell)
    }
    # Every table with an estimate shows intervals, e.g.:
    for expected in [
        ("Ratings per model and aspect", "mean_rating"),
        ("Ratings per model and aspect", "mean_rating_0_100"),
        ("Overall and fine-grained scores per model", "mean_overall_fixed"),
        ("Overall and fine-grained scores per model", "spearman_overall_vs_fine_grained"),
        ("Judge health", "parse_error_rate"),
        ("Position consistency", "share_changed"),
        ("Agreement between shuffles", "value"),
        ("Mean rating by position", "mean_rating"),
        ("Model ranking", "score"),
        ("Model ranking", "win_rate"),
        ("Model ranking", "lc_win_rate"),
        ("Model ranking", "style_controlled_score"),
        ("Style control", "coefficient"),
        ("Judge bias", "estimate"),
    ]:
        assert expected in with_interval, expected
    # Bounds bracket their estimate.
    for _, _, cell in cells:
        if WITH_INTERVAL.match(cell):
            value, low, high = (float(x.replace(",", "")) for x in re.findall(NUMBER, cell))
            assert low <= value <= high, cell


def test_the_model_ranking_is_a_versioned_dataset_with_its_figure(
    run_report: RunReport, data_root: Path
):
    params = {"report": {"ranking": {"baseline": "beta"}}}
    catalog = run_report(build_frames(typical_specs(), shuffles=1), params)

    versions = list((data_root / "08_reporting" / "model_ranking.parquet").iterdir())
    assert len(versions) == 1
    ranking = catalog.load("model_ranking")
    assert list(ranking.columns) == list(MODEL_RANKING_COLUMN_TYPES)
    assert set(ranking["model"]) == {"alpha", "beta", "gamma", "delta"}
    assert set(ranking["baseline"]) == {"beta"}
    assert ranking.set_index("model")["win_rate"].isna()["beta"]  # not against itself
    assert ranking["rank"].min() == 1 and ranking["rank"].is_monotonic_increasing
    assert (ranking["resamples"] == 50).all()
    figure = data_root / "08_reporting" / "figures" / "model_ranking.png"
    assert figure.read_bytes().startswith(b"\x89PNG")
    report = report_path(data_root).read_text()
    assert "## Model ranking" in report and "Top model (Bradley-Terry):" in report
    ranking_line = next(line for line in report.splitlines() if "Top model (Bradley-Terry)" in line)
    best = ranking.sort_values("score").iloc[-1]
    # A leader is named only where its interval lies above every other model's.
    separated = (ranking.loc[ranking["model"] != best["model"], "ci_high"] < best["ci_low"]).all()
    assert ("told apart" not in ranking_line) == separated, ranking_line
    coefficients = catalog.load("style_coefficients")
    assert list(coefficients.columns) == list(STYLE_COEFFICIENTS_COLUMN_TYPES)
    assert list(coefficients["feature"]) == ["length", "headers", "bold", "list_items"]
    assert len(list((data_root / "08_reporting" / "style_coefficients.parquet").iterdir())) == 1
    assert "## Style control" in report
