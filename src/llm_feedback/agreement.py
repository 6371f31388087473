"""How far raters agree: judges of a panel, shuffles of one judge, a judge and a recording.

Categorical verdicts (binary correct/incorrect, pairwise A/B/tie) get Cohen's kappa for
each two raters and, with three raters or more, Fleiss' kappa over all of them; scores get
Spearman's rho. Both get the exact-match share (the observed agreement). Each statistic is
computed over the items every compared rater rated, and is NaN where it is undefined (no
items, a constant rater for rho, chance agreement of 1 for kappa) rather than a warning or
an exception.

`agreement_rows` takes one column per rater and returns long rows
`{raters, statistic, value, n}`: `raters` joins the compared raters' names with "~".
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd

MIN_CORRELATION_PAIRS = 3
RATERS_SEPARATOR = "~"
COHEN_KAPPA = "cohen_kappa"
FLEISS_KAPPA = "fleiss_kappa"
SPEARMAN = "spearman"
EXACT_MATCH_SHARE = "exact_match_share"
AGREEMENT_STATISTICS = (COHEN_KAPPA, FLEISS_KAPPA, SPEARMAN, EXACT_MATCH_SHARE)


def pearson(x: pd.Series, y: pd.Series) -> float:
    """Pearson's r of two aligned, NaN-free series (pandas' `Series.corr`); NaN with fewer
    than 3 pairs or a constant series. Spearman's rho is this applied to the ranks (pandas'
    own spearman needs scipy, which is not a dependency)."""
    if len(x) < MIN_CORRELATION_PAIRS:
        return float("nan")
    return float(
        pd.Series(x.to_numpy(dtype="float64")).corr(pd.Series(y.to_numpy(dtype="float64")))
    )


def spearman(x: pd.Series, y: pd.Series) -> float:
    """Spearman's rho: Pearson's r of the ranks, tied values sharing their mean rank."""
    return pearson(pd.Series(x).rank(), pd.Series(y).rank())


def exact_match_share(x: pd.Series, y: pd.Series) -> float:
    """Share of items on which the two raters gave the same value; NaN without items."""
    if len(x) == 0:
        return float("nan")
    return float((np.asarray(x) == np.asarray(y)).mean())


def _kappa(observed: float, by_chance: float) -> float:
    if by_chance >= 1.0:  # every rating in one category: agreement beyond chance is 0/0
        return float("nan")
    return float((observed - by_chance) / (1.0 - by_chance))


def cohen_kappa(x: pd.Series, y: pd.Series) -> float:
    """Cohen's kappa of two raters' categorical verdicts on the same items.

    (p_o - p_e) / (1 - p_e): p_o the share of items with the same verdict, p_e the share
    expected by chance, the sum over categories of the product of both raters' shares.
    """
    x, y = pd.Series(np.asarray(x, dtype=object)), pd.Series(np.asarray(y, dtype=object))
    if len(x) == 0:
        return float("nan")
    share_x = x.value_counts(normalize=True)
    share_y = y.value_counts(normalize=True)
    by_chance = float((share_x * share_y.reindex(share_x.index, fill_value=0.0)).sum())
    return _kappa(exact_match_share(x, y), by_chance)


def fleiss_kappa(verdicts: pd.DataFrame) -> float:
    """Fleiss' kappa of m >= 2 raters (columns) over items (rows) that every rater rated.

    Per item, P_i = (sum_c n_ic^2 - m) / (m (m - 1)) with n_ic the raters who chose
    category c; P = mean P_i; P_e = sum_c p_c^2 with p_c the share of all verdicts in c.
    """
    n_items, n_raters = verdicts.shape
    if n_items == 0 or n_raters < 2:
        return float("nan")
    stacked = verdicts.astype(object).stack()
    counts = pd.crosstab(stacked.index.get_level_values(0), stacked.to_numpy()).to_numpy()
    per_item = ((counts**2).sum(axis=1) - n_raters) / (n_raters * (n_raters - 1))
    category_shares = counts.sum(axis=0) / (n_items * n_raters)
    return _kappa(float(per_item.mean()), float((category_shares**2).sum()))


def agreement_rows(
    ratings: pd.DataFrame, raters: Sequence[str], *, categorical: bool
) -> list[dict[str, object]]:
    """Agreement of the `raters` columns of `ratings` (one row per item, NaN / None where a
    rater gave no value): for every two raters, Cohen's kappa (categorical) or Spearman's
    rho (scores) and the exact-match share; with three or more categorical raters, Fleiss'
    kappa over the items all of them rated. `n` is the number of items compared."""
    rows: list[dict[str, object]] = []
    for first, second in itertools.combinations(raters, 2):
        both = ratings[[first, second]].dropna()
        x, y = both[first], both[second]
        if categorical:
            statistic, value = COHEN_KAPPA, cohen_kappa(x, y)
        else:
            statistic, value = SPEARMAN, spearman(x, y)
        name = f"{first}{RATERS_SEPARATOR}{second}"
        rows.append({"raters": name, "statistic": statistic, "value": value, "n": len(both)})
        rows.append(
            {
                "raters": name,
                "statistic": EXACT_MATCH_SHARE,
                "value": exact_match_share(x, y),
                "n": len(both),
            }
        )
    if categorical and len(raters) >= 3:
        complete = ratings[list(raters)].dropna()
        rows.append(
            {
                "raters": RATERS_SEPARATOR.join(raters),
                "statistic": FLEISS_KAPPA,
                "value": fleiss_kappa(complete),
                "n": len(complete),
            }
        )
    return rows
