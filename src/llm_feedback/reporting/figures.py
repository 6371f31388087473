"""Report figures as `matplotlib.figure.Figure` objects.

Figures are built without pyplot on an Agg canvas: nothing is registered with pyplot's
figure manager, so nothing needs closing, no GUI backend is touched, and a notebook's own
backend is left alone. An empty input gives a figure that says "no data" rather than an
error, so a report always renders.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from llm_feedback.core.errors import require_columns
from llm_feedback.reporting._frames import (
    Table,
    as_float,
    attach_model,
    completion_chunks,
    ordered_aspects,
)
from llm_feedback.reporting.metrics import (
    ANNOTATION_COLUMNS,
    FIX_ACTIONS,
    RATING_MAX,
    RATING_MIN,
    rating_by_position,
)
from llm_feedback.stats.intervals import cluster_ids, pearson_from_sums
from llm_feedback.storage.parquet_source import table_batches
from llm_feedback.storage.schema import COMPLETION_KEY, MODEL_ASPECT_METRICS_COLUMN_TYPES
from llm_feedback.validation.agreement import MIN_CORRELATION_PAIRS

RATING_LEVELS = tuple(range(int(RATING_MIN), int(RATING_MAX) + 1))
NO_DATA = "no data"
JITTER = 0.08  # score units, in the scatter only


def new_figure(width: float, height: float) -> Figure:
    """An empty figure on its own Agg canvas, outside pyplot, laid out "constrained".

    Args:
        width: The width in inches.
        height: The height in inches.

    Returns:
        The figure.
    """
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def message_figure(title: str, message: str) -> Figure:
    """A placeholder figure that explains why there is nothing to plot.

    Args:
        title: The figure's title.
        message: The explanation, written in its middle.

    Returns:
        The figure.
    """
    figure = new_figure(6, 3)
    axes = figure.add_subplot()
    axes.set_axis_off()
    axes.set_title(title)
    axes.text(0.5, 0.5, message, ha="center", va="center", fontsize=12, wrap=True)
    return figure


def rating_distribution_figure(aspect_annotations: Table, completions: Table) -> Figure:
    """One panel per aspect; per model a horizontal bar split into the shares of ratings
    1-5, N/A and failed judgments (every shuffle's judgment counts). Tables on disk are
    counted a chunk of prompts at a time.

    Args:
        aspect_annotations: The aspect ratings, one row per shuffle.
        completions: The completions, with their model.

    Returns:
        The figure, or one that says "no data".

    Raises:
        InputError: A required column is missing, or the inputs come from different runs.
    """
    title = "Rating distribution per aspect and model"
    require_columns(aspect_annotations, ANNOTATION_COLUMNS, "aspect_annotations")
    counts = _judgment_counts(aspect_annotations, completions)
    if counts.empty:
        return message_figure(title, NO_DATA)
    labels = [str(level) for level in RATING_LEVELS]
    categories = [*labels, "N/A", "failed"]
    rating_colors = colormaps["RdYlGn"](np.linspace(0.1, 0.9, len(labels)))
    colors = [*rating_colors, "0.75", "0.25"]

    aspects = ordered_aspects(counts.index.get_level_values("aspect"))
    models = sorted(counts.index.get_level_values("model").unique(), reverse=True)  # top-down
    n_columns = min(2, len(aspects))
    n_rows = -(-len(aspects) // n_columns)
    figure = new_figure(6 * n_columns, 0.6 + n_rows * (0.9 + 0.3 * len(models)))
    figure.suptitle(title)
    panels = figure.subplots(n_rows, n_columns, squeeze=False, sharex=True)
    for axes, aspect in zip(panels.flat, aspects, strict=False):
        found = counts.xs(aspect, level="aspect").unstack("category", fill_value=0)
        shares = (
            found.div(found.sum(axis=1), axis=0)
            .reindex(index=models, columns=categories)
            .fillna(0.0)
        )
        left = np.zeros(len(models))
        for category, color in zip(categories, colors, strict=True):
            axes.barh(models, shares[category], left=left, color=color, label=category)
            left += shares[category].to_numpy()
        axes.set_title(aspect)
        axes.set_xlim(0, 1)
        axes.set_xlabel("share of judgments")
    for axes in panels.flat[len(aspects) :]:
        axes.set_axis_off()
    handles, legend_labels = panels.flat[0].get_legend_handles_labels()
    figure.legend(handles, legend_labels, loc="outside lower center", ncols=len(categories))
    return figure


def aspect_heatmap_figure(model_aspect_table: pd.DataFrame) -> Figure:
    """Model x aspect heatmap of mean ratings (1-5), each cell annotated with its mean and
    the number of rated completions. A cell without ratings is grey and says why: "N/A"
    (the judge found the aspect not applicable) or "failed" (no usable judgment: hatched
    red), so a failure never reads as honesty's N/A.

    Args:
        model_aspect_table: The `model_aspect_metrics` table.

    Returns:
        The figure, or one that says "no data".

    Raises:
        InputError: A required column is missing.
    """
    title = "Mean rating per model and aspect"
    if model_aspect_table.empty:
        return message_figure(title, NO_DATA)
    require_columns(model_aspect_table, MODEL_ASPECT_METRICS_COLUMN_TYPES, "model_aspect_metrics")
    means = model_aspect_table.pivot(index="model", columns="aspect", values="mean_rating")
    counts = model_aspect_table.pivot(index="model", columns="aspect", values="n_rated")
    na_counts = model_aspect_table.pivot(index="model", columns="aspect", values="n_na")
    failed = model_aspect_table.pivot(index="model", columns="aspect", values="n_failed")
    aspects = ordered_aspects(means.columns)
    means, counts = means.loc[:, aspects], counts.loc[:, aspects]

    figure = new_figure(1.6 + 1.5 * len(aspects), 1.2 + 0.45 * len(means))
    axes = figure.add_subplot()
    cmap = colormaps["viridis"].with_extremes(bad="0.85")
    image = axes.imshow(
        np.ma.masked_invalid(means.to_numpy(dtype="float64")),
        cmap=cmap,
        vmin=RATING_MIN,
        vmax=RATING_MAX,
        aspect="auto",
    )
    for row, model in enumerate(means.index):
        for column, aspect in enumerate(aspects):
            mean = means.at[model, aspect]
            n_failed = int(failed.at[model, aspect]) if pd.notna(failed.at[model, aspect]) else 0
            n_na = int(na_counts.at[model, aspect]) if pd.notna(na_counts.at[model, aspect]) else 0
            if pd.notna(mean):
                label = f"{mean:.2f}\nn={int(counts.at[model, aspect])}"
                label += f", {n_failed} failed" if n_failed else ""
            elif n_failed:
                label = f"failed\n{n_failed}"
                axes.add_patch(
                    Rectangle(
                        (column - 0.5, row - 0.5),
                        1,
                        1,
                        fill=False,
                        hatch="xx",
                        edgecolor="tab:red",
                        linewidth=0,
                    )
                )
            else:
                label = f"N/A\n{n_na}" if n_na else "no data"
            # Dark text on the bright (high) end of viridis and on the grey of missing cells.
            dark_text = pd.isna(mean) or mean > (RATING_MIN + RATING_MAX) / 2
            axes.text(
                column,
                row,
                label,
                ha="center",
                va="center",
                fontsize=8,
                color="black" if dark_text else "white",
            )
    axes.set_xticks(range(len(aspects)), aspects, rotation=20, ha="right")
    axes.set_yticks(range(len(means)), means.index)
    axes.set_title(title)
    figure.colorbar(image, ax=axes, label="mean rating (1-5)")
    return figure


def score_scatter_figure(overall_scores: Table) -> Figure:
    """Overall score (after the fix) against the fine-grained score, coloured by fix action,
    with Pearson's r in the title. Takes the overall_scores table; r, n and the legend's
    counts are of every point, but above `SCATTER_POINTS` only a seeded sample of them is
    drawn (chosen by each completion's hash, so whichever way the table is read).

    Args:
        overall_scores: The overall_scores table, in memory or on disk.

    Returns:
        The figure, or one that says "no data".

    Raises:
        InputError: A required column is missing.
    """
    title = "Overall vs fine-grained score"
    require_columns(
        overall_scores,
        ["fine_grained_score", "overall_score_fixed", "fix_action"],
        "overall_scores",
    )
    total, actions, moments = _scatter_counts(overall_scores)
    if not total:
        return message_figure(title, NO_DATA)
    share = min(1.0, SCATTER_POINTS / total)
    points = pd.concat(
        [part[_hash_share(part) < share] for part in _scatter_points(overall_scores)]
    ).reset_index(drop=True)
    # Scores take few values: a small seeded jitter keeps coinciding points visible.
    rng = np.random.default_rng(0)
    jittered = points.assign(
        fine_grained_shown=points["fine_grained"] + rng.uniform(-JITTER, JITTER, len(points)),
        overall_shown=points["overall"] + rng.uniform(-JITTER, JITTER, len(points)),
    )

    figure = new_figure(6, 4.5)
    axes = figure.add_subplot()
    palette = dict(zip(FIX_ACTIONS, colormaps["tab10"].colors, strict=False))
    present = list(actions.index)
    legend_order = [a for a in FIX_ACTIONS if a in present] + sorted(
        set(present) - set(FIX_ACTIONS)
    )
    for action in legend_order:
        group = jittered[jittered["fix_action"] == action]
        axes.scatter(
            group["fine_grained_shown"],
            group["overall_shown"],
            s=14,
            alpha=0.5,
            color=palette.get(action, "black"),
            label=f"{action} ({actions[action]})",
        )
    r = pearson_from_sums(moments[None, :])[0] if total >= MIN_CORRELATION_PAIRS else np.nan
    r_text = "n/a" if np.isnan(r) else f"{r:.2f}"
    drawn = "" if share == 1.0 else f", {len(points):,} drawn"
    axes.set_title(f"{title}\nPearson r = {r_text}, n = {total}{drawn}")
    axes.set_xlabel(f"fine-grained score (mean aspect rating, 1-5; jitter ±{JITTER})")
    axes.set_ylabel(f"overall score after fix (1-10; jitter ±{JITTER})")
    axes.legend(title="fix action", fontsize=8)
    return figure


def position_bias_figure(aspect_annotations: Table) -> Figure:
    """Mean rating by the position a completion was shown at, one line per aspect, with
    the intervals of `rating_by_position` as error bars. Measured from one shuffle too:
    shown positions are random, so a sloping line is position bias.

    Args:
        aspect_annotations: The aspect ratings, one row per shuffle.

    Returns:
        The figure, or one that says "no data".

    Raises:
        InputError: A required column is missing.
    """
    title = "Mean rating by position shown to the judge"
    by_position = rating_by_position(aspect_annotations)
    if by_position.empty:
        return message_figure(title, NO_DATA)

    figure = new_figure(6, 4)
    axes = figure.add_subplot()
    for offset, aspect in enumerate(ordered_aspects(by_position["aspect"])):
        line = by_position[by_position["aspect"] == aspect]
        mean = line["mean_rating"].to_numpy()
        errors = np.vstack([mean - line["ci_low"], line["ci_high"] - mean])
        axes.errorbar(
            line["position"] + 0.04 * offset,
            mean,
            yerr=np.nan_to_num(errors),
            marker="o",
            capsize=3,
            label=aspect,
        )
    axes.set_xticks(sorted(by_position["position"].unique()))
    axes.set_xlabel("position shown to the judge (0 = first)")
    axes.set_ylabel("mean rating (1-5), 95% interval")
    shuffles = len(_distinct(aspect_annotations, "shuffle_idx"))
    axes.set_title(f"{title}\n{shuffles} shuffle{'s' if shuffles > 1 else ''}")
    axes.legend(fontsize=8)
    return figure


def _judgment_counts(aspect_annotations: Table, completions: Table) -> pd.Series:
    """Judgments per (aspect, model, category): the rating 1-5, "N/A" or "failed"."""
    counts = []
    others = {"aspect_annotations": (aspect_annotations, ANNOTATION_COLUMNS)}
    for chunk, rows in completion_chunks(completions, [*COMPLETION_KEY, "model"], others):
        judgments = attach_model(rows["aspect_annotations"], chunk, "aspect_annotations")
        rating = as_float(judgments["rating"])
        # Ratings are integers from the judge; rounding only matters for hand-made inputs.
        rounded = rating.round().clip(RATING_MIN, RATING_MAX)
        category = np.where(
            rating.notna(),
            rounded.fillna(0).astype("int64").astype(str),
            np.where(judgments["is_na"].fillna(False).astype(bool), "N/A", "failed"),
        )
        found = judgments.assign(category=category)
        counts.append(found.groupby(["aspect", "model", "category"], sort=False).size())
    found = [part for part in counts if len(part)]
    if not found:
        return pd.Series(dtype="int64")
    return pd.concat(found).groupby(level=[0, 1, 2], sort=False).sum()


# Points the scatter draws at most: more would hide each other and slow the figure down.
SCATTER_POINTS = 20_000
SCORE_PAIR = ("fine_grained_score", "overall_score_fixed")


def _scatter_points(overall_scores: Table):
    """The scores that have both values, a record batch at a time."""
    columns = ["prompt_id", "completion_idx", *SCORE_PAIR, "fix_action"]
    for batch in table_batches(overall_scores, columns):
        points = pd.DataFrame(
            {
                "fine_grained": as_float(batch["fine_grained_score"]),
                "overall": as_float(batch["overall_score_fixed"]),
                "fix_action": batch["fix_action"].to_numpy(),
            }
        )
        keys = batch.loc[:, [c for c in ("prompt_id", "completion_idx") if c in batch]]
        yield points.assign(_key=_row_keys(keys)).dropna(subset=["fine_grained", "overall"])


def _row_keys(keys: pd.DataFrame) -> np.ndarray:
    if keys.shape[1] == 0:  # hand-made tables without keys: the row's position
        return np.arange(len(keys), dtype="uint64")
    return cluster_ids(keys)


def _hash_share(points: pd.DataFrame) -> np.ndarray:
    """Each point's key as a number in [0, 1): a point is drawn when below the share."""
    return (points["_key"].to_numpy(dtype="uint64") >> np.uint64(11)) * 2.0**-53


def _scatter_counts(overall_scores: Table) -> tuple[int, pd.Series, np.ndarray]:
    """Points, points per fix action, and the moment sums of Pearson's r (scores centred
    on the first batch's means, which keeps the sums' digits)."""
    total, actions, moments, centre = 0, pd.Series(dtype="int64"), np.zeros(6), None
    for points in _scatter_points(overall_scores):
        if points.empty:
            continue
        x, y = points["overall"].to_numpy(), points["fine_grained"].to_numpy()
        if centre is None:
            centre = (x.mean(), y.mean())
        a, b = x - centre[0], y - centre[1]
        moments += [len(a), a.sum(), b.sum(), (a * a).sum(), (b * b).sum(), (a * b).sum()]
        total += len(points)
        actions = actions.add(points["fix_action"].value_counts(), fill_value=0)
    return total, actions.astype("int64"), moments


RANKING_TITLE = "Model ranking (Bradley-Terry, from per-prompt scores)"


def model_ranking_figure(ranking: pd.DataFrame, title: str = RANKING_TITLE) -> Figure:
    """Bradley-Terry scores with their intervals as error bars, best model on top, and
    beside each its style-controlled score (hollow); a model's label carries its raw and
    length-controlled win rate against the baseline. Takes the `model_ranking` or
    `eval_model_ranking` table (`title` says which).

    The axis spans the scores and the intervals up to `ranking_axis`'s reach: a bound
    beyond it (a few battles can give one thousands of points wide) is drawn to the axis'
    edge, with an arrowhead and its value written there. The legend sits above the axes,
    never over a point.

    Args:
        ranking: The `model_ranking` or `eval_model_ranking` table.
        title: The figure's title.

    Returns:
        The figure, or one that says "no data".
    """
    if ranking.empty:
        return message_figure(title, NO_DATA)
    ordered = ranking.sort_values("score")
    labels = [
        row.model
        if pd.isna(row.win_rate)
        else f"{row.model}\nwin {row.win_rate:.0%}, LC {row.lc_win_rate:.0%} vs {row.baseline}"
        for row in ordered.itertuples()
    ]
    figure = new_figure(7, 1.6 + 0.6 * len(ordered))
    axes = figure.add_subplot()
    place = np.arange(len(ordered), dtype="float64")
    series = [
        (label, *columns, offset, style)
        for label, *columns, offset, style in (
            ("raw", "score", "ci_low", "ci_high", 0.12, {"color": "C0"}),
            (
                "style-controlled",
                "style_controlled_score",
                "style_controlled_score_ci_low",
                "style_controlled_score_ci_high",
                -0.12,
                {"color": "C1", "mfc": "white"},
            ),
        )
        if columns[0] in ordered
    ]
    left, right = ranking_axis(
        np.concatenate([ordered[column].to_numpy("float64") for _, column, *_ in series]),
        np.concatenate([ordered[low].to_numpy("float64") for _, _, low, *_ in series]),
        np.concatenate([ordered[high].to_numpy("float64") for _, _, _, high, *_ in series]),
    )
    clipped = False
    for label, column, low, high, offset, style in series:
        # The interval drawn from its bounds, not as errors about the score: a bootstrap
        # percentile interval need not contain the point estimate (few battles).
        rows = place + offset
        lows, highs = ordered[low].to_numpy("float64"), ordered[high].to_numpy("float64")
        shown_lows, shown_highs = np.clip(lows, left, right), np.clip(highs, left, right)
        axes.hlines(rows, shown_lows, shown_highs, color=style["color"], linewidth=1.2)
        for bounds, shown, marker, align in (
            (lows, shown_lows, "<", "left"),
            (highs, shown_highs, ">", "right"),
        ):
            cut = (bounds != shown) & ~np.isnan(bounds)
            axes.plot(shown[~cut], rows[~cut], "|", color=style["color"], markersize=8)
            # At the axis' edge: drawn whole, over the frame.
            axes.plot(
                shown[cut], rows[cut], marker, color=style["color"], markersize=6, clip_on=False
            )
            for value, row in zip(bounds[cut], rows[cut], strict=True):
                # Above the upper series' line, below the lower one's: never on each other.
                axes.annotate(
                    f"{value:,.0f}",
                    (left if marker == "<" else right, row),
                    xytext=(8 if marker == "<" else -8, 3 if offset > 0 else -3),
                    textcoords="offset points",
                    ha=align,
                    va="bottom" if offset > 0 else "top",
                    fontsize=7,
                    color=style["color"],
                )
            clipped |= bool(cut.any())
        axes.plot(ordered[column].to_numpy("float64"), rows, "o", label=label, **style)
    axes.set_xlim(left, right)
    axes.set_ylim(-0.6, len(ordered) - 0.4)
    axes.set_yticks(place, labels)
    axes.axvline(1000, color="0.7", linestyle="--", linewidth=1)
    xlabel = "score (Elo-like; 1000 = average model), 95% interval"
    if clipped:
        xlabel += "\narrowhead: interval cut at the axis, its bound written beside it"
    axes.set_xlabel(xlabel)
    axes.set_title(title)
    handles, legend_labels = axes.get_legend_handles_labels()
    figure.legend(handles, legend_labels, loc="outside upper center", ncols=len(series), fontsize=8)
    return figure


# How far beyond the scores an interval is drawn: this many times the typical (median)
# interval width, or the spread of the scores if wider; the rest is cut at the axis.
AXIS_REACH_WIDTHS = 1.0
MIN_AXIS_SPAN = 50.0  # score points, for models all scored alike with zero-width intervals


def ranking_axis(scores: np.ndarray, lows: np.ndarray, highs: np.ndarray) -> tuple[float, float]:
    """The ranking figure's x range: every score, and the intervals as far as a typical
    interval's width (or the scores' spread) beyond the scores, with a margin.

    Args:
        scores: the point estimates drawn (NaN ignored).
        lows: the intervals' lower bounds (NaN ignored).
        highs: the intervals' upper bounds (NaN ignored).

    Returns:
        (left, right) limits for the axis.
    """
    scores = scores[np.isfinite(scores)]
    if not len(scores):
        return 1000.0 - MIN_AXIS_SPAN, 1000.0 + MIN_AXIS_SPAN
    widths = (highs - lows)[np.isfinite(highs - lows)]
    spread = float(scores.max() - scores.min())
    reach = max(AXIS_REACH_WIDTHS * float(np.median(widths)) if len(widths) else 0.0, spread)
    left = max(np.nanmin(np.append(lows, scores)), scores.min() - reach)
    right = min(np.nanmax(np.append(highs, scores)), scores.max() + reach)
    margin = max(0.05 * (right - left), MIN_AXIS_SPAN / 2 if right - left < MIN_AXIS_SPAN else 0)
    return float(left - margin), float(right + margin)


def rating_by_length_figure(rating_by_length: pd.DataFrame) -> Figure:
    """Mean rating per completion-length decile, one line per aspect, with intervals.

    Args:
        rating_by_length: The `rating_by_length` table.

    Returns:
        The figure, or one that says "no data".
    """
    title = "Mean rating by completion length"
    if rating_by_length.empty:
        return message_figure(title, NO_DATA)
    figure = new_figure(6, 4)
    axes = figure.add_subplot()
    for aspect in ordered_aspects(rating_by_length["aspect"]):
        line = rating_by_length[rating_by_length["aspect"] == aspect]
        centre = (line["length_low"] + line["length_high"]).to_numpy() / 2
        mean = line["estimate"].to_numpy()
        errors = np.vstack([mean - line["ci_low"], line["ci_high"] - mean])
        axes.errorbar(centre, mean, yerr=np.nan_to_num(errors), marker="o", capsize=3, label=aspect)
    axes.set_xscale("log")
    axes.set_xlabel("completion length (characters, decile centre)")
    axes.set_ylabel("mean rating (1-5), 95% interval")
    axes.set_title(title)
    axes.legend(fontsize=8)
    return figure


def _distinct(table: Table, column: str) -> set:
    """The distinct values of `column`, read a record batch at a time."""
    return {value for batch in table_batches(table, [column]) for value in batch[column].unique()}
