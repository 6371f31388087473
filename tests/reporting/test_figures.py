import io

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.text import Text

from llm_feedback.reporting import (
    aspect_heatmap_figure,
    model_aspect_metrics,
    model_ranking_figure,
    position_bias_figure,
    rating_distribution_figure,
    score_scatter_figure,
)

from .builders import (
    CALL_ERROR,
    NA,
    Completion,
    build_frames,
    empty_frames,
    on_disk,
    typical_specs,
)

pytestmark = pytest.mark.filterwarnings("error")


def texts(figure: Figure) -> str:
    return "\n".join(text.get_text() for text in figure.findobj(Text))


def png_bytes(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def all_figures(frames) -> dict[str, Figure]:
    table = model_aspect_metrics(frames.aspect_annotations, frames.completions)
    return {
        "rating_distribution": rating_distribution_figure(
            frames.aspect_annotations, frames.completions
        ),
        "aspect_heatmap": aspect_heatmap_figure(table),
        "score_scatter": score_scatter_figure(frames.overall_scores),
        "position_bias": position_bias_figure(frames.aspect_annotations),
    }


def test_figures_of_files_read_in_parts_are_those_of_the_frames(tmp_path):
    """The nodes' path: the tables on disk in prompt order, read a batch or a chunk of
    prompts at a time, draw the very pixels of the tables whole."""
    frames = build_frames(typical_specs(), shuffles=2)
    aspects = on_disk(tmp_path, "aspects", frames.aspect_annotations)
    completions = on_disk(tmp_path, "completions", frames.completions)
    assert png_bytes(rating_distribution_figure(aspects, completions)) == png_bytes(
        rating_distribution_figure(frames.aspect_annotations, frames.completions)
    )
    assert png_bytes(position_bias_figure(aspects)) == png_bytes(
        position_bias_figure(frames.aspect_annotations)
    )
    scores = on_disk(tmp_path, "scores", frames.overall_scores, rows=2)
    assert png_bytes(score_scatter_figure(scores)) == png_bytes(
        score_scatter_figure(frames.overall_scores)
    )


def test_a_large_scatter_draws_a_sample_but_counts_every_point(tmp_path, monkeypatch):
    from llm_feedback.reporting import figures

    n = 3000
    rng = np.random.default_rng(1)
    fine = rng.integers(1, 6, size=n).astype("float64")
    scores = pd.DataFrame(
        {
            "prompt_id": [f"p{i // 4:04d}" for i in range(n)],
            "completion_idx": np.arange(n) % 4,
            "fine_grained_score": fine,
            "overall_score_fixed": 2 * fine,
            "fix_action": np.where(np.arange(n) % 10 == 0, "flipped", "kept"),
        }
    )
    monkeypatch.setattr(figures, "SCATTER_POINTS", 500)
    figure = score_scatter_figure(on_disk(tmp_path, "scores", scores, rows=256))
    drawn = sum(len(c.get_offsets()) for c in figure.axes[0].collections)
    assert 400 < drawn < 600
    title = texts(figure)
    assert f"Pearson r = 1.00, n = {n}, {drawn:,} drawn" in title
    assert "kept (2700)" in title and "flipped (300)" in title
    # The same sample whichever way the table is read.
    again = score_scatter_figure(scores)
    assert png_bytes(again) == png_bytes(figure)


def test_figures_render_real_data_without_touching_pyplot():
    open_before = plt.get_fignums()
    figures = all_figures(build_frames(typical_specs(), shuffles=2))

    assert plt.get_fignums() == open_before  # nothing for the caller to close
    for name, figure in figures.items():
        assert isinstance(figure, Figure), name
        assert png_bytes(figure).startswith(b"\x89PNG"), name
    assert "helpfulness" in texts(figures["rating_distribution"])
    assert "4.67" in texts(figures["aspect_heatmap"])  # alpha's mean helpfulness
    assert "flipped (1)" in texts(figures["score_scatter"])
    assert "Pearson r" in texts(figures["score_scatter"])
    assert "no data" not in "".join(texts(figure) for figure in figures.values())


def test_empty_inputs_render_no_data():
    for name, figure in all_figures(empty_frames()).items():
        assert "no data" in texts(figure), name
        assert png_bytes(figure), name


def test_single_shuffle_still_plots_rating_by_position_with_error_bars():
    # Shown positions are random, so one shuffle measures position bias as well.
    figure = position_bias_figure(build_frames(typical_specs()).aspect_annotations)
    assert "1 shuffle" in texts(figure)
    assert figure.axes[0].containers  # one errorbar container per aspect


def test_heatmap_marks_cells_without_ratings():
    frames = build_frames([Completion("p1", "alpha", {"honesty": NA}), Completion("p1", "beta")])
    table = model_aspect_metrics(frames.aspect_annotations, frames.completions)
    figure = aspect_heatmap_figure(table)
    assert "N/A\n1" in texts(figure)
    assert png_bytes(figure)


def test_heatmap_tells_failed_judgments_from_not_applicable():
    frames = build_frames(
        [
            Completion("p1", "alpha", {"honesty": NA, "truthfulness": CALL_ERROR}),
            Completion("p1", "beta"),
        ]
    )
    table = model_aspect_metrics(frames.aspect_annotations, frames.completions)
    figure = aspect_heatmap_figure(table)
    labels = texts(figure)
    assert "failed\n1" in labels and "N/A\n1" in labels
    hatched = [p for p in figure.axes[0].patches if p.get_hatch() == "xx"]
    assert len(hatched) == 1  # only the failed cell


def test_scatter_without_any_scored_completion_says_no_data():
    frames = build_frames([Completion("p1", "alpha", overall=None)])
    assert "no data" in texts(score_scatter_figure(frames.overall_scores))


def test_the_ranking_figure_shows_raw_and_style_controlled_scores_with_intervals():
    ranking = pd.DataFrame(
        {
            "model": ["a", "b"],
            "score": [1040.0, 960.0],
            "ci_low": [1020.0, 940.0],
            "ci_high": [1060.0, 980.0],
            "baseline": "a",
            "win_rate": [np.nan, 0.4],
            "lc_win_rate": [np.nan, 0.45],
            "style_controlled_score": [1010.0, 990.0],
            "style_controlled_score_ci_low": [990.0, 970.0],
            "style_controlled_score_ci_high": [1030.0, 1010.0],
        }
    )
    figure = model_ranking_figure(ranking, "Ranking")
    axes = figure.axes[0]
    # The legend is the figure's, outside the axes: it never covers a point.
    assert axes.get_legend() is None
    assert [text.get_text() for text in figure.legends[0].get_texts()] == [
        "raw",
        "style-controlled",
    ]
    assert "b\nwin 40%, LC 45% vs a" in [label.get_text() for label in axes.get_yticklabels()]
    bars = [line for line in axes.get_children() if isinstance(line, LineCollection)]
    assert len(bars) == 2  # one set of interval bars per series
    assert png_bytes(figure).startswith(b"\x89PNG")
    assert "no data" in texts(model_ranking_figure(ranking.iloc[:0], "Ranking")).lower()
    # A percentile interval that leaves out its point estimate (few battles) is drawn as it is.
    outside = ranking.assign(style_controlled_score=[1040.0, 1020.0])
    axes = model_ranking_figure(outside, "Ranking").axes[0]
    segments = [
        sorted(tuple(end) for end in segment)
        for bars in axes.get_children()
        if isinstance(bars, LineCollection)
        for segment in bars.get_segments()
    ]
    drawn = sorted(tuple(sorted([round(a[0]), round(b[0])])) for a, b in segments)
    assert drawn == [(940, 980), (970, 1010), (990, 1030), (1020, 1060)]


def test_the_ranking_figure_cuts_a_runaway_interval_at_the_axis_and_says_so():
    ranking = pd.DataFrame(
        {
            "model": ["smollm2", "qwen", "tiny"],
            "score": [1062.0, 1001.0, 937.0],
            "ci_low": [864.9, 700.0, -2704.0],
            "ci_high": [2005.0, 1300.0, 1100.0],
            "baseline": "qwen",
            "win_rate": [0.55, np.nan, 0.4],
            "lc_win_rate": [0.52, np.nan, 0.41],
        }
    )
    figure = model_ranking_figure(ranking, "Ranking")
    axes = figure.axes[0]
    left, right = axes.get_xlim()
    # Every score is on the axis, the runaway bound is not.
    assert left < ranking["score"].min() and right > ranking["score"].max()
    assert left > -2704.0
    widths = ranking["ci_high"] - ranking["ci_low"]
    assert right - left < 2 * (widths.median() + ranking["score"].max() - ranking["score"].min())
    # The cut bound: an arrowhead at the edge and its value written beside it.
    heads = [
        line for line in axes.get_lines() if line.get_marker() == "<" and len(line.get_xdata()) == 1
    ]
    assert len(heads) == 1 and heads[0].get_xdata()[0] == pytest.approx(left)
    assert "-2,704" in texts(figure) and "arrowhead" in axes.get_xlabel()
    segments = [
        segment
        for bars in axes.get_children()
        if isinstance(bars, LineCollection)
        for segment in bars.get_segments()
    ]
    assert all(left <= x <= right for segment in segments for x, _ in segment)
    # Nothing cut: no arrowhead and no note.
    tight = model_ranking_figure(
        ranking.assign(ci_low=[1000.0, 950.0, 900.0], ci_high=[1100.0, 1050.0, 1000.0]), "Ranking"
    )
    assert "arrowhead" not in tight.axes[0].get_xlabel()
    assert "-2,704" not in texts(tight)
    # One model with a zero-width interval still gets an axis of its own.
    alone = model_ranking_figure(ranking.iloc[:1].assign(ci_low=1062.0, ci_high=1062.0), "R")
    low, high = alone.axes[0].get_xlim()
    assert low < 1062.0 < high
