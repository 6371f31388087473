"""Viewer labels on an annotate run (`report.labels.path`) in the report pipeline: the
annotate judge's card under its own identity, the corrected mean ratings beside the
judge's, drift against the previous card, and the judge gate stopping `kedro run` before
the report."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import KEDRO_CLI_ENV, PROJECT_ROOT, kedro_cli
from tests.pipelines.test_report_judge_card import JUDGE_1, annotate_identity, first_screen
from tests.pipelines.test_report_pipeline import (  # noqa: F401 - the report's fixtures
    RunReport,
    data_root,
    report_path,
    run_report,
    seed,
)
from tests.reporting.builders import ASPECTS, Completion, Frames, build_frames

MODELS = ("alpha", "beta", "gamma")
PROMPTS = 24
LABELLED = 8  # prompts whose completions get labels


def rated_frames() -> Frames:
    """24 prompts x 3 models, every aspect rated 1-5 at random (seeded)."""
    draw = random.Random(7)
    return build_frames(
        [
            Completion(f"p{number:02d}", model, {aspect: draw.randint(1, 5) for aspect in ASPECTS})
            for number in range(PROMPTS)
            for model in MODELS
        ],
        shuffles=2,
    )


def viewer_lines(frames: Frames, offset: float, reviewer: str = "rev-1") -> list[dict]:
    """The lines the viewer downloads when `reviewer` scores every completion of the first
    LABELLED prompts on helpfulness (the judge's rating + `offset`) and picks, in each,
    the one of the first two completions the judge rated higher over all aspects."""
    completions = frames.completions.set_index(["prompt_id", "completion_idx"])
    ratings = frames.aspect_annotations
    helpful = (
        ratings[ratings["aspect"] == "helpfulness"]
        .groupby(["prompt_id", "completion_idx"])["rating"]
        .mean()
    )
    overall = ratings.groupby(["prompt_id", "completion_idx"])["rating"].mean()
    lines = []
    for number in range(LABELLED):
        prompt = f"p{number:02d}"
        for idx in range(len(MODELS)):
            row = completions.loc[(prompt, idx)]
            lines.append(
                {
                    "instance_id": prompt,
                    "question": row["instruction"],
                    "response": row["response"],
                    "model": row["model"],
                    "gold_score": float(helpful[(prompt, idx)]) + offset,
                    "aspect": "helpfulness",
                    "annotator": reviewer,
                }
            )
        a, b = completions.loc[(prompt, 0)], completions.loc[(prompt, 1)]
        first, second = overall[(prompt, 0)], overall[(prompt, 1)]
        lines.append(
            {
                "instance_id": prompt,
                "question": a["instruction"],
                "response_a": a["response"],
                "response_b": b["response"],
                "model_a": a["model"],
                "model_b": b["model"],
                "label": "A" if first > second else "B" if first < second else "tie",
                "annotator": reviewer,
            }
        )
    return lines


def write_labels(path: Path, lines: list[dict]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return str(path)


def with_labels(path: str, **report) -> dict:
    return {**JUDGE_1, "report": {"labels": {"path": path}, **report}}


def test_labels_validate_the_annotate_judge_and_correct_its_ratings(
    run_report: RunReport,  # noqa: F811 - fixtures
    data_root: Path,  # noqa: F811 - fixtures
    tmp_path: Path,
):
    frames = rated_frames()
    # The reviewer scores one higher than the judge everywhere: the judge is too strict.
    labels = write_labels(tmp_path / "review" / "labels.jsonl", viewer_lines(frames, 1.0))
    catalog = run_report(frames, with_labels(labels), annotated_with=JUDGE_1)
    text = report_path(data_root).read_text()

    # The card is the annotate judge's, under its own key, and the report shows it.
    key = annotate_identity(data_root)["judge_key"]
    cards = catalog.load("annotate_judge_validation")
    assert set(cards["judge_key"]) == {key}
    assert set(cards["validation_set"]) == {"review/labels.jsonl"}
    card = text.split("## Judge card", 1)[1]
    assert "has not been validated" not in card
    assert "| judge (argmax) | judge (ratings) | always_first |" in card
    assert "| exact_agreement |  | 0.000 [0.000, 0.000] |" in card
    assert "| within_1_agreement |  | 1.000 [1.000, 1.000] |" in card
    assert "| mean_difference |  | -1.000 [-1.000, -1.000] |" in card
    # One point strict everywhere is not an inverted judge (its kappa weighs by distance).
    assert "verdicts are inverted" not in card
    # The pairs derived from the ratings are the reviewer's choices, tie for tie.
    assert "| accuracy | 1.000 [1.000, 1.000] |" in card
    assert "Validated on `review/labels.jsonl` (this prompt and task)" in first_screen(data_root)

    # Corrected figures: per model on helpfulness, named apart, with the labels counted.
    estimates = catalog.load("corrected_ratings")
    assert set(estimates["model"]) == set(MODELS)
    assert set(estimates.loc[estimates["metric"] == "mean_rating", "aspect"]) == {"helpfulness"}
    ratings = frames.aspect_annotations.merge(
        frames.completions[["prompt_id", "completion_idx", "model"]]
    )
    ratings = ratings[ratings["aspect"] == "helpfulness"]
    section = text.split("## Corrected by human labels", 1)[1].split("\n## ")[0]
    for model in MODELS:
        rows = estimates[
            (estimates["model"] == model) & (estimates["metric"] == "mean_rating")
        ].set_index("estimator")
        judge_mean = ratings.loc[ratings["model"] == model, "rating"].astype(float).mean()
        assert rows.loc["judge", "estimate"] == pytest.approx(judge_mean)
        assert rows.loc["prediction_powered", "n_labels"] == LABELLED
        assert rows.loc["prediction_powered", "n_judged"] == PROMPTS
        # The labels say one point more than the judge: the correction moves up, past the
        # judge-only interval, which covers sampling noise only.
        assert rows.loc["prediction_powered", "estimate"] > rows.loc["judge", "ci_high"]
        powered = rows.loc["prediction_powered"]
        assert (
            f"| {model} | helpfulness | {rows.loc['judge', 'estimate']:.2f} "
            f"[{rows.loc['judge', 'ci_low']:.2f}, {rows.loc['judge', 'ci_high']:.2f}] | "
            f"{powered['estimate']:.2f} [{powered['ci_low']:.2f}, {powered['ci_high']:.2f}] |"
        ) in section
    assert section.split("Win rate")[0].count(f"| {LABELLED} | {PROMPTS} |") == len(MODELS)

    # The reviewers compared alpha (the baseline: first by name) and beta on the labelled
    # prompts, as the judge's ratings did: beta's win rate on them is the judge's.
    wins = estimates[estimates["metric"] == "win_rate"]
    assert set(wins["model"]) == {"beta"} and set(wins["baseline"]) == {"alpha"}
    rows = wins.set_index("estimator")
    assert rows.loc["prediction_powered", "n_labels"] == LABELLED
    assert rows.loc["judge", "n_judged"] == PROMPTS
    overall = frames.aspect_annotations.groupby(["prompt_id", "completion_idx"])["rating"].mean()
    labelled = [f"p{number:02d}" for number in range(LABELLED)]
    won = [0.5 + 0.5 * np.sign(overall[(p, 1)] - overall[(p, 0)]) for p in labelled]
    assert rows.loc["labels_only", "estimate"] == pytest.approx(np.mean(won))
    assert "| beta | alpha | " in section


def test_a_card_that_moved_beyond_the_previous_interval_is_flagged(
    run_report: RunReport,  # noqa: F811 - fixtures
    data_root: Path,  # noqa: F811 - fixtures
    tmp_path: Path,
):
    frames = rated_frames()
    path = tmp_path / "review" / "labels.jsonl"
    labels = write_labels(path, viewer_lines(frames, 1.0))
    run_report(frames, with_labels(labels), annotated_with=JUDGE_1)
    # The same labels again: the same figures, no new card.
    catalog = run_report(runtime_params=with_labels(labels))
    assert catalog.load("annotate_judge_validation")["created_at"].nunique() == 1
    assert "Drift" not in report_path(data_root).read_text()

    # Later reviewers agree with the judge exactly: its figures move beyond the old card's.
    write_labels(path, viewer_lines(frames, 0.0))
    catalog = run_report(runtime_params=with_labels(labels))
    assert catalog.load("annotate_judge_validation")["created_at"].nunique() == 2
    text = report_path(data_root).read_text()
    card = text.split("## Judge card", 1)[1]
    assert (
        "**Drift** (ratings verdicts): exact_agreement 1.000 [1.000, 1.000] lies outside the "
        "previous card's interval [0.000, 0.000]"
    ) in card
    assert "Earlier runs on this set, kept in judge_validation" in card
    assert "drifted: exact_agreement, mean_difference" in first_screen(data_root)


def test_no_labels_changes_nothing(
    run_report: RunReport,  # noqa: F811 - fixtures
    data_root: Path,  # noqa: F811 - fixtures
):
    catalog = run_report(rated_frames(), annotated_with=JUDGE_1)
    text = report_path(data_root).read_text()
    assert "## Corrected by human labels" not in text
    assert "This judge has not been validated" in text.split("## Judge card", 1)[1]
    assert catalog.load("corrected_ratings").empty
    assert catalog.load("annotate_judge_validation").empty


def _gate_run(root: Path, *params: str) -> subprocess.CompletedProcess:
    command = kedro_cli(
        root,
        "http://127.0.0.1:9",  # never called: the report calls no model
        "endpoints.local.model=judge-1",
        "report.intervals.n_resamples=50",
        *params,
    )
    return subprocess.run(
        [*command, "--pipelines", "report"],
        check=False,  # the exit status is what is tested
        cwd=PROJECT_ROOT,
        env=KEDRO_CLI_ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _error_lines(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("error:")]


def test_the_judge_gate_stops_kedro_run_before_the_report(
    seed,  # noqa: F811 - fixtures
    data_root: Path,  # noqa: F811 - fixtures
    tmp_path: Path,
):
    frames = rated_frames()
    seed(frames, JUDGE_1)
    # Reviewers who chose the other completion of every pair: accuracy 0 on the pairs.
    lines = viewer_lines(frames, 0.0)
    for line in lines:
        if "label" in line:
            line["label"] = {"A": "B", "B": "A", "tie": "A"}[line["label"]]
    labels = write_labels(tmp_path / "review" / "labels.jsonl", lines)

    # No card measures this judge yet: a requirement stops the run.
    done = _gate_run(
        data_root,
        "report.judge_requirement.metric=accuracy",
        "report.judge_requirement.min_lower_bound=0.7",
    )
    assert done.returncode == 1, done.stderr
    (line,) = _error_lines(done)
    assert "judge judge-1 at local" in line and "has no card measuring accuracy" in line
    assert "report.judge_requirement requires accuracy lower bound >= 0.7" in line
    assert not report_path(data_root).exists()

    # The labels make a card, whose accuracy falls short.
    done = _gate_run(
        data_root,
        f"report.labels.path={labels}",
        "report.judge_requirement.metric=accuracy",
        "report.judge_requirement.min_lower_bound=0.7",
    )
    assert done.returncode == 1, done.stderr
    (line,) = _error_lines(done)
    assert "judge judge-1 at local (judge key " in line
    assert "falls short: accuracy lower bound 0.000 < 0.7" in line
    assert "report.judge_requirement requires accuracy lower bound >= 0.7" in line
    assert not report_path(data_root).exists()

    # The ratings' within-1 agreement meets its requirement: the report is written.
    done = _gate_run(
        data_root,
        f"report.labels.path={labels}",
        "report.judge_requirement.metric=within_1_agreement",
        "report.judge_requirement.min_lower_bound=0.9",
    )
    assert done.returncode == 0, done.stderr
    text = report_path(data_root).read_text()
    assert "Requirement met: within_1_agreement lower bound >= 0.9 (within_1_agreement " in text


def test_labels_of_another_run_are_counted_not_matched(
    run_report: RunReport,  # noqa: F811 - fixtures
    data_root: Path,  # noqa: F811 - fixtures
    tmp_path: Path,
):
    frames = rated_frames()
    lines = viewer_lines(frames, 1.0)
    for line in lines:
        if line["instance_id"] == "p00":
            line["instance_id"] = "another-run"
    # An overall score (no aspect): not a figure of the annotate judge's.
    lines.append({k: v for k, v in lines[-2].items() if k != "aspect"} | {"gold_score": 2.0})
    labels = write_labels(tmp_path / "labels.jsonl", lines)
    catalog = run_report(frames, with_labels(labels), annotated_with=JUDGE_1)
    estimates = catalog.load("corrected_ratings")
    assert set(estimates["labels_unmatched"]) == {len(MODELS) + 1}  # 3 scores and a pair
    assert set(estimates["labels_without_aspect"]) == {1}
    assert (estimates.loc[estimates["estimator"] == "labels_only", "n_labels"] == 7).all()
    section = report_path(data_root).read_text().split("## Corrected by human labels", 1)[1]
    assert "4 labels name no completion of this run and are left out" in section
    assert "1 scores without an aspect are left out" in section


def test_labels_on_ratings_whose_judge_is_not_recorded_are_refused(
    run_report: RunReport,  # noqa: F811 - fixtures
    data_root: Path,  # noqa: F811 - fixtures
    tmp_path: Path,
):
    """Without the ratings' run record the labels' card could be filed under no judge: the
    configured one (judge-1 here) is not taken for it."""
    from llm_feedback.core.errors import InputError

    frames = rated_frames()
    labels = write_labels(tmp_path / "labels.jsonl", viewer_lines(frames, 1.0))
    with pytest.raises(InputError, match="the judge that rated aspect_annotations .* not recorded"):
        run_report(frames, with_labels(labels))
    assert not report_path(data_root).exists()
