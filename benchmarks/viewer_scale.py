"""The judgment viewer of a large annotate run: build time and index load time.

python benchmarks/viewer_scale.py [--prompts 64000] [--completions 4] [--shuffles 1]

Builds synthetic annotate tables (prompts x completions, five aspects, one critique and
score per completion; text lengths of typical UltraFeedback rows, words drawn from a
Zipf-distributed vocabulary so that the full-text index meets a long tail of rare words),
times `feedback_site` and writing the site to a temporary folder (target: under 2 minutes
at 64k x 4), measures the search files against the rest of the site (target: at most
`SEARCH_SIZE_TARGET` of it, i.e. the site grows by at most 1.5x), then opens the index from
file:// in headless Chromium and takes the page's own time from navigation to the drawn
first page (target: under 3 s), a search's (two words, one in every prompt, one in a single
rationale: their files loaded, the rows found and drawn), and a prompt page's. Prints one
JSON object.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).parent))
from common import machine, peak_rss_mib, save  # noqa: E402

from llm_feedback.viewer import feedback_site  # noqa: E402
from tests.viewer.cdp import Chromium  # noqa: E402

ASPECTS = ("instruction_following", "honesty", "truthfulness", "helpfulness", "harmlessness")
MODELS = tuple(f"model-{i:02d}" for i in range(17))
SOURCES = ("evol_instruct", "false_qa", "flan", "sharegpt", "truthful_qa", "ultrachat")
# Characters of each text: about the medians of UltraFeedback's own records.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
RESPONSE_CHARS, RATIONALE_CHARS, CRITIQUE_CHARS, INSTRUCTION_CHARS = 900, 160, 300, 250
# The synthetic vocabulary: pseudo-words of 2-9 letters, the r-th most common drawn with
# probability proportional to 1/r; texts are slices of one long text drawn from it.
VOCABULARY, CORPUS_WORDS = 100_000, 2_000_000
SEARCH_SIZE_TARGET = 0.5


def _corpus(seed: int = 1) -> str:
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = np.array(
        ["".join(rng.choice(letters, n)) for n in rng.integers(2, 10, VOCABULARY)], dtype=object
    )
    weights = 1 / np.arange(1, VOCABULARY + 1)
    return " ".join(rng.choice(words, CORPUS_WORDS, p=weights / weights.sum()))


def _texts(corpus: str, prefix: str, count: int, chars: int, seed: int = 2) -> list[str]:
    starts = np.random.default_rng([seed, count, chars]).integers(0, len(corpus) - chars, count)
    return [f"{prefix} {i} {corpus[s : s + chars]}" for i, s in enumerate(starts.tolist())]


def synthetic_run(n_prompts: int, n_completions: int, n_shuffles: int, seed: int = 0):
    texts = functools.partial(_texts, _corpus())
    rng = np.random.default_rng(seed)
    prompt_ids = np.array([f"p{i:06d}" for i in range(n_prompts)], dtype=object)
    n = n_prompts * n_completions
    key = pd.DataFrame(
        {
            "prompt_id": np.repeat(prompt_ids, n_completions),
            "completion_idx": np.tile(np.arange(n_completions), n_prompts),
        }
    )
    instructions = texts("instruction", n_prompts, INSTRUCTION_CHARS)
    completions = key.assign(
        source=np.repeat(rng.choice(SOURCES, n_prompts), n_completions),
        instruction=np.repeat(np.array(instructions, dtype=object), n_completions),
        model=rng.choice(MODELS, n),
        principle=rng.choice(["helpfulness", "honesty", "truthfulness"], n),
        response=texts("response", n, RESPONSE_CHARS),
    )
    critiques = key.assign(
        critique=texts("critique", n, CRITIQUE_CHARS),
        parse_status=rng.choice(["ok"] * 50 + ["no_match"], n),
        suspected_injection=rng.random(n) < 0.002,
    )
    overall = rng.integers(1, 11, n).astype(float)
    scores = key.assign(
        overall_score_original=overall,
        overall_score_fixed=overall,
        fine_grained_score=rng.uniform(1, 5, n),
        fix_action=np.where(overall == 10, "flipped", "kept"),
    )
    per_call = n_prompts * len(ASPECTS) * n_shuffles
    positions = np.argsort(rng.random((per_call, n_completions)), axis=1)
    aspects = pd.DataFrame(
        {
            "prompt_id": np.repeat(prompt_ids, len(ASPECTS) * n_shuffles * n_completions),
            "completion_idx": positions.ravel(),
            "aspect": np.tile(np.repeat(ASPECTS, n_shuffles * n_completions), n_prompts),
            "shuffle_idx": np.tile(
                np.repeat(np.arange(n_shuffles), n_completions), n_prompts * len(ASPECTS)
            ),
            "position": np.tile(np.arange(n_completions), per_call),
            "rating": rng.integers(1, 6, per_call * n_completions).astype(float),
            "is_na": False,
            "rationale": texts("Text 2 rationale", per_call * n_completions, RATIONALE_CHARS),
            "parse_status": "ok",
            "suspected_injection": False,
        }
    )
    return completions, aspects, critiques, scores


def _search(browser: Chromium, query: str) -> tuple[float, int]:
    """Type `query` into the index's search; (ms until the rows are drawn, rows found)."""
    started = browser.evaluate(
        "(() => { const e = document.getElementById('search'); "
        f"e.value = {json.dumps(query)}; e.dispatchEvent(new Event('input')); "
        "return performance.now(); })()"
    )
    while browser.evaluate("document.documentElement.hasAttribute('data-busy')"):
        time.sleep(0.01)
    # The page waits for typing to pause (200 ms) before it searches: not counted.
    took = browser.evaluate("performance.now()") - started - 200
    found = browser.evaluate("Number(document.getElementById('count').textContent.split(' ')[0])")
    return took, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=64_000)
    parser.add_argument("--completions", type=int, default=4)
    parser.add_argument("--shuffles", type=int, default=1)
    args = parser.parse_args()
    started = time.perf_counter()
    tables = synthetic_run(args.prompts, args.completions, args.shuffles)
    synth_s = time.perf_counter() - started
    work = Path(tempfile.mkdtemp(prefix="viewer_scale_"))
    try:
        started = time.perf_counter()
        site = feedback_site(*tables)
        model_s = time.perf_counter() - started
        del tables
        started = time.perf_counter()
        site.write(work / "site")
        write_s = time.perf_counter() - started
        size_mib = sum(p.stat().st_size for p in (work / "site").rglob("*")) / 2**20
        index_mib = sum(p.stat().st_size for p in (work / "site/data").glob("index-*")) / 2**20
        search_mib = sum(p.stat().st_size for p in (work / "site/data").glob("search-*")) / 2**20
        result = {
            "machine": machine(),
            "prompts": args.prompts,
            "completions": args.completions,
            "aspect_rows": args.prompts * args.completions * len(ASPECTS) * args.shuffles,
            "synthesise_s": round(synth_s, 2),
            "build_s": round(model_s + write_s, 2),
            "build_model_s": round(model_s, 2),
            "build_write_s": round(write_s, 2),
            "build_target_s": 120,
            "site_mib": round(size_mib, 1),
            "index_mib": round(index_mib, 1),
            "search_mib": round(search_mib, 1),
            # The search files against the rest of the site.
            "search_size_factor": round(search_mib / (size_mib - search_mib), 3),
            "search_size_target": SEARCH_SIZE_TARGET,
            "files": sum(1 for _ in (work / "site").rglob("*")),
            "peak_rss_mib": round(peak_rss_mib()),
        }
        del site
        binary = next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)
        if binary is None:
            result["index_load_s"] = None
            result["note"] = "chromium not found: index load not measured"
        else:
            browser = Chromium(binary, work / "profile")
            try:
                loads = [browser.open(f"file://{work}/site/index.html", 60) for _ in range(3)]
                href = browser.evaluate("document.querySelector('#rows tbody a').href")
                last = result["aspect_rows"] - 1  # the last rationale's number: in it only
                search_ms, found = _search(browser, f"rationale {last}")
                page = browser.open(href, 60)
            finally:
                browser.close()
            result["index_load_s"] = round(max(loads) / 1000, 2)
            result["index_load_runs_s"] = [round(ms / 1000, 2) for ms in loads]
            result["index_target_s"] = 3
            result["prompt_page_load_s"] = round(page / 1000, 2)
            result["search_s"] = round(search_ms / 1000, 2)
            result["search_found"] = found
        save("viewer_scale", result)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
