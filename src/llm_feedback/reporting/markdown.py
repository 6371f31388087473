"""The readable report: headline numbers, Markdown tables, figure links and provenance.

Tables are laid out by pandas' `DataFrame.to_markdown` (tabulate); only the cell text is
ours (`_cell`: thousands separators, "–" for missing, yes/no, lists joined), because the
report's reader wants those and tabulate does not format them.

The judge's validation comes first, beside the headline: the cards measured for the same
model, endpoint and sampling on any task, or "not validated" (`validation.card
.validation_standing`); the headline's ranking line and the rating tables carry its
caveat. Names from configuration (models, endpoints, sources) are escaped
(`markdown_escape`): a `<script>` in a model name is text.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import numpy as np
import pandas as pd

from llm_feedback.reporting._frames import Table
from llm_feedback.reporting.markdown_escape import markdown_text, table_cell_text
from llm_feedback.reporting.metrics import FIX_ACTIONS, to_0_100
from llm_feedback.storage.parquet_source import table_batches

MAX_TABLE_ROWS = 40

# Known inputs get a title and a sentence on how to read them, in this order; any other
# table is rendered after them under its own key.
TABLE_SECTIONS: dict[str, tuple[str, str]] = {
    "model_aspect_metrics": (
        "Ratings per model and aspect",
        "Each completion counts once per aspect (shuffles averaged). mean_rating_0_100 maps "
        "the 1-5 scale onto 0-100 as (mean - 1) / 4 * 100. Every mean is shown with its "
        "interval, `estimate [low, high]` (method in ci_method; the standard error is in "
        "the dataset).",
    ),
    "model_ranking": (
        "Model ranking",
        "Every two completions of a prompt from different models form a battle, the "
        "higher-scored one winning (equal scores: a tie, counted half); the score is the "
        "one the preference pairs use (report.pairs.score). score: Bradley-Terry on an "
        "Elo-like scale (1000 = the average model; 400 points = 10:1 odds). win_rate: "
        "against the baseline, ties half; lc_win_rate: a length-controlled win rate in the "
        "form of AlpacaEval's length_controlled_minimal, fitted without penalty (the win "
        "rate predicted at equal lengths; not AlpacaEval 2's leaderboard figure), with "
        "length_coefficient the log-odds the length term explains (0: length played no "
        "part). style_controlled_score: after Arena-Hard's style control, the Bradley-Terry "
        "score with "
        "the answers' length and Markdown counts as covariates (same scale as score; their "
        "coefficients in the next table). Intervals: clustered bootstrap by prompt, the "
        "same resamples for the raw and the controlled figures.",
    ),
    "style_coefficients": (
        "Style control",
        "How much style explained in the style-controlled ranking: each covariate's "
        "coefficient, in log-odds per standard deviation of the normalised difference "
        "(A - B) / (A + B) between the two answers (length in characters; headers, bold "
        "spans and list items counted in the Markdown). 0: that feature played no part; "
        "> 0: the judge's scores favour more of it. – for a feature that never differed.",
    ),
    "source_aspect_metrics": (
        "Ratings per prompt source, model and aspect",
        "The table above for each prompt source (the `source` of each prompt), with its "
        "own counts.",
    ),
    "model_score_metrics": (
        "Overall and fine-grained scores per model",
        "Overall scores (1-10) before and after the score fix; correlations compare the "
        "fixed overall score with the fine-grained score (mean aspect rating) over the "
        "n_paired completions that have both.",
    ),
    "judge_health": (
        "Judge health",
        "Rates are shares of all judgments of the scope, with Wilson intervals; reasks is "
        "the total number of times a malformed reply was re-asked. modal_score: the "
        "overall score the critiques gave most often, with how many gave it and their share "
        "of the read critiques (near 1: the overall score cannot tell completions apart).",
    ),
    "judge_bias": (
        "Judge bias",
        "Measured from this run, one shuffle suffices. position_slope: rating points per "
        "position further down the shown order (positions are random, so a slope whose "
        "interval excludes 0 is position bias; OLS, cluster-robust by prompt). "
        "length_spearman: Spearman's rho of rating vs response length. self_preference "
        "(when the judge also generated completions): its mean rating of its own minus the "
        "others', which a genuinely better model also shows.",
    ),
    "position_consistency": (
        "Position consistency",
        "How often showing the completions in another order changed a rating.",
    ),
    "shuffle_agreement": (
        "Agreement between shuffles",
        "The judge against itself: Spearman's rho and the exact-match share of the ratings "
        "each completion got in two shuffled orders (raters shuffle_i~shuffle_j), over the "
        "n completions rated in both.",
    ),
    "rating_by_position": (
        "Mean rating by position",
        "Mean rating by the 0-based position a completion was shown at (every shuffle's judgment).",
    ),
    "rating_by_length": (
        "Mean rating by response length",
        "Mean rating per response-length decile (length_low to length_high characters).",
    ),
    "cost_table": (
        "Tokens and estimated cost",
        "Cost uses the configured price per 1k tokens; models without a price count as 0. "
        "Rows of mode batch were answered through a Batch API, at the batch price. Of the "
        "prompt tokens, those a provider's prompt cache served or wrote (cached_prompt_tokens, "
        "cache_write_tokens) are priced as cache_pricing says. Sums of "
        "recorded tokens, not estimates from a sample: no intervals. Rows of stage unseen are "
        "calls sent whose reply was never received (a killed or interrupted run), which may "
        "have been billed: at most their cost, with a reply of max_tokens each.",
    ),
    "pair_drops": (
        "Preference pairs: prompts without a pair",
        "Prompts that yielded no chosen/rejected pair, by reason.",
    ),
}
FIGURE_TITLES = {
    "rating_distribution": "Rating distribution per aspect and model",
    "aspect_heatmap": "Mean rating per model and aspect",
    "score_scatter": "Overall vs fine-grained score",
    "position_bias": "Mean rating by position",
    "model_ranking": "Model ranking with 95% intervals",
    "rating_by_length": "Mean rating by response length",
}
# The column a table's plain ci_low / ci_high bound; `<column>_ci_low` / `_ci_high` bound
# `<column>` in any table.
INTERVAL_OF = {
    "model_aspect_metrics": "mean_rating",
    "source_aspect_metrics": "mean_rating",
    "rating_by_position": "mean_rating",
    "rating_by_length": "estimate",
    "shuffle_agreement": "value",
    "model_ranking": "score",
    "style_coefficients": "coefficient",
    "judge_bias": "estimate",
}
# The tables of the judge's ratings: they carry the caveat of its validation.
RATING_TABLES = (
    "model_aspect_metrics",
    "model_ranking",
    "source_aspect_metrics",
    "model_score_metrics",
)
# Shown in its mean's interval instead, see `with_intervals`.
HIDDEN_COLUMNS = ("std_error",)
EMPTY_POSITION_NOTE = (
    "Not measured: this needs the completions judged in more than one shuffled order."
)


def render_markdown_report(
    tables: Mapping[str, pd.DataFrame],
    figure_paths: Mapping[str, str],
    dataset_versions: Mapping[str, str],
    run_info: Mapping[str, Any],
    omitted_figures: Mapping[str, str] | None = None,
    *,
    judge_validation: Sequence[str] = (),
    caveat: str | None = None,
    viewer: str | None = None,
    confidence: float = 0.95,
) -> str:
    """The report as Markdown text.

    Args:
        tables: Named DataFrames; the keys in `TABLE_SECTIONS` get titles and
            explanations, "preference_pairs" (the `binarize` pairs) or "pair_counts"
            (their counts) is summarised rather than listed, and any other key is rendered
            as a plain table.
        figure_paths: Figure name -> path or URL, used as given in image links.
        dataset_versions: Dataset name -> version (e.g. the Kedro save timestamp) of the
            inputs the report was built from.
        run_info: Free key/values (run id, parameters, date) listed at the top.
        omitted_figures: Figure name -> the sentence saying why it is not shown.
        judge_validation: The judge's validation, one Markdown line per card (or the "not
            validated" line), shown before the headline.
        caveat: The sentence the headline's ranking and the rating tables carry.
        viewer: The judgment viewer's index page (a path or URL, used as given in the
            link).
        confidence: The level of the report's intervals (the position warning's chance
            rate).

    Returns:
        The report's Markdown, ending in a newline.
    """
    sections = ["# llm_feedback report"]
    if run_info:
        sections.append(
            "## Run\n\n"
            + "\n".join(
                f"- **{markdown_text(key)}**: {markdown_text(_cell(value))}"
                for key, value in run_info.items()
            )
        )
    if judge_validation:
        sections.append(
            "## Judge validation\n\n" + "\n".join(f"- {line}" for line in judge_validation)
        )
    headline = _headline(tables)
    if headline:
        warning = position_warning(tables.get("judge_bias"), confidence)
        if warning:
            headline.insert(0, warning)
        if caveat:
            headline.insert(0, caveat)
        sections.append("## Headline\n\n" + "\n".join(f"- {line}" for line in headline))
    if viewer:
        sections.append(
            f"## Judgment viewer\n\n[{markdown_text(viewer)}]({quote(viewer, safe='/:')}): "
            "every prompt with its "
            "completions, ratings, rationales and critiques; open it in a browser."
        )

    known = [name for name in TABLE_SECTIONS if name in tables]
    summarised = ("preference_pairs", "pair_counts")
    others = [name for name in tables if name not in TABLE_SECTIONS and name not in summarised]
    for name in known:
        title, explanation = TABLE_SECTIONS[name]
        if caveat and name in RATING_TABLES:
            explanation = f"{caveat}\n\n{explanation}"
        sections.append(f"## {title}\n\n{explanation}\n\n{_render_known(name, tables[name])}")
    for name in others:
        sections.append(f"## {markdown_text(name)}\n\n{markdown_table(tables[name])}")

    if figure_paths or omitted_figures:
        shown = [
            f"### {FIGURE_TITLES.get(name, name)}\n\n![{FIGURE_TITLES.get(name, name)}]({path})"
            for name, path in figure_paths.items()
        ]
        notes = [
            f"_{FIGURE_TITLES.get(name, name)}: not shown; {reason}_"
            for name, reason in (omitted_figures or {}).items()
        ]
        sections.append("## Figures\n\n" + "\n\n".join(shown + notes))
    sections.append(
        "## Built from\n\n"
        + (
            markdown_table(
                pd.DataFrame(
                    {"dataset": list(dataset_versions), "version": list(dataset_versions.values())}
                )
            )
            if dataset_versions
            else "_No dataset versions were recorded._"
        )
    )
    return "\n\n".join(sections) + "\n"


def describe_run(completions: Table, costs: pd.DataFrame, when: str) -> dict[str, str]:
    """The Run section: date, prompts and completions, who generated and who judged
    (as the data records it). A completions table on disk is counted a record batch at a
    time (its prompts too, when it is in prompt order).

    Args:
        completions: The completions, in memory or on disk.
        costs: The cost table, whose stage, model and endpoint say who generated and
            who judged.
        when: The date shown.

    Returns:
        The section's entries, label -> text.
    """
    rows = failed = 0
    for batch in table_batches(completions, ["prompt_id", "error"]):
        rows += len(batch)
        failed += int(batch["error"].notna().sum()) if "error" in batch else 0
    if isinstance(completions, pd.DataFrame):
        prompts = completions["prompt_id"].nunique()
    elif completions.in_key_order():
        prompts = completions.distinct_count()
    else:
        prompts = len(completions.distinct("prompt_id"))
    info = {
        "date": when,
        "prompts": f"{prompts:,}",
        "completions": f"{rows:,}" + (f" ({failed:,} without a response)" if failed else ""),
    }
    for label, stages in (("generated by", ["generate"]), ("judge", ["annotate", "critique"])):
        rows = costs[costs["stage"].isin(stages)]
        pairs = sorted(
            {
                f"{model} ({endpoint})"
                for model, endpoint in zip(rows["model"], rows["endpoint"], strict=True)
            }
        )
        if pairs:
            info[label] = ", ".join(pairs)
    return info


def markdown_table(frame: pd.DataFrame, max_rows: int = MAX_TABLE_ROWS) -> str:
    """A GitHub-flavoured Markdown table; numeric columns right-aligned, NaN shown as "–",
    rows beyond `max_rows` left out with a note saying how many.

    Args:
        frame: The table.
        max_rows: The most rows shown.

    Returns:
        The Markdown table, or a note when it has no columns or no rows.
    """
    if frame.columns.empty:
        return "_No columns._"
    if frame.empty:
        return "_No rows._"
    shown = frame.head(max_rows).map(lambda value: table_cell_text(_cell(value)))
    shown.columns = [table_cell_text(str(column)) for column in frame.columns]
    alignment = [
        "right"
        if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)
        else "left"
        for dtype in frame.dtypes
    ]
    text = shown.to_markdown(
        index=False, tablefmt="pipe", colalign=alignment, disable_numparse=True
    )
    if len(frame) > max_rows:
        text += f"\n\n_{len(frame) - max_rows} more rows not shown._"
    return text


def _cell(value: Any) -> str:
    if isinstance(value, list | tuple | np.ndarray):
        return ", ".join(_cell(item) for item in value)
    if pd.isna(value):
        return "–"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, numbers.Real):
        return _number(value)
    return str(value)


def _number(value: numbers.Real) -> str:
    if isinstance(value, numbers.Integral):
        return f"{value:,}"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _render_known(name: str, table: pd.DataFrame) -> str:
    if name in {"position_consistency", "shuffle_agreement"} and table.empty:
        return f"_{EMPTY_POSITION_NOTE}_"
    if name == "judge_health" and not table.empty:
        return _judge_health_tables(table)
    return markdown_table(with_intervals(table, INTERVAL_OF.get(name)))


def with_intervals(table: pd.DataFrame, primary: str | None = None) -> pd.DataFrame:
    """`table` for display with each estimate and its interval in one cell, `3.42 [3.31,
    3.55]`: `<column>_ci_low` / `<column>_ci_high` go into `<column>`, plain ci_low /
    ci_high into `primary` (and, mapped to 0-100, into mean_rating_0_100). The bound
    columns and HIDDEN_COLUMNS are dropped; a missing bound shows as "–".

    Args:
        table: The table with interval columns.
        primary: The column the plain ci_low / ci_high belong to, if any.

    Returns:
        The table for display (itself when empty).
    """
    if table.empty:
        return table
    shown = table.copy()
    bounds = {}
    if primary is not None and {"ci_low", "ci_high"} <= set(table.columns):
        bounds[primary] = (table["ci_low"], table["ci_high"])
        if primary == "mean_rating" and "mean_rating_0_100" in table.columns:
            bounds["mean_rating_0_100"] = (to_0_100(table["ci_low"]), to_0_100(table["ci_high"]))
    for column in table.columns:
        if f"{column}_ci_low" in table.columns and f"{column}_ci_high" in table.columns:
            bounds[column] = (table[f"{column}_ci_low"], table[f"{column}_ci_high"])
    for column, (low, high) in bounds.items():
        shown[column] = [
            _interval_cell(value, lo, hi)
            for value, lo, hi in zip(table[column], low, high, strict=True)
        ]
    dropped = [c for c in table.columns if c.endswith(("ci_low", "ci_high"))]
    return shown.drop(columns=[*dropped, *(c for c in HIDDEN_COLUMNS if c in shown.columns)])


def _interval_cell(value: Any, low: Any, high: Any) -> str:
    if pd.isna(value):
        return "–"
    return f"{_cell(value)} [{_cell(low)}, {_cell(high)}]"


def _judge_health_tables(table: pd.DataFrame) -> str:
    """The long (metric, scope, value) table reads best as one row per scope: one table
    for the judge calls, one for the score fix."""
    is_fix = table["metric"].str.startswith("fix_")
    calls, fixes = table[~is_fix], table[is_fix]
    parts = []
    if not calls.empty:
        wide = _wide_with_bounds(calls)
        wide = wide.loc[calls["scope"].unique()].reset_index()
        counts = [
            c
            for c in (
                "rows",
                "parse_errors",
                "call_errors",
                "skipped_too_long",
                "reasks",
                "suspected_injections",
            )
            if c in wide
        ]
        wide[counts] = wide[counts].astype("int64")
        if "modal_score_count" in wide:  # the critiques' only: null for the aspects
            wide["modal_score_count"] = wide["modal_score_count"].astype("Int64")
        parts.append(markdown_table(with_intervals(wide)))
    if not fixes.empty:
        wide = _wide_with_bounds(fixes)
        wide = wide.reindex([a for a in FIX_ACTIONS if a in wide.index]).reset_index()
        wide["fix_count"] = wide["fix_count"].astype("int64")
        wide = with_intervals(wide.rename(columns={"scope": "fix_action"}))
        parts.append("Score fix:\n\n" + markdown_table(wide))
    return "\n\n".join(parts)


def _wide_with_bounds(long: pd.DataFrame) -> pd.DataFrame:
    """(metric, scope, value, ci_low, ci_high) as one row per scope: a column per metric
    and, for metrics with an interval, `<metric>_ci_low` / `<metric>_ci_high`."""
    metrics = list(long["metric"].unique())
    wide = long.pivot(index="scope", columns="metric", values="value").loc[:, metrics]
    if "ci_low" in long.columns:
        with_bounds = long[long["ci_low"].notna()]
        for bound in ("ci_low", "ci_high"):
            found = with_bounds.pivot(index="scope", columns="metric", values=bound)
            wide = wide.join(found.add_suffix(f"_{bound}"))
    wide.columns.name = None
    return wide


def _judgment_shares(health: pd.DataFrame) -> str | None:
    """One line: how many judged rows were read, unreadable, failed or skipped."""
    calls = health[~health["metric"].str.startswith("fix_")]
    totals = calls.groupby("metric")["value"].sum()
    rows = int(totals.get("rows", 0))
    if not rows:
        return None
    parts = {
        "unreadable": int(totals.get("parse_errors", 0)),
        "failed": int(totals.get("call_errors", 0)),
        "skipped as too long": int(totals.get("skipped_too_long", 0)),
    }
    read = rows - sum(parts.values())
    shares = [f"{read:,} read ({read / rows:.1%})"] + [
        f"{count:,} {what} ({count / rows:.1%})" for what, count in parts.items() if count
    ]
    reasks = int(totals.get("reasks", 0))
    return (
        f"Judged rows (aspect ratings and critiques): {rows:,}: {', '.join(shares)}; "
        f"{reasks:,} re-asks."
    )


def _headline(tables: Mapping[str, pd.DataFrame]) -> list[str]:
    lines = []
    health = tables.get("judge_health")
    if health is not None and not health.empty:
        shares = _judgment_shares(health)
        if shares:
            lines.append(shares)
        warning = score_spread_warning(health)
        if warning:
            lines.append(warning)
        counts = health[health["metric"] == "fix_count"].set_index("scope")["value"]
        if counts.sum() > 0:
            lines.append(
                "Score fix: "
                + ", ".join(f"{int(counts.get(action, 0)):,} {action}" for action in FIX_ACTIONS)
                + "."
            )
    lines += _bias_and_ranking_lines(tables)
    costs = tables.get("cost_table")
    if costs is not None and not costs.empty:
        line = f"Estimated cost: {_cell(float(costs['estimated_cost'].sum()))}"
        unpriced = sorted(costs.loc[~costs["priced"], "model"].unique())
        if unpriced:
            names = ", ".join(markdown_text(model) for model in unpriced)
            line += f" (no price for {names}: counted as 0)"
        if "usage_estimated" in costs and costs["usage_estimated"].any():
            estimated = costs.loc[costs["usage_estimated"], "stage"].unique()
            line += (
                f"; tokens estimated where the server sent no usage ({', '.join(estimated)}: "
                "`usage_estimated` in the cost table)"
            )
        lines.append(line + ".")
    pairs, counts = tables.get("preference_pairs"), tables.get("pair_counts")
    found, test = None, None
    if counts is not None and len(counts):
        found = int(counts["pairs"].iloc[0]), int(counts["prompts"].iloc[0])
        if "test_pairs" in counts and counts["test_pairs"].notna().all():
            test = int(counts["test_pairs"].iloc[0]), int(counts["test_prompts"].iloc[0])
    elif pairs is not None:
        found = len(pairs), pairs["prompt_id"].nunique()
        if "split" in pairs:
            tested = pairs[pairs["split"] == "test"]
            test = len(tested), tested["prompt_id"].nunique()
    if found is not None:
        n_pairs, prompts = found
        line = f"Preference pairs: {n_pairs:,} from {prompts:,} prompts"
        if test is not None and n_pairs:
            line += f" (test split: {test[0]:,} pairs from {test[1]:,} prompts)"
        drops = tables.get("pair_drops")
        if drops is not None and drops["n_prompts"].sum() > 0:
            line += "; prompts dropped: " + ", ".join(
                f"{int(n):,} {reason}"
                for reason, n in zip(drops["reason"], drops["n_prompts"], strict=True)
                if n
            )
        lines.append(line + ".")
    return lines


# The share of read critiques giving one overall score above which the headline says the
# score cannot tell completions apart (an embedded judge gave 10 in 22 of 24).
DEGENERATE_SCORE_SHARE = 0.8


def score_spread_warning(health: pd.DataFrame) -> str | None:
    """The headline's callout when the critiques' overall scores barely vary: the share of
    read critiques that gave the most frequent score (`judge_health`'s modal_score_share)
    reaches `DEGENERATE_SCORE_SHARE`.

    Args:
        health: the judge_health table.

    Returns:
        Markdown, or None (scores spread, or none read).
    """
    rows = health[health["scope"] == "critique"].set_index("metric")
    if "modal_score_share" not in rows.index:
        return None
    share = rows.loc["modal_score_share"]
    if pd.isna(share["value"]) or share["value"] < DEGENERATE_SCORE_SHARE:
        return None
    gave = int(rows.loc["modal_score_count", "value"])
    read = round(gave / share["value"])
    score = _cell(float(rows.loc["modal_score", "value"]))
    interval = _interval_cell(share["value"], share.get("ci_low"), share.get("ci_high"))
    return (
        f"**Caveat: the overall scores barely vary**: {gave:,} of {read:,} read critiques "
        f"gave {score} (share {interval}). The overall score, and the ranking and "
        "preference pairs built on it (report.pairs.score: overall), can hardly tell the "
        "completions apart; the aspect ratings (report.pairs.score: mean_aspects) may."
    )


BIAS_HEADLINES = {
    "position_slope": "Position slope (rating points per position further down)",
    "length_spearman": "Rating vs response length (Spearman)",
}


def position_warning(bias: pd.DataFrame | None, confidence: float = 0.95) -> str | None:
    """The headline's warning when the judge's ratings depend on the position a completion
    was shown at: the aspects whose position slope (`judge_bias`: rating points per
    position further down, with its cluster-robust interval) has an interval that excludes
    0, each with its interval; None when no interval does (or none was measured).

    Args:
        bias: the judge_bias table.
        confidence: the intervals' level, for the rate at which an unbiased judge shows
            such an interval on at least one of the aspects measured.

    Returns:
        Markdown, or None.
    """
    if bias is None or bias.empty:
        return None
    rows = bias[(bias["diagnostic"] == "position_slope") & bias["ci_low"].notna()]
    rows = rows[rows["ci_high"].notna()]
    flagged = rows[(rows["ci_low"] > 0) | (rows["ci_high"] < 0)]
    if flagged.empty:
        return None
    shown = ", ".join(
        f"{markdown_text(scope)} {_interval_cell(value, low, high)} "
        f"(shown {'later' if value > 0 else 'earlier'}, rated higher)"
        for scope, value, low, high in zip(
            flagged["scope"],
            flagged["estimate"],
            flagged["ci_low"],
            flagged["ci_high"],
            strict=True,
        )
    )
    chance = 1 - confidence ** len(rows)
    return (
        "**Caveat: the ratings depend on display position**: the judge rated completions "
        "by where they were shown, not only by what they say; the position slope (rating "
        f"points per position further down) excludes 0 for {shown}. Positions are shuffled, "
        "so the bias adds noise rather than favouring a model on average, but each prompt's "
        "ratings and preference pair carry it; more shuffles (annotate.n_shuffles) average "
        f"it down. With {len(rows)} aspect(s) at {confidence:.0%} intervals, an unbiased "
        f"judge shows this on at least one about {chance:.0%} of the time."
    )


def _bias_and_ranking_lines(tables: Mapping[str, pd.DataFrame]) -> list[str]:
    lines = []
    bias = tables.get("judge_bias")
    if bias is not None and not bias.empty:
        for diagnostic, label in BIAS_HEADLINES.items():
            rows = bias[bias["diagnostic"] == diagnostic]
            if not rows.empty:
                values = [
                    f"{markdown_text(scope)} {_interval_cell(value, low, high)}"
                    for scope, value, low, high in zip(
                        rows["scope"],
                        rows["estimate"],
                        rows["ci_low"],
                        rows["ci_high"],
                        strict=True,
                    )
                ]
                lines.append(f"{label}: {', '.join(values)}.")
    ranking = tables.get("model_ranking")
    if ranking is not None and not ranking.empty:
        lines.append(
            _leader_line("Top model (Bradley-Terry)", ranking, "score", "ci_low", "ci_high")
        )
        if "style_controlled_score" in ranking and ranking["style_controlled_score"].notna().any():
            lines.append(
                _leader_line(
                    "Top model with style controlled",
                    ranking,
                    "style_controlled_score",
                    "style_controlled_score_ci_low",
                    "style_controlled_score_ci_high",
                )
            )
    return lines


def _leader_line(label: str, ranking: pd.DataFrame, score: str, low: str, high: str) -> str:
    """The headline's leader: the best-scored model, named only when its interval lies
    wholly above every other model's; else the models whose intervals overlap it."""
    scored = ranking[ranking[score].notna()].sort_values(score, ascending=False)
    if scored.empty:
        return f"{label}: no model could be scored."
    top, others = scored.iloc[0], scored.iloc[1:]
    interval = _interval_cell(top[score], top[low], top[high])
    shown = f"{markdown_text(top['model'])}, score {interval}"
    if others.empty:
        return f"{label}: {shown} (the only model ranked)."
    # A missing bound separates nothing: the comparison is False and the model overlaps.
    overlapping = others[~(others[high] < top[low])]
    if overlapping.empty:
        return f"{label}: {shown}; its interval lies above every other model's."
    overlaps = ", ".join(
        f"{markdown_text(row['model'])} {_interval_cell(row[score], row[low], row[high])}"
        for _, row in overlapping.iterrows()
    )
    if len(overlapping) == len(others):
        return (
            f"{label}: no model can be told apart from the others; the highest, {shown}, "
            f"overlaps the interval of every other model: {overlaps}."
        )
    return (
        f"{label}: no single leader can be told apart; the highest, {shown}, overlaps the "
        f"intervals of {overlaps} (the other models' lie below it)."
    )


def judge_card_section(cards: pd.DataFrame, key: str) -> str:
    """The report's judge card section: the card filed under `key` in judge_validation, or
    the plain statement that this judge has not been validated.

    Args:
        cards: The judge_validation cards.
        key: The judge key the card is filed under.

    Returns:
        The section's Markdown.
    """
    from llm_feedback.validation.card import card_lines  # noqa: PLC0415 - this section kept self-contained

    return "\n## Judge card\n\n" + card_lines(cards, key)
