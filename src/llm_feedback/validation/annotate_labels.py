"""Viewer labels on an annotate run, matched to its judge's ratings: the annotate judge's
card and the prediction-powered figures of its mean ratings.

The viewer's `labels.jsonl` (read by `formats.read_viewer_labels`) names, on an annotate
page, the prompt (`instance_id`: the run's `prompt_id`), the completion (its model and
text) and, for a score, the aspect it rates. A label is matched to the completion of that
prompt with that model and text; a label that matches none (a page of another run, a text
edited since) is counted in `unmatched` and left out, as is a score without an aspect
(`no_aspect`: the annotate judge rates aspects, not an overall score).

The judge's value of a completion on an aspect is its mean rating over the readable
shuffles (NaN when none is readable: left out of the agreement, counted as unreadable).
A pair of completions gets the judge's preference derived from its ratings: the one with
the higher mean over its aspects (each aspect's mean over shuffles) wins, equal means tie.

The card (`annotate_card`, `validation.card` rows under the annotate judge's identity):
verdict source `ratings` for the ratings against the reviewers' scores (exact agreement,
within-1, Spearman, Pearson, mean difference, and Cohen's kappa, quadratic-weighted, of the
two rounded to the nearest whole rating: reviewers may type any number), per aspect as its
categories; verdict source `argmax` for the pairs derived from the ratings against the
reviewers' choices (accuracy, kappa, ...), beside the baselines on the same pairs. Each
derived pair is one call in the original order (ratings are given to one completion at a
time, so no pair is shown in an order): the metrics of the orders say nothing and are left
off.

`corrected_ratings` gives each model's mean rating per aspect, and its win rate against a
baseline model by the pairs derived from the ratings, three ways (estimator `judge`,
`prediction_powered`, `labels_only`; `stats.prediction_powered`), and for a win rate with
no tie the Rogan-Gladen rate with the judge's TPR and TNR, wherever labels exist for them.
The estimators assume the labelled completions (prompts) were drawn uniformly at random
from the model's rated ones; labels the viewer's review queue drew with unequal recorded
probabilities (`selection_probability`) make the mean rating's and the win rate's
prediction-powered row the probability-weighted one (active inference; selection
`probability_weighted`; no labels-only, Rogan-Gladen, TPR or TNR row: those assume a uniform
draw), which assumes every completion drawn was scored and every prompt drawn compared.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from llm_feedback.stats.intervals import resample_matrix
from llm_feedback.stats.prediction_powered import (
    COLUMNS,
    JUDGE,
    binary_estimates,
    mean_estimates,
    weighted_estimate,
)
from llm_feedback.validation.agreement import cohen_kappa
from llm_feedback.validation.baselines import baseline_metrics
from llm_feedback.validation.binary_rates import pairwise_rates
from llm_feedback.validation.card import ARGMAX, card_frame, normalised
from llm_feedback.validation.metric_table import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    metric_row,
    metric_table,
)
from llm_feedback.validation.metrics import READABLE, pairwise_metrics
from llm_feedback.validation.pointwise import pointwise_metrics
from llm_feedback.validation.verdicts import ORIGINAL, attach_pairs, pairs_table
from llm_feedback.viewer.labels import SELECTION_FIELD

logger = logging.getLogger(__name__)

RATINGS = "ratings"  # the card's verdict source of the ratings against the reviewers' scores
# Metrics of the order a pair was shown in: a pair derived from ratings was shown in none.
ORDER_METRICS = (
    "accuracy_original_order",
    "accuracy_swapped_order",
    "accuracy_both_orders",
    "positional_agreement",
    "first_shown_share",
    "gold_first_shown_share",
)
_KEY = ["prompt_id", "model", "response"]
# Ratings are ordinal: a judge one point off disagrees less than one four points off (an
# unweighted kappa calls a judge one point strict everywhere worse than chance).
KAPPA_WEIGHTS = "quadratic"
# corrected_ratings' columns: the estimate's, after the model and aspect it is of.
ESTIMATE_COLUMNS = ("model", "aspect", "baseline", *COLUMNS)
# What two cards' figures are: the same figures measured again make no new card.
_FIGURES = ["kind", "judge", "verdict_source", "metric", "category", "value", "n"]


def _read(table: Any, columns: list[str]) -> pd.DataFrame:
    """`columns` of a table on disk (`ParquetSource`) or in memory."""
    return table.read(columns) if hasattr(table, "read") else table[columns].copy()


def judged_ratings(completions: Any, aspect_annotations: Any) -> pd.DataFrame:
    """The judge's value of every rated completion on every aspect.

    Args:
        completions: the annotate run's completions (a table on disk or a frame).
        aspect_annotations: its aspect ratings, one row per shuffle.

    Returns:
        One row per (prompt_id, completion_idx, aspect): `model`, `response` and `judge`,
        the mean of the readable shuffles' ratings (NaN when none is readable).
    """
    texts = _read(completions, ["prompt_id", "completion_idx", "model", "response"])
    ratings = _read(aspect_annotations, ["prompt_id", "completion_idx", "aspect", "rating"])
    ratings = ratings.assign(rating=pd.to_numeric(ratings["rating"], errors="coerce"))
    means = (
        ratings.astype({"rating": "float64"})
        .groupby(["prompt_id", "completion_idx", "aspect"], sort=True)["rating"]
        .mean()
        .rename("judge")
        .reset_index()
    )
    return means.merge(texts, on=["prompt_id", "completion_idx"], how="inner")


@dataclass(frozen=True)
class LabelMatch:
    """Viewer labels matched to an annotate run's ratings."""

    ratings: pd.DataFrame  # judged_ratings: every rated completion and aspect
    # matched score labels: prompt_id, completion_idx, model, aspect, judge, gold_score
    scores: pd.DataFrame
    pairs: pd.DataFrame  # matched pair rows (two an item, as read), each with its `judge` mean
    unmatched: int  # labels naming no completion of this run
    no_aspect: int  # score labels without an aspect

    @property
    def n_labels(self) -> int:
        """Labels matched: every reviewer's score and choice counted once."""
        scores = int(self.scores["gold_labels"].map(len).sum()) if len(self.scores) else 0
        pairs = int(self.pairs["gold_labels"].map(len).sum()) // 2 if len(self.pairs) else 0
        return scores + pairs


def _labels_count(rows: pd.DataFrame) -> int:
    return int(rows["gold_labels"].map(len).sum()) if len(rows) else 0


def match_labels(pairs: pd.DataFrame, scores: pd.DataFrame, ratings: pd.DataFrame) -> LabelMatch:
    """Match the viewer labels (`formats.ViewerLabels`' pairs and scores) to the ratings.

    Args:
        pairs: the labels' pair rows (two an item, `labelled_id` the prompt).
        scores: the labels' score rows (`instance_id` the prompt, optional `aspect`).
        ratings: `judged_ratings` of the run.

    Returns:
        The matched labels and the counts of those left out.
    """
    completions = ratings.drop_duplicates(_KEY)[[*_KEY, "completion_idx"]]
    matched_scores = pd.DataFrame(
        columns=["prompt_id", "completion_idx", "model", "aspect", "judge", "gold_score"]
    )
    unmatched = no_aspect = 0
    if len(scores):
        with_aspect = scores["aspect"].notna() if "aspect" in scores.columns else False
        no_aspect = _labels_count(scores[~with_aspect])
        rated = scores[with_aspect].rename(columns={"instance_id": "prompt_id"})
        joined = rated.merge(
            ratings[["prompt_id", "model", "response", "aspect", "completion_idx", "judge"]],
            on=[*_KEY, "aspect"],
            how="left",
        )
        found = joined["completion_idx"].notna()
        unmatched += _labels_count(joined[~found])
        matched_scores = joined[found].reset_index(drop=True)
    matched_pairs = pairs.iloc[0:0].assign(judge=pd.Series(dtype="float64"))
    if len(pairs):
        overall = ratings.groupby(_KEY, sort=False)["judge"].mean().rename("judge").reset_index()
        rows = pairs.rename(columns={"labelled_id": "prompt_id"}).merge(
            overall, on=_KEY, how="left"
        )
        rows = rows.merge(completions, on=_KEY, how="left")
        # An item whose either completion is not in this run is left out whole.
        found = rows.groupby("instance_id")["completion_idx"].transform(
            lambda ids: ids.notna().all()
        )
        unmatched += _labels_count(rows[~found]) // 2
        matched_pairs = rows[found.astype(bool)].reset_index(drop=True)
    if unmatched:
        logger.warning("viewer labels: %d labels match no completion of this run", unmatched)
    return LabelMatch(ratings, matched_scores, matched_pairs, unmatched, no_aspect)


def _kappa_rows(
    scores: pd.DataFrame, resamples: int, seed: int, judge: str
) -> list[dict[str, Any]]:
    """Quadratic-weighted Cohen's kappa of the judge's and the reviewers' ratings rounded
    to whole ratings, over all aspects and per aspect, each with its bootstrap interval
    over prompts."""
    rows = []
    readable = scores[scores["judge"].notna()]
    for category in [None, *sorted(readable["aspect"].dropna().unique())]:
        part = readable if category is None else readable[readable["aspect"] == category]
        judged = np.rint(part["judge"].to_numpy(dtype="float64"))
        gold = np.rint(part["gold_score"].to_numpy(dtype="float64"))
        codes, prompts = pd.factorize(part["prompt_id"])
        weights = resample_matrix(len(prompts), resamples, seed) if len(prompts) else None
        replicates = np.array(
            [cohen_kappa(judged, gold, w[codes], weights=KAPPA_WEIGHTS) for w in weights]
            if weights is not None
            else [np.nan]
        )
        rows.append(
            metric_row(
                "cohen_kappa",
                cohen_kappa(judged, gold, weights=KAPPA_WEIGHTS),
                replicates,
                len(part),
                resamples=resamples,
                seed=seed,
                category=category,
                judge=judge,
            )
        )
    return rows


def _rating_table(scores: pd.DataFrame, resamples: int, seed: int, judge: str) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "instance_id": scores["prompt_id"].astype(str),
            "score": scores["judge"].astype("float64"),
            "gold_score": scores["gold_score"].astype("float64"),
            "category": scores["aspect"].astype(object),
        }
    )
    table = pointwise_metrics(frame, resamples=resamples, seed=seed, judge=judge)
    kappa = metric_table(_kappa_rows(scores, resamples, seed, judge))
    return pd.concat([table, kappa], ignore_index=True)


def derived_verdicts(pairs: pd.DataFrame) -> pd.DataFrame:
    """The verdict frame (`verdicts`) of the matched pairs: the judge prefers the completion
    with the higher mean rating (one call, original order); None where either is unreadable.

    Args:
        pairs: the matched pairs, two rows per instance, each with the judge's mean rating.

    Returns:
        The verdict frame.
    """
    table = pairs_table(pairs)
    judge = pairs.groupby("instance_id", sort=False)["judge"].agg(["first", "last"])
    first, second = judge["first"].to_numpy(), judge["last"].to_numpy()
    verdict = np.where(first > second, "A", np.where(first < second, "B", "tie")).astype(object)
    verdict[np.isnan(first) | np.isnan(second)] = None
    verdicts = dict(zip(judge.index, verdict, strict=True))
    frame = pd.DataFrame(
        [
            {"instance_id": instance, "order": ORIGINAL, "verdict": verdicts[instance]}
            for instance in table["instance_id"]
        ]
    )
    return attach_pairs(frame.astype({"verdict": object}), table)


def _without_orders(table: pd.DataFrame) -> pd.DataFrame:
    metric = table["metric"].str.removesuffix(READABLE)
    return table[~metric.isin(ORDER_METRICS)].reset_index(drop=True)


def annotate_card(
    match: LabelMatch,
    identity: dict[str, str],
    validation_set: str,
    *,
    created_at: str,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """The annotate judge's card rows from the matched labels (see the module docstring).

    Args:
        match: the labels matched to the run's ratings.
        identity: the annotate judge's identity (`validation.identity.judge_identity`).
        validation_set: the name the card is filed under (the labels file).
        created_at: when the card was measured.
        resamples: bootstrap resamples of every interval.
        seed: the bootstrap's seed.

    Returns:
        judge_validation rows; none when no label matched.
    """
    model = identity["judge_model"]
    tables: dict[str, pd.DataFrame] = {}
    baselines = None
    if len(match.pairs):
        verdicts = derived_verdicts(match.pairs)
        table = pairwise_metrics(verdicts, resamples=resamples, seed=seed, judge=model)
        rates = pairwise_rates(verdicts, judge=model)
        tables[ARGMAX] = pd.concat([_without_orders(table), rates], ignore_index=True)
        baselines = _without_orders(baseline_metrics(verdicts, resamples=resamples, seed=seed))
    if len(match.scores):
        tables[RATINGS] = _rating_table(match.scores, resamples, seed, model)
    if not tables:
        return normalised(pd.DataFrame())
    return card_frame(identity, validation_set, tables, baselines, created_at=created_at)


def repeats_latest(previous: pd.DataFrame, card: pd.DataFrame) -> bool:
    """Whether `card` has the very figures of its judge's latest card on its set in
    `previous` (the same labels on the same ratings, reported again): no new card then.

    Args:
        previous: judge_validation rows.
        card: one new run's rows.

    Returns:
        True when the latest earlier run of the card's judge and set has equal figures.
    """
    if card.empty or previous.empty:
        return card.empty
    first = card.iloc[0]
    rows = normalised(previous)
    rows = rows[
        (rows["judge_key"] == first["judge_key"])
        & (rows["validation_set"] == first["validation_set"])
    ]
    if rows.empty:
        return False
    latest = rows[rows["created_at"] == rows["created_at"].max()]

    def figures(frame: pd.DataFrame) -> pd.DataFrame:
        shown = normalised(frame)[_FIGURES].astype(str)
        return shown.sort_values(_FIGURES).reset_index(drop=True)

    return figures(latest).equals(figures(card))


def _drawn_unequally(labelled: pd.DataFrame) -> bool:
    """Whether every label was drawn by the review queue, with probabilities that differ
    (equal ones are a uniform draw: the uniform estimators hold)."""
    if SELECTION_FIELD not in labelled.columns:
        return False
    drawn = labelled[SELECTION_FIELD]
    return bool(drawn.notna().all() and drawn.nunique() > 1)


def _weighted(judged: pd.DataFrame, labelled: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """The prediction-powered mean from labels the queue drew with recorded probabilities
    (`stats.prediction_powered.weighted_estimate`): every rated completion of the model
    and aspect an item, the labelled ones drawn."""
    keys = ["prompt_id", "completion_idx"]
    items = judged[[*keys, "judge"]].merge(
        labelled[[*keys, "gold_score", SELECTION_FIELD]].astype({"completion_idx": "int64"}),
        on=keys,
        how="left",
    )
    drawn = items[SELECTION_FIELD].notna().to_numpy()
    return weighted_estimate(
        items["judge"].to_numpy(dtype="float64"),
        items["gold_score"].to_numpy(dtype="float64"),
        drawn,
        items[SELECTION_FIELD].fillna(1.0).to_numpy(dtype="float64"),
        metric="mean_rating",
        confidence=confidence,
    )


_WON = {"A": 1.0, "B": 0.0, "tie": 0.5}  # the first response's share of a win


def _win_values(match: LabelMatch) -> pd.DataFrame:
    """The judge's wins per prompt and model pair: one row per (prompt_id, model, other),
    `judge` 1 / 0.5 / 0 as `model`'s mean rating over aspects is above, equal to or
    below `other`'s (NaN when either is unreadable)."""
    per_model = match.ratings.groupby(["prompt_id", "model"], sort=True)["judge"].mean()
    wide = per_model.unstack("model")
    rows = []
    for model in wide.columns:
        for other in wide.columns:
            if model == other:
                continue
            mine, theirs = wide[model], wide[other]
            both = mine.notna() & theirs.notna()  # prompts both answered, readably
            value = np.sign(mine - theirs) / 2 + 0.5
            rows.append(
                pd.DataFrame(
                    {"prompt_id": wide.index[both], "model": model, "other": other}
                ).assign(judge=value[both].to_numpy())
            )
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def _gold_wins(pairs: pd.DataFrame) -> pd.DataFrame:
    """The reviewers' wins per prompt and model pair (the mean over the pair's items), both
    ways round: `gold` 1 / 0.5 / 0 for `model` against `other`."""
    drawn = SELECTION_FIELD in pairs.columns
    items = pairs.groupby("instance_id", sort=False).agg(
        prompt_id=("prompt_id", "first"),
        model=("model", "first"),
        other=("model", "last"),
        gold=("gold", "first"),
        **({SELECTION_FIELD: (SELECTION_FIELD, "first")} if drawn else {}),
    )
    first = items.assign(gold=items["gold"].map(_WON))
    second = first.rename(columns={"model": "other", "other": "model"}).assign(
        gold=1 - first["gold"]
    )
    both = pd.concat([first, second], ignore_index=True)
    # The queue draws prompts: every pair of a prompt shares its probability.
    values = {"gold": "mean", **({SELECTION_FIELD: "first"} if drawn else {})}
    return both.groupby(["prompt_id", "model", "other"], as_index=False).agg(values)


def _win_rates(match: LabelMatch, baseline: str | None, confidence: float) -> list[pd.DataFrame]:
    if match.pairs.empty:
        return []
    wins = _win_values(match)
    if wins.empty:
        return []
    models = sorted(set(wins["model"]))
    against = baseline if baseline in models else models[0]
    wins = wins[wins["other"] == against].merge(
        _gold_wins(match.pairs), on=["prompt_id", "model", "other"], how="left"
    )
    frames = []
    for model, part in wins.groupby("model", sort=True):
        labelled = part[part["gold"].notna()]
        if labelled.empty:
            continue
        values = pd.concat([part["judge"], labelled["gold"]]).dropna()
        # Win or loss on every prompt, by the judge and the reviewers: a binary judge.
        binary = values.isin([0.0, 1.0]).all()
        estimate = binary_estimates if binary else mean_estimates
        estimates = estimate(
            part["judge"].to_numpy(dtype="float64"),
            labelled["judge"].to_numpy(dtype="float64"),
            labelled["gold"].to_numpy(dtype="float64"),
            metric="win_rate",
            confidence=confidence,
        )
        if _drawn_unequally(labelled):
            estimates = pd.concat(
                [estimates[estimates["estimator"] == JUDGE], _weighted_wins(part, confidence)],
                ignore_index=True,
            )
        frames.append(estimates.assign(model=model, aspect=None, baseline=against))
    return frames


def _weighted_wins(part: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """The prediction-powered win rate from prompts the queue drew with recorded
    probabilities: every prompt both models answered an item, the compared ones drawn
    (the labels-only, Rogan-Gladen, TPR and TNR figures assume a uniform draw: left out)."""
    drawn = part["gold"].notna() & part[SELECTION_FIELD].notna()
    return weighted_estimate(
        part["judge"].to_numpy(dtype="float64"),
        part["gold"].to_numpy(dtype="float64"),
        drawn.to_numpy(),
        part[SELECTION_FIELD].where(drawn, 1.0).to_numpy(dtype="float64"),
        metric="win_rate",
        confidence=confidence,
    )


def corrected_ratings(
    match: LabelMatch, baseline: str | None = None, confidence: float = 0.95
) -> pd.DataFrame:
    """Each model's mean rating per aspect and its win rate against `baseline`: the
    judge's, prediction-powered and labels-only, wherever labels exist for them.

    A win rate is over the prompts that both models answered, a win (1), tie (0.5) or
    loss (0) by the mean rating over aspects, and, where the reviewers compared the two
    models' completions, by their choice. Where the judge and the reviewers saw no tie, the
    judge is binary: its TPR and TNR (Wilson intervals) and the Rogan-Gladen-corrected
    rate come too (`stats.prediction_powered.binary_estimates`).

    Args:
        match: the labels matched to the run's ratings.
        baseline: the model the win rates are against; None (or a model not in the run):
            the first model by name.
        confidence: the intervals' coverage.

    Returns:
        `ESTIMATE_COLUMNS` rows: metric `mean_rating` (with its `aspect`), `win_rate`,
        `tpr`, `tnr` (with the `baseline`); none without matched labels.
    """
    frames = []
    if len(match.scores):
        ratings = match.ratings
        for (model, aspect), labelled in match.scores.groupby(["model", "aspect"], sort=True):
            judged = ratings[(ratings["model"] == model) & (ratings["aspect"] == aspect)]
            estimates = mean_estimates(
                judged["judge"].to_numpy(dtype="float64"),
                labelled["judge"].to_numpy(dtype="float64"),
                labelled["gold_score"].to_numpy(dtype="float64"),
                metric="mean_rating",
                confidence=confidence,
            )
            if _drawn_unequally(labelled):
                estimates = pd.concat(
                    [
                        estimates[estimates["estimator"] == JUDGE],
                        _weighted(judged, labelled, confidence),
                    ],
                    ignore_index=True,
                )
            frames.append(estimates.assign(model=model, aspect=aspect, baseline=None))
    frames += _win_rates(match, baseline, confidence)
    if not frames:
        return pd.DataFrame(columns=list(ESTIMATE_COLUMNS))
    return pd.concat(frames, ignore_index=True)[list(ESTIMATE_COLUMNS)]
