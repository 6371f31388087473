"""`evaluate.judge_requirement`: `kedro run --pipelines evaluate` with a judge (the
project's test server) whose card falls short, or who has none, exits 1 with one `error:`
line naming the judge, the metric, its bound and the requirement, before eval_metrics and
the ranking are written; the card that measured it is kept. A judge whose card meets it
runs to the end, and its card says so."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from llm_feedback.core.errors import ConfigError
from llm_feedback.params.evaluate import parse_evaluate
from llm_feedback.testing.server import FakeLLMServer, RequestContext
from tests.conftest import KEDRO_CLI_ENV, PROJECT_ROOT, kedro_cli
from tests.pipelines.test_evaluate_judge_validation import always_first, shown

ITEMS = 12
REQUIREMENT = (
    "evaluate.judge_requirement.metric=accuracy",
    "evaluate.judge_requirement.min_lower_bound=0.7",
)
WANTED = "evaluate.judge_requirement requires accuracy lower bound >= 0.7"


def write_pairs(path: Path, gold: bool) -> Path:
    """ITEMS pairs of models `good` and `bad`, the good response first on even items: with
    `gold`, as our pairs with a label naming the good one; without, as eval_samples rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for number in range(ITEMS):
        good, bad = f"good answer {number}", f"bad answer {number}"
        order = [("good", good), ("bad", bad)][:: 1 if number % 2 == 0 else -1]
        item, question = f"item-{number:02d}", f"Question {number}?"
        if gold:
            (model_a, first), (model_b, second) = order
            rows.append(
                {
                    "instance_id": item,
                    "question": question,
                    "response_a": first,
                    "response_b": second,
                    "label": "A" if model_a == "good" else "B",
                }
            )
        else:
            rows += [
                {"instance_id": item, "question": question, "model": model, "response": text}
                for model, text in order
            ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def picks_the_good_one(body: dict[str, Any], ctx: RequestContext) -> str:
    _, first, _ = shown(body["messages"][-1]["content"])
    return f"This one.\nVerdict: [[{'A' if first.startswith('good') else 'B'}]]"


def evaluate(
    root: Path, samples: Path, responder: Any, *params: str
) -> subprocess.CompletedProcess:
    with FakeLLMServer(responder=responder) as server:
        command = kedro_cli(
            root,
            server.base_url,
            "endpoints.local.structured_output=false",
            f"eval_samples_path={samples}",
            "evaluate.mode=pairwise",
            "evaluate.intervals.n_resamples=200",
            *params,
        )
        return subprocess.run(
            [*command, "--pipelines", "evaluate"],
            check=False,  # the exit status is what is tested
            cwd=PROJECT_ROOT,
            env=KEDRO_CLI_ENV,
            capture_output=True,
            text=True,
            timeout=600,
        )


def error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 1, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    return line


def reporting(root: Path, name: str) -> Path:
    return root / "08_reporting" / name


def test_the_judge_gate_stops_kedro_run_before_eval_metrics(tmp_path: Path):
    root = tmp_path / "data"
    gold = write_pairs(tmp_path / "gold" / "pairs.jsonl", gold=True)
    unlabelled = write_pairs(tmp_path / "unlabelled.jsonl", gold=False)

    # Samples without gold and no earlier card: the judge has none to meet it with.
    line = error_line(evaluate(root, unlabelled, always_first, *REQUIREMENT))
    assert "judge fake at local (judge key " in line
    assert "has no card measuring accuracy" in line and WANTED in line
    assert not reporting(root, "eval_metrics.parquet").exists()
    assert not reporting(root, "eval_model_ranking.parquet").exists()

    # Gold-labelled samples and a judge that always picks the first shown: accuracy 0.5.
    line = error_line(evaluate(root, gold, always_first, *REQUIREMENT))
    assert "judge fake at local (judge key " in line
    assert (
        "falls short: accuracy lower bound " in line and " < 0.7, accuracy (argmax) 0.500" in line
    )
    assert "on gold/pairs.jsonl" in line and WANTED in line
    assert not reporting(root, "eval_metrics.parquet").exists()
    assert not reporting(root, "eval_model_ranking.parquet").exists()
    assert reporting(root, "judge_validation.parquet").is_dir()  # the card is kept
    card = reporting(root, "eval_judge_card.md").read_text()
    assert "Requirement not met (eval_metrics and the ranking are not written)" in card

    # The same judge (same key) right on every pair: its new card meets the requirement.
    done = evaluate(root, gold, picks_the_good_one, *REQUIREMENT, "evaluate.overwrite_results=true")
    assert done.returncode == 0, done.stderr
    assert reporting(root, "eval_metrics.parquet").is_dir()
    assert reporting(root, "eval_model_ranking.parquet").is_dir()
    card = reporting(root, "eval_judge_card.md").read_text()
    assert "Requirement met: accuracy lower bound >= 0.7 (accuracy (argmax) 1.000" in card


def test_a_requirement_is_checked_before_any_call():
    endpoints = {"local": {"backend": "openai", "model": "m", "base_url": "http://x/v1"}}
    with pytest.raises(ConfigError, match=r"evaluate.judge_requirement.metric: 'acuracy'"):
        parse_evaluate(
            {"judge_requirement": {"metric": "acuracy", "min_lower_bound": 0.7}}, endpoints
        )
    panel = {
        "judges": [{"endpoint": "local"}, {"endpoint": "local", "name": "warm", "temperature": 0.7}]
    }
    with pytest.raises(ConfigError, match="a panel of judges has no single judge's card"):
        parse_evaluate(
            {
                "judge": None,
                "panel": {**panel, "aggregate": "majority"},
                "judge_requirement": [{"metric": "accuracy", "min_lower_bound": 0.7}],
            },
            endpoints,
        )
    both = parse_evaluate(
        {"judge_requirement": [{"metric": "accuracy", "min_lower_bound": 0.6}]}, endpoints
    )
    assert [item.describe() for item in both.judge_requirement] == ["accuracy lower bound >= 0.6"]
    assert parse_evaluate({}, endpoints).judge_requirement == ()


def test_the_gate_takes_tpr_and_tnr_wilson_lower_bounds(tmp_path: Path):
    """A binary judge gated on its true positive rate ("A is better" the positive): the
    judge that always picks the first shown is right on half the calls of every item, and
    stops the run; the one right everywhere meets it (6 positive items, Wilson 0.61)."""
    root = tmp_path / "data"
    gold = write_pairs(tmp_path / "gold" / "pairs.jsonl", gold=True)
    wanted = "evaluate.judge_requirement requires tpr lower bound >= 0.6"
    tpr = (
        "evaluate.judge_requirement.metric=tpr",
        "evaluate.judge_requirement.min_lower_bound=0.6",
    )

    line = error_line(evaluate(root, gold, always_first, *tpr))
    assert "judge fake at local (judge key " in line
    assert "falls short: tpr lower bound " in line and " < 0.6, tpr (argmax) 0.500" in line
    assert "on gold/pairs.jsonl" in line and wanted in line
    assert not reporting(root, "eval_metrics.parquet").exists()
    card = reporting(root, "eval_judge_card.md").read_text()
    assert "| tpr | 0.500 [" in card and "| tnr | 0.500 [" in card
    assert "Wilson 95% intervals over items" in card

    done = evaluate(root, gold, picks_the_good_one, *tpr, "evaluate.overwrite_results=true")
    assert done.returncode == 0, done.stderr
    card = reporting(root, "eval_judge_card.md").read_text()
    assert "Requirement met: tpr lower bound >= 0.6 (tpr (argmax) 1.000 [0.610, 1.000]" in card
