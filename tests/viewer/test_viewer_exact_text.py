"""The judgment viewer in a real headless Chromium shows completions exactly as written:
superscripts, ligatures, full-width letters, combining marks, right-to-left text, tabs and
every line break reach the page's text unchanged (and as text, never as markup)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llm_feedback.viewer import feedback_site
from tests.exact_texts import EXACT_TEXTS
from tests.test_kedro_viz import chromium  # noqa: F401 - the fixture (installs where it may)
from tests.viewer.cdp import Chromium
from tests.viewer.frames import feedback_frames


@pytest.fixture
def browser(chromium, tmp_path) -> Iterator[Chromium]:  # noqa: F811
    browser = Chromium(chromium, tmp_path / "profile")
    try:
        yield browser
    finally:
        browser.close()


def test_a_prompt_page_shows_each_completion_as_written(browser, tmp_path):
    completions, aspects, critiques, scores = feedback_frames(3)
    known = completions["prompt_id"] == "p-known"  # the index's first row
    texts = list(EXACT_TEXTS.values())[: int(known.sum())]
    completions.loc[known, "response"] = texts
    feedback_site(completions, aspects, critiques, scores).write(tmp_path / "site")

    browser.open(f"file://{tmp_path / 'site'}/index.html")
    href = browser.evaluate("document.querySelector('#rows tbody a').href")
    assert "id=p-known" in href
    browser.open(href)
    assert browser.errors == []
    shown = browser.evaluate("[...document.querySelectorAll('.response')].map(e => e.textContent)")
    assert shown == texts
