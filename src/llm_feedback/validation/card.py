"""The judge card: a judge's validation metrics and baselines, keyed by the judge.

A judge is its endpoint, model, prompt template and sampling parameters: `judge_key`
hashes the four (the endpoint without any password or query string, the template by its
SHA-256, sampling as sorted JSON), so a changed prompt or temperature is another judge.
`card_frame` makes the rows of the versioned `judge_validation` dataset: the metric tables
(`metrics.pairwise_metrics` / `pointwise.pointwise_metrics` for the judge, one per verdict
source: "argmax", "logprobs", "logprobs_calibrated"; `baselines.baseline_metrics`) with the
judge's identity on every row, `kind` ("judge" | "baseline"), the validation set's name, the
measured position bias and the share of calls with usable probabilities.

`card_lines(cards, key)` is the card as Markdown for a report: "this judge has not been
validated" when no row has the key; otherwise the metrics with intervals, beside the
baselines, and "this judge cannot be told apart from <baseline>" for every baseline whose
accuracy interval overlaps the judge's. `accuracy_figure` plots accuracy with its interval
for each judge and baseline.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from llm_feedback.schema_evaluate import JUDGE_VALIDATION_COLUMN_TYPES
from llm_feedback.validation.card_notes import data_notes

JUDGE = "judge"
BASELINE = "baseline"
ARGMAX = "argmax"
CARD_METRICS = (
    "accuracy",
    "accuracy_both_orders",
    "positional_agreement",
    "first_shown_share",
    "longer_share",
    "gold_longer_share",
    "tie_rate",
    "unreadable_share",
    "cohen_kappa",
    "spearman",
    "pearson",
    "within_1_agreement",
    "mean_difference",
)


def public_endpoint(endpoint: str) -> str:
    """An endpoint name or URL without a user, password, query string or fragment."""
    if "://" not in endpoint:
        return endpoint
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def judge_identity(
    endpoint: str, model: str, prompt_template: str, sampling: Mapping[str, Any] | None
) -> dict[str, str]:
    """The identity columns of a judge, `judge_key` a hash of the other four."""
    identity = {
        "judge_endpoint": public_endpoint(endpoint),
        "judge_model": model,
        "prompt_template_sha256": hashlib.sha256(prompt_template.encode("utf-8")).hexdigest(),
        "sampling": json.dumps(dict(sampling or {}), sort_keys=True, default=str),
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()
    return {"judge_key": digest[:16], **identity}


def judge_key(
    endpoint: str, model: str, prompt_template: str, sampling: Mapping[str, Any] | None
) -> str:
    """The key a judge's card is filed under (16 hex digits)."""
    return judge_identity(endpoint, model, prompt_template, sampling)["judge_key"]


def card_frame(
    identity: Mapping[str, str],
    validation_set: str,
    judge_tables: Mapping[str, pd.DataFrame],
    baselines: pd.DataFrame | None,
    *,
    created_at: str,
    position_bias: float = math.nan,
    usable_probability_share: float = 0.0,
) -> pd.DataFrame:
    """The judge_validation rows of one validation run: `judge_tables` maps a verdict
    source ("argmax", "logprobs", "logprobs_calibrated") to its metric table."""
    parts = []
    for source, table in judge_tables.items():
        parts.append(table.assign(kind=JUDGE, judge=identity["judge_model"], verdict_source=source))
    if baselines is not None:
        parts.append(baselines.assign(kind=BASELINE, verdict_source=None))
    frame = pd.concat(parts, ignore_index=True).assign(
        **identity,
        validation_set=validation_set,
        position_bias=position_bias,
        usable_probability_share=usable_probability_share,
        created_at=created_at,
    )
    columns = list(JUDGE_VALIDATION_COLUMN_TYPES)
    return frame[columns].astype(JUDGE_VALIDATION_COLUMN_TYPES)


def _latest(cards: pd.DataFrame, key: str) -> pd.DataFrame:
    """The key's rows of its latest validation run on each validation set, all items."""
    rows = cards[(cards["judge_key"] == key) & cards["category"].isna()]
    if rows.empty:
        return rows
    latest = rows.groupby("validation_set")["created_at"].transform("max")
    return rows[rows["created_at"] == latest]


def _interval(row: pd.Series) -> str:
    if not np.isfinite(row["ci_low"]):
        return f"{row['value']:.3f}"
    return f"{row['value']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"


def _overlaps(judge: pd.Series, baseline: pd.Series) -> bool:
    return bool(judge["ci_low"] <= baseline["ci_high"] and baseline["ci_low"] <= judge["ci_high"])


def _column_name(row: pd.Series) -> str:
    if row["kind"] == BASELINE:
        return str(row["judge"])
    return f"judge ({row['verdict_source']})"


def _set_lines(rows: pd.DataFrame, validation_set: str) -> list[str]:
    columns = list(dict.fromkeys(_column_name(row) for _, row in rows.iterrows()))
    cells: dict[tuple[str, str], str] = {
        (row["metric"], _column_name(row)): _interval(row) for _, row in rows.iterrows()
    }
    metrics = [m for m in CARD_METRICS if any((m, c) in cells for c in columns)]
    n = int(rows["n"].max())
    first = rows.iloc[0]
    lines = [
        f"Validation set `{validation_set}` ({n} judged calls at most per metric), "
        f"{first['created_at']}; 95% intervals: {first['ci_method'] or 'none'}.",
        "",
        "| metric | " + " | ".join(columns) + " |",
        "| --- | " + " | ".join("---" for _ in columns) + " |",
    ]
    for metric in metrics:
        lines.append(
            f"| {metric} | " + " | ".join(cells.get((metric, c), "") for c in columns) + " |"
        )
    lines.append("")
    accuracy = rows[rows["metric"] == "accuracy"]
    judges = accuracy[accuracy["kind"] == JUDGE]
    baselines = accuracy[accuracy["kind"] == BASELINE]
    for _, judge in judges.iterrows():
        for _, baseline in baselines.iterrows():
            if _overlaps(judge, baseline):
                lines.append(
                    f"**This judge cannot be told apart from {baseline['judge']}** "
                    f"({judge['verdict_source']} verdicts): accuracy {_interval(judge)} against "
                    f"{_interval(baseline)}."
                )
    lines += data_notes(rows)
    usable = float(first["usable_probability_share"])
    if usable == 0:
        lines.append(
            "No usable probabilities: argmax only (the endpoint returned no token "
            "probabilities at the verdict token; the verdicts are the reply text's)."
        )
    else:
        lines.append(
            f"Token probabilities usable on {usable:.0%} of calls (the rest fell back to the "
            "argmax): the probability-weighted verdicts are their expected values"
            + (
                f"; first-position bias {first['position_bias']:+.3f} (P(first) - P(second) "
                "over both orders), removed in the calibrated verdicts."
                if np.isfinite(first["position_bias"])
                else "."
            )
        )
    return lines


def card_lines(cards: pd.DataFrame, key: str) -> str:
    """The judge card of `key` as Markdown, or the plain statement that there is none."""
    rows = _latest(cards, key) if len(cards) else cards
    if rows.empty:
        return (
            f"**This judge has not been validated** (judge key `{key}`): no judge_validation "
            "card exists for this endpoint, model, prompt template and sampling. Its verdicts "
            "carry no measured accuracy."
        )
    first = rows.iloc[0]
    lines = [
        f"### Judge card: {first['judge_model']} at {first['judge_endpoint']}",
        "",
        f"Judge key `{key}`; prompt template sha256 `{first['prompt_template_sha256'][:12]}`; "
        f"sampling `{first['sampling']}`.",
        "",
    ]
    for validation_set, group in rows.groupby("validation_set", sort=True):
        lines += _set_lines(group, str(validation_set))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def accuracy_figure(cards: pd.DataFrame, key: str | None = None) -> Figure:
    """Accuracy with its 95% interval for each judge (and verdict source) and baseline, over
    all items; `key` limits it to one judge's latest card."""
    rows = cards[(cards["metric"] == "accuracy") & cards["category"].isna()]
    if key is not None:
        rows = _latest(cards, key)
        rows = rows[rows["metric"] == "accuracy"]
    figure = Figure(figsize=(7, 1.2 + 0.45 * max(len(rows), 1)), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    if rows.empty:
        axes.set_axis_off()
        axes.text(0.5, 0.5, "no judge has been validated", ha="center", va="center")
        return figure
    labels = [
        f"{row['judge']}"
        if row["kind"] == BASELINE
        else f"{row['judge']} ({row['verdict_source']})"
        for _, row in rows.iterrows()
    ]
    labels = [f"{label} · {vs}" for label, vs in zip(labels, rows["validation_set"], strict=True)]
    values = rows["value"].to_numpy(dtype="float64")
    low = values - rows["ci_low"].to_numpy(dtype="float64")
    high = rows["ci_high"].to_numpy(dtype="float64") - values
    colours = ["tab:blue" if kind == JUDGE else "tab:gray" for kind in rows["kind"]]
    positions = np.arange(len(rows))
    for position, value, below, above, colour in zip(
        positions, values, low, high, colours, strict=True
    ):
        axes.errorbar(value, position, xerr=[[below], [above]], fmt="o", color=colour, capsize=3)
    axes.set_yticks(positions, labels)
    axes.invert_yaxis()
    axes.set_xlim(0, 1)
    axes.set_xlabel("accuracy against the gold (95% interval)")
    axes.set_title("Judges and baselines")
    return figure
