import re

import numpy as np
import pandas as pd
import pytest

from llm_feedback.reporting import (
    binarize,
    cost_table,
    judge_health,
    markdown_table,
    model_aspect_metrics,
    position_consistency,
    render_markdown_report,
)

from .builders import Completion, build_frames, empty_frames, typical_specs

pytestmark = pytest.mark.filterwarnings("error")

VERSIONS = {"completions": "2026-11-30T10.00.00.000Z", "overall_scores": "2026-11-30T11.00.00.000Z"}


def report_tables(frames) -> dict[str, pd.DataFrame]:
    pairs, dropped = binarize(frames.completions, frames.overall_scores, frames.aspect_annotations)
    return {
        "model_aspect_metrics": model_aspect_metrics(frames.aspect_annotations, frames.completions),
        "judge_health": judge_health(
            frames.aspect_annotations, frames.critiques, frames.overall_scores
        ),
        "position_consistency": position_consistency(frames.aspect_annotations),
        "cost_table": cost_table(
            frames.completions,
            frames.aspect_annotations,
            frames.critiques,
            {"judge-1": {"prompt_per_1k": 0.01, "completion_per_1k": 0.03}},
        ),
        "preference_pairs": pairs,
        "pair_drops": dropped,
    }


def unpadded(markdown: str) -> str:
    """Markdown with tabulate's column padding collapsed: runs of spaces and of dashes."""
    return re.sub(r"-{2,}", "-", re.sub(r" {2,}", " ", markdown))


def test_markdown_table_formats_cells():
    frame = pd.DataFrame(
        {
            "name": ["a|b", "line\nbreak"],
            "count": pd.Series([1200, 3], dtype="int64"),
            "mean": [np.nan, 0.123456],
            "priced": [True, False],
            "types": [["x", "y"], []],
        }
    )
    assert unpadded(markdown_table(frame)).splitlines() == [
        "| name | count | mean | priced | types |",
        "|:-|-:|-:|:-|:-|",
        "| a\\|b | 1,200 | – | yes | x, y |",
        "| line break | 3 | 0.1235 | no | |",
    ]


def test_markdown_table_truncates_long_tables():
    text = markdown_table(pd.DataFrame({"i": range(10)}), max_rows=3)
    assert text.count("\n| ") == 3
    assert "_7 more rows not shown._" in text


def test_markdown_table_of_nothing():
    assert markdown_table(pd.DataFrame({"a": []})) == "_No rows._"


def test_report_has_headline_tables_figures_and_versions():
    tables = report_tables(build_frames(typical_specs()))
    tables["extra_table"] = pd.DataFrame({"k": ["v"]})
    report = render_markdown_report(
        tables,
        {"aspect_heatmap": "figures/aspect_heatmap.png", "custom": "figures/custom.png"},
        VERSIONS,
        {"run_id": "2026-11-30T12.00.00.000Z", "judge": "judge-1"},
    )

    assert report.startswith("# llm_feedback report\n")
    assert "- **judge**: judge-1" in report
    assert (
        "Judged rows (aspect ratings and critiques): 55: 52 read (94.5%), 2 unreadable (3.6%), "
        "1 failed (1.8%); 3 re-asks." in report
    )
    assert (
        "Score fix: 8 kept, 1 reannotated, 0 reannotate_failed, 1 flipped, 1 no_overall_score."
        in report
    )
    assert "no price for alpha, beta, delta, gamma" in report
    pairs = tables["preference_pairs"]
    test = pairs[pairs["split"] == "test"]  # the pairs' own test split, by prompt
    assert (
        f"Preference pairs: 3 from 3 prompts (test split: {len(test)} pairs from "
        f"{test['prompt_id'].nunique()} prompts)." in report
    )
    assert "## Ratings per model and aspect" in report
    # Each mean with its bootstrap interval over the three prompts (ratings 5, 4, 5).
    assert "| alpha | helpfulness | 3 | 0 | 0 | 4.667 [4, 5] | 91.67 [75, 100] |" in unpadded(
        report
    )
    # judge health, one row per scope; rates with Wilson intervals (1 of 11, 1 of 11)
    assert "| truthfulness | 11 | 1 | 0.09091 [0.01623, 0.3774] |" in unpadded(report)
    assert "| flipped | 1 | 0.09091 [0.01623, 0.3774] |" in unpadded(report)
    assert "needs the completions judged in more than one shuffled order" in report
    assert "## extra_table" in report
    assert "![Mean rating per model and aspect](figures/aspect_heatmap.png)" in report
    assert "![custom](figures/custom.png)" in report
    assert "| overall_scores | 2026-11-30T11.00.00.000Z |" in unpadded(report)
    # The report's order: headline before tables before figures before provenance.
    positions = [
        report.index(s) for s in ("## Headline", "## Ratings", "## Figures", "## Built from")
    ]
    assert positions == sorted(positions)


def test_report_from_empty_inputs():
    report = render_markdown_report(report_tables(empty_frames()), {}, {}, {})
    assert "_No rows._" in report
    assert "Preference pairs: 0 from 0 prompts." in report
    assert "_No dataset versions were recorded._" in report
    assert "## Figures" not in report


def test_the_headline_says_when_tokens_were_estimated():
    frames = build_frames(typical_specs())
    critiques = frames.critiques.assign(prompt_tokens=0, completion_tokens=0)
    tables = report_tables(frames)
    tables["cost_table"] = cost_table(
        frames.completions,
        frames.aspect_annotations,
        critiques,
        {"judge-1": {"prompt_per_1k": 0.01, "completion_per_1k": 0.03}},
    )
    report = render_markdown_report(tables, {}, VERSIONS, {"run_id": "r", "judge": "judge-1"})
    assert "tokens estimated where the server sent no usage (critique" in report
    # The estimate is ~3 characters a token of the rebuilt critique prompts; the cost is
    # 4,045 x 0.01 / 1000 + 66 x 0.03 / 1000.
    assert (
        "| critique | judge | judge-1 | online | 4,045 | 0 | 0 | 66 | 0.04243 | yes "
        "| no cache tokens | yes |"
    ) in unpadded(report)


def test_style_control_is_shown_beside_the_raw_ranking_with_its_coefficients():
    ranking = pd.DataFrame(
        {
            "model": ["padded", "good"],
            "score": [1050.0, 950.0],
            "ci_low": [1030.0, 930.0],
            "ci_high": [1070.0, 970.0],
            "rank": [1, 2],
            "style_controlled_score": [940.0, 1060.0],
            "style_controlled_score_ci_low": [915.0, 1035.0],
            "style_controlled_score_ci_high": [965.0, 1085.0],
        }
    )
    coefficients = pd.DataFrame(
        {
            "feature": ["length", "headers"],
            "coefficient": [0.8, np.nan],
            "ci_low": [0.6, np.nan],
            "ci_high": [1.0, np.nan],
            "ci_method": "poisson-bootstrap-1000-cluster-one-step",
        }
    )
    report = unpadded(
        render_markdown_report(
            {"model_ranking": ranking, "style_coefficients": coefficients}, {}, {}, {}
        )
    )
    separated = "its interval lies above every other model's."
    assert f"Top model (Bradley-Terry): padded, score 1,050 [1,030, 1,070]; {separated}" in report
    assert f"Top model with style controlled: good, score 1,060 [1,035, 1,085]; {separated}" in (
        report
    )
    assert "| padded | 1,050 [1,030, 1,070] | 1 | 940 [915, 965] |" in report
    assert "## Style control" in report
    assert "| length | 0.8 [0.6, 1] | poisson-bootstrap-1000-cluster-one-step |" in report
    assert "| headers | – | poisson-bootstrap-1000-cluster-one-step |" in report  # never differed


def ranking_of(intervals: dict[str, tuple[float, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"model": model, "score": score, "ci_low": low, "ci_high": high}
            for model, (score, low, high) in intervals.items()
        ]
    ).assign(rank=lambda frame: frame["score"].rank(ascending=False).astype("int64"))


def headline_of(ranking: pd.DataFrame) -> str:
    report = unpadded(render_markdown_report({"model_ranking": ranking}, {}, {}, {}))
    return report.split("## Headline", 1)[1].split("##", 1)[0]


def test_the_headline_names_a_leader_only_where_the_intervals_separate_it():
    # Every interval overlaps the top one (the embedded judge's run): no leader is named.
    overlapping = headline_of(
        ranking_of(
            {
                "smollm2-t0.1": (1062.0, 864.9, 2005.0),
                "qwen": (1001.0, 700.0, 1300.0),
                "tiny": (937.0, -2704.0, 1100.0),
            }
        )
    )
    assert "Top model (Bradley-Terry): no model can be told apart from the others" in overlapping
    assert "the highest, smollm2-t0.1, score 1,062 [864.9, 2,005]" in overlapping
    assert "qwen 1,001 [700, 1,300], tiny 937 [-2,704, 1,100]." in overlapping
    # Above one model, not another: still no leader, and the overlapping one is named.
    partly = headline_of(
        ranking_of(
            {
                "a": (1100.0, 1050.0, 1150.0),
                "b": (1060.0, 1000.0, 1120.0),
                "c": (800.0, 700.0, 900.0),
            }
        )
    )
    assert "no single leader can be told apart; the highest, a, score 1,100 [1,050, 1,150]" in (
        partly
    )
    assert "overlaps the intervals of b 1,060 [1,000, 1,120] (the other models' lie below it)" in (
        partly
    )
    assert " c " not in partly
    # Separated from every other model: named.
    clear = headline_of(ranking_of({"a": (1100.0, 1050.0, 1150.0), "c": (800.0, 700.0, 900.0)}))
    assert "Top model (Bradley-Terry): a, score 1,100 [1,050, 1,150]; its interval lies above" in (
        clear
    )
    # A missing bound separates nothing.
    unbounded = headline_of(
        ranking_of({"a": (1100.0, 1050.0, 1150.0), "c": (800.0, np.nan, np.nan)})
    )
    assert "no model can be told apart from the others" in unbounded and "c 800 [–, –]" in unbounded
    alone = headline_of(ranking_of({"a": (1000.0, 1000.0, 1000.0)}))
    assert "Top model (Bradley-Terry): a, score 1,000 [1,000, 1,000] (the only model ranked)." in (
        alone
    )


def test_the_run_section_counts_a_completions_file_in_batches_as_the_frame(tmp_path):
    from llm_feedback.reporting import describe_run
    from llm_feedback.storage.parquet_source import ParquetSource

    from .builders import on_disk

    frames = build_frames(typical_specs())
    costs = pd.DataFrame(columns=["stage", "model", "endpoint"])
    expected = describe_run(frames.completions, costs, "today")
    assert expected["prompts"] == "3" and expected["completions"] == "12 (1 without a response)"
    assert describe_run(on_disk(tmp_path, "completions", frames.completions), costs, "today") == (
        expected
    )
    unordered = tmp_path / "unordered.parquet"
    frames.completions.iloc[::-1].to_parquet(unordered, row_group_size=2)
    assert describe_run(ParquetSource(str(unordered), batch_rows=2), costs, "today") == expected


def test_the_headline_calls_out_overall_scores_that_barely_vary():
    """22 of 24 critiques gave 10 (as the embedded judge's did): the headline says the
    overall score cannot tell the completions apart; typical_specs' spread scores do not."""
    specs = [
        Completion(f"p{prompt}", model, overall=7 if prompt == 0 and model in "ab" else 10)
        for prompt in range(6)
        for model in "abcd"
    ]
    report = render_markdown_report(report_tables(build_frames(specs)), {}, {}, {})
    headline = report.split("## Headline")[1].split("\n## ")[0]
    assert "**Caveat: the overall scores barely vary**: 22 of 24 read critiques gave 10" in (
        headline
    )
    assert "share 0.9167 [" in headline
    assert "report.pairs.score: mean_aspects" in headline

    spread = render_markdown_report(report_tables(build_frames(typical_specs())), {}, {}, {})
    assert "barely vary" not in spread
