"""The two-walk correlation tally against scipy and the in-memory clustered interval."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from llm_feedback.stats.correlation_tally import CorrelationTally
from llm_feedback.stats.intervals import correlation_interval


def rows(n: int = 600) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    x = rng.integers(1, 6, size=n).astype("float64")  # ratings: many ties
    return pd.DataFrame(
        {
            "group": rng.choice(["a", "b"], size=n),
            "x": np.where(rng.random(n) < 0.05, np.nan, x),
            "y": 100 * x + rng.integers(0, 400, size=n),  # lengths
            "prompt": rng.integers(0, 150, size=n).astype(str),
        }
    )


@pytest.mark.parametrize("kind", ["spearman", "pearson"])
def test_chunks_of_rows_give_scipys_estimate_and_the_whole_tables_interval(kind):
    frame = rows()
    tally = CorrelationTally(kind, n_resamples=300, seed=2)
    chunks = [frame.iloc[start : start + 77] for start in range(0, len(frame), 77)]
    for chunk in chunks:
        tally.count(chunk["group"].to_numpy(), chunk["x"].to_numpy(), chunk["y"].to_numpy())
    for chunk in chunks[::-1]:  # the second walk in any order
        tally.add(
            chunk["group"].to_numpy(), chunk["x"].to_numpy(), chunk["y"].to_numpy(), chunk["prompt"]
        )
    found = tally.result()
    for group, part in frame.dropna().groupby("group"):
        n, estimate, low, high = found[group]
        expected = getattr(stats, f"{kind}r")(part["x"], part["y"]).statistic
        assert n == len(part) and estimate == pytest.approx(expected)
        whole = correlation_interval(
            part["x"], part["y"], part["prompt"], kind, n_resamples=300, seed=2
        )
        assert (estimate, low, high) == pytest.approx(whole)


def test_too_few_pairs_or_a_constant_side_is_nan():
    tally = CorrelationTally("spearman", n_resamples=20)
    groups = np.array(["few", "few", "flat", "flat", "flat", "flat"])
    x = np.array([1.0, 2.0, 3.0, 3.0, 3.0, 3.0])
    y = np.array([1.0, 2.0, 1.0, 2.0, 3.0, 4.0])
    clusters = np.array(["p1", "p2", "p3", "p4", "p5", "p6"])
    tally.count(groups, x, y)
    tally.add(groups, x, y, clusters)
    found = tally.result()
    assert found["few"][0] == 2 and np.isnan(found["few"][1])
    assert found["flat"][0] == 4 and np.isnan(found["flat"][1]) and np.isnan(found["flat"][2])
