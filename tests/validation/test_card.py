"""The judge card: keys, rows of judge_validation, the Markdown a report shows, the figure."""

from __future__ import annotations

import hashlib
import json

import pandas as pd

from llm_feedback.backends import EndpointConfig
from llm_feedback.storage.schema import JUDGE_VALIDATION_COLUMN_TYPES
from llm_feedback.validation.baselines import baseline_metrics, both_orders
from llm_feedback.validation.card import (
    accuracy_figure,
    add_card,
    card_frame,
    card_lines,
    validation_standing,
)
from llm_feedback.validation.identity import judge_identity, judge_key
from llm_feedback.validation.measured import measured_cards, write_measured_cards
from llm_feedback.validation.metrics import pairwise_metrics
from llm_feedback.validation.model_file import model_file_identity

TEMPLATE = "Which response is better? {question} {response_a} {response_b}"


def test_judge_key_follows_the_judge_and_hides_secrets() -> None:
    key = judge_key("http://localhost:8080/v1", "m", TEMPLATE, {"temperature": 0, "seed": 1})
    assert key == judge_key(
        "http://localhost:8080/v1", "m", TEMPLATE, {"seed": 1, "temperature": 0}
    )
    assert key != judge_key(
        "http://localhost:8080/v1", "m", TEMPLATE + " ", {"temperature": 0, "seed": 1}
    )
    assert key != judge_key(
        "http://localhost:8080/v1", "m", TEMPLATE, {"temperature": 0.7, "seed": 1}
    )
    assert key != judge_key(
        "http://localhost:8080/v1", "other", TEMPLATE, {"temperature": 0, "seed": 1}
    )
    identity = judge_identity(
        "https://bob:hunter2@api.example.com/v1?key=sk-123", "m", TEMPLATE, {}
    )
    assert identity["judge_endpoint"] == "https://api.example.com/v1"
    assert "hunter2" not in str(identity) and "sk-123" not in str(identity)
    assert len(identity["judge_key"]) == 16


def items(n: int = 40) -> pd.DataFrame:
    """n items, gold A on even, B on odd; A longer on every other pair of items."""
    return pd.DataFrame(
        {
            "instance_id": [f"i{k}" for k in range(n)],
            "category": None,
            "model_a": "m1",
            "model_b": "m2",
            "gold": ["A" if k % 2 == 0 else "B" for k in range(n)],
            "gold_labels": [["A" if k % 2 == 0 else "B"] for k in range(n)],
            "gold_annotators": [["gold"]] * n,
            "len_a": [100 if (k // 2) % 2 == 0 else 10 for k in range(n)],
            "len_b": [50] * n,
        }
    )


def cards_of(verdicts: pd.DataFrame, identity: dict[str, str]) -> pd.DataFrame:
    return card_frame(
        identity,
        "scripted-40",
        {"argmax": pairwise_metrics(verdicts, resamples=300, judge="x")},
        baseline_metrics(verdicts, resamples=300),
        created_at="2026-12-01T21:00:00Z",
    )


def test_card_of_a_position_biased_judge_says_it_cannot_be_told_apart() -> None:
    identity = judge_identity("local", "tiny-judge", TEMPLATE, {"temperature": 0})
    skeleton = both_orders(items())
    verdicts = skeleton.assign(verdict=skeleton["order"].map({"original": "A", "swapped": "B"}))
    cards = cards_of(verdicts, identity)
    assert list(cards.columns) == list(JUDGE_VALIDATION_COLUMN_TYPES)
    assert set(cards["kind"]) == {"judge", "baseline"}
    text = card_lines(cards, identity["judge_key"])
    assert "### Judge card: tiny-judge at local" in text
    assert "**This judge cannot be told apart from always_first**" in text
    assert "**This judge cannot be told apart from random**" in text
    assert "| accuracy | 0.500 [0.500, 0.500] |" in text
    assert "| first_shown_share | 1.000 [1.000, 1.000] |" in text
    assert "No usable probabilities: argmax only" in text


def test_card_of_a_good_judge_and_of_an_unvalidated_one() -> None:
    identity = judge_identity("local", "good-judge", TEMPLATE, {"temperature": 0})
    skeleton = both_orders(items())
    verdicts = skeleton.assign(verdict=skeleton["gold"])
    verdicts.loc[verdicts["instance_id"] == "i3", "verdict"] = "A"  # wrong on one item
    cards = cards_of(verdicts, identity)
    text = card_lines(cards, identity["judge_key"])
    assert "cannot be told apart" not in text
    assert "| accuracy | 0.975 [" in text
    other = judge_key("local", "good-judge", TEMPLATE, {"temperature": 1.0})
    missing = card_lines(cards, other)
    assert missing.startswith("**This judge has not been validated**")
    assert other in missing
    figure = accuracy_figure(cards)
    axes = figure.axes[0]
    labels = [tick.get_text() for tick in axes.get_yticklabels()]
    assert labels == [
        "good-judge (argmax) · scripted-40",
        "always_first · scripted-40",
        "always_longer · scripted-40",
        "random · scripted-40",
    ]
    assert len(axes.containers) == 4  # one error bar each
    assert "no judge" in accuracy_figure(cards.iloc[0:0]).axes[0].texts[0].get_text()


def test_the_weights_behind_the_name_and_the_task_are_part_of_the_judge() -> None:
    base = judge_identity("local", "SmolLM2-135M-Instruct", TEMPLATE, {"temperature": 0})
    gemma = judge_identity(
        "local", "SmolLM2-135M-Instruct", TEMPLATE, {"temperature": 0}, model_file="sha256:ab"
    )
    other_task = judge_identity(
        "local", "SmolLM2-135M-Instruct", TEMPLATE, {"temperature": 0}, task={"mode": "x"}
    )
    assert len({base["judge_key"], gemma["judge_key"], other_task["judge_key"]}) == 3
    assert gemma["judge_model_file"] == "sha256:ab"
    assert json.loads(other_task["task"]) == {"mode": "x"}


def test_the_local_judge_is_named_by_its_gguf_and_azure_by_its_deployment(tmp_path) -> None:
    first, second = tmp_path / "a.gguf", tmp_path / "b.gguf"
    first.write_bytes(b"weights one")
    second.write_bytes(b"weights two")
    local = {"backend": "local", "model": "SmolLM2-135M-Instruct"}
    one = model_file_identity(EndpointConfig.from_dict({**local, "model_path": str(first)}))
    two = model_file_identity(EndpointConfig.from_dict({**local, "model_path": str(second)}))
    assert one == "sha256:" + hashlib.sha256(b"weights one").hexdigest()
    assert two == "sha256:" + hashlib.sha256(b"weights two").hexdigest()
    azure = EndpointConfig.from_dict(
        {"backend": "azure", "model": "gpt4o-prod", "base_url": "https://res.openai.azure.com"}
    )
    assert (
        model_file_identity(azure) == "azure deployment gpt4o-prod at https://res.openai.azure.com"
    )
    remote = EndpointConfig.from_dict(
        {"backend": "openai", "model": "gpt-4o", "base_url": "http://127.0.0.1:1/v1"}
    )
    assert model_file_identity(remote) == ""


def test_inverted_verdicts_are_said_as_plainly_as_a_tie_with_a_baseline() -> None:
    identity = judge_identity("local", "contrary-judge", TEMPLATE, {"temperature": 0})
    skeleton = both_orders(items())
    # Always the response the gold rejects, but right on two items.
    flipped = skeleton["gold"].map({"A": "B", "B": "A"})
    verdicts = skeleton.assign(
        verdict=flipped.where(~skeleton["instance_id"].isin(["i0", "i1"]), skeleton["gold"])
    )
    text = card_lines(cards_of(verdicts, identity), identity["judge_key"])
    assert "**This judge's verdicts are inverted** (argmax verdicts)" in text
    assert "below chance (0.500)" in text
    assert "cohen_kappa -0.9" in text
    assert "**This judge is worse than always_first** (argmax verdicts): accuracy 0.050 [" in text
    assert "**This judge is worse than random**" in text
    assert "cannot be told apart" not in text


def test_a_card_of_another_size_is_kept_beside_and_a_newer_run_of_the_same_size_over() -> None:
    identity = judge_identity("local", "good-judge", TEMPLATE, {"temperature": 0})
    key = identity["judge_key"]

    def run(n: int, created: str) -> pd.DataFrame:
        skeleton = both_orders(items(n))
        verdicts = skeleton.assign(verdict=skeleton["gold"])
        return card_frame(
            identity,
            "natural",
            {"argmax": pairwise_metrics(verdicts, resamples=50, judge="x")},
            baseline_metrics(verdicts, resamples=50),
            created_at=created,
        )

    hundred = run(100, "2026-12-01T10:00:00Z")
    cards = add_card(add_card(hundred.iloc[0:0], hundred), run(20, "2026-12-02T10:00:00Z"))
    text = card_lines(cards, key)
    # Both sizes, dated: the 20-pair card replaced nothing.
    assert "(200 judged calls at most per metric), 2026-12-01T10:00:00Z" in text
    assert "(40 judged calls at most per metric), 2026-12-02T10:00:00Z" in text

    cards = add_card(cards, run(100, "2026-12-03T10:00:00Z"))
    text = card_lines(cards, key)
    assert "(200 judged calls at most per metric), 2026-12-03T10:00:00Z" in text
    assert "(40 judged calls at most per metric), 2026-12-02T10:00:00Z" in text
    assert "(200 judged calls at most per metric), 2026-12-01T10:00:00Z" not in text
    assert (
        "Earlier runs on this set, kept in judge_validation: 2026-12-01T10:00:00Z (200 calls)."
        in text
    )
    # Every run is still in the table.
    assert cards["created_at"].nunique() == 3


def test_an_old_card_without_the_new_identity_columns_still_reads() -> None:
    identity = judge_identity("local", "good-judge", TEMPLATE, {"temperature": 0})
    skeleton = both_orders(items())
    old = cards_of(skeleton.assign(verdict=skeleton["gold"]), identity).drop(
        columns=["judge_model_file", "task"]
    )
    text = card_lines(old, identity["judge_key"])
    assert "| accuracy | 1.000 [" in text
    assert "task `not recorded`" in text


def test_names_from_configuration_are_inert_in_a_card() -> None:
    identity = judge_identity("local", "<script>alert(1)</script>", TEMPLATE, {"temperature": 0})
    skeleton = both_orders(items())
    cards = cards_of(skeleton.assign(verdict=skeleton["gold"]), identity)
    cards["validation_set"] = "set`<img src=x onerror=alert(1)>"
    text = card_lines(cards, identity["judge_key"])
    assert "<script>" not in text
    assert "### Judge card: &lt;script&gt;alert(1)&lt;/script&gt; at local" in text
    assert "Validation set ``set`<img src=x onerror=alert(1)>``" in text
    standing = validation_standing(cards, identity)
    assert "<script>" not in "\n".join(standing.lines)


def test_the_shipped_measured_card_reads_back_as_it_was_written(tmp_path) -> None:
    shipped = measured_cards()
    assert list(shipped.columns) == list(JUDGE_VALIDATION_COLUMN_TYPES)
    assert shipped["judge_model"].eq("SmolLM2-135M-Instruct").all()
    # The embedded judge's identity under today's key: its GGUF and evaluate's template.
    assert shipped["judge_model_file"].str.startswith("sha256:").all()
    written = tmp_path / "cards.json"
    identity = judge_identity("local", "good-judge", TEMPLATE, {"temperature": 0})
    skeleton = both_orders(items())
    cards = add_card(shipped, cards_of(skeleton.assign(verdict=skeleton["gold"]), identity))
    write_measured_cards(cards, "a test", written)
    again = json.loads(written.read_text())
    assert again["source"] == "a test" and len(again["cards"]) == 2
    rows = sum(len(card["rows"]) for card in again["cards"])
    assert rows == len(cards[cards["category"].isna()])
