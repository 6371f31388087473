"""Labels made in the viewer in a real headless Chromium, by two reviewers, several pairs of
one prompt in either order and scores beside them (overall and on one aspect), downloaded
and concatenated, read back unchanged as gold: one item per pair, the reviewers' labels in
the item's order, a score per response and aspect."""

from __future__ import annotations

import time
from pathlib import Path

from llm_feedback.validation.formats import read_samples, read_viewer_labels
from tests.viewer.cdp import Chromium
from tests.viewer.test_viewer_browser import _set


def _download(binary: str, page: str, root: Path, name: str, clicks) -> str:
    """One reviewer's session in a browser of its own: `clicks(browser)`, then the file."""
    downloads = root / f"downloads-{name}"
    browser = Chromium(binary, root / f"profile-{name}", downloads=downloads)
    try:
        browser.open(page)
        _set(browser, "#annotator", name)
        clicks(browser)
        browser.evaluate("document.getElementById('download-labels').click()")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            done = [path for path in downloads.glob("*.jsonl") if path.stat().st_size]
            if done:
                return done[0].read_text(encoding="utf-8")
            time.sleep(0.1)
        raise AssertionError(f"no labels file downloaded into {downloads}")
    finally:
        browser.close()


def _pair(browser: Chromium, a: int, b: int, verdict: str) -> None:
    _set(browser, "select.pair-a", str(a))
    _set(browser, "select.pair-b", str(b))
    browser.evaluate(f"document.querySelector('.labeler button[data-verdict={verdict}]').click()")


def _score(browser: Chromium, idx: int, value: str, aspect: str = "") -> None:
    _set(browser, f'.gold-aspect[data-ident="{idx}"]', aspect)
    browser.evaluate(
        f"(() => {{ const i = document.querySelector('.gold-score[data-ident=\"{idx}\"]'); "
        f"i.value = '{value}'; i.closest('.labeler').querySelector('.save-score').click(); }})()"
    )


def test_two_reviewers_sessions_read_back_as_gold(chromium, feedback_dir, frames, tmp_path):
    page = f"file://{feedback_dir}/page.html?id=p-known&shard=0"

    def first(browser: Chromium) -> None:
        _pair(browser, 2, 1, "B")
        _pair(browser, 0, 1, "A")
        _score(browser, 0, "6.5")
        _score(browser, 0, "3", aspect="helpfulness")

    def second(browser: Chromium) -> None:
        _pair(browser, 1, 2, "A")  # rev-1's first pair, shown the other way round
        _score(browser, 0, "8")

    path = tmp_path / "labels.jsonl"
    path.write_text(
        _download(chromium, page, tmp_path, "rev-1", first)
        + _download(chromium, page, tmp_path, "rev-2", second),
        encoding="utf-8",
    )
    known = frames[0][frames[0]["prompt_id"] == "p-known"].set_index("completion_idx")
    model = known["model"].to_dict()
    labels = read_viewer_labels(path)
    items = labels.pairs.drop_duplicates("instance_id").set_index("instance_id")
    assert sorted(items.index) == sorted(
        [f"p-known:{model[2]}~{model[1]}", f"p-known:{model[0]}~{model[1]}"]
    )
    shared = items.loc[f"p-known:{model[2]}~{model[1]}"]
    # rev-1 chose completion 1 (B); rev-2 chose completion 1 shown as A: the same choice.
    assert shared["gold_labels"] == ["B", "B"]
    assert shared["gold_annotators"] == ["rev-1", "rev-2"]
    scores = labels.scores.set_index(labels.scores["aspect"].fillna("overall"))
    assert scores.loc["overall", "gold_labels"] == [6.5, 8.0]
    assert scores.loc["helpfulness", "gold_labels"] == [3.0]
    assert scores.loc["helpfulness", "gold_annotators"] == ["rev-1"]
    assert set(scores["response"]) == {known.loc[0, "response"]}
    # As evaluate reads it: the pairs for a pairwise judge, the scores for a scoring one.
    assert read_samples(path)["instance_id"].nunique() == 2
    assert sorted(read_samples(path, pairwise=False)["gold_score"]) == [3.0, 7.25]
