"""Several annotators per item: the majority gold, ties, and how far annotators agree.

Labels are pairwise ("A", "B", "tie") or any other categorical values. The gold of an
item is the label most of its annotators gave; when two labels or more share the top count
(one "A" and one "B", or "A", "B" and "tie" once each) the gold is "tie": the annotators
did not settle it. Cohen's kappa is computed for every two annotators over the items both
labelled (scikit-learn's `cohen_kappa_score`) and Fleiss' kappa over the items every
annotator labelled (statsmodels' `fleiss_kappa`), so sparse designs such as MT-Bench's
human judgments (each expert labels some pairs) are handled.

`annotation_table(pairs)` spreads a pairs table's `gold_labels` / `gold_annotators` into
one column per annotator; `annotator_agreement(table)` returns long rows `metric`, `value`,
`n`, `raters`; `metrics_against_annotators` compares a judge with the majority and with
each annotator in turn (column `gold_source`: "majority" or the annotator's name).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from llm_feedback.validation.metric_table import DEFAULT_RESAMPLES, DEFAULT_SEED
from llm_feedback.validation.metrics import pairwise_metrics

TIE = "tie"
RATERS_SEPARATOR = "~"
MAJORITY = "majority"


def majority_label(labels: Sequence[Any]) -> Any:
    """The label most annotators gave; "tie" when the top count is shared; None without
    labels (missing labels, None, are not votes)."""
    votes = Counter(label for label in labels if label is not None)
    if not votes:
        return None
    ranked = votes.most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return TIE
    return ranked[0][0]


def annotation_table(pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per instance (index `instance_id`), one column per annotator with that
    annotator's label (None where the annotator did not label the item)."""
    records: dict[str, dict[str, Any]] = {}
    for row in pairs.itertuples():
        labels = dict(zip(row.gold_annotators, row.gold_labels, strict=True))
        records[row.instance_id] = labels
    table = pd.DataFrame.from_dict(records, orient="index").astype(object)
    table.index.name = "instance_id"
    return table.where(table.notna(), None)


def _cohen(x: pd.Series, y: pd.Series) -> float:
    if len(x) == 0 or (x.nunique() == 1 and y.nunique() == 1 and x.iloc[0] == y.iloc[0]):
        return float("nan")  # one category only: chance agreement is 1, kappa 0/0
    return float(cohen_kappa_score(x.astype(str), y.astype(str)))


def annotator_agreement(table: pd.DataFrame) -> pd.DataFrame:
    """Agreement of the annotator columns of `table` (from `annotation_table`).

    Rows: `cohen_kappa` and `exact_match_share` for every two annotators, `fleiss_kappa`
    over the items every annotator labelled (three annotators or more), and over all items
    `majority_tie_share` (items whose majority is a tie, though no annotator may have said
    tie), `label_tie_share` (labels that are "tie") and `unanimous_share` (items on which
    every annotator who labelled it agrees, among items with two labels or more).
    """
    annotators = list(table.columns)
    rows: list[dict[str, Any]] = []
    for first, second in itertools.combinations(annotators, 2):
        both = table[[first, second]].dropna()
        raters = f"{first}{RATERS_SEPARATOR}{second}"
        rows.append(
            {
                "metric": "cohen_kappa",
                "value": _cohen(both[first], both[second]),
                "n": len(both),
                "raters": raters,
            }
        )
        rows.append(
            {
                "metric": "exact_match_share",
                "value": float((both[first] == both[second]).mean()) if len(both) else np.nan,
                "n": len(both),
                "raters": raters,
            }
        )
    if len(annotators) >= 3:
        complete = table.dropna()
        value = float("nan")
        if len(complete):
            counts, _ = aggregate_raters(complete.astype(str).to_numpy())
            value = float(fleiss_kappa(counts, method="fleiss"))
        rows.append(
            {
                "metric": "fleiss_kappa",
                "value": value,
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
    own labels on the items that annotator labelled (`gold_source` says which)."""
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
