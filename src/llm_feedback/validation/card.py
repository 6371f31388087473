"""The judge card: a judge's validation metrics and baselines, keyed by the judge.

A judge is its identity (`validation.identity`: endpoint, model, model file, prompt
template, sampling, task; `judge_key` hashes them). `card_frame` makes the rows of the versioned
`judge_validation` dataset: the metric tables (`metrics.pairwise_metrics` /
`pointwise.pointwise_metrics` for the judge, one per verdict source: "argmax", "logprobs",
"logprobs_calibrated"; `baselines.baseline_metrics`) with the judge's identity on every
row, `kind` ("judge" | "baseline"), the validation set's name, the measured position bias
and the share of calls with usable probabilities.

History: `add_card` appends a validation run's rows and never drops any; a run is its
(judge_key, validation_set, created_at). Cards show, per validation set and size (the most
judged calls of a metric), the latest run: a card of another size is shown beside it, dated,
never replaced; earlier runs of the same size are counted as history. A run's judge figure
outside the interval of the same judge's previous run on the same set is a drift (`drifts`):
"**Drift**" in the card, "drifted: <metric>" in the report's standing line.

`card_lines(cards, key)` is the card as Markdown for a report: "this judge has not been
validated" when no row has the key; otherwise the metrics with intervals, beside the
baselines, and, as plainly, "this judge cannot be told apart from <baseline>" (accuracy
intervals overlap), "this judge is worse than <baseline>" (its interval entirely below) and
"this judge's verdicts are inverted" (accuracy entirely below chance, or kappa / Spearman
entirely below 0), all from `findings`. `validation_standing(cards, identity)` is the short
form a report puts beside its headline: every card of the same model (and file), endpoint
and sampling on any task, and the caveat the ratings carry. Every name from configuration is escaped
(`markdown_escape`). `accuracy_figure` plots accuracy with its interval for each judge and
baseline.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from llm_feedback.reporting.markdown_escape import code_span, markdown_text
from llm_feedback.storage.schema import JUDGE_VALIDATION_COLUMN_TYPES
from llm_feedback.validation.card_notes import data_notes

JUDGE = "judge"
BASELINE = "baseline"
ARGMAX = "argmax"
CARD_METRICS = (
    "accuracy",
    "accuracy_both_orders",
    "tpr",
    "tnr",
    "positional_agreement",
    "first_shown_share",
    "longer_share",
    "gold_longer_share",
    "tie_rate",
    "unreadable_share",
    "cohen_kappa",
    "spearman",
    "pearson",
    "exact_agreement",
    "within_1_agreement",
    "mean_difference",
)


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
    source ("argmax", "logprobs", "logprobs_calibrated") to its metric table.

    Args:
        identity: the judge's identity (`judge_identity`).
        validation_set: the validation set's name.
        judge_tables: metric tables by verdict source.
        baselines: the baselines' metric tables (None: none).
        created_at: when the card was made (ISO time).
        position_bias: P(first) - P(second) from the probabilities (NaN: none).
        usable_probability_share: the share of calls with usable log-probabilities.

    Returns:
        The card rows.
    """
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


def normalised(cards: pd.DataFrame) -> pd.DataFrame:
    """`cards` with every judge_validation column, in order and type: a card written before
    a column existed (judge_model_file, task) has it empty.

    Args:
        cards: judge_validation rows, of any age.

    Returns:
        The rows with every column.
    """
    columns = list(JUDGE_VALIDATION_COLUMN_TYPES)
    return cards.reindex(columns=columns).astype(JUDGE_VALIDATION_COLUMN_TYPES)


def add_card(previous: pd.DataFrame, card: pd.DataFrame) -> pd.DataFrame:
    """Every card of `previous`, then `card`: history is kept, a newer run of the same
    judge on the same set is shown over it (`_latest`), never written over it.

    Args:
        previous: the cards so far.
        card: the new card's rows.

    Returns:
        All the rows.
    """
    parts = [normalised(part) for part in (previous, card) if len(part)]
    return pd.concat(parts, ignore_index=True) if parts else normalised(card)


RUN = ["judge_key", "validation_set", "created_at"]


def _runs(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per validation run of `rows`: its RUN columns and `size` (the most judged
    calls of any of its metrics)."""
    return rows.groupby(RUN, as_index=False, dropna=False)["n"].max().rename(columns={"n": "size"})


def _latest(cards: pd.DataFrame, key: str) -> pd.DataFrame:
    """The key's rows, over all items, of its latest validation run on each validation set
    and size: a card of another size is kept beside, never replaced."""
    rows = normalised(cards)
    rows = rows[(rows["judge_key"] == key) & rows["category"].isna()]
    if rows.empty:
        return rows
    runs = _runs(rows)
    latest = runs.sort_values("created_at").groupby(["validation_set", "size"]).tail(1)
    return rows.merge(latest[RUN], on=RUN)


def latest_rows(cards: pd.DataFrame, key: str) -> pd.DataFrame:
    """The rows, over all items, of the judge `key`'s latest validation run on each
    validation set and size: what its card shows.

    Args:
        cards: judge_validation rows (every judge's, every run).
        key: the judge key.

    Returns:
        The rows the card shows (none when the judge has no card).
    """
    return _latest(cards, key)


def _history_line(
    cards: pd.DataFrame, key: str, validation_set: str, shown: set[str]
) -> str | None:
    """The runs of `key` on `validation_set` not shown because a later one of the same size
    covers them, dated."""
    rows = normalised(cards)
    rows = rows[
        (rows["judge_key"] == key)
        & (rows["validation_set"] == validation_set)
        & rows["category"].isna()
    ]
    earlier = _runs(rows)
    earlier = earlier[~earlier["created_at"].isin(shown)]
    if earlier.empty:
        return None
    dates = ", ".join(
        f"{created} ({size:,} calls)"
        for created, size in zip(earlier["created_at"], earlier["size"], strict=True)
    )
    return f"Earlier runs on this set, kept in judge_validation: {dates}."


def _interval(row: pd.Series) -> str:
    if not np.isfinite(row["ci_low"]):
        return f"{row['value']:.3f}"
    return f"{row['value']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"


def _overlaps(judge: pd.Series, baseline: pd.Series) -> bool:
    return bool(judge["ci_low"] <= baseline["ci_high"] and baseline["ci_low"] <= judge["ci_high"])


def _below(judge: pd.Series, baseline: pd.Series) -> bool:
    """The judge's interval entirely below the baseline's."""
    return bool(judge["ci_high"] < baseline["ci_low"])


def _column_name(row: pd.Series) -> str:
    if row["kind"] == BASELINE:
        return markdown_text(row["judge"])
    return f"judge ({row['verdict_source']})"


# Chance when no `random` baseline is on the card: a coin between two responses.
CHANCE_ACCURACY = 0.5
# Agreement statistics whose 0 is chance: an interval entirely below 0 is an inversion.
SIGNED_AGREEMENT = ("cohen_kappa", "spearman")


@dataclass(frozen=True)
class Finding:
    """One plain warning of a card: `kind` "inverted", "worse than" or "cannot be told
    apart from", against `baseline` (None for an inversion), for one verdict source."""

    source: str
    kind: str
    baseline: str | None
    line: str  # the card's Markdown sentence


INVERTED = "inverted"
WORSE = "worse than"
APART = "cannot be told apart from"


def findings(rows: pd.DataFrame) -> list[Finding]:
    """The plain warnings of one validation run's rows, per verdict source: "inverted"
    (accuracy entirely below chance, or kappa / Spearman entirely below 0), "worse than
    <baseline>" (the judge's accuracy interval entirely below the baseline's), "cannot be
    told apart from <baseline>" (the intervals overlap).

    Args:
        rows: one run's card rows over all items.

    Returns:
        The findings, strongest first per verdict source.
    """
    found = []
    accuracy = rows[rows["metric"] == "accuracy"]
    baselines = accuracy[accuracy["kind"] == BASELINE]
    random = baselines.loc[baselines["judge"] == "random", "value"]
    chance = float(random.iloc[0]) if len(random) else CHANCE_ACCURACY
    judged = rows[rows["kind"] == JUDGE]
    for source, own in judged.groupby("verdict_source", sort=False):
        verdicts = f"({source} verdicts)"
        inverted = [
            f"{metric} {_interval(row)}"
            for metric in SIGNED_AGREEMENT
            for _, row in own[own["metric"] == metric].iterrows()
            if np.isfinite(row["ci_high"]) and row["ci_high"] < 0
        ]
        own_accuracy = own[own["metric"] == "accuracy"]
        for _, judge in own_accuracy.iterrows():
            if np.isfinite(judge["ci_high"]) and judge["ci_high"] < chance:
                inverted.insert(0, f"accuracy {_interval(judge)}, below chance ({chance:.3f})")
        if inverted:
            line = (
                f"**This judge's verdicts are inverted** {verdicts}: it prefers the response "
                f"the gold rejects more often than chance would; {'; '.join(inverted)}."
            )
            found.append(Finding(str(source), INVERTED, None, line))
        for _, judge in own_accuracy.iterrows():
            for _, baseline in baselines.iterrows():
                name = markdown_text(baseline["judge"])
                against = f"accuracy {_interval(judge)} against {_interval(baseline)}."
                kind = WORSE if _below(judge, baseline) else APART
                if kind == WORSE or _overlaps(judge, baseline):
                    line = f"**This judge {'is ' if kind == WORSE else ''}{kind} {name}** "
                    found.append(Finding(str(source), kind, name, line + f"{verdicts}: {against}"))
    return found


def _in_short(found: list[Finding]) -> str:
    """The findings of one verdict source in one phrase: "verdicts inverted; worse than
    always_longer; cannot be told apart from always_first, random"."""
    phrases = []
    if any(item.kind == INVERTED for item in found):
        phrases.append("verdicts inverted")
    for kind in (WORSE, APART):
        names = [item.baseline for item in found if item.kind == kind and item.baseline]
        if names:
            phrases.append(f"{kind} {', '.join(dict.fromkeys(names))}")
    return "; ".join(phrases)


@dataclass(frozen=True)
class Drift:
    """A judge figure of a card outside the interval of the judge's previous card on the
    same validation set."""

    source: str
    metric: str
    line: str  # the card's Markdown sentence


def drifts(cards: pd.DataFrame, key: str, validation_set: str, created_at: str) -> list[Drift]:
    """The figures of the run (`key`, `validation_set`, `created_at`) that moved beyond the
    interval of the previous run of the same judge on the same set (any size).

    Args:
        cards: judge_validation rows (every run kept).
        key: the judge key.
        validation_set: the set both runs measured.
        created_at: the run compared with the one before it.

    Returns:
        One drift per judge figure (verdict source and card metric, over all items) outside
        the previous run's interval; none without a previous run.
    """
    rows = normalised(cards)
    rows = rows[
        (rows["judge_key"] == key)
        & (rows["validation_set"] == validation_set)
        & rows["category"].isna()
        & (rows["kind"] == JUDGE)
        & rows["metric"].isin(CARD_METRICS)
    ]
    before = sorted(created for created in set(rows["created_at"]) if created < created_at)
    if not before:
        return []
    previous = rows[rows["created_at"] == before[-1]].set_index(["verdict_source", "metric"])
    found = []
    for _, row in rows[rows["created_at"] == created_at].iterrows():
        where = (row["verdict_source"], row["metric"])
        if where not in previous.index:
            continue
        old = previous.loc[where]
        old = old.iloc[0] if isinstance(old, pd.DataFrame) else old
        low, high, value = old["ci_low"], old["ci_high"], row["value"]
        if not (np.isfinite(low) and np.isfinite(high) and np.isfinite(value)):
            continue
        if low <= value <= high:
            continue
        line = (
            f"**Drift** ({row['verdict_source']} verdicts): {row['metric']} "
            f"{_interval(row)} lies outside the previous card's interval "
            f"[{low:.3f}, {high:.3f}] ({before[-1]}: {old['value']:.3f})."
        )
        found.append(Drift(str(row["verdict_source"]), str(row["metric"]), line))
    return found


def _set_lines(rows: pd.DataFrame, validation_set: str) -> list[str]:
    columns = list(dict.fromkeys(_column_name(row) for _, row in rows.iterrows()))
    cells: dict[tuple[str, str], str] = {
        (row["metric"], _column_name(row)): _interval(row) for _, row in rows.iterrows()
    }
    metrics = [m for m in CARD_METRICS if any((m, c) in cells for c in columns)]
    n = int(rows["n"].max())
    first = rows.iloc[0]
    lines = [
        f"Validation set {code_span(validation_set)} ({n} judged calls at most per metric), "
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
    if rows["ci_method"].fillna("").str.startswith("wilson").any():
        lines += [
            "TPR and TNR (positive: the first response is the better one, or a pass): Wilson "
            "95% intervals over items, each item counted once with the share of its calls "
            "right.",
            "",
        ]
    lines += [item.line for item in findings(rows)]
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


def _identity_line(first: pd.Series) -> str:
    model_file = first["judge_model_file"]
    weights = (
        f"; model file {code_span(model_file)}"
        if isinstance(model_file, str) and model_file
        else ""
    )
    task = first["task"] if isinstance(first["task"], str) else "not recorded"
    return (
        f"Judge key `{first['judge_key']}`{weights}; prompt template sha256 "
        f"`{first['prompt_template_sha256'][:12]}`; sampling {code_span(first['sampling'])}; "
        f"task {code_span(task)}."
    )


def card_lines(cards: pd.DataFrame, key: str) -> str:
    """The judge card of `key` as Markdown, or the plain statement that there is none.

    Args:
        cards: judge_validation rows.
        key: the judge's key.

    Returns:
        The Markdown.
    """
    rows = _latest(cards, key) if len(cards) else cards
    if rows.empty:
        return (
            f"**This judge has not been validated** (judge key `{key}`): no judge_validation "
            "card exists for this endpoint, model, model file, prompt template, sampling and "
            "task. Its verdicts carry no measured accuracy."
        )
    first = rows.iloc[0]
    lines = [
        f"### Judge card: {markdown_text(first['judge_model'])} at "
        f"{markdown_text(first['judge_endpoint'])}",
        "",
        _identity_line(first),
        "",
    ]
    for validation_set, runs in rows.groupby("validation_set", sort=True):
        for created, group in runs.groupby("created_at", sort=True):
            lines += _set_lines(group, str(validation_set))
            lines += [item.line for item in drifts(cards, key, str(validation_set), created)]
            lines.append("")
        shown = set(runs["created_at"])
        history = _history_line(cards, key, str(validation_set), shown)
        if history:
            lines += [history, ""]
    return "\n".join(lines).rstrip() + "\n"


# What makes two cards the same model answering the same way, whatever the task.
MODEL_COLUMNS = ("judge_endpoint", "judge_model", "judge_model_file", "sampling")


@dataclass(frozen=True)
class ValidationStanding:
    """A judge's validation as a report's first screen states it."""

    validated: bool  # a card exists for this model, file, endpoint and sampling
    lines: tuple[str, ...]  # Markdown bullet texts, one per card (or the "not validated" one)
    caveat: str  # the sentence the headline and rating tables carry


def _task_words(task: Any) -> str:
    if not isinstance(task, str) or not task:
        return "task not recorded"
    try:
        parts = json.loads(task)
    except ValueError:
        return f"task {code_span(task)}"
    # The task first ("task evaluate, mode pairwise, ..."), then its settings.
    ordered = sorted(parts.items(), key=lambda item: item[0] != "task")
    words = ", ".join(f"{name} {markdown_text(value)}" for name, value in ordered)
    return words or "task not recorded"


def _accuracy_words(rows: pd.DataFrame) -> str:
    judged = rows[rows["kind"] == JUDGE]
    # The argmax verdicts first; a card of ratings only has its own source.
    judged = judged.sort_values("verdict_source", key=lambda s: s != ARGMAX, kind="stable")
    for metric in ("accuracy", "cohen_kappa", "spearman"):
        found = judged[judged["metric"] == metric]
        if len(found):
            return f"{metric} {_interval(found.iloc[0])}"
    return "no agreement measured"


def _same_model(
    cards: pd.DataFrame, identity: Mapping[str, str], columns: tuple[str, ...] = MODEL_COLUMNS
) -> pd.DataFrame:
    rows = normalised(cards)
    for column in columns:
        rows = rows[rows[column].fillna("") == identity.get(column, "")]
    return rows


def _card_summaries(rows: pd.DataFrame, identity: Mapping[str, str]) -> list[tuple[str, str]]:
    """(line, short warning or "") for each latest card of `rows`: set, task, size, date,
    accuracy with its interval, and its warnings in short."""
    summaries = []
    for key in dict.fromkeys(rows["judge_key"]):
        latest = _latest(rows, key)
        for (validation_set, created), run in latest.groupby(["validation_set", "created_at"]):
            found = findings(run)
            # The ratings a report shows are the judge's replies: its argmax verdicts.
            short = _in_short([item for item in found if item.source == ARGMAX] or found)
            moved = [item.metric for item in drifts(rows, key, validation_set, created)]
            if moved:
                short = "; ".join(
                    filter(None, [short, f"drifted: {', '.join(dict.fromkeys(moved))}"])
                )
            size = int(run["n"].max())
            first = run.iloc[0]
            same = " (this prompt and task)" if key == identity.get("judge_key") else ""
            line = (
                f"{code_span(validation_set)}{same}: {_task_words(first['task'])}; "
                f"{size:,} judged calls; {created}; {_accuracy_words(run)}"
            )
            if short:
                line += f"; **{short}**"
                short = f"{code_span(validation_set)}: {short}"
            summaries.append((line + ".", short))
    return summaries


def validation_standing(
    cards: pd.DataFrame, identity: Mapping[str, str], rated_by: Collection[str] = ()
) -> ValidationStanding:
    """The cards measured for the judge's model (and file), endpoint and sampling on any
    task and validation set, each as one line (set, size, date, accuracy with its interval,
    its warnings), and the caveat its ratings carry; "not validated" where there is none,
    with the cards of the same model and file at the endpoint under other sampling settings
    as context (they do not validate these settings).

    Args:
        cards: judge_validation rows (every judge's).
        identity: the judge's identity columns (`judge_identity`).
        rated_by: the judge models the data records (empty: unknown); when the identity's
            model is not among them, the data was rated by another judge and no card of
            the identity's is shown for it.

    Returns:
        The standing: validated or not, the lines, the caveat.
    """
    model, endpoint = identity["judge_model"], identity["judge_endpoint"]
    name = f"{markdown_text(model)} at {markdown_text(endpoint)}"
    if rated_by and model not in rated_by:
        others = ", ".join(markdown_text(other) for other in sorted(rated_by))
        return ValidationStanding(
            False,
            (
                f"**Judge not validated**: this data's rows name {others} as their judge, "
                f"not {name}; no card is known for the judge that rated it.",
            ),
            "**Caveat: the judge is not validated** (see Judge validation): "
            "these ratings carry no measured accuracy.",
        )
    rows = _same_model(cards, identity) if len(cards) else normalised(cards)
    if rows.empty:
        others = _same_model(cards, identity, MODEL_COLUMNS[:-1]) if len(cards) else rows
        context = [
            f"Measured for the same model and file with other sampling "
            f"({code_span(sampling)}), which does not validate these settings: {line}"
            for sampling, group in others.groupby("sampling", sort=True)
            for line, _ in _card_summaries(group, identity)
        ]
        return ValidationStanding(
            False,
            (
                f"**Judge not validated**: no card measures {name} with these sampling "
                f"settings ({code_span(identity['sampling'])}) against gold labels, on any "
                "task. Its ratings carry no measured accuracy.",
                *context,
            ),
            "**Caveat: the judge is not validated** (see Judge validation): "
            "these ratings carry no measured accuracy.",
        )
    summaries = _card_summaries(rows, identity)
    warned = [short for _, short in summaries if short]
    if warned:
        caveat = (
            "**Caveat: on its validation this judge did no better than a baseline** "
            f"({'; '.join(warned)}): treat these ratings as unverified."
        )
    else:
        caveat = (
            "Judge validated (see Judge validation): read the ratings with its measured accuracy."
        )
    return ValidationStanding(True, tuple(f"Validated on {line}" for line, _ in summaries), caveat)


def accuracy_figure(cards: pd.DataFrame, key: str | None = None) -> Figure:
    """Accuracy with its 95% interval for each judge (and verdict source) and baseline, over
    all items; `key` limits it to one judge's latest card.

    Args:
        cards: judge_validation rows.
        key: one judge's key (None: every judge).

    Returns:
        The figure.
    """
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
