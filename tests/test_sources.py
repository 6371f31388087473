"""The six sources in their public file formats, UltraFeedback's per-source counts and FLAN
sampled in equal shares per task; through `kedro run --pipelines sample` too."""

import json
from collections import Counter

import pandas as pd
import pytest

from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.params import parse_sample
from llm_feedback.prompts.sources import ULTRAFEEDBACK_SOURCE_COUNTS, read_source, sample_per_source
from tests.conftest import SHARED_DATA

TRUTHFULQA = SHARED_DATA / "truthfulqa" / "TruthfulQA.csv"


def write_sources(folder):
    """One small file per source, in its public layout (our own made-up prompts)."""
    files = {
        "evol_instruct": folder / "evol.json",
        "sharegpt": folder / "sharegpt.json",
        "ultrachat": folder / "ultrachat.jsonl",
        "flan": folder / "flan.jsonl",
        "false_qa": folder / "falseqa.csv",
    }
    files["evol_instruct"].write_text(
        json.dumps(
            [{"instruction": f"Evolved task {i}.", "output": "..."} for i in range(6)]
            + [{"conversations": [{"from": "human", "value": "Evolved chat task."}]}]
        )
    )
    conversations = [
        {
            "id": f"s{i}",
            "conversations": [
                {"from": "human", "value": f"Share {i % 5}?"},
                {"from": "gpt", "value": "Sure."},
            ],
        }
        for i in range(8)  # first turns repeat: five distinct prompts
    ] + [{"id": "empty", "conversations": [{"from": "gpt", "value": "Hello."}]}]
    files["sharegpt"].write_text(json.dumps(conversations))
    files["ultrachat"].write_text(
        "".join(
            json.dumps({"id": i, "data": [f"Chat opener {i}", "Reply"]}) + "\n" for i in range(4)
        )
    )
    flan = [("anli", 2), ("cosmos_qa", 10), ("squad", 10)]
    files["flan"].write_text(
        "".join(
            json.dumps(
                {"inputs": f"{task} input {i}", "targets": f"{task} answer {i}", "task_name": task}
            )
            + "\n"
            for task, n in flan
            for i in range(n)
        )
    )
    pd.DataFrame(
        {
            "question": [f"Why does false thing {i} happen?" for i in range(6)],
            "answer": ["It does not."] * 6,
            "label": [1, 0, 1, 1, 0, 1],
        }
    ).to_csv(files["false_qa"], index=False)
    return files


def test_each_public_format_is_read_into_raw_prompts(tmp_path):
    files = write_sources(tmp_path)
    evol = read_source("evol_instruct", files["evol_instruct"])
    assert evol["instruction"].tolist()[-1] == "Evolved chat task." and len(evol) == 7
    sharegpt = read_source("sharegpt", files["sharegpt"])
    assert sorted(sharegpt["instruction"]) == [f"Share {i}?" for i in range(5)]
    assert read_source("ultrachat", files["ultrachat"])["instruction"][0] == "Chat opener 0"
    flan = read_source("flan", files["flan"])
    assert flan.loc[0, ["instruction", "reference_answer", "task"]].tolist() == [
        "anli input 0",
        "anli answer 0",
        "anli",
    ]
    false_qa = read_source("false_qa", files["false_qa"])
    assert len(false_qa) == 4 and set(false_qa["source"]) == {"false_qa"}


@pytest.mark.skipif(not TRUTHFULQA.is_file(), reason="shared TruthfulQA CSV not present")
def test_the_truthfulqa_csv_as_published():
    raw = read_source("truthful_qa", TRUTHFULQA)
    assert len(raw) == len(pd.read_csv(TRUTHFULQA)) and set(raw["source"]) == {"truthful_qa"}
    assert all(len(answers) for answers in raw["incorrect_answers"])


def test_flan_is_sampled_in_equal_shares_per_task_and_others_by_count(tmp_path):
    files = write_sources(tmp_path)
    flan = read_source("flan", files["flan"])
    # 12 of 22: anli has only 2, so cosmos_qa and squad take 5 each.
    picked = sample_per_source(flan, {"flan": 12}, seed=1)
    assert Counter(picked["task"]) == {"anli": 2, "cosmos_qa": 5, "squad": 5}
    assert picked.equals(sample_per_source(flan, {"flan": 12}, seed=1))
    assert not picked.equals(sample_per_source(flan, {"flan": 12}, seed=2))
    sharegpt = read_source("sharegpt", files["sharegpt"])
    assert len(sample_per_source(sharegpt, {"sharegpt": 3}, seed=0)) == 3
    assert len(sample_per_source(sharegpt, {"sharegpt": 30}, seed=0)) == 5  # all there is
    assert len(sample_per_source(sharegpt, {"flan": 3}, seed=0)) == 5  # not capped


def test_source_parameters_are_checked(tmp_path):
    files = write_sources(tmp_path)
    pool = {"m": {"endpoint": "local"}}
    params = parse_sample({"per_source": "ultrafeedback"}, pool)
    assert params.per_source == ULTRAFEEDBACK_SOURCE_COUNTS
    assert sum(ULTRAFEEDBACK_SOURCE_COUNTS.values()) == 63_966
    with pytest.raises(ConfigError, match=r"sample.source_files.reddit: unknown source"):
        parse_sample({"source_files": {"reddit": str(files["flan"])}}, pool)
    with pytest.raises(ConfigError, match=r"sample.source_files.flan: .* is not a file"):
        parse_sample({"source_files": {"flan": str(tmp_path / "none.jsonl")}}, pool)
    with pytest.raises(ConfigError, match=r"sample.per_source.flan must be an integer >= 1"):
        parse_sample({"per_source": {"flan": 0}}, pool)
    (tmp_path / "bad.jsonl").write_text('{"data": []}\n')
    with pytest.raises(InputError, match=r"bad.jsonl, line 1: field 'data' must be a non-empty"):
        read_source("ultrachat", tmp_path / "bad.jsonl")


def test_kedro_sample_reads_the_public_files_with_per_source_counts(tmp_path, run_kedro):
    files = write_sources(tmp_path)
    sample = {
        "source_files": {source: str(path) for source, path in files.items()},
        "prompt_files": False,
        "per_source": {"flan": 6, "sharegpt": 2},
        "max_prompts": None,
    }
    catalog = run_kedro("sample", {"sample": sample})["catalog"]
    prompts = catalog.load("sampled_prompts").read().drop_duplicates("prompt_id")
    assert Counter(prompts["source"]) == {
        "evol_instruct": 7,
        "sharegpt": 2,
        "ultrachat": 4,
        "flan": 6,
        "false_qa": 4,
    }
    flan = prompts[prompts["source"] == "flan"]
    assert flan["reference_answer"].str.contains("answer").all()
    assert Counter(text.split(" input")[0] for text in flan["instruction"]) == {
        "anli": 2,
        "cosmos_qa": 2,
        "squad": 2,
    }
