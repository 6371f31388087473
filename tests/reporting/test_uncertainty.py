"""Annotate ratings as battles, the model ranking and the judge-bias table."""

from __future__ import annotations

import pandas as pd
import pytest

from llm_feedback.reporting.pairs import completion_scores
from llm_feedback.reporting.uncertainty import (
    Bootstrap,
    annotate_battles,
    judge_bias,
    model_ranking,
    rating_by_length,
)
from llm_feedback.storage.schema import (
    JUDGE_BIAS_COLUMN_TYPES,
    MODEL_RANKING_COLUMN_TYPES,
    STYLE_COEFFICIENTS_COLUMN_TYPES,
)
from tests.reporting.builders import Completion, build_frames

FAST = Bootstrap(n_resamples=50)


def test_battles_are_every_two_usable_completions_of_a_prompt_from_different_models():
    frames = build_frames(
        [
            Completion("p1", "a", overall=9, response="long answer here"),
            Completion("p1", "b", overall=5),
            Completion("p1", "c", overall=9),
            Completion("p1", "a", overall=1),  # same model as the first: no battle between them
            Completion("p2", "a", overall=4),
            Completion("p2", "b", overall=None),  # unscored: left out
            Completion("p2", "c", overall=6, error="timeout", response=None),  # failed
        ]
    )
    scores = completion_scores(frames.overall_scores, frames.aspect_annotations, "overall")
    battles = annotate_battles(frames.completions, scores)
    pairs = {
        (row.model_a, row.model_b, row.outcome)
        for row in battles.itertuples()
        if row.instance == "p1"
    }
    assert pairs == {
        ("a", "b", 1.0),
        ("a", "c", 0.5),  # equal scores: a tie
        ("b", "c", 0.0),
        ("b", "a", 1.0),  # b (5) against a's second completion (1)
        ("c", "a", 1.0),
    }
    assert set(battles["instance"]) == {"p1"}  # p2 has one usable completion
    first = battles[(battles["model_a"] == "a") & (battles["model_b"] == "b")].iloc[0]
    assert (first["length_a"], first["length_b"]) == (
        len("long answer here"),
        len("A helpful answer by b."),  # the builders' default response names its model
    )


def test_model_ranking_has_the_schema_and_the_baseline_row_has_no_win_rate():
    battles = pd.DataFrame(
        {
            "instance": [f"p{i}" for i in range(12)],
            "model_a": ["x", "y", "x", "z"] * 3,
            "model_b": ["y", "z", "z", "x"] * 3,
            "outcome": [1.0, 0.0, 0.5, 0.0, 1.0, 1.0, 0.0, 1.0, 0.5, 0.0, 1.0, 0.0],
            "length_a": [10.0, 20.0, 30.0, 40.0] * 3,
            "length_b": [40.0, 10.0, 20.0, 30.0] * 3,
        }
    )
    ranking, coefficients = model_ranking(battles, "y", FAST)
    assert list(ranking.columns) == list(MODEL_RANKING_COLUMN_TYPES)
    by_model = ranking.set_index("model")
    assert pd.isna(by_model.loc["y", "win_rate"]) and set(ranking["baseline"]) == {"y"}
    # x against y: wins in p0, p4, p8 as A (outcomes 1, 1, 0.5) -> 2.5 / 3
    assert by_model.loc["x", "win_rate"] == pytest.approx(2.5 / 3)
    assert (by_model.loc["x", ["wins", "ties", "losses"]] == [2, 1, 0]).all()
    assert ranking["style_controlled_score"].notna().all()
    # Only lengths are given here: the style control has the length covariate alone.
    assert list(coefficients.columns) == list(STYLE_COEFFICIENTS_COLUMN_TYPES)
    assert list(coefficients["feature"]) == ["length"]
    empty_ranking, empty_coefficients = model_ranking(battles.iloc[:0], None, FAST)
    assert empty_ranking.empty and empty_coefficients.empty


def test_battles_carry_each_answers_markdown_counts_for_style_control():
    markdown = "# Plan\n\n- **one**\n- two\n"
    frames = build_frames(
        [
            Completion("p1", "a", overall=9, response=markdown),
            Completion("p1", "b", overall=5, response="plain"),
        ]
    )
    scores = completion_scores(frames.overall_scores, frames.aspect_annotations, "overall")
    battle = annotate_battles(frames.completions, scores).iloc[0]
    assert battle[["headers_a", "bold_a", "list_items_a"]].tolist() == [1, 1, 2]
    assert battle[["length_a", "headers_b", "bold_b", "list_items_b"]].tolist() == [
        len(markdown),
        0,
        0,
        0,
    ]


def test_judge_bias_reports_self_preference_when_the_judge_generated_completions():
    frames = build_frames(
        [
            Completion(f"p{i}", model, {"helpfulness": rating})
            for i in range(6)
            for model, rating in (("judge-1", 5), ("other", 3 + i % 2))
        ]
    )
    table = judge_bias(frames.aspect_annotations, frames.completions, FAST)
    assert list(table.columns) == list(JUDGE_BIAS_COLUMN_TYPES)
    own = table[table["diagnostic"] == "self_preference"].set_index("scope")
    # helpfulness: own 5, others 3.5 on average; other aspects are 3 for everyone.
    assert own.loc["judge-1 / helpfulness", "estimate"] == pytest.approx(1.5)
    low, high = own.loc["judge-1 / helpfulness", ["ci_low", "ci_high"]]
    assert 1.0 <= low <= 1.5 <= high <= 2.0
    assert {"position_slope", "length_spearman"} <= set(table["diagnostic"])


@pytest.mark.parametrize("table", [judge_bias, rating_by_length])
def test_bias_tables_of_files_walked_a_prompt_at_a_time_are_those_of_the_frames(tmp_path, table):
    from llm_feedback.storage.parquet_source import ParquetSource

    frames = build_frames(
        [
            Completion(f"p{i}", model, {"helpfulness": 1 + (i * 3 + j) % 5, "honesty": 2 + j})
            for i in range(12)
            for j, model in enumerate(("judge-1", "other", "third"))
        ],
        shuffles=2,
    )
    expected = table(frames.aspect_annotations, frames.completions, FAST)
    sources = []
    for name in ("aspect_annotations", "completions"):
        ordered = getattr(frames, name).sort_values(["prompt_id", "completion_idx"])
        ordered.reset_index(drop=True).to_parquet(tmp_path / f"{name}.parquet", row_group_size=5)
        sources.append(ParquetSource(str(tmp_path / f"{name}.parquet"), batch_rows=5))
    # One prompt a chunk: every prompt's rows meet in the walk, not in one frame.
    streamed = table(*sources, FAST, prompts_per_chunk=1)
    pd.testing.assert_frame_equal(streamed, expected, check_exact=False, rtol=1e-9)
    assert streamed["ci_low"].notna().any()
