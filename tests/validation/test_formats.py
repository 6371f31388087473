"""Readers of the published gold-label formats: small files written here in each format as
published, LLMBar's real file when ../shared/data has it, and the errors for bad files."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd
import pytest

from llm_feedback.core.errors import InputError
from llm_feedback.validation.formats import read_samples
from tests.conftest import SHARED_DATA

LLMBAR_NATURAL = SHARED_DATA / "llmbar" / "natural" / "dataset.json"


def write_json(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


LLMBAR_ITEMS = [
    {"input": "Say hi.", "output_1": "Hi!", "output_2": "Goodbye.", "label": 1},
    {"input": "Add 2 and 2.", "output_1": "5", "output_2": "2 + 2 = 4", "label": 2},
]
PANDALM_ITEMS = [
    {
        "idx": 7,
        "motivation_app": "Grammarly",
        "cmp_key": "alpaca-7b_bloom-7b",
        "instruction": "Fix the grammar.",
        "input": "he go home",
        "response1": "He goes home.",
        "response2": "he go home",
        "annotator1": 1,
        "annotator2": 1,
        "annotator3": 0,
    },
    {
        "idx": 8,
        "motivation_app": "Wolfram",
        "cmp_key": "alpaca-7b_bloom-7b",
        "instruction": "What is 3 * 3?",
        "input": "",
        "response1": "6",
        "response2": "9",
        "annotator1": 2,
        "annotator2": 1,
        "annotator3": 0,
    },
]


def conversation(first_answer: str, second_answer: str) -> list[dict]:
    return [
        {"role": "user", "content": "Write a haiku."},
        {"role": "assistant", "content": first_answer},
        {"role": "user", "content": "Now make it rhyme."},
        {"role": "assistant", "content": second_answer},
    ]


MTBENCH_ROWS = [
    {
        "question_id": 81,
        "model_a": "gpt-4",
        "model_b": "llama-13b",
        "winner": "model_a",
        "judge": "expert_0",
        "turn": 1,
        "conversation_a": conversation("gpt haiku", "gpt rhyme"),
        "conversation_b": conversation("llama haiku", "llama rhyme"),
    },
    {  # the same pair and turn by another judge, shown the other way round
        "question_id": 81,
        "model_a": "llama-13b",
        "model_b": "gpt-4",
        "winner": "model_a",
        "judge": "expert_1",
        "turn": 1,
        "conversation_a": conversation("llama haiku", "llama rhyme"),
        "conversation_b": conversation("gpt haiku", "gpt rhyme"),
    },
    {
        "question_id": 81,
        "model_a": "gpt-4",
        "model_b": "llama-13b",
        "winner": "tie (bothbad)",
        "judge": "expert_0",
        "turn": 2,
        "conversation_a": conversation("gpt haiku", "gpt rhyme"),
        "conversation_b": conversation("llama haiku", "llama rhyme"),
    },
]


def test_llmbar_published_shape(tmp_path: Path) -> None:
    samples = read_samples(write_json(tmp_path / "dataset.json", LLMBAR_ITEMS), "llmbar")
    assert samples["model"].tolist() == ["output_1", "output_2"] * 2
    assert samples["response"].tolist() == ["Hi!", "Goodbye.", "5", "2 + 2 = 4"]
    assert samples["gold"].tolist() == ["A", "A", "B", "B"]
    assert samples["gold_labels"].tolist() == [["A"], ["A"], ["B"], ["B"]]
    assert samples["instance_id"].nunique() == 2


def test_pandalm_majority_ties_and_question(tmp_path: Path) -> None:
    samples = read_samples(write_json(tmp_path / "testset-v1.json", PANDALM_ITEMS))
    assert samples.attrs["samples_format"] == "pandalm"
    first, second = samples.iloc[0], samples.iloc[2]
    assert first["question"] == "Fix the grammar.\n\nhe go home"
    assert second["question"] == "What is 3 * 3?"  # an empty input adds nothing
    assert first["gold_labels"] == ["A", "A", "tie"] and first["gold"] == "A"
    # B, A and tie once each: the annotators did not settle it, so the gold is a tie.
    assert second["gold_labels"] == ["B", "A", "tie"] and second["gold"] == "tie"
    assert first["category"] == "Grammarly"
    assert first["gold_annotators"] == ["annotator1", "annotator2", "annotator3"]


@pytest.mark.parametrize("suffix", [".json", ".jsonl", ".parquet"])
def test_mtbench_human_turns_orders_and_judges(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"human{suffix}"
    if suffix == ".json":
        write_json(path, MTBENCH_ROWS)
    elif suffix == ".jsonl":
        write_jsonl(path, MTBENCH_ROWS)
    else:
        pd.DataFrame(MTBENCH_ROWS).to_parquet(path)
    samples = read_samples(path)
    assert samples.attrs["samples_format"] == "mtbench_human"
    turn1 = samples[samples["turn"] == 1]
    assert turn1["model"].tolist() == ["gpt-4", "llama-13b"]
    assert turn1["response"].tolist() == ["gpt haiku", "llama haiku"]
    # expert_1 saw llama first and chose it: in this instance's labels that is B.
    assert turn1["gold_labels"].iloc[0] == ["A", "B"]
    assert turn1["gold_annotators"].iloc[0] == ["expert_0", "expert_1"]
    assert turn1["gold"].iloc[0] == "tie"
    turn2 = samples[samples["turn"] == 2]
    assert turn2["question"].tolist() == ["Now make it rhyme."] * 2
    assert turn2["response"].tolist() == ["gpt rhyme", "llama rhyme"]
    assert turn2["prior_question"].tolist() == ["Write a haiku."] * 2
    assert turn2["prior_response"].tolist() == ["gpt haiku", "llama haiku"]
    assert turn2["gold"].tolist() == ["tie", "tie"]
    assert turn1["prior_question"].isna().all()


def test_mtbench_human_repeated_judge_is_a_further_annotator(tmp_path: Path) -> None:
    again = dict(MTBENCH_ROWS[0], winner="tie (inconsistent)")
    samples = read_samples(write_json(tmp_path / "h.json", [MTBENCH_ROWS[0], again]))
    assert samples["gold_annotators"].iloc[0] == ["expert_0", "expert_0#2"]
    assert samples["gold_labels"].iloc[0] == ["A", "tie"]


def test_own_jsonl_pairwise_and_pointwise(tmp_path: Path) -> None:
    pairwise = read_samples(
        write_jsonl(
            tmp_path / "pairs.jsonl",
            [
                {
                    "instance_id": "q1",
                    "question": "Q?",
                    "response_a": "x",
                    "response_b": "yy",
                    "model_a": "m1",
                    "model_b": "m2",
                    "label": "B",
                    "category": "math",
                },
                {
                    "question": "R?",
                    "response_a": "x",
                    "response_b": "y",
                    "labels": {"ann": "A", "bob": "tie", "cy": "A"},
                },
            ],
        ),
        "jsonl",
    )
    assert pairwise["instance_id"].tolist() == ["q1", "q1", "item-2", "item-2"]
    assert pairwise["model"].tolist() == ["m1", "m2", "response_a", "response_b"]
    assert pairwise["gold"].tolist() == ["B", "B", "A", "A"]
    assert pairwise["gold_annotators"].iloc[2] == ["ann", "bob", "cy"]
    pointwise = read_samples(
        write_jsonl(
            tmp_path / "scores.jsonl",
            [
                {"question": "Q?", "response": "x", "model": "m", "score": 7},
                {"question": "Q?", "response": "y", "scores": [2, 4, 9]},
            ],
        )
    )
    assert pointwise.attrs["samples_format"] == "jsonl"
    assert pointwise["gold_score"].tolist() == [7.0, 5.0]
    assert pointwise["gold_labels"].iloc[1] == [2.0, 4.0, 9.0]
    assert "gold" not in pointwise.columns


def test_own_jsonl_pairs_with_gold_on_a_slice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Pairs without a label (none, or null) are judged only; the labelled share is logged."""
    pairs = [
        {"instance_id": "q1", "question": "Q?", "response_a": "x", "response_b": "y"},
        {"instance_id": "q2", "question": "R?", "response_a": "x", "response_b": "y", "label": "B"},
        {
            "instance_id": "q3",
            "question": "S?",
            "response_a": "x",
            "response_b": "y",
            "label": None,
        },
    ]
    with caplog.at_level(logging.INFO, logger="llm_feedback.validation.own_jsonl"):
        samples = read_samples(write_jsonl(tmp_path / "pairs.jsonl", pairs))
    assert samples.attrs["samples_format"] == "jsonl"
    assert samples["gold"].fillna("none").tolist() == ["none", "none", "B", "B", "none", "none"]
    assert samples["gold_labels"].iloc[0] == []
    assert "1 of 3 pairs carry gold (33%)" in caplog.text
    unlabelled = [{key: value for key, value in pair.items() if key != "label"} for pair in pairs]
    with pytest.raises(InputError, match=r"line 1: .*no pair of the file has a label"):
        read_samples(write_jsonl(tmp_path / "none.jsonl", unlabelled))


def test_auto_detection_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write_json(tmp_path / "dataset.json", LLMBAR_ITEMS)
    with caplog.at_level(logging.INFO, logger="llm_feedback.validation.formats"):
        samples = read_samples(path)
    assert samples.attrs["samples_format"] == "llmbar"
    assert "detected as llmbar" in caplog.text


@pytest.mark.parametrize(
    ("content", "format_", "message"),
    [
        ('[{"a": 1}]', "auto", r"item 0: not a known samples format \(fields a\)"),
        (
            '[{"input": "q", "output_1": "x", "output_2": "y", "label": 3}]',
            "llmbar",
            r"item 0, field 'label': must be 1 or 2, got 3",
        ),
        (
            '[{"input": "q", "output_1": "x", "label": 1}]',
            "llmbar",
            r"item 0: missing field 'output_2'",
        ),
        (
            '[{"input": "q", "output_1": 5, "output_2": "y", "label": 1}]',
            "llmbar",
            r"item 0, field 'output_1': expected text, got 5",
        ),
        (
            '{"question": "q", "response": "x", "score": 1}\n{"question": "q", "respo',
            "auto",
            r"line 2, column \d+: malformed JSON",
        ),
        (
            '{"question": "q", "response": "x", "score": 1}\n'
            '{"question": "q", "response_a": "x", "response_b": "y", "label": "A"}\n',
            "jsonl",
            r"line 2: a pairwise item in a file of pointwise items",
        ),
        (
            '{"question": "q", "response_a": "x", "response_b": "y", "label": "C"}\n',
            "jsonl",
            r"line 1, field 'label': labels are A, B or tie, got 'C'",
        ),
        (
            '[{"idx": 1, "instruction": "i", "input": "", "response1": "a", "response2": "b", '
            '"annotator1": 1, "annotator2": 4, "annotator3": 0}]',
            "pandalm",
            r"item 0, field 'annotator2': must be 0 \(tie\), 1 or 2, got 4",
        ),
        ("[]", "auto", r"no records"),
        ("[1]", "auto", r"item 0: expected a JSON object, got int"),
        (
            '[{"input": "q", "output_1": "x", "output_2": "y", "label": 1}]',
            "llmbarr",
            r"unknown samples format 'llmbarr'",
        ),
    ],
)
def test_bad_files_name_file_place_and_field(
    tmp_path: Path, content: str, format_: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=message) as raised:
        read_samples(path, format_)
    assert str(path) in str(raised.value)


def test_mtbench_bad_roles_and_winner(tmp_path: Path) -> None:
    bad_role = dict(MTBENCH_ROWS[0], conversation_b=[{"role": "assistant", "content": "x"}] * 2)
    with pytest.raises(InputError, match=r"item 0, field 'conversation_b'\[0\]: role must be"):
        read_samples(write_json(tmp_path / "a.json", [bad_role]), "mtbench_human")
    bad_winner = dict(MTBENCH_ROWS[0], winner="model_c")
    with pytest.raises(InputError, match=r"item 0, field 'winner': must be one of"):
        read_samples(write_json(tmp_path / "b.json", [bad_winner]))


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"question": "q", "response": "x", "score": 1}\n{"question": "\xff"}\n')
    with pytest.raises(InputError, match=r"line 2: not UTF-8"):
        read_samples(path)


@pytest.mark.skipif(not LLMBAR_NATURAL.is_file(), reason="../shared/data/llmbar is absent")
def test_llmbar_natural_real_file() -> None:
    samples = read_samples(LLMBAR_NATURAL)
    assert samples.attrs["samples_format"] == "llmbar"
    assert len(samples) == 200 and samples["instance_id"].nunique() == 100
    items = json.loads(LLMBAR_NATURAL.read_text(encoding="utf-8"))
    assert samples["response"].iloc[0::2].tolist() == [item["output_1"] for item in items]
    assert samples["response"].iloc[1::2].tolist() == [item["output_2"] for item in items]
    golds = samples["gold"].iloc[0::2].tolist()
    assert golds == ["A" if item["label"] == 1 else "B" for item in items]
    assert golds.count("B") == 58
