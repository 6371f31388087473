"""Viewer labels matched to an annotate run's ratings (`validation.annotate_labels`), the
judge gate (`validation.gate`) and drift between cards (`validation.card.drifts`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.proportion import proportion_confint

from llm_feedback.params.report import JudgeRequirement, parse_report
from llm_feedback.stats.prediction_powered import weighted_estimate
from llm_feedback.validation.annotate_labels import (
    KAPPA_WEIGHTS,
    RATINGS,
    annotate_card,
    corrected_ratings,
    judged_ratings,
    match_labels,
    repeats_latest,
)
from llm_feedback.validation.card import ARGMAX, add_card, card_lines, drifts
from llm_feedback.validation.formats import read_viewer_labels
from llm_feedback.validation.gate import JudgeRequirementError, check_requirements
from llm_feedback.validation.identity import judge_identity
from llm_feedback.validation.kappa import cohen_kappa
from tests.reporting.builders import Completion, build_frames

IDENTITY = judge_identity("local", "judge-1", "the aspect templates", {"temperature": 0})
N_PROMPTS = 30


def frames_and_labels(tmp_path: Path, flip_every: int = 0, score_offset: float = 0.0):
    """30 prompts, alpha and beta, helpfulness rated so that no two completions tie (the
    other aspects 3); a reviewer scores alpha's helpfulness (+ offset) and compares the
    two on every prompt, against the judge on every `flip_every`-th."""
    specs = []
    for number in range(N_PROMPTS):
        first, second = (5, 2) if number % 3 else (1, 4)
        specs += [
            Completion(f"p{number:02d}", "alpha", {"helpfulness": first}),
            Completion(f"p{number:02d}", "beta", {"helpfulness": second}),
        ]
    frames = build_frames(specs)
    completions = frames.completions.set_index(["prompt_id", "completion_idx"])
    lines = []
    for number in range(N_PROMPTS):
        prompt = f"p{number:02d}"
        a, b = completions.loc[(prompt, 0)], completions.loc[(prompt, 1)]
        alpha_won = number % 3 != 0
        if flip_every and number % flip_every == 0:
            alpha_won = not alpha_won
        lines.append(
            {
                "instance_id": prompt,
                "question": a["instruction"],
                "response_a": a["response"],
                "response_b": b["response"],
                "model_a": "alpha",
                "model_b": "beta",
                "label": "A" if alpha_won else "B",
                "annotator": "rev",
            }
        )
        lines.append(
            {
                "instance_id": prompt,
                "question": a["instruction"],
                "response": a["response"],
                "model": "alpha",
                "gold_score": (5.0 if number % 3 else 1.0) + score_offset,
                "aspect": "helpfulness",
                "annotator": "rev",
            }
        )
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    labels = read_viewer_labels(path)
    ratings = judged_ratings(frames.completions, frames.aspect_annotations)
    return frames, match_labels(labels.pairs, labels.scores, ratings)


def test_labels_match_completions_by_prompt_model_and_text(tmp_path):
    _, match = frames_and_labels(tmp_path)
    assert len(match.scores) == N_PROMPTS and match.pairs["instance_id"].nunique() == N_PROMPTS
    assert match.unmatched == 0 and match.no_aspect == 0
    assert match.n_labels == 2 * N_PROMPTS
    # The judge's value of a pair row is the completion's mean over its aspects.
    alpha = match.pairs[match.pairs["model"] == "alpha"].set_index("prompt_id")["judge"]
    assert alpha["p01"] == pytest.approx((5 + 3 + 3 + 3) / 4)


def test_the_card_has_ratings_and_derived_pairs_with_the_librarys_kappa(tmp_path):
    _, match = frames_and_labels(tmp_path, flip_every=5)
    card = annotate_card(match, IDENTITY, "labels.jsonl", created_at="t1", resamples=100)
    over_all = card[card["category"].isna()].set_index(["verdict_source", "metric"])
    judged = over_all[over_all["kind"] == "judge"]
    # Every fifth choice goes against the judge's ratings.
    assert judged.loc[(ARGMAX, "accuracy"), "value"] == pytest.approx(1 - 6 / N_PROMPTS)
    assert judged.loc[(RATINGS, "exact_agreement"), "value"] == 1.0
    # The ratings' kappa is scikit-learn's, quadratic-weighted, on the ratings as given.
    scores = match.scores
    expected = cohen_kappa_score(
        scores["judge"].astype(int), scores["gold_score"].astype(int), weights="quadratic"
    )
    assert judged.loc[(RATINGS, "cohen_kappa"), "value"] == pytest.approx(expected)
    # No order was shown: no order metric, and the baselines on the same pairs.
    assert not {"positional_agreement", "accuracy_both_orders"} & set(card["metric"])
    assert {"always_first", "always_longer", "random"} <= set(card["judge"])


def test_a_binary_win_rate_gets_tpr_tnr_and_rogan_gladen(tmp_path):
    _, match = frames_and_labels(tmp_path, flip_every=4)
    estimates = corrected_ratings(match, baseline="alpha")
    wins = estimates[estimates["baseline"] == "alpha"].set_index(["metric", "estimator"])
    # beta against alpha: the judge says beta won on every third prompt.
    judge_won = np.array([number % 3 == 0 for number in range(N_PROMPTS)], dtype=float)
    reviewer_won = judge_won.copy()
    flipped = np.arange(N_PROMPTS) % 4 == 0
    reviewer_won[flipped] = 1 - reviewer_won[flipped]
    positives = reviewer_won == 1
    tpr = (judge_won[positives] == 1).mean()
    assert wins.loc[("tpr", "labels_only"), "estimate"] == pytest.approx(tpr)
    low, high = proportion_confint(
        (judge_won[positives] == 1).sum(), positives.sum(), method="wilson"
    )
    assert wins.loc[("tpr", "labels_only"), "ci_low"] == pytest.approx(low)
    assert wins.loc[("tpr", "labels_only"), "ci_high"] == pytest.approx(high)
    tnr = (judge_won[~positives] == 0).mean()
    rogan_gladen = (judge_won.mean() + tnr - 1) / (tpr + tnr - 1)
    assert wins.loc[("win_rate", "rogan_gladen"), "estimate"] == pytest.approx(
        np.clip(rogan_gladen, 0, 1)
    )
    assert wins.loc[("win_rate", "labels_only"), "estimate"] == pytest.approx(reviewer_won.mean())


def test_the_same_figures_again_make_no_new_card_and_a_move_is_a_drift(tmp_path):
    _, match = frames_and_labels(tmp_path)
    first = annotate_card(match, IDENTITY, "set", created_at="2026-12-01", resamples=100)
    again = annotate_card(match, IDENTITY, "set", created_at="2026-12-02", resamples=100)
    assert repeats_latest(first, again)
    _, moved = frames_and_labels(tmp_path, flip_every=2, score_offset=1.0)
    later = annotate_card(moved, IDENTITY, "set", created_at="2026-12-03", resamples=100)
    assert not repeats_latest(first, later)
    cards = add_card(first, later)
    found = {
        (item.source, item.metric)
        for item in drifts(cards, IDENTITY["judge_key"], "set", "2026-12-03")
    }
    assert (ARGMAX, "accuracy") in found and (RATINGS, "exact_agreement") in found
    assert drifts(cards, IDENTITY["judge_key"], "set", "2026-12-01") == []
    text = card_lines(cards, IDENTITY["judge_key"])
    assert "**Drift** (argmax verdicts): accuracy 0.500 [" in text
    assert "lies outside the previous card's interval [1.000, 1.000] (2026-12-01: 1.000)" in text


def test_the_gate_names_the_judge_the_metric_its_bound_and_the_requirement(tmp_path):
    _, match = frames_and_labels(tmp_path, flip_every=2)
    card = annotate_card(match, IDENTITY, "set", created_at="t", resamples=100)
    accuracy = card[(card["metric"] == "accuracy") & card["category"].isna()]
    low = float(accuracy.loc[accuracy["kind"] == "judge", "ci_low"].iloc[0])
    with pytest.raises(JudgeRequirementError) as raised:
        check_requirements(card, IDENTITY, [JudgeRequirement("accuracy", 0.7)])
    message = str(raised.value)
    assert message.startswith(f"judge judge-1 at local (judge key {IDENTITY['judge_key']})")
    assert f"accuracy lower bound {low:.3f} < 0.7" in message
    assert "report.judge_requirement requires accuracy lower bound >= 0.7" in message
    assert "\n" not in message
    met = check_requirements(card, IDENTITY, [JudgeRequirement("within_1_agreement", 0.9)])
    assert met and met[0].startswith("Requirement met: within_1_agreement lower bound >= 0.9")
    with pytest.raises(JudgeRequirementError, match="has no card measuring accuracy"):
        check_requirements(card.iloc[0:0], IDENTITY, [JudgeRequirement("accuracy", 0.7)])
    with pytest.raises(JudgeRequirementError, match="has no card measuring accuracy on other"):
        check_requirements(card, IDENTITY, [JudgeRequirement("accuracy", 0.1, "other")])


def test_the_requirement_parameter_takes_one_or_a_list():
    one = parse_report({"judge_requirement": {"metric": "accuracy", "min_lower_bound": 0.7}})
    assert one.judge_requirement == (JudgeRequirement("accuracy", 0.7),)
    both = parse_report(
        {
            "judge_requirement": [
                {"metric": "cohen_kappa", "min_lower_bound": 0.2},
                {"metric": "accuracy", "min_lower_bound": 0.6, "validation_set": "s"},
            ]
        }
    )
    assert [item.describe() for item in both.judge_requirement] == [
        "cohen_kappa lower bound >= 0.2",
        "accuracy lower bound >= 0.6 on s",
    ]
    assert parse_report({}).judge_requirement == ()
    with pytest.raises(ValueError, match=r"report.judge_requirement\[0\].min_lower_bound"):
        parse_report({"judge_requirement": [{"metric": "accuracy", "min_lower_bound": "x"}]})


def test_labels_of_another_run_match_nothing(tmp_path):
    frames, _ = frames_and_labels(tmp_path)
    labels = read_viewer_labels(tmp_path / "labels.jsonl")
    other = frames.completions.assign(response="another text")
    ratings = judged_ratings(other, frames.aspect_annotations)
    match = match_labels(labels.pairs, labels.scores, ratings)
    assert match.unmatched == 2 * N_PROMPTS
    assert match.n_labels == 0
    assert corrected_ratings(match).empty
    assert annotate_card(match, IDENTITY, "set", created_at="t").empty


def test_labels_the_queue_drew_unequally_are_weighted_by_their_probability(tmp_path):
    frames, _ = frames_and_labels(tmp_path)
    lines = [json.loads(line) for line in (tmp_path / "labels.jsonl").read_text().splitlines()]
    # The queue drew p00-p09 (probability 0.8 when the judge was unsure, else 0.2).
    drawn = {f"p{number:02d}": 0.8 if number % 3 == 0 else 0.2 for number in range(10)}
    queued = [
        line | {"selection": "uncertainty", "selection_probability": drawn[line["instance_id"]]}
        for line in lines
        if line["instance_id"] in drawn
    ]
    path = tmp_path / "queued.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in queued), encoding="utf-8")
    labels = read_viewer_labels(path)
    ratings = judged_ratings(frames.completions, frames.aspect_annotations)
    match = match_labels(labels.pairs, labels.scores, ratings)
    estimates = corrected_ratings(match).set_index(["metric", "estimator"])
    row = estimates.loc[("mean_rating", "prediction_powered")]
    assert row["selection"] == "probability_weighted" and row["n_labels"] == 10
    assert ("mean_rating", "labels_only") not in estimates.index
    # As the estimator computes it from every alpha completion, the drawn ones weighted.
    alpha = ratings[(ratings["model"] == "alpha") & (ratings["aspect"] == "helpfulness")]
    is_drawn = alpha["prompt_id"].isin(list(drawn)).to_numpy()
    expected = weighted_estimate(
        alpha["judge"].to_numpy(),
        np.where(is_drawn, alpha["judge"].to_numpy(), np.nan),
        is_drawn,
        alpha["prompt_id"].map(drawn).fillna(1.0).to_numpy(),
        metric="mean_rating",
    ).iloc[0]
    assert row["estimate"] == pytest.approx(expected["estimate"])
    assert row["ci_low"] == pytest.approx(expected["ci_low"])


def test_the_ratings_kappa_weighs_a_disagreement_by_its_distance():
    judge, reviewer = [1, 2, 3, 4, 2, 3], [2, 3, 4, 5, 2, 3]  # one point strict, or right
    weighted = cohen_kappa(judge, reviewer, weights=KAPPA_WEIGHTS)
    assert weighted == pytest.approx(cohen_kappa_score(judge, reviewer, weights="quadratic"))
    assert weighted > 0.5 > cohen_kappa(judge, reviewer)  # unweighted: exact matches only


def test_win_rates_from_prompts_the_queue_drew_unequally_are_weighted(tmp_path):
    frames, _ = frames_and_labels(tmp_path, flip_every=4)
    lines = [json.loads(line) for line in (tmp_path / "labels.jsonl").read_text().splitlines()]
    # The queue drew p00-p11 (0.9 where the judge was unsure, else 0.3): the reviewer's
    # choices go against the judge on p00, p04 and p08, so the drawn slice over-represents
    # the judge's errors and an unweighted correction would over-correct.
    drawn = {f"p{number:02d}": 0.9 if number % 4 == 0 else 0.3 for number in range(12)}
    queued = [
        line | {"selection": "uncertainty", "selection_probability": drawn[line["instance_id"]]}
        for line in lines
        if line["instance_id"] in drawn and "label" in line
    ]
    path = tmp_path / "queued.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in queued), encoding="utf-8")
    labels = read_viewer_labels(path)
    ratings = judged_ratings(frames.completions, frames.aspect_annotations)
    match = match_labels(labels.pairs, labels.scores, ratings)
    wins = corrected_ratings(match, baseline="alpha")
    wins = wins[wins["model"] == "beta"].set_index(["metric", "estimator"])
    assert set(wins.index) == {("win_rate", "judge"), ("win_rate", "prediction_powered")}
    row = wins.loc[("win_rate", "prediction_powered")]
    assert row["selection"] == "probability_weighted" and row["n_labels"] == 12
    # beta against alpha on every prompt: the judge says beta won on every third, the
    # reviewer the opposite on every fourth; prompts p00-p11 drawn with their probability.
    judge_won = np.array([number % 3 == 0 for number in range(N_PROMPTS)], dtype=float)
    reviewer_won = np.where(np.arange(N_PROMPTS) % 4 == 0, 1 - judge_won, judge_won)
    is_drawn = np.arange(N_PROMPTS) < 12
    probability = np.array([drawn.get(f"p{number:02d}", 1.0) for number in range(N_PROMPTS)])
    expected = weighted_estimate(
        judge_won,
        np.where(is_drawn, reviewer_won, np.nan),
        is_drawn,
        probability,
        metric="win_rate",
    ).iloc[0]
    assert row["estimate"] == pytest.approx(expected["estimate"])
    assert row["ci_low"] == pytest.approx(expected["ci_low"])
    # The unweighted correction from the same slice lands elsewhere.
    uniform = judge_won.mean() + (reviewer_won[is_drawn] - judge_won[is_drawn]).mean()
    assert abs(row["estimate"] - uniform) > 0.01
