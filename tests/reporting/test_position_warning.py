"""The report's headline warns when the judge's ratings depend on display position: an
aspect whose position slope (`judge_bias`, with its cluster-robust interval) excludes 0
is named with its interval; a judge whose ratings do not follow the shown position gets
no warning."""

from __future__ import annotations

import numpy as np

from llm_feedback.reporting import render_markdown_report
from llm_feedback.reporting.markdown import position_warning
from llm_feedback.reporting.uncertainty import Bootstrap, judge_bias
from tests.reporting.builders import ASPECTS, Completion, build_frames

FAST = Bootstrap(n_resamples=50)
MODELS = ("alpha", "beta", "gamma", "delta")


def bias_table(by_position: str | None) -> tuple:
    """judge_bias of 40 prompts x 4 completions x 2 shuffles rated 1-5 at random (seeded),
    except `by_position`, rated 1 + the position the completion was shown at."""
    frames = build_frames(
        [Completion(f"p{i:02d}", model) for i in range(40) for model in MODELS], shuffles=2
    )
    ratings = frames.aspect_annotations.copy()
    ratings["rating"] = np.random.default_rng(5).integers(1, 6, len(ratings)).astype(float)
    if by_position is not None:
        shown = ratings["aspect"] == by_position
        ratings.loc[shown, "rating"] = 1.0 + ratings.loc[shown, "position"]
    table = judge_bias(ratings, frames.completions, FAST)
    return table, table[table["diagnostic"] == "position_slope"].set_index("scope")


def headline(table) -> str:
    text = render_markdown_report({"judge_bias": table}, {}, {}, {})
    return text.split("## Headline", 1)[1].split("\n## ", 1)[0]


def test_ratings_that_follow_the_shown_position_are_named_in_the_headline():
    table, slopes = bias_table("helpfulness")
    low, high = slopes.loc["helpfulness", ["ci_low", "ci_high"]]
    assert low > 0  # the statistic itself sees it
    others = slopes.drop(index="helpfulness")
    assert ((others["ci_low"] <= 0) & (others["ci_high"] >= 0)).all()

    warning = position_warning(table)
    assert warning is not None
    assert warning.startswith("**Caveat: the ratings depend on display position**")
    named = warning.split("excludes 0 for ", 1)[1].split(". ", 1)[0]
    assert named.startswith("helpfulness ") and "(shown later, rated higher)" in named
    assert not any(aspect in named for aspect in ASPECTS if aspect != "helpfulness")
    chance = 1 - 0.95 ** len(slopes)
    assert f"With {len(slopes)} aspect(s) at 95% intervals" in warning
    assert f"about {chance:.0%} of the time" in warning
    # The headline's first line (no judge caveat given), before the slope figures.
    lines = headline(table).strip().splitlines()
    assert lines[0] == f"- {warning}"


def test_no_warning_when_no_interval_excludes_zero():
    table, slopes = bias_table(None)
    assert ((slopes["ci_low"] <= 0) & (slopes["ci_high"] >= 0)).all()
    assert position_warning(table) is None
    assert "display position" not in headline(table)
    assert position_warning(None) is None
