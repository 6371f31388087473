"""Labels made in the judgment viewer of an annotate run, in a real headless Chromium,
downloaded and fed back unchanged (`report.labels.path`): the annotate judge's card and
the corrected mean ratings appear in report.md. The index's review queue draws records by
the judge's uncertainty with the estimators' probabilities, and a label given on a drawn
record carries its probability."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from llm_feedback.stats.prediction_powered import select_for_labels
from llm_feedback.validation.formats import read_viewer_labels
from tests.pipelines.test_report_pipeline import (  # noqa: F401 - the report's fixtures
    RunReport,
    data_root,
    report_path,
    run_report,
    seed,
)
from tests.pipelines.test_report_viewer_labels import (
    JUDGE_1,
    LABELLED,
    MODELS,
    PROMPTS,
    rated_frames,
    with_labels,
)
from tests.viewer.cdp import Chromium
from tests.viewer.test_viewer_browser import _set
from tests.viewer.test_viewer_labels_browser import _download, _pair, _score


def _site(root: Path) -> Path:
    (index,) = (root / "08_reporting" / "judgment_viewer").glob("*/judgment_viewer/index.html")
    return index.parent


def _shard(site: Path, prompt: str) -> int:
    """The shard file holding `prompt`'s record (a page is opened with it)."""
    for path in sorted((site / "data").glob("shard-*.js")):
        if f'"{prompt}":' in path.read_text(encoding="utf-8"):
            return int(path.stem.split("-")[1])
    raise AssertionError(f"{prompt} is in no shard of {site}")


def test_labels_made_in_the_viewer_reach_the_report(
    chromium,
    run_report: RunReport,  # noqa: F811 - fixtures
    data_root: Path,  # noqa: F811 - fixtures
    tmp_path: Path,
):
    frames = rated_frames()
    run_report(frames, annotated_with=JUDGE_1)
    site = _site(data_root)
    ratings = frames.aspect_annotations
    helpful = (
        ratings[ratings["aspect"] == "helpfulness"]
        .groupby(["prompt_id", "completion_idx"])["rating"]
        .mean()
    )
    overall = ratings.groupby(["prompt_id", "completion_idx"])["rating"].mean()
    prompts = [f"p{number:02d}" for number in range(LABELLED)]

    def review(browser: Chromium) -> None:
        # The reviewer rates every completion one point above the judge on helpfulness and
        # prefers what the judge's ratings prefer.
        for prompt in prompts:
            browser.open(f"file://{site}/page.html?id={prompt}&shard={_shard(site, prompt)}")
            for idx in range(len(MODELS)):
                _score(browser, idx, str(int(helpful[(prompt, idx)]) + 1), "helpfulness")
            first, second = overall[(prompt, 0)], overall[(prompt, 1)]
            _pair(browser, 0, 1, "A" if first > second else "B" if first < second else "tie")

    start = f"file://{site}/page.html?id={prompts[0]}&shard={_shard(site, prompts[0])}"
    labels = tmp_path / "labels.jsonl"
    labels.write_text(_download(chromium, start, tmp_path, "rev-1", review), encoding="utf-8")
    assert len(labels.read_text().splitlines()) == LABELLED * (len(MODELS) + 1)

    run_report(runtime_params=with_labels(str(labels)))
    text = report_path(data_root).read_text()
    card = text.split("## Judge card", 1)[1]
    assert "has not been validated" not in card
    assert f"Validation set `{labels.parent.name}/labels.jsonl`" in card
    assert "| exact_agreement |  | 0.000 [0.000, 0.000] |" in card
    assert "| mean_difference |  | -1.000 [-1.000, -1.000] |" in card
    assert "| accuracy | 1.000 [1.000, 1.000] |" in card
    section = text.split("## Corrected by human labels", 1)[1].split("\n## ")[0]
    for model in MODELS:
        assert f"| {model} | helpfulness | " in section
    assert section.split("Win rate")[0].count(f"| {LABELLED} | {PROMPTS} |") == len(MODELS)


def _index_rows(site: Path) -> list[dict]:
    """The index rows the viewer loads, by column name."""
    manifest = (site / "data" / "manifest.js").read_text(encoding="utf-8")
    columns = json.loads(manifest.removeprefix("LLMF.manifest(").rstrip().removesuffix(");"))[
        "columns"
    ]
    rows = []
    for path in sorted((site / "data").glob("index-*.js")):
        body = path.read_text(encoding="utf-8").removeprefix("LLMF.index(").rstrip()
        _, chunk = json.loads("[" + body.removesuffix(");") + "]")
        rows += [dict(zip(columns, row, strict=True)) for row in chunk]
    return rows


def test_the_review_queue_draws_by_uncertainty_and_the_labels_carry_its_probability(
    chromium, feedback_dir, tmp_path
):
    budget = 20
    rows = _index_rows(feedback_dir)
    uncertainty = np.array([np.nan if r["shuffle"] is None else r["shuffle"] for r in rows])
    # The probabilities the estimators' own sampler gives the same uncertainties.
    _, expected = select_for_labels(uncertainty, budget, np.random.default_rng(0))
    expected_by_id = dict(zip((r["id"] for r in rows), expected, strict=True))
    drawn: list[tuple[str, float]] = []

    def review(browser: Chromium) -> None:
        _set(browser, "#queue-design", "uncertainty")
        _set(browser, "#queue-budget", str(budget))
        browser.evaluate("document.getElementById('queue-draw').click()")
        drawn.extend(
            json.loads(
                browser.evaluate(
                    "JSON.stringify([...document.querySelectorAll('#queue-items li')]"
                    ".map(li => [li.dataset.id, Number(li.dataset.p)]))"
                )
            )
        )
        browser.open(browser.evaluate("document.querySelector('#queue-items a').href"))
        _score(browser, 0, "3", "helpfulness")

    text = _download(chromium, f"file://{feedback_dir}/index.html", tmp_path, "rev-1", review)
    assert drawn, "the queue drew nothing"
    for record, probability in drawn:
        assert probability == pytest.approx(expected_by_id[record])
    # The most uncertain first: where a label is worth the most.
    shuffle = {r["id"]: r["shuffle"] or 0 for r in rows}
    assert [shuffle[record] for record, _ in drawn] == sorted(
        (shuffle[record] for record, _ in drawn), reverse=True
    )
    (line,) = [json.loads(line) for line in text.splitlines()]
    assert line["instance_id"] == drawn[0][0]
    assert line["selection"] == "uncertainty"
    assert line["selection_probability"] == pytest.approx(drawn[0][1])
    path = tmp_path / "labels.jsonl"
    path.write_text(text, encoding="utf-8")
    scores = read_viewer_labels(path).scores
    assert scores["selection_probability"].tolist() == pytest.approx([drawn[0][1]])
