import pandas as pd
import pytest

from llm_feedback.annotation import (
    FIX_ACTIONS,
    apply_reannotated_scores,
    collect_scores,
    fine_grained_scores,
    fix_counts,
    pending_reannotation,
    plan_score_fix,
)
from llm_feedback.core.errors import ConfigError, InputError


def overall_scores(rows: list[tuple[float | None, float | None]]) -> pd.DataFrame:
    """(fine_grained_score, overall_score_original) per completion of prompt "p"."""
    return pd.DataFrame(
        {
            "prompt_id": ["p"] * len(rows),
            "completion_idx": range(len(rows)),
            "model": ["m"] * len(rows),
            "fine_grained_score": pd.array([fine for fine, _ in rows], dtype="Float64"),
            "overall_score_original": pd.array([overall for _, overall in rows], dtype="Float64"),
        }
    )


@pytest.mark.parametrize(
    ("fine", "overall", "action", "fixed"),
    [
        (1.0, 10.0, "flipped", 1.0),
        (2.0, 10.0, "flipped", 1.0),
        (2.01, 10.0, "reannotate", None),
        (4.0, 10.0, "reannotate", None),
        (4.01, 10.0, "kept", 10.0),
        (5.0, 10.0, "kept", 10.0),
        (1.0, 9.0, "kept", 9.0),
        (2.0, 9.5, "kept", 9.5),
        (3.0, None, "no_overall_score", None),
        (None, 10.0, "kept", 10.0),
    ],
)
def test_fix_rule_boundaries(fine, overall, action, fixed) -> None:
    plan = plan_score_fix(overall_scores([(fine, overall)]))
    row = plan.iloc[0]
    assert row["fix_action"] == action
    assert (None if pd.isna(row["overall_score_fixed"]) else row["overall_score_fixed"]) == fixed
    assert row["no_fine_grained"] == (fine is None)
    original = row["overall_score_original"]
    assert pd.isna(original) if overall is None else original == overall


def test_custom_thresholds_and_validation() -> None:
    plan = plan_score_fix(overall_scores([(3.0, 10.0), (3.5, 10.0)]), 3.0, 3.0)
    assert plan["fix_action"].tolist() == ["flipped", "kept"]
    for flip, reannotate in [(3, 2), (0, 4), (2, 6), (0.5, 0.5)]:
        with pytest.raises(ConfigError):
            plan_score_fix(overall_scores([(3.0, 10.0)]), flip, reannotate)


def test_reannotation_round() -> None:
    plan = plan_score_fix(overall_scores([(3.0, 10.0), (1.0, 10.0), (4.0, 10.0), (5.0, 8.0)]))
    assert pending_reannotation(plan) == [("p", 0), ("p", 2)]
    done = apply_reannotated_scores(plan, {("p", 0): 6.0, ("p", 2): None, ("q", 9): 3.0})
    assert done["fix_action"].tolist() == ["reannotated", "flipped", "reannotate_failed", "kept"]
    assert done["overall_score_fixed"].tolist() == [6.0, 1.0, pd.NA, 8.0]
    assert done["overall_score_original"].tolist() == [10.0, 10.0, 10.0, 8.0]
    with pytest.raises(InputError):
        apply_reannotated_scores(plan, {("p", 0): 6.0})
    with pytest.raises(InputError):
        apply_reannotated_scores(plan, {("p", 0): 6.0, ("p", 2): 11.0})


def test_fix_counts() -> None:
    plan = plan_score_fix(overall_scores([(3.0, 10.0), (1.0, 10.0), (None, 10.0), (5.0, None)]))
    counts = fix_counts(plan)
    assert set(FIX_ACTIONS) <= set(counts)
    assert (counts["reannotate"], counts["flipped"], counts["kept"]) == (1, 1, 1)
    assert (counts["no_overall_score"], counts["no_fine_grained"], counts["total"]) == (1, 1, 4)
    done = apply_reannotated_scores(plan, {("p", 0): 7.0})
    assert fix_counts(done)["reannotated"] == 1 and fix_counts(done)["reannotate"] == 0


def aspect_rows() -> pd.DataFrame:
    rows = [
        # completion 0: two shuffles, one N/A and one parse failure that must not count
        ("p", 0, "honesty", 0, None, True, "na"),
        ("p", 0, "helpfulness", 0, 2.0, False, "ok"),
        ("p", 0, "helpfulness", 1, 4.0, False, "ok"),
        ("p", 0, "truthfulness", 0, None, False, "no_match"),
        # completion 1: nothing usable
        ("p", 1, "honesty", 0, None, True, "na"),
        ("p", 1, "helpfulness", 0, None, False, "call_failed"),
        ("p", 2, "harmlessness", 0, 1.0, False, "ok"),
        ("p", 2, "helpfulness", 0, 5.0, False, "ok"),
    ]
    frame = pd.DataFrame(
        rows,
        columns=[
            "prompt_id",
            "completion_idx",
            "aspect",
            "shuffle_idx",
            "rating",
            "is_na",
            "parse_status",
        ],
    )
    return frame.astype({"rating": "Float64"})


def test_fine_grained_mean_skips_na_and_failures() -> None:
    scores = fine_grained_scores(aspect_rows())
    assert scores["fine_grained_score"].tolist() == [3.0, pd.NA, 3.0]
    only = fine_grained_scores(aspect_rows(), aspects=["helpfulness"])
    assert only["fine_grained_score"].tolist() == [3.0, pd.NA, 5.0]


def test_collect_scores_joins_everything_per_completion() -> None:
    completions = pd.DataFrame(
        {"prompt_id": ["p"] * 4, "completion_idx": [0, 1, 2, 3], "model": list("abcd")}
    )
    critiques = pd.DataFrame(
        {
            "prompt_id": ["p"] * 3,
            "completion_idx": [0, 1, 2],
            "overall_score": pd.array([10.0, 10.0, None], dtype="Float64"),
        }
    )
    collected = collect_scores(completions, aspect_rows(), critiques)
    assert collected["model"].tolist() == list("abcd")
    assert collected["fine_grained_score"].tolist() == [3.0, pd.NA, 3.0, pd.NA]
    assert collected["overall_score_original"].tolist() == [10.0, 10.0, pd.NA, pd.NA]
    plan = plan_score_fix(collected)
    assert plan["fix_action"].tolist() == ["reannotate", "kept", "no_overall_score"] + [
        "no_overall_score"
    ]
    assert plan["no_fine_grained"].tolist() == [False, True, False, True]
    with pytest.raises(InputError, match="critiques"):
        collect_scores(completions, aspect_rows(), pd.concat([critiques, critiques]))
    with pytest.raises(InputError, match="overall_score"):
        collect_scores(completions, aspect_rows(), critiques.drop(columns="overall_score"))
