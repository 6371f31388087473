"""Baselines on the judge's own items, computed without any call, in the metric table shape.

- `always_first`: the response shown first wins (A in the original order, B in the swapped);
- `always_longer`: the longer response (characters) wins, in either order; a tie when both
  have the same length;
- `random`: A or B with probability 1/2 each, never a tie: its expected value, each count
  replaced by its expectation (the two orders independent), so accuracy is half the share
  of items whose gold is no tie, positional agreement 0.5, kappa 0. Its interval is over
  the items (the bootstrap), not over coin flips.

Each baseline is judged on the same calls as the judge (the same instances, replicates and
orders, every call readable), so its numbers compare with the judge's row for row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from llm_feedback.validation.metric_table import DEFAULT_RESAMPLES, DEFAULT_SEED
from llm_feedback.validation.metrics import pairwise_metrics
from llm_feedback.validation.verdicts import ORDERS, ORIGINAL, attach_pairs

ALWAYS_FIRST = "always_first"
ALWAYS_LONGER = "always_longer"
RANDOM = "random"
BASELINES = (ALWAYS_FIRST, ALWAYS_LONGER, RANDOM)


def both_orders(pairs: pd.DataFrame) -> pd.DataFrame:
    """A verdict frame skeleton of `pairs` (from `pairs_table`): every instance in both
    orders, without verdicts (for baselines when no judge has been run).

    Args:
        pairs: the pairs table (`pairs_table`).

    Returns:
        The verdict frame's rows, one per instance and order, `verdict` None.
    """
    skeleton = pd.DataFrame(
        [(instance, order) for instance in pairs["instance_id"] for order in ORDERS],
        columns=["instance_id", "order"],
    )
    return attach_pairs(skeleton, pairs)


def baseline_verdicts(verdicts: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """`verdicts`' calls answered by `baseline` (a verdict column, or p_* for random).

    Args:
        verdicts: the verdict frame whose calls are answered.
        baseline: the baseline's name (always_first, always_longer, random).

    Returns:
        The same calls with the baseline's verdicts.
    """
    frame = verdicts.drop(columns=[c for c in ("verdict", "p_a", "p_b", "p_tie") if c in verdicts])
    if baseline == ALWAYS_FIRST:
        return frame.assign(verdict=np.where(frame["order"] == ORIGINAL, "A", "B").astype(object))
    if baseline == ALWAYS_LONGER:
        len_a, len_b = frame["len_a"].to_numpy(), frame["len_b"].to_numpy()
        longer = np.where(len_a > len_b, "A", np.where(len_b > len_a, "B", "tie"))
        return frame.assign(verdict=longer.astype(object))
    if baseline == RANDOM:
        return frame.assign(p_a=0.5, p_b=0.5, p_tie=0.0)
    raise ValueError(f"unknown baseline {baseline!r}; one of {', '.join(BASELINES)}")


def baseline_metrics(
    verdicts: pd.DataFrame, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> pd.DataFrame:
    """The metric table of every baseline on `verdicts`' calls, `judge` naming it; the same
    seed as the judge's table gives the same resampled items, so intervals compare.

    Args:
        verdicts: the verdict frame whose calls the baselines answer.
        resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed (the judge's, so intervals compare).

    Returns:
        The baselines' metric tables, one after the other.
    """
    tables = [
        pairwise_metrics(
            baseline_verdicts(verdicts, name), resamples=resamples, seed=seed, judge=name
        )
        for name in BASELINES
    ]
    return pd.concat(tables, ignore_index=True)
