"""`parse_bracket_rating` reproduces every score FastChat parsed in a real MT-Bench run."""

import json
from collections import defaultdict
from pathlib import Path

import pytest

from llm_feedback.judges import parse_bracket_rating

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
JUDGMENTS = SHARED_DATA / "mt_bench" / "gpt-4_single_judgments.jsonl"


@pytest.fixture(scope="module")
def judgments() -> list[dict]:
    if not JUDGMENTS.is_file():
        pytest.skip(f"shared MT-Bench data not found at {JUDGMENTS} (no ../shared/data here)")
    with JUDGMENTS.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def test_every_recorded_score_is_reproduced(judgments: list[dict]) -> None:
    assert len(judgments) == 330
    mismatches = []
    for row in judgments:
        parsed = parse_bracket_rating(row["judgment"]).value
        expected = None if row["score"] == -1 else float(row["score"])
        if parsed != expected:
            mismatches.append((row["question_id"], row["model"], row["turn"], row["score"], parsed))
    assert mismatches == []


def test_per_model_means_of_valid_scores(judgments: list[dict]) -> None:
    valid: dict[str, list[float]] = defaultdict(list)
    for row in judgments:
        score = parse_bracket_rating(row["judgment"]).value
        if score is not None:
            valid[row["model"]].append(score)
    normal = valid["Meta-Llama-3-8B-Instruct-Normal"]
    griffin = valid["Meta-Llama-3-8B-Instruct-Griffin"]
    assert (len(normal), len(griffin)) == (166, 160)
    assert round(sum(normal) / len(normal), 3) == 7.843
    assert round(sum(griffin) / len(griffin), 3) == 2.700
