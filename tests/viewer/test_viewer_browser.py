"""The judgment viewer in a real headless Chromium, opened from file://: the index and a
prompt page render, filters and search change the row count, the position a completion was
shown at maps back to the right completion, hostile text stays text, and labels given in
the page download as JSON Lines that read back in the agreed format. Screenshots are saved
in the test's tmp output."""

from __future__ import annotations

import json
import time
from pathlib import Path

from llm_feedback.viewer import evaluation_site
from llm_feedback.viewer.labels import PAIRWISE_FIELDS, PAIRWISE_LABELS, POINTWISE_FIELDS
from tests.viewer.cdp import Chromium
from tests.viewer.frames import (
    HOSTILE,
    KNOWN_MODELS,
    KNOWN_ORDER,
    evaluation_frames,
)

ROWS_PER_PAGE = 50


def _count(browser: Chromium) -> int:
    return int(browser.evaluate("document.getElementById('count').textContent.split(' ')[0]"))


def _set(browser: Chromium, selector: str, value: str | bool) -> None:
    prop, event = ("checked", "change") if isinstance(value, bool) else ("value", "change")
    if selector == "#search":
        event = "input"
    browser.evaluate(
        f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
        f"e.{prop} = {json.dumps(value)}; e.dispatchEvent(new Event('{event}')); }})()"
    )
    _settled(browser)


def _settled(browser: Chromium, timeout_s: float = 15) -> None:
    """Wait while the index is busy (a search loading its files, or waiting for typing to
    pause)."""
    deadline = time.monotonic() + timeout_s
    while browser.evaluate("document.documentElement.hasAttribute('data-busy')"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the index stayed busy; errors: {browser.errors}")
        time.sleep(0.02)


def test_the_index_renders_and_filters_change_the_row_count(
    browser, feedback_dir, frames, tmp_path
):
    completions, aspects, critiques, scores = frames
    browser.open(f"file://{feedback_dir}/index.html")
    assert browser.errors == []
    assert _count(browser) == 120
    assert browser.evaluate("document.querySelectorAll('#rows tbody tr').length") == ROWS_PER_PAGE
    browser.screenshot(tmp_path / "index.png")

    # Each filter against the count taken from the tables themselves.
    flips = scores.loc[scores["fix_action"] == "flipped", "prompt_id"].nunique()
    _set(browser, "select[data-filter=fix_actions]", "flipped")
    assert _count(browser) == flips
    _set(browser, "select[data-filter=fix_actions]", "")
    flan = completions.loc[completions["source"] == "flan", "prompt_id"].nunique()
    _set(browser, "select[data-filter=source]", "flan")
    assert _count(browser) == flan
    _set(browser, "select[data-filter=source]", "")
    bad = aspects.loc[aspects["parse_status"] == "no_match", "prompt_id"].nunique()
    _set(browser, "select[data-filter=statuses]", "no_match")
    assert _count(browser) == bad
    _set(browser, "select[data-filter=statuses]", "")
    spread = aspects.groupby(["prompt_id", "aspect", "completion_idx"])["rating"].nunique()
    disagreeing = spread[spread > 1].index.get_level_values("prompt_id").nunique()
    _set(browser, "input[data-filter=disagreement]", True)
    assert _count(browser) == disagreeing
    browser.screenshot(tmp_path / "index-filtered.png")
    _set(browser, "input[data-filter=disagreement]", False)
    flagged = critiques.loc[critiques["suspected_injection"], "prompt_id"].nunique()
    _set(browser, "input[data-filter=flagged]", True)
    assert _count(browser) == flagged
    _set(browser, "input[data-filter=flagged]", False)
    _set(browser, "#search", "topic 42")
    assert _count(browser) == 1
    _set(browser, "#search", "")
    # Pagination: the second page holds the next rows.
    browser.evaluate("document.getElementById('next').click()")
    first = browser.evaluate("document.querySelector('#rows tbody a').textContent")
    assert first == f"p-{ROWS_PER_PAGE:04d}"
    assert 0 < flips < 120 and 0 < flan < 120 and 0 < disagreeing < 120 and 0 < flagged < 120


def test_a_prompt_page_maps_shown_positions_to_completions_and_shows_hostile_text_as_text(
    browser, feedback_dir, tmp_path
):
    browser.open(f"file://{feedback_dir}/index.html")
    href = browser.evaluate("document.querySelector('#rows tbody a').href")
    assert "id=p-known" in href
    browser.open(href)
    assert browser.errors == []
    browser.screenshot(tmp_path / "prompt.png")
    cards = browser.evaluate(
        "[...document.querySelectorAll('.completion h3')].map(e => e.textContent)"
    )
    assert cards == [f"#{i} {model}" for i, model in enumerate(KNOWN_MODELS)]
    shown = browser.evaluate(
        "Object.fromEntries([...document.querySelectorAll("
        "'table[data-aspect=helpfulness] td[data-shuffle=\"0\"]')]"
        ".map(td => [td.dataset.completion, Number(td.dataset.shown)]))"
    )
    # KNOWN_ORDER[p] is the completion shown at position p, i.e. as "Text p+1".
    assert shown == {str(idx): position + 1 for position, idx in enumerate(KNOWN_ORDER)}
    # Completion 2's rationale says "Text 1 ... Text 3": completions 2 and 1 in that call.
    mapped = browser.evaluate(
        "[...document.querySelector('table[data-aspect=helpfulness] "
        'td[data-shuffle="0"][data-completion="2"] .rationale\')'
        ".querySelectorAll('.mapped')].map(e => Number(e.dataset.completion))"
    )
    assert mapped == [KNOWN_ORDER[0], KNOWN_ORDER[2]]
    # The hostile completion is shown as its literal text and ran nothing.
    assert browser.evaluate("typeof window.pwned") == "undefined"
    assert browser.evaluate("document.querySelectorAll('#record img, #record script').length") == 0
    texts = browser.evaluate("[...document.querySelectorAll('.response')].map(e => e.textContent)")
    assert HOSTILE in texts


def _downloaded(directory: Path, timeout_s: float = 15) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = [p for p in directory.glob("*.jsonl") if p.stat().st_size]
        if done:
            return [json.loads(line) for line in done[0].read_text().splitlines() if line]
        time.sleep(0.1)
    raise AssertionError(f"no labels file downloaded into {directory}")


def read_labels(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """The reader check: every line is one of the two agreed shapes, nothing more."""
    pairwise, pointwise = [], []
    for row in rows:
        if set(row) == set(PAIRWISE_FIELDS):
            assert row["label"] in PAIRWISE_LABELS
            pairwise.append(row)
        else:
            assert set(row) == set(POINTWISE_FIELDS), row
            assert isinstance(row["gold_score"], (int, float))
            pointwise.append(row)
        assert all(isinstance(row[key], str) for key in row if key != "gold_score")
    return pairwise, pointwise


def test_labels_given_in_the_page_download_as_jsonl_in_the_agreed_format(
    browser, feedback_dir, frames, tmp_path
):
    completions = frames[0]
    browser.open(f"file://{feedback_dir}/page.html?id=p-known&shard=0")
    _set(browser, "#annotator", "rev-1")
    _set(browser, "select.pair-a", "2")
    _set(browser, "select.pair-b", "1")
    browser.evaluate("document.querySelector('.labeler button[data-verdict=B]').click()")
    browser.evaluate(
        "(() => { const i = document.querySelector('.gold-score[data-ident=\"0\"]'); "
        "i.value = '6.5'; i.closest('.labeler').querySelector('.save-score').click(); })()"
    )
    assert browser.evaluate("document.getElementById('download-labels').textContent") == (
        "Download labels (2)"
    )
    browser.screenshot(tmp_path / "labels.png")
    browser.evaluate("document.getElementById('download-labels').click()")
    pairwise, pointwise = read_labels(_downloaded(tmp_path / "downloads"))
    known = completions[completions["prompt_id"] == "p-known"].set_index("completion_idx")
    assert pairwise == [
        {
            "instance_id": "p-known",
            "question": known.loc[0, "instruction"],
            "response_a": known.loc[2, "response"],
            "response_b": known.loc[1, "response"],
            "model_a": known.loc[2, "model"],
            "model_b": known.loc[1, "model"],
            "label": "B",
            "annotator": "rev-1",
        }
    ]
    assert pointwise == [
        {
            "instance_id": "p-known",
            "question": known.loc[0, "instruction"],
            "response": known.loc[0, "response"],
            "model": known.loc[0, "model"],
            "gold_score": 6.5,
            "annotator": "rev-1",
        }
    ]


def test_the_evaluation_viewer_shows_both_orders_and_labels_a_pair(browser, tmp_path):
    site_dir = tmp_path / "eval-site"
    evaluation_site(*evaluation_frames()).write(site_dir)
    browser.open(f"file://{site_dir}/index.html")
    assert _count(browser) == 2
    _set(browser, "input[data-filter=disagreement]", True)
    assert _count(browser) == 1  # q1: A first says A, B first says B
    browser.open(f"file://{site_dir}/page.html?id=q1&shard=0")
    assert browser.errors == []
    browser.screenshot(tmp_path / "eval-instance.png")
    assert browser.evaluate("document.querySelector('.verdict-a-first').textContent") == "A"
    assert browser.evaluate("document.querySelector('.verdict-b-first').textContent") == "B"
    assert browser.evaluate("document.querySelector('.gold').textContent") == "gold q1"
    browser.evaluate("document.querySelector('.labeler button[data-verdict=A]').click()")
    browser.evaluate("document.getElementById('download-labels').click()")
    pairwise, pointwise = read_labels(_downloaded(tmp_path / "downloads"))
    assert pointwise == []
    assert pairwise == [
        {
            "instance_id": "q1",
            "question": "Q q1?",
            "response_a": "alpha says q1",
            "response_b": "beta says q1",
            "model_a": "alpha",
            "model_b": "beta",
            "label": "A",
            "annotator": "anonymous",
        }
    ]


def test_the_report_pipeline_site_shows_each_rating_at_the_position_the_judge_saw(
    browser, run_kedro, fake_llm, tmp_path
):
    from tests.conftest import endpoints_via

    params = {
        "endpoints": endpoints_via(fake_llm),
        "sample": {"max_prompts": 3},
        "annotate": {"n_shuffles": 2},
    }
    for name in ("sample", "generate", "annotate", "report"):
        catalog = run_kedro(name, params)["catalog"]
    index = catalog.load("judgment_viewer")
    aspects = catalog.load("aspect_annotations").read()
    browser.open(f"file://{index}")
    assert _count(browser) == aspects["prompt_id"].nunique() == 3
    prompt_id = aspects["prompt_id"].iloc[0]
    href = browser.evaluate(
        f"[...document.querySelectorAll('#rows a')].find(a => a.textContent === "
        f"{json.dumps(prompt_id)}).href"
    )
    browser.open(href)
    assert browser.errors == []
    browser.screenshot(tmp_path / "pipeline-prompt.png")
    cells = browser.evaluate(
        "[...document.querySelectorAll('table.aspect')].flatMap(t => "
        "[...t.querySelectorAll('td.rating-cell')].map(td => [t.dataset.aspect, "
        "Number(td.dataset.completion), Number(td.dataset.shuffle), Number(td.dataset.shown)]))"
    )
    rows = aspects[aspects["prompt_id"] == prompt_id]
    expected = sorted(
        [a, int(c), int(s), int(p) + 1]
        for a, c, s, p in zip(
            rows["aspect"],
            rows["completion_idx"],
            rows["shuffle_idx"],
            rows["position"],
            strict=True,
        )
    )
    assert sorted(cells) == expected and len(expected) == 4 * 4 * 2
