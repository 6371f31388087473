"""The long-format `eval_metrics` table from the judgments, over all samples and per
category and per level.

Intervals: every rate and mean (mean, normalised_mean, weighted and pooled accuracy or
means, pass_at_k, pass_at_k_first, win_rate, mean_difference_vs_<baseline>, and the
agreement rows of `panel.agreement_metrics`) carries `ci_low`, `ci_high` and `ci_method`:
a percentile bootstrap clustered by `instance_id` (`llm_feedback.stats.intervals`), so an
instance's replicates, turns, criteria and both orders of a pairwise comparison are
resampled together; seeded, with `evaluate.intervals` (n_resamples, seed, confidence).
Each statistic is recomputed from per-instance pieces (pass@k: each item's own estimate;
weighted accuracy: each ensemble's credit), so its interval is that of the reported value.
`ci_method` is `bootstrap-<n>-cluster` (`-paired` for differences). Counts (wins, ties,
losses, n_invalid, n_exact_match, n_reasks, n_inconsistent) and mean_runtime_s keep nulls.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import pandas as pd

from llm_feedback.evaluation.config import EvaluateParams
from llm_feedback.evaluation.judging import EXACT_MATCH, INVALID
from llm_feedback.evaluation.metric_intervals import (
    NO_INTERVAL,
    Interval,
    baseline_model,
    interval_fields,
    mean_intervals,
    paired_differences,
    scaled,
    win_rate_observations,
)
from llm_feedback.judges import (
    aggregate_scores,
    pairwise_win_rates,
    pass_at_k_table,
    weighted_accuracy,
)
from llm_feedback.judges.metrics import pass_at_k, pass_at_k_first_table
from llm_feedback.stats.prediction_powered import JUDGE
from llm_feedback.storage.schema import EVAL_METRICS_COLUMN_TYPES, EVAL_SAMPLE_KEY

logger = logging.getLogger(__name__)

# Sample labels whose every value gets its own copy of the metrics.
GROUP_COLUMNS = ("category", "level")
ENSEMBLE_KEY = ("model", "instance_id", "turn", "replicate")
WEIGHT_SUM_TOLERANCE = 1e-6


def ensemble_weighted_accuracy(
    scores: pd.Series, weights: pd.Series, instances: pd.Series, replicates: pd.Series
) -> tuple[float, int]:
    """genlm.eval's weighted accuracy and the number of instances it averages.

    Per (instance, replicate): the sum of score x weight over the ensemble's responses;
    then the mean over each instance's replicates, then over instances. Weights are used
    as given (genlm's are normalised per ensemble); a missing score drops its response.

    Args:
        scores: each response's score.
        weights: each response's weight.
        instances: each response's instance.
        replicates: each response's replicate.

    Returns:
        (the accuracy, the number of instances).
    """
    table = pd.DataFrame(
        {"instance": instances, "replicate": replicates, "product": scores * weights}
    ).dropna(subset=["product"])
    if table.empty:
        return math.nan, 0
    per_replicate = table.groupby(["instance", "replicate"], sort=False)["product"].sum()
    per_instance = per_replicate.groupby(level="instance", sort=False).mean()
    return float(per_instance.mean()), len(per_instance)


def _metric(
    model: str,
    metric: str,
    value: float,
    *,
    n: int,
    n_missing: int = 0,
    criterion: str | None = None,
    k: int | None = None,
    interval: Interval = NO_INTERVAL,
) -> dict[str, Any]:
    return {
        **interval_fields(interval),
        "model": model,
        "metric": metric,
        "criterion": criterion,
        "k": k,
        "value": value,
        "n": n,
        "n_missing": n_missing,
    }


def _weighted_metrics(
    part: pd.DataFrame, config: EvaluateParams, criterion: str | None
) -> list[dict[str, Any]]:
    """Accuracy (binary) or normalised mean (0-100) with each response's weight: genlm's
    per-ensemble definition, and all responses pooled (`pooled_` prefix)."""
    low, high = config.scale
    fraction = (part["score"] - low) / (high - low)
    if config.missing == "zero":
        fraction = fraction.fillna(0.0)
    weights = part["weight"].fillna(1.0)
    name, factor = (
        ("weighted_accuracy", 1.0)
        if config.kind.categorical
        else ("weighted_normalised_mean", 100.0)
    )
    item = part["instance_id"] + "#" + part["turn"].astype("string")
    pooled_cis = mean_intervals(
        pd.DataFrame(
            {
                "model": part["model"],
                "instance_id": part["instance_id"],
                "value": factor * fraction,
                "weight": weights,
            }
        ),
        config.intervals,
        weight="weight",
    )
    ensemble_cis = mean_intervals(
        _ensemble_values(part, factor * fraction, weights), config.intervals
    )
    rows = []
    for model, index in part.groupby("model", sort=True).groups.items():
        n_missing = int(part.loc[index, "score"].isna().sum())
        per_ensemble, n_instances = ensemble_weighted_accuracy(
            fraction[index], weights[index], item[index], part.loc[index, "replicate"]
        )
        pooled = weighted_accuracy(fraction[index], weights[index])
        rows += [
            _metric(
                model,
                name,
                factor * per_ensemble,
                n=n_instances,
                n_missing=n_missing,
                criterion=criterion,
                interval=ensemble_cis.get(model, NO_INTERVAL),
            ),
            _metric(
                model,
                f"pooled_{name}",
                factor * pooled,
                n=int(fraction[index].notna().sum()),
                n_missing=n_missing,
                criterion=criterion,
                interval=pooled_cis.get(model, NO_INTERVAL),
            ),
        ]
    return rows


def _ensemble_values(part: pd.DataFrame, credit: pd.Series, weights: pd.Series) -> pd.DataFrame:
    """Per (model, instance and turn): the ensemble's weighted credit averaged over
    replicates, as `ensemble_weighted_accuracy` averages it, with its instance_id."""
    table = (
        part[["model", "instance_id", "turn", "replicate"]]
        .assign(product=credit * weights)
        .dropna(subset=["product"])
    )
    per_replicate = table.groupby(["model", "instance_id", "turn", "replicate"])["product"].sum()
    per_item = per_replicate.groupby(level=["model", "instance_id", "turn"]).mean()
    return per_item.rename("value").reset_index()


def _attempts(part: pd.DataFrame, passing_score: float) -> pd.DataFrame:
    """One attempt per (model, instance and turn, replicate), passed (1.0) or not (0.0, NaN
    when unscored): an ensemble's attempt is its heaviest response."""
    heaviest = (
        part.assign(
            item=part["instance_id"] + "#" + part["turn"].astype("string"),
            heft=part["weight"].fillna(1.0),
        )
        .sort_values(["heft", "ensemble_member"], ascending=[False, True], kind="stable")
        .drop_duplicates(["model", "item", "replicate"])
    )
    passed = (heaviest["score"] >= passing_score).astype("float64")
    return heaviest.assign(passed=passed.where(heaviest["score"].notna()))


def _pass_at_k_metrics(
    part: pd.DataFrame, config: EvaluateParams, criterion: str | None
) -> list[dict[str, Any]]:
    """Both pass@k definitions: `pass_at_k` (the unbiased estimator) and `pass_at_k_first`
    (solved by one of the first k replicates)."""
    attempts = _attempts(part, config.passing_score)
    tables = {
        "pass_at_k": pass_at_k_table(attempts, "item", "passed", config.ks, missing=config.missing),
        "pass_at_k_first": pass_at_k_first_table(
            attempts, "item", "replicate", "passed", config.ks, missing=config.missing
        ),
    }
    intervals = _pass_at_k_intervals(attempts, config)
    return [
        _metric(
            row.model,
            metric,
            row.pass_at_k,
            n=row.n_instances,
            n_missing=row.n_missing,
            criterion=criterion,
            k=row.k,
            interval=intervals.get((metric, row.k), {}).get(row.model, NO_INTERVAL),
        )
        for metric, table in tables.items()
        for row in table.itertuples()
    ]


def _pass_at_k_intervals(
    attempts: pd.DataFrame, config: EvaluateParams
) -> dict[tuple[str, int], dict[str, Interval]]:
    """{(metric, k): {model: interval}} from each item's own pass@k (the unbiased estimate
    from its n attempts and c passes; solved within its first k replicates), as the
    tables average them over items with at least k attempts."""
    passed = attempts["passed"]
    counted = attempts.assign(passed=passed.fillna(0.0) if config.missing == "zero" else passed)
    counted = counted.dropna(subset=["passed"]).sort_values("replicate", kind="stable")
    items = counted.groupby(["model", "instance_id", "item"], sort=True)["passed"]
    tallies = items.agg(n="count", c="sum").reset_index()
    histories = items.agg(lambda history: history.to_numpy(dtype=bool)).rename("history")
    tallies = tallies.merge(histories.reset_index(), on=["model", "instance_id", "item"])
    ks = config.ks or range(1, int(tallies["n"].max()) + 1 if len(tallies) else 1)
    intervals = {}
    for k in ks:
        enough = tallies[tallies["n"] >= k]
        if enough.empty:
            continue
        unbiased = [
            pass_at_k(int(n), int(c), k) for n, c in zip(enough["n"], enough["c"], strict=True)
        ]
        first = [float(history[:k].any()) for history in enough["history"]]
        for metric, values in (("pass_at_k", unbiased), ("pass_at_k_first", first)):
            observations = enough[["model", "instance_id"]].assign(value=values)
            intervals[(metric, k)] = mean_intervals(observations, config.intervals)
    return intervals


def _score_observations(part: pd.DataFrame, config: EvaluateParams) -> pd.DataFrame:
    """model, instance_id, value: each judgment's score as `mean` counts it (a missing one
    as the scale minimum with `missing: zero`, left out with `exclude`)."""
    scores = pd.to_numeric(part["score"]).astype("float64")
    if config.missing == "zero":
        scores = scores.fillna(float(config.scale[0]))
    return pd.DataFrame(
        {"model": part["model"], "instance_id": part["instance_id"], "value": scores}
    )


def _difference_metrics(
    observations: pd.DataFrame, config: EvaluateParams, criterion: str | None
) -> list[dict[str, Any]]:
    """`mean_difference_vs_<baseline>` per other model: its mean score minus the baseline's
    over their shared instances (each instance's judgments averaged first), with a paired
    bootstrap interval; none with fewer than two models."""
    if observations["model"].nunique() < 2:
        return []
    baseline = baseline_model(observations["model"], config.ranking.baseline)
    differences = paired_differences(observations, baseline, config.intervals)
    return [
        _metric(
            row.model,
            f"mean_difference_vs_{baseline}",
            row.value,
            n=row.n,
            criterion=criterion,
            interval=(row.ci_low, row.ci_high, row.ci_method),
        )
        for row in differences.itertuples()
    ]


def _pointwise_metrics(judgments: pd.DataFrame, config: EvaluateParams) -> list[dict[str, Any]]:
    low, high = config.scale
    invalid = judgments["parse_status"] == INVALID
    rows = []
    kind = config.kind
    if kind.needs_reference:
        rows += [
            _metric(model, "n_invalid", float(group_invalid.sum()), n=len(group_invalid))
            for model, group_invalid in invalid.groupby(judgments["model"], sort=True)
        ]
    judged = judgments[~invalid]
    if kind.exact_match and config.evaluator is None:  # evaluators score every match
        exact = judged["parse_status"] == EXACT_MATCH
        rows += [
            _metric(model, "n_exact_match", float(group.sum()), n=len(group))
            for model, group in exact.groupby(judged["model"], sort=True)
        ]
    parts = [(None, judged)]
    if kind.uses_criteria:
        parts = [(name, judged[judged["criterion"] == name]) for name in config.rubric] + parts
    for criterion, part in parts:
        if part.empty:
            continue
        summary = aggregate_scores(part, "score", low=low, high=high, missing=config.missing)
        observations = _score_observations(part, config)
        mean_cis = mean_intervals(observations, config.intervals)
        for row in summary.itertuples():
            interval = mean_cis.get(row.model, NO_INTERVAL)
            for metric, metric_interval in (
                ("mean", interval),
                ("normalised_mean", scaled(interval, low, 100.0 / (high - low))),
            ):
                rows.append(
                    _metric(
                        row.model,
                        metric,
                        getattr(row, metric),
                        n=row.n,
                        n_missing=row.n_missing,
                        criterion=criterion,
                        interval=metric_interval,
                    )
                )
        rows += _difference_metrics(observations, config, criterion)
        if part["weight"].notna().any():
            rows += _weighted_metrics(part, config, criterion)
        pooled_criteria = kind.uses_criteria and criterion is None
        if config.passing_score is not None and not pooled_criteria:
            rows += _pass_at_k_metrics(part, config, criterion)
    # A rubric call makes one row per criterion, each with the call's re-asks: count it once.
    calls = judgments.drop_duplicates(list(EVAL_SAMPLE_KEY))
    rows += [
        _metric(model, "n_reasks", float(group.sum()), n=len(group))
        for model, group in calls["reasks"].groupby(calls["model"], sort=True)
    ]
    runtimes = calls["runtime_s"].dropna()
    rows += [
        _metric(model, "mean_runtime_s", float(group.mean()), n=len(group))
        for model, group in runtimes.groupby(calls.loc[runtimes.index, "model"], sort=True)
    ]
    return rows


def _pairwise_metrics(judgments: pd.DataFrame, config: EvaluateParams) -> list[dict[str, Any]]:
    rows = []
    table = pairwise_win_rates(judgments, "model_a", "model_b", "outcome")
    win_rate_cis = mean_intervals(win_rate_observations(judgments), config.intervals)
    for row in table.itertuples():
        rows.append(
            _metric(
                row.model,
                "win_rate",
                row.win_rate,
                n=row.n,
                n_missing=row.n_missing,
                interval=win_rate_cis.get(row.model, NO_INTERVAL),
            )
        )
        rows += [
            _metric(row.model, name, float(getattr(row, name)), n=row.n, n_missing=row.n_missing)
            for name in ("wins", "losses", "ties")
        ]
        involved = (judgments["model_a"] == row.model) | (judgments["model_b"] == row.model)
        inconsistent = involved & (judgments["consistent"] == False)  # noqa: E712 - nullable
        rows.append(
            _metric(
                row.model,
                "n_inconsistent",
                float(inconsistent.sum()),
                n=int(involved.sum()),
                n_missing=row.n_missing,
            )
        )
        rows.append(
            _metric(
                row.model,
                "n_reasks",
                float(judgments.loc[involved, "reasks"].sum()),
                n=int(involved.sum()),
            )
        )
    return rows


def _warn_of_unnormalised_ensembles(judgments: pd.DataFrame) -> None:
    weighted = judgments.dropna(subset=["weight"]).drop_duplicates(list(EVAL_SAMPLE_KEY))
    if weighted.empty:
        return
    sums = weighted.groupby(list(ENSEMBLE_KEY), sort=False)["weight"].sum()
    off = int((abs(sums - 1.0) > WEIGHT_SUM_TOLERANCE).sum())
    if off:
        logger.warning(
            "evaluate: the weights of %d of %d (model, instance, turn, replicate) ensembles "
            "do not sum to 1; weighted_accuracy uses them as given (as genlm.eval does), "
            "pooled_weighted_accuracy divides by their sum",
            off,
            len(sums),
        )


def compute_metrics(judgments: pd.DataFrame, config: EvaluateParams) -> pd.DataFrame:
    """Long-format metrics: one row per (model, metric, category, level, criterion, k).

    Pointwise modes: `mean` and `normalised_mean` (0-100) per model (and per criterion
    in rubric mode). Given weights: `weighted_accuracy` / `weighted_normalised_mean` as
    genlm.eval computes them (per ensemble of one instance and replicate the sum of score
    x weight, averaged over replicates, then instances) and `pooled_weighted_...` (every
    response pooled, divided by the weights' sum). Where a response passes (binary, or
    `pass_threshold` set): `pass_at_k` (unbiased estimator) and `pass_at_k_first` (solved
    by one of the first k replicates) for each k (default 1..replicates). binary and
    score_0_5 add `n_invalid` (unknown references), binary also `n_exact_match`.
    A kind's `extra_metrics` add their rows (with the same breakdowns).
    With two or more models: `mean_difference_vs_<baseline>` per other model (and
    criterion), its mean minus the baseline's (`evaluate.ranking.baseline`, default the
    first model by name) over the instances both were scored on, each instance's scores
    averaged first, with a paired bootstrap interval.
    Pairwise: `win_rate` (ties half), `wins`, `losses`, `ties`, `n_inconsistent`; the
    ranking of the models is `evaluation.ranking` (`eval_model_ranking`). Every mode:
    `n_reasks`, the judge's re-asks of unreadable replies over the model's judgments
    (pairwise: over the pairs it is in, both orders); `mean_runtime_s` where generation
    times are known.
    `n` counts what each value is over (samples, instances or comparisons); `n_missing`
    the judgments without a usable value (unparsed replies, failed calls, missing
    responses): as the scale minimum with `missing: zero`, left out with `exclude`;
    invalid judgments are never counted. The same metrics follow for each `category` and
    each `level` of the samples (rows with that column set; the other one null).

    Args:
        judgments: eval_judgments rows.
        config: the evaluate parameters.

    Returns:
        The long metric table.
    """
    kind = config.kind
    if not kind.compares:
        _warn_of_unnormalised_ensembles(judgments)

    def compute(part: pd.DataFrame) -> list[dict[str, Any]]:
        rows = (
            _pairwise_metrics(part, config) if kind.compares else _pointwise_metrics(part, config)
        )
        if kind.extra_metrics is not None:
            rows += kind.extra_metrics(part, config.kind_options)
        return rows

    rows = compute(judgments)
    for column in GROUP_COLUMNS:
        for label, part in judgments.groupby(column, sort=True):
            rows += [{**row, column: label} for row in compute(part)]
    metrics = pd.DataFrame(rows, columns=list(EVAL_METRICS_COLUMN_TYPES))
    metrics["mode"] = config.mode
    metrics["estimator"] = JUDGE  # the judge's own figures (corrected ones: `corrected`)
    return metrics.astype(EVAL_METRICS_COLUMN_TYPES)
