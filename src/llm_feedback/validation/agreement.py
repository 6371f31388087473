"""How far raters agree (judges of a panel, shuffles of one judge, a judge and a recording,
human annotators), and several annotators' labels made one gold.

Categorical verdicts (binary correct/incorrect, pairwise A/B/tie) get Cohen's kappa for
each two raters and, with three raters or more, Fleiss' kappa over all of them (both
from `validation.kappa`, the libraries' kappas); scores get Spearman's rho.
Both get the exact-match share (the observed agreement). Each statistic is computed over
the items every compared rater rated, so sparse designs such as MT-Bench's human judgments
(each expert labels some pairs) are handled, and is NaN where it is undefined (no items, a
constant rater for rho, chance agreement of 1 for kappa) rather than a warning or an
exception. Values are compared as Python objects (1 and 1.0 are one category).

`agreement_rows` takes one column per rater and returns long rows
`{raters, statistic, value, n}`: `raters` joins the compared raters' names with "~".

Labels are pairwise ("A", "B", "tie") or any other categorical values. The gold of an
item is the label most of its annotators gave; when two labels or more share the top count
(one "A" and one "B", or "A", "B" and "tie" once each) the gold is "tie": the annotators
did not settle it. `annotation_table(pairs)` spreads a pairs table's `gold_labels` /
`gold_annotators` into one column per annotator; `annotator_agreement(table)` returns long
rows `metric`, `value`, `n`, `raters`; `metrics_against_annotators` compares a judge with
the majority and with each annotator in turn (column `gold_source`: "majority" or the
annotator's name).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from llm_feedback.validation.kappa import cohen_kappa, fleiss_kappa
from llm_feedback.validation.metric_table import DEFAULT_RESAMPLES, DEFAULT_SEED
from llm_feedback.validation.metrics import pairwise_metrics

TIE = "tie"
RATERS_SEPARATOR = "~"
MAJORITY = "majority"
MIN_CORRELATION_PAIRS = 3
COHEN_KAPPA = "cohen_kappa"
FLEISS_KAPPA = "fleiss_kappa"
SPEARMAN = "spearman"
EXACT_MATCH_SHARE = "exact_match_share"


def pearson(x: pd.Series, y: pd.Series) -> float:
    """Pearson's r of two aligned, NaN-free series (pandas' `Series.corr`); NaN with fewer
    than 3 pairs or a constant series. Spearman's rho is this applied to the ranks.

    Args:
        x: one rater's values.
        y: the other's, on the same items.

    Returns:
        Pearson's r, or NaN.
    """
    if len(x) < MIN_CORRELATION_PAIRS:
        return float("nan")
    return float(
        pd.Series(x.to_numpy(dtype="float64")).corr(pd.Series(y.to_numpy(dtype="float64")))
    )


def spearman(x: pd.Series, y: pd.Series) -> float:
    """Spearman's rho: Pearson's r of the ranks, tied values sharing their mean rank.

    Args:
        x: one rater's values.
        y: the other's, on the same items.

    Returns:
        Spearman's rho, or NaN.
    """
    return pearson(pd.Series(x).rank(), pd.Series(y).rank())


def exact_match_share(x: pd.Series, y: pd.Series) -> float:
    """Share of items on which the two raters gave the same value; NaN without items.

    Args:
        x: one rater's values.
        y: the other's, on the same items.

    Returns:
        The share in [0, 1], or NaN.
    """
    if len(x) == 0:
        return float("nan")
    return float((np.asarray(x) == np.asarray(y)).mean())


def agreement_rows(
    ratings: pd.DataFrame, raters: Sequence[str], *, categorical: bool
) -> list[dict[str, object]]:
    """Agreement of the `raters` columns of `ratings` (one row per item, NaN / None where a
    rater gave no value).

    Args:
        ratings: one row per item, one column per rater.
        raters: the columns compared.
        categorical: True for verdicts (Cohen's and Fleiss' kappa), False for scores
            (Spearman's rho).

    Returns:
        For every two raters, Cohen's kappa (categorical) or Spearman's rho (scores) and
        the exact-match share; with three or more categorical raters, Fleiss' kappa over
        the items all of them rated. `n` is the number of items compared.
    """
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


def majority_label(labels: Sequence[Any]) -> Any:
    """The label most annotators gave; "tie" when the top count is shared; None without
    labels (missing labels, None, are not votes).

    Args:
        labels: one item's labels, None where an annotator gave none.

    Returns:
        The majority label, "tie", or None.
    """
    votes = Counter(label for label in labels if label is not None)
    if not votes:
        return None
    ranked = votes.most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return TIE
    return ranked[0][0]


def annotation_table(pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per instance (index `instance_id`), one column per annotator with that
    annotator's label (None where the annotator did not label the item).

    Args:
        pairs: a pairs table with `gold_annotators` and `gold_labels` lists.

    Returns:
        The labels, one column per annotator.
    """
    records: dict[str, dict[str, Any]] = {}
    for row in pairs.itertuples():
        labels = dict(zip(row.gold_annotators, row.gold_labels, strict=True))
        records[row.instance_id] = labels
    table = pd.DataFrame.from_dict(records, orient="index").astype(object)
    table.index.name = "instance_id"
    return table.where(table.notna(), None)


def annotator_agreement(table: pd.DataFrame) -> pd.DataFrame:
    """Agreement of the annotator columns of `table` (from `annotation_table`).

    Rows: `cohen_kappa` and `exact_match_share` for every two annotators, `fleiss_kappa`
    over the items every annotator labelled (three annotators or more), and over all items
    `majority_tie_share` (items whose majority is a tie, though no annotator may have said
    tie), `label_tie_share` (labels that are "tie") and `unanimous_share` (items on which
    every annotator who labelled it agrees, among items with two labels or more).

    Args:
        table: labels, one column per annotator (`annotation_table`).

    Returns:
        Long rows `metric`, `value`, `n`, `raters`.
    """
    annotators = list(table.columns)
    rows: list[dict[str, Any]] = []
    for first, second in itertools.combinations(annotators, 2):
        both = table[[first, second]].dropna()
        raters = f"{first}{RATERS_SEPARATOR}{second}"
        rows.append(
            {
                "metric": COHEN_KAPPA,
                "value": cohen_kappa(both[first], both[second]),
                "n": len(both),
                "raters": raters,
            }
        )
        rows.append(
            {
                "metric": EXACT_MATCH_SHARE,
                "value": exact_match_share(both[first], both[second]),
                "n": len(both),
                "raters": raters,
            }
        )
    if len(annotators) >= 3:
        complete = table.dropna()
        rows.append(
            {
                "metric": FLEISS_KAPPA,
                "value": fleiss_kappa(complete),
                "n": len(complete),
                "raters": RATERS_SEPARATOR.join(map(str, annotators)),
            }
        )
    labels = [[label for label in row if label is not None] for row in table.to_numpy()]
    majorities = [majority_label(item) for item in labels]
    all_labels = [label for item in labels for label in item]
    several = [item for item in labels if len(item) >= 2]
    everyone = RATERS_SEPARATOR.join(map(str, annotators))
    rows += [
        {
            "metric": "majority_tie_share",
            "value": float(np.mean([m == TIE for m in majorities])) if majorities else np.nan,
            "n": len(majorities),
            "raters": everyone,
        },
        {
            "metric": "label_tie_share",
            "value": float(np.mean([x == TIE for x in all_labels])) if all_labels else np.nan,
            "n": len(all_labels),
            "raters": everyone,
        },
        {
            "metric": "unanimous_share",
            "value": float(np.mean([len(set(item)) == 1 for item in several]))
            if several
            else np.nan,
            "n": len(several),
            "raters": everyone,
        },
    ]
    return pd.DataFrame(rows, columns=["metric", "value", "n", "raters"])


def metrics_against_annotators(
    verdicts: pd.DataFrame,
    pairs: pd.DataFrame,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    judge: str | None = None,
) -> pd.DataFrame:
    """The judge's metric table against the majority gold, then against each annotator's
    own labels on the items that annotator labelled (`gold_source` says which).

    Args:
        verdicts: the judge's verdict frame (see `validation.verdicts`).
        pairs: the pairs with each annotator's labels.
        resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed.
        judge: the judge's name for the `judge` column.

    Returns:
        The metric tables, one after the other, with a `gold_source` column.
    """
    table = annotation_table(pairs)
    tables = [pairwise_metrics(verdicts, resamples=resamples, seed=seed, judge=judge)]
    tables[0].insert(1, "gold_source", MAJORITY)
    for annotator in table.columns:
        labels = table[annotator].dropna()
        labelled = verdicts[verdicts["instance_id"].isin(labels.index)]
        if labelled.empty:
            continue
        own = labelled.assign(gold=labelled["instance_id"].map(labels).astype(object))
        result = pairwise_metrics(own, resamples=resamples, seed=seed, judge=judge)
        result.insert(1, "gold_source", str(annotator))
        tables.append(result)
    return pd.concat(tables, ignore_index=True)
