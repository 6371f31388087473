"""The viewer as a place to work, in a real headless Chromium from file://: columns sort
(header clicks and the named orders, missing values last, ties in index order), the page
jump, full-text search over every text (a word written only in one rationale, by prefix, in
one field or all), the index's filters, search, order and page kept in the URL through a
visit to a prompt page and back, and hostile text in every place the index and the search
show it staying text."""

from __future__ import annotations

import json
import time
import urllib.parse

import pandas as pd

from llm_feedback.viewer import feedback_site
from tests.viewer.cdp import READY, Chromium
from tests.viewer.frames import (
    HOSTILE,
    RATIONALE_ONLY_AT,
    RATIONALE_ONLY_WORD,
    feedback_frames,
)
from tests.viewer.test_viewer_browser import ROWS_PER_PAGE, _count, _set


def _ids(browser: Chromium) -> list[str]:
    return browser.evaluate(
        "[...document.querySelectorAll('#rows tbody a')].map(a => a.textContent)"
    )


def _click(browser: Chromium, selector: str) -> None:
    browser.evaluate(f"document.querySelector({json.dumps(selector)}).click()")


def _order(values: pd.Series, descending: bool) -> list[str]:
    """Ids by value (missing last), ties in index order: what the page should show."""
    present = values.dropna()
    ranked = sorted(
        range(len(present)), key=lambda i: ((-1 if descending else 1) * present.iloc[i], i)
    )
    return [present.index[i] for i in ranked] + list(values.index[values.isna()])


def _per_prompt(frames) -> pd.DataFrame:
    completions, aspects, critiques, scores = frames
    order = list(dict.fromkeys(completions["prompt_id"]))
    moves = aspects.groupby(["prompt_id", "aspect", "completion_idx"])["rating"].agg(
        lambda r: r.max() - r.min()
    )
    return pd.DataFrame(
        {
            "overall": scores.groupby("prompt_id")["overall_score_fixed"].mean(),
            "shuffle": moves.groupby("prompt_id").max(),
        }
    ).loc[order]


def test_columns_sort_by_header_and_by_the_named_orders_and_the_page_jump_goes_there(
    browser, feedback_dir, frames
):
    expected = _per_prompt(frames)
    browser.open(f"file://{feedback_dir}/index.html")
    _click(browser, "th[data-column=overall] button")
    worst = _order(expected["overall"], descending=False)
    assert _ids(browser) == worst[:ROWS_PER_PAGE]
    assert browser.evaluate("document.querySelector('th[data-column=overall]').ariaSort") == (
        "ascending"
    )
    cells = browser.evaluate(
        "[...document.querySelectorAll('#rows tbody tr')].map(r => "
        f"Number(r.children[{_column(browser, 'overall')}].textContent))"
    )
    assert cells == sorted(cells) and cells[0] == expected["overall"].min()
    # Jump to the last page: the order's last rows.
    _set(browser, "#page-jump", "3")
    assert _ids(browser) == worst[2 * ROWS_PER_PAGE :]
    _click(browser, "th[data-column=overall] button")  # again: from the best
    assert _ids(browser) == _order(expected["overall"], descending=True)[:ROWS_PER_PAGE]
    _click(browser, "th[data-column=overall] button")  # a third time: index order
    assert _ids(browser) == list(expected.index[:ROWS_PER_PAGE])
    _click(browser, "#sorting button[data-sort=shuffle]")  # "most contested first"
    contested = _order(expected["shuffle"], descending=True)
    assert _ids(browser) == contested[:ROWS_PER_PAGE]
    assert expected["shuffle"].nunique() > 1 and expected["overall"].nunique() > 3
    assert "sort=shuffle&dir=desc" in browser.evaluate("location.hash")
    _click(browser, "#sorting button[data-sort=overall]")  # "worst first"
    assert _ids(browser) == worst[:ROWS_PER_PAGE]
    assert browser.errors == []


def _column(browser: Chromium, name: str) -> int:
    return browser.evaluate(
        "[...document.querySelectorAll('#rows thead th')].findIndex(th => "
        f"th.dataset.column === {json.dumps(name)})"
    )


def test_search_finds_a_word_written_only_in_one_rationale(browser, feedback_dir, tmp_path):
    prompt_id = RATIONALE_ONLY_AT[0]
    browser.open(f"file://{feedback_dir}/index.html")
    for query in (RATIONALE_ONLY_WORD.upper(), RATIONALE_ONLY_WORD[:6].lower()):
        _set(browser, "#search", query)
        assert (_count(browser), _ids(browser)) == (1, [prompt_id])
    # Every word must be found: with another prompt's id, nothing.
    _set(browser, "#search", f"{RATIONALE_ONLY_WORD} 0034")
    assert _count(browser) == 0
    _set(browser, "#search", f"{RATIONALE_ONLY_WORD} {prompt_id.split('-')[1]}")
    assert _ids(browser) == [prompt_id]
    # Only in the rationales.
    for field, found in (("responses", 0), ("critiques", 0), ("instruction", 0), ("rationales", 1)):
        _set(browser, "#search-in", field)
        assert _count(browser) == found, field
    _set(browser, "#search", RATIONALE_ONLY_WORD.lower())
    browser.screenshot(tmp_path / "search.png")
    # The prompt page marks the word where it is: one rationale, that completion's.
    browser.open(browser.evaluate("document.querySelector('#rows tbody a').href"))
    assert browser.errors == []
    marks = browser.evaluate(
        "[...document.querySelectorAll('mark')].map(m => [m.textContent, "
        "m.closest('td') && m.closest('td').dataset.completion, "
        "m.closest('table') && m.closest('table').dataset.aspect])"
    )
    _, aspect, _, idx = RATIONALE_ONLY_AT
    assert marks == [[RATIONALE_ONLY_WORD, str(idx), aspect]]
    assert browser.evaluate("document.getElementById('found').textContent").startswith("1 place")
    browser.screenshot(tmp_path / "search-prompt.png")


def _index_state(browser: Chromium) -> dict:
    return browser.evaluate(
        "({count: document.getElementById('count').textContent, "
        "ids: [...document.querySelectorAll('#rows tbody a')].map(a => a.textContent), "
        "source: document.querySelector('select[data-filter=source]').value, "
        "disagree: document.querySelector('input[data-filter=disagreement]').checked, "
        "search: document.getElementById('search').value, "
        "scope: document.getElementById('search-in').value, "
        "jump: document.getElementById('page-jump').value, "
        "sorted: document.querySelector('th[aria-sort=descending]').dataset.column})"
    )


def _back(browser: Chromium) -> None:
    """The browser's back button, then wait for the index to be drawn."""
    browser.evaluate("history.back()")
    _wait_for(browser, "index.html")


def _wait_for(browser: Chromium, page: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    ready = f"location.pathname.endsWith({json.dumps('/' + page)}) && {READY}"
    while not browser.evaluate(ready):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the index did not come back; errors: {browser.errors}")
        time.sleep(0.02)


def test_filters_search_order_and_page_survive_a_visit_to_a_prompt_page_and_back(
    browser, frames, tmp_path
):
    many = tmp_path / "site"
    feedback_site(*feedback_frames(300), shard_size=16).write(many)
    browser.open(f"file://{many}/index.html")
    _set(browser, "select[data-filter=source]", "evol")
    _set(browser, "input[data-filter=disagreement]", True)
    _set(browser, "#search", "rated")
    _set(browser, "#search-in", "rationales")
    _click(browser, "th[data-column=fine] button")
    _click(browser, "th[data-column=fine] button")  # from the largest
    _click(browser, "#next")
    before = _index_state(browser)
    assert before["jump"] == "2" and before["sorted"] == "fine" and before["source"] == "evol"
    assert int(before["count"].split(" ")[0]) > ROWS_PER_PAGE  # a second page to be on
    browser.screenshot(tmp_path / "index-state.png")

    # Through the prompt page's "← index" link.
    browser.open(browser.evaluate("document.querySelector('#rows tbody a').href"))
    assert browser.evaluate("document.getElementById('title').textContent") == before["ids"][0]
    browser.open(browser.evaluate("document.getElementById('back').href"))
    assert _index_state(browser) == before
    # Through the browser's back button.
    browser.open(browser.evaluate("document.querySelectorAll('#rows tbody a')[3].href"))
    _back(browser)
    assert _index_state(browser) == before
    # A link to the index's state, opened in a fresh page, shows the same.
    link = browser.evaluate("location.href")
    browser.send("Page.navigate", url="about:blank")
    browser.open(link)
    assert _index_state(browser) == before
    assert browser.errors == []


PAYLOADS = (
    '<img src=x onerror="window.pwned=1">',
    "<script>window.pwned=2</script>",
    '<svg onload="window.pwned=3"></svg>',
    '<iframe src="javascript:window.pwned=4"></iframe>',
    '"><img src=x onerror=window.pwned=5>',
    "javascript:window.pwned=6",
    "</script><script>window.pwned=7</script>",
    "&lt;img src=x onerror=window.pwned=8&gt;",
    '<a href="javascript:window.pwned=9">pwned link</a>',
    '\u2028\u2029<details open ontoggle="window.pwned=10"><style>body{display:none}</style>',
)
# What the page's own markup may hold: nothing a payload could add.
FOREIGN = "img, svg, iframe, script, style, details, object, embed, a[href^='javascript']"


def test_hostile_text_in_every_place_the_index_and_search_show_stays_text(chromium, tmp_path):
    """Each payload kind as a prompt id, source, model name, instruction, response,
    rationale and critique; the index searched for it, sorted by every column, and each
    prompt page opened with the payload as its search: nothing runs, no element is added,
    and the payload reads as written."""
    completions, aspects, critiques, scores = feedback_frames(len(PAYLOADS) + 2)
    ids = dict(zip(completions["prompt_id"].unique()[1:], PAYLOADS, strict=False))
    for frame in (completions, aspects, critiques, scores):
        frame["prompt_id"] = frame["prompt_id"].replace(ids)
    hostile = completions["prompt_id"].isin(PAYLOADS)
    completions.loc[hostile, "source"] = completions.loc[hostile, "prompt_id"]
    for column in ("instruction", "response", "model"):
        completions.loc[hostile, column] = completions.loc[hostile, "prompt_id"] + " pwned"
    for frame, column in ((aspects, "rationale"), (critiques, "critique")):
        rows = frame["prompt_id"].isin(PAYLOADS)
        frame.loc[rows, column] = frame.loc[rows, "prompt_id"] + " pwned"
    site = tmp_path / "site"
    feedback_site(completions, aspects, critiques, scores, shard_size=4).write(site)

    browser = Chromium(chromium, tmp_path / "profile")
    try:
        clean = "typeof window.pwned === 'undefined' && " + (
            f"document.body.querySelectorAll({json.dumps(FOREIGN)}).length === 0"
        )
        query = urllib.parse.quote(PAYLOADS[0])
        # The page rewrites its hash (what it read of it), so it is waited for by path.
        browser.send("Page.navigate", url="about:blank")
        browser.send(
            "Page.navigate", url=f"file://{site}/index.html#q={query}&sort={query}&f.source={query}"
        )
        _wait_for(browser, "index.html")
        assert browser.evaluate("document.getElementById('search').value") == PAYLOADS[0]
        assert _ids(browser) == [PAYLOADS[0]]  # the source filter read from the hash
        _set(browser, "select[data-filter=source]", "")
        assert browser.evaluate(clean)
        _set(browser, "#search", "pwned")
        # The payloads' prompts, and "p-known", whose hostile completion says "pwned" too.
        assert sorted(_ids(browser)) == sorted([*PAYLOADS, "p-known"])
        shown = browser.evaluate("document.querySelector('#rows tbody').textContent")
        assert all(payload in shown for payload in PAYLOADS)
        columns = "[...document.querySelectorAll('th')].map(t => t.dataset.column)"
        for name in browser.evaluate(columns):
            _click(browser, f"th[data-column={name}] button")
            assert browser.evaluate(clean), name
        hrefs = browser.evaluate("[...document.querySelectorAll('#rows tbody a')].map(a => a.href)")
        for href in hrefs:
            page = href.split("#")[0] + "#q=" + urllib.parse.quote(PAYLOADS[1] + " pwned")
            browser.open(page)
            assert browser.evaluate(clean), page
            title = browser.evaluate("document.getElementById('title').textContent")
            texts = browser.evaluate(
                "[...document.querySelectorAll('.response')].map(e => e.textContent)"
            )
            assert (title + " pwned" if title in PAYLOADS else HOSTILE) in texts
            assert PAYLOADS[1] in browser.evaluate("document.getElementById('found').textContent")
        assert browser.errors == []
    finally:
        browser.close()
