"""Metrics tables for the report: one typed DataFrame per question a reader asks.

Every function accepts empty inputs (with their columns) and returns an empty table with
the documented columns and dtypes; statistics that are undefined (a mean of nothing, a
correlation of fewer than three pairs) are NaN, computed without numpy RuntimeWarnings.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import pandas as pd

from llm_feedback.annotation import score_fix
from llm_feedback.core.errors import ConfigError, InputError, require_columns
from llm_feedback.replies.status import CALL_FAILED, SKIPPED_TOO_LONG, UNREADABLE
from llm_feedback.reporting._frames import (
    ordered_aspects,
    typed_frame,
)
from llm_feedback.reporting.cache_prices import CACHE_COLUMNS, CACHE_PRICE_KEYS, prompt_cost_per_1k
from llm_feedback.reporting.cost_tally import Table, usage_totals
from llm_feedback.reporting.costs import CHARS_PER_TOKEN
from llm_feedback.stats.intervals import (
    wilson_interval,
)
from llm_feedback.storage.parquet_source import table_batches
from llm_feedback.storage.schema import (
    COST_TABLE_COLUMN_TYPES,
    JUDGE_HEALTH_COLUMN_TYPES,
)
from llm_feedback.templates import PACKAGE_TEMPLATES, Templates
from llm_feedback.validation.agreement import pearson

logger = logging.getLogger(__name__)

# "reannotate" is a pending state of the fix; a finished overall_scores table never holds it.
FIX_ACTIONS = tuple(a for a in score_fix.FIX_ACTIONS if a != "reannotate")
# `unseen`: calls sent whose reply nobody received (a killed or interrupted run).
UNSEEN = "unseen"
STAGES = ("generate", "annotate", "critique", UNSEEN)

# Re-exported: the aspect and position tables live in their own modules.
from llm_feedback.reporting.aspect_metrics import (  # noqa: E402
    RATING_MAX,
    RATING_MIN,
    model_aspect_metrics,
    source_aspect_metrics,
    to_0_100,
)
from llm_feedback.reporting.positions import (  # noqa: E402
    ANNOTATION_COLUMNS,
    position_consistency,
    rating_by_position,
    shuffle_agreement,
)
from llm_feedback.reporting.score_metrics import model_score_metrics  # noqa: E402

__all__ = [
    "ANNOTATION_COLUMNS",
    "RATING_MAX",
    "RATING_MIN",
    "cost_table",
    "judge_health",
    "model_aspect_metrics",
    "model_score_metrics",
    "pearson",
    "position_consistency",
    "rating_by_position",
    "shuffle_agreement",
    "source_aspect_metrics",
    "to_0_100",
]


def judge_health(
    aspect_annotations: Table, critiques: Table, overall_scores: Table
) -> pd.DataFrame:
    """How well the judge behaved, as a long (metric, scope, value) table.

    Scope is an aspect name or "critique" for:
      rows, parse_errors, parse_error_rate, call_errors, call_error_rate, reasks
      (total re-asks), suspected_injections (rows whose completion addresses the judge
      or carries a verdict), and for aspects na_rate. Rates are shares of all rows of the scope.
    Scope "critique" also has modal_score (the overall score the read critiques gave most
      often; ties: the higher), modal_score_count (how many gave it) and modal_score_share
      (their share of the read critiques): near 1, the overall score cannot tell the
      completions apart.
    Scope is a fix action (kept, reannotated, flipped, no_overall_score) for:
      fix_count and fix_share (share of the overall_scores rows); every action is listed,
      0 when absent.
    Rates carry a Wilson interval (ci_low, ci_high, ci_method "wilson"); counts none.
    Tables on disk are counted a record batch at a time.

    Args:
        aspect_annotations: The aspect annotations.
        critiques: The critiques.
        overall_scores: The score fix's table.

    Returns:
        The (metric, scope, value) table.
    """
    require_columns(
        aspect_annotations, ["aspect", "parse_status", "reasks", "is_na"], "aspect_annotations"
    )
    require_columns(critiques, ["parse_status", "reasks"], "critiques")
    require_columns(overall_scores, ["fix_action"], "overall_scores")

    rows: list[dict[str, object]] = []
    aspect_counts = _health_counts(aspect_annotations, by_aspect=True)
    for aspect in ordered_aspects(aspect_counts.index):
        counts = aspect_counts.loc[aspect]
        rows += _call_health(counts, scope=aspect)
        na_share = _share(int(counts["na"]), int(counts["rows"]))
        rows.append(
            {"metric": "na_rate", "scope": aspect, "value": na_share, "trials": counts["rows"]}
        )
    critique_counts = _health_counts(critiques, by_aspect=False)
    rows += _call_health(critique_counts.iloc[0], scope="critique")
    rows += _modal_score(critiques)

    fix_counts, total = pd.Series(dtype="int64"), 0
    for batch in table_batches(overall_scores, ["fix_action"]):
        fix_counts = fix_counts.add(batch["fix_action"].value_counts(), fill_value=0)
        total += len(batch)
    unknown = set(fix_counts.index) - set(FIX_ACTIONS)
    if unknown:
        raise InputError(
            f"overall_scores: column 'fix_action' has unknown value(s) {sorted(unknown)}"
        )
    for action in FIX_ACTIONS:
        count = int(fix_counts.get(action, 0))
        rows.append({"metric": "fix_count", "scope": action, "value": count})
        share = _share(count, total)
        rows.append({"metric": "fix_share", "scope": action, "value": share, "trials": total})
    table = pd.DataFrame(rows)
    # Wilson intervals for the rates: judgments fail or parse one by one.
    rates = table["metric"].isin(RATE_METRICS) & table["value"].notna() & (table["trials"] > 0)
    trials = table.loc[rates, "trials"].to_numpy(dtype="float64")
    table["ci_low"], table["ci_high"], table["ci_method"] = np.nan, np.nan, None
    if rates.any():
        successes = np.round(table.loc[rates, "value"].to_numpy(dtype="float64") * trials)
        low, high = wilson_interval(successes, trials)
        table.loc[rates, "ci_low"], table.loc[rates, "ci_high"] = low, high
        table.loc[rates, "ci_method"] = "wilson"
    return typed_frame(table, JUDGE_HEALTH_COLUMN_TYPES)


RATE_METRICS = ("parse_error_rate", "call_error_rate", "na_rate", "fix_share", "modal_score_share")
HEALTH_COUNTS = ("rows", "parse_errors", "call_errors", "skipped_too_long", "reasks", "na")


def _health_counts(table: Table, by_aspect: bool) -> pd.DataFrame:
    """Per aspect (or one row), the counts `_call_health` reports, summed over batches;
    `suspected` only where the table records it (tables written before it lack it)."""
    columns = ["parse_status", "reasks", "is_na", "suspected_injection", "aspect"]
    present = [name for name in columns if name in table.columns]
    parts = []
    for batch in table_batches(table, present):
        status = batch["parse_status"]
        counts = pd.DataFrame(
            {
                "rows": 1,
                "parse_errors": status.isin(UNREADABLE).to_numpy(dtype="int64"),
                "call_errors": (status == CALL_FAILED).to_numpy(dtype="int64"),
                "skipped_too_long": (status == SKIPPED_TOO_LONG).to_numpy(dtype="int64"),
                "reasks": batch["reasks"].fillna(0).to_numpy(dtype="int64"),
                "na": _flags(batch, "is_na"),
                "suspected": _flags(batch, "suspected_injection"),
                "scope": batch["aspect"].to_numpy() if by_aspect else "critique",
            }
        )
        parts.append(counts.groupby("scope", sort=False).sum())
    summed = (
        pd.concat(parts).groupby(level=0, sort=False).sum()
        if parts
        else pd.DataFrame(columns=[*HEALTH_COUNTS, "suspected"], dtype="int64")
    )
    if not by_aspect:  # one row, even of an empty table
        summed = summed.reindex(["critique"], fill_value=0)
    if "suspected_injection" not in present:
        summed = summed.drop(columns="suspected")
    return summed


def _modal_score(critiques: Table) -> list[dict[str, object]]:
    """The critiques' most frequent overall score and its share of the read ones (none when
    the table has no score column or no score was read)."""
    if "overall_score" not in critiques.columns:
        return []
    counts = pd.Series(dtype="int64")
    for batch in table_batches(critiques, ["overall_score"]):
        scores = pd.to_numeric(batch["overall_score"], errors="coerce").dropna()
        counts = counts.add(scores.value_counts(), fill_value=0)
    read = int(counts.sum())
    if not read:
        return []
    top = counts[counts == counts.max()].index.max()  # a tie goes to the higher score
    values = {
        "modal_score": float(top),
        "modal_score_count": int(counts[top]),
        "modal_score_share": _share(int(counts[top]), read),
    }
    return [
        {"metric": metric, "scope": "critique", "value": value, "trials": read}
        for metric, value in values.items()
    ]


def _flags(batch: pd.DataFrame, column: str) -> np.ndarray | int:
    if column not in batch.columns:
        return 0
    return batch[column].fillna(False).astype(bool).to_numpy(dtype="int64")


def _call_health(counts: pd.Series, scope: str) -> list[dict[str, object]]:
    n_rows = int(counts["rows"])
    values = {
        "rows": n_rows,
        "parse_errors": int(counts["parse_errors"]),
        "parse_error_rate": _share(int(counts["parse_errors"]), n_rows),
        "call_errors": int(counts["call_errors"]),
        "call_error_rate": _share(int(counts["call_errors"]), n_rows),
        "reasks": int(counts["reasks"]),
        "skipped_too_long": int(counts["skipped_too_long"]),
    }
    if "suspected" in counts.index:
        values["suspected_injections"] = int(counts["suspected"])
    return [
        {"metric": metric, "scope": scope, "value": value, "trials": n_rows}
        for metric, value in values.items()
    ]


def _share(count: int, total: int) -> float:
    return count / total if total else float("nan")


# Models these backends run on this machine cost nothing per token unless a price is given.
IN_PROCESS_BACKENDS = ("local", "vllm")


def cost_table(
    completions: Table,
    aspect_annotations: Table,
    critiques: Table,
    prices: Mapping[str, Mapping[str, float]],
    overall_scores: Table | None = None,
    *,
    unseen: pd.DataFrame | None = None,
    templates: Templates = PACKAGE_TEMPLATES,
) -> pd.DataFrame:
    """Tokens and estimated cost per stage (generate, annotate, critique), endpoint and model.

    `unseen` (`backends.cache.unseen_calls`): calls sent whose reply was never received (a
    run killed or interrupted while they were out), which may have been billed; they are
    rows of stage `unseen`, `unseen_calls` of them each, priced at an upper bound: their
    estimated prompt tokens and a reply of their whole `max_tokens`.

    The score fix's re-score calls (`overall_scores`' token columns, when recorded) count in
    the critique stage: each continues its critique's conversation with the same judge.

    Each row is priced by what the data records of it: a completion by its `model`,
    `endpoint` and `backend`, a judgment by its `judge_model`, `judge_endpoint` and
    `judge_backend`. So a report on an older run prices that run, whatever the parameters
    say today. Tokens are summed over rows, so each row must carry its own share of a
    call's tokens. `prices` maps a model name to {"prompt_per_1k": ..., "completion_per_1k":
    ...}; a model run in process (local, vllm) costs 0 unless priced, any other model absent
    from `prices` costs 0 with priced = False.

    Rows answered through a Batch API (`via_batch`, `judge_via_batch`) are priced apart, in
    rows of mode `batch`, at `price_per_1k`'s batch price.

    Only requests actually sent are counted (copies of an identical request, answered
    from the first, are dropped), and a row whose reply had no usage gets the token
    estimate, flagged `usage_estimated` (`llm_feedback.reporting.costs`), from the judge
    requests rebuilt with `templates` (the run's `prompt_templates` folder over the package).

    Of the prompt tokens, those a provider's prompt cache served or wrote (judge rows that
    record them) are priced at the cache's prices (`reporting.cache_prices`), the rule in
    `cache_pricing`.

    Columns: stage, endpoint, model, mode, prompt_tokens, cached_prompt_tokens,
    cache_write_tokens, completion_tokens, estimated_cost, priced, cache_pricing,
    usage_estimated, unseen_calls.

    Args:
        completions: The run's completions.
        aspect_annotations: The aspect annotations.
        critiques: The critiques.
        prices: Model name -> its price entry (`report.prices`).
        overall_scores: The score fix's table (None: no re-scores counted).
        unseen: Calls sent whose reply never came (None: none).
        templates: The prompt templates the judge requests were rendered from.

    Returns:
        The cost table.
    """
    token_columns = ["prompt_tokens", "completion_tokens"]
    counted = [*token_columns, *CACHE_COLUMNS]
    require_columns(completions, ["model", "endpoint", "backend", *token_columns], "completions")
    judge_columns = ["judge_model", "judge_endpoint", "judge_backend", *token_columns]
    require_columns(aspect_annotations, judge_columns, "aspect_annotations")
    require_columns(critiques, judge_columns, "critiques")
    _check_prices(prices)  # before the tables are read

    table = usage_totals(
        completions, aspect_annotations, critiques, overall_scores, templates=templates
    )
    table["usage_estimated"] = table["estimated_rows"] > 0
    table["unseen_calls"] = 0
    if unseen is not None and len(unseen):
        table = pd.concat([table, _unseen_rows(unseen)], ignore_index=True)
    # Rows carry float shares of their call's tokens: summed first, then rounded, so that a
    # call's shares add up to its usage exactly (a truncated share each would not).
    for column in counted:
        table[column] = table[column].fillna(0).round().astype("int64")
    estimated = int(table["estimated_rows"].sum())
    if estimated:
        logger.warning(
            "cost table: %d row(s) had no usage from the server; their tokens are estimated "
            "(~%d characters a token) and flagged usage_estimated",
            estimated,
            CHARS_PER_TOKEN,
        )

    table = price_usage(table, prices)
    table["stage_order"] = table["stage"].map(STAGES.index)
    table = table.sort_values(["stage_order", "endpoint", "model"])
    _log_unseen(table)
    return typed_frame(table, COST_TABLE_COLUMN_TYPES)


def _unseen_rows(unseen: pd.DataFrame) -> pd.DataFrame:
    """Stage `unseen` per endpoint and model: the calls, their estimated prompt tokens and
    their replies' bound (max_tokens each)."""
    grouped = unseen.groupby(["endpoint", "backend", "model"], dropna=False, sort=True).agg(
        prompt_tokens=("prompt_tokens", "sum"),
        completion_tokens=("max_tokens", "sum"),
        unseen_calls=("max_tokens", "size"),
    )
    return grouped.reset_index().assign(stage=UNSEEN, mode="online", usage_estimated=True)


def _log_unseen(table: pd.DataFrame) -> None:
    unseen = table[table["stage"] == UNSEEN]
    if len(unseen):
        logger.warning(
            "cost table: %d call(s) were sent but their reply never received (a killed or "
            "interrupted run); they may have been billed up to %.4f USD more (rows of stage "
            "unseen: estimated prompt tokens, max_tokens for each reply)",
            int(unseen["unseen_calls"].sum()),
            float(unseen["estimated_cost"].sum()),
        )


def price_usage(usage: pd.DataFrame, prices: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """`usage` (columns model, backend, mode, prompt_tokens, completion_tokens) with `priced`
    and `estimated_cost` added: the one price rule of the report and the run plan. A model run
    in process (local, vllm) costs 0 unless priced; any other unpriced model costs 0 with
    priced = False.

    Args:
        usage: Token totals per model, backend and mode.
        prices: Model name -> its price entry.

    Returns:
        `usage` with `priced` and `estimated_cost`.
    """
    _check_prices(prices)
    usage = usage.copy()
    usage["priced"] = usage["model"].isin(list(prices)) | usage["backend"].isin(IN_PROCESS_BACKENDS)
    prompt_price, completion_price = (
        np.array(
            [
                price_per_1k(prices.get(model), key, mode == "batch")
                for model, mode in zip(usage["model"], usage["mode"], strict=True)
            ],
            dtype="float64",
        )
        for key in ("prompt_per_1k", "completion_per_1k")
    )
    # Cached prompt tokens at the cache's prices, where the usage has them.
    prompt_cost, cache_rules = prompt_cost_per_1k(usage, prices, prompt_price, price_per_1k)
    usage["estimated_cost"] = (
        prompt_cost + usage["completion_tokens"].to_numpy(dtype="float64") * completion_price
    ) / 1000
    if cache_rules is not None:
        usage["cache_pricing"] = cache_rules
    return usage


# The Batch APIs of OpenAI and Azure charge half the online price unless a price entry
# names its own `batch_prompt_per_1k` / `batch_completion_per_1k`.
BATCH_PRICE_SHARE = 0.5


def price_per_1k(entry: Mapping[str, float] | None, key: str, batch: bool) -> float:
    """USD per 1k tokens from a price entry.

    Args:
        entry: The model's price entry (None: unpriced, 0).
        key: "prompt_per_1k" or "completion_per_1k".
        batch: Through a Batch API: its own price, or the batch share of the online one.

    Returns:
        The price.
    """
    if entry is None:
        return 0.0
    if not batch:
        return entry[key]
    return entry.get(f"batch_{key}", entry[key] * BATCH_PRICE_SHARE)


def _check_prices(prices: Mapping[str, Mapping[str, float]]) -> None:
    for model, entry in prices.items():
        batch_keys = [
            key
            for key in (
                "batch_prompt_per_1k",
                "batch_completion_per_1k",
                *CACHE_PRICE_KEYS,
                *(f"batch_{key}" for key in CACHE_PRICE_KEYS),
            )
            if key in (entry or {})
        ]
        for key in ("prompt_per_1k", "completion_per_1k", *batch_keys):
            value = entry.get(key) if isinstance(entry, Mapping) else None
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"prices.{model}.{key}: expected a number >= 0, got {value!r}")
