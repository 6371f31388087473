"""The score fix on openbmb/UltraFeedback records as published: records written by `datasets`
with the dataset card's features, `kedro run --pipelines ultrafeedback_fix`, and the fixed
records read back by `datasets` against hand-computed flips, re-annotations and keeps."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pandas as pd
import pytest
from datasets import Dataset, load_dataset

from llm_feedback.annotation.published import PublishedTables
from llm_feedback.core.errors import InputError
from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import endpoints_via, kedro_cli, run_kedro_cli
from tests.reporting.test_ecosystem import ULTRAFEEDBACK_FEATURES

ASPECTS = ("instruction_following", "honesty", "truthfulness", "helpfulness")


def completion(model, ratings, overall, fine):
    """A published completion: `ratings` in ASPECTS order, None for N/A."""
    annotations = {}
    for aspect, rating in zip(ASPECTS, ratings, strict=True):
        shown = "N/A" if rating is None else str(rating)
        if aspect in ("truthfulness", "helpfulness"):
            annotations[aspect] = {
                "Type": ["1", "3"] if rating and rating > 2 else ["0"],
                "Rationale": f"{aspect} types of {model}",
                "Rating": shown,
                "Rationale For Rating": f"{aspect} rated {shown} for {model}",
            }
        else:
            annotations[aspect] = {"Rating": shown, "Rationale": f"{aspect} rated {shown}"}
    return {
        "annotations": annotations,
        "critique": f"Feedback for {model}: tighten the second paragraph.",
        "custom_system_prompt": f"System prompt of {model}.",
        "fine-grained_score": fine,
        "model": model,
        "overall_score": overall,
        "principle": "helpfulness",
        "response": f"The answer {model} wrote.",
    }


def record(source, instruction, completions, correct=(), incorrect=()):
    return {
        "source": source,
        "instruction": instruction,
        "models": [c["model"] for c in completions],
        "completions": completions,
        "correct_answers": list(correct),
        "incorrect_answers": list(incorrect),
    }


# (record, completion) -> the overall score the fix must write, worked out by hand from
# UltraFeedback's rule: 10 with fine-grained <= 2 -> 1; 10 with fine-grained <= 4 -> the
# judge's new score (the scripted judge says 7); anything else kept.
RECORDS = [
    record(
        "evol_instruct",
        "Explain recursion to a child.",
        [
            completion("alpaca-7b", (1, 2, 1, 2), 10.0, 1.5),  # flipped -> 1
            completion("vicuna-33b", (3, None, 4, 3), 10.0, 10 / 3),  # re-annotated -> 7
            completion("gpt-4", (5, 4, 5, 5), 10.0, 4.75),  # kept 10
            completion("falcon-40b-instruct", (2, 2, 2, 1), 6.0, 1.75),  # not a 10: kept
        ],
    ),
    record(
        "truthful_qa",
        "What happens if you swallow gum?",
        [
            completion("llama-2-7b-chat", (4, 4, 4, 4), 10.0, 4.0),  # re-annotated -> 7
            completion("gpt-3.5-turbo", (5, 5, 5, 5), 9.0, 5.0),  # kept 9
            completion("mpt-30b-chat", (1, 1, 1, 1), 10.0, 1.0),  # flipped -> 1
            completion("ultralm-13b", (3, 3, 3, 3), 8.5, 3.0),  # kept 8.5
        ],
        correct=["It passes through the digestive system"],
        incorrect=["It stays in your stomach for seven years"],
    ),
    record(
        "flan",
        "Translate 'good morning' into French.",
        [
            completion("bard", (4, 4, 4, 5), 10.0, 4.25),  # kept 10
            completion("wizardlm-7b", (4, 3, 3, 3), 7.0, 3.25),  # kept 7
        ],
    ),
]
FIXED = [[1.0, 7.0, 10.0, 6.0], [7.0, 9.0, 1.0, 8.5], [10.0, 7.0]]
RESCORE = json.dumps({"overall_score": 7})


def write_records(tmp_path: Path, suffix: str = "parquet") -> Path:
    dataset = Dataset.from_list(copy.deepcopy(RECORDS), features=ULTRAFEEDBACK_FEATURES)
    path = tmp_path / f"ultrafeedback.{suffix}"
    if suffix == "parquet":
        dataset.to_parquet(str(path))
    else:
        dataset.to_json(str(path), lines=True)
    return path


def read_back(data_root: Path, tmp_path: Path) -> Dataset:
    (path,) = (data_root / "07_model_output").glob("ultrafeedback_fixed.parquet/*/*.parquet")
    return load_dataset(
        "parquet", data_files=str(path), split="train", cache_dir=str(tmp_path / "hf")
    )


def test_kedro_run_fixes_published_records_as_computed_by_hand(tmp_path):
    source = write_records(tmp_path)
    data_root = tmp_path / "data"
    with FakeLLMServer(responder=lambda body, ctx: RESCORE) as server:
        command = kedro_cli(data_root, server.base_url, f"ultrafeedback_fix.records_path={source}")
        run_kedro_cli(command, "ultrafeedback_fix")
        calls = server.requests
    # One judge call per re-annotation: the critique conversation continued.
    assert len(calls) == 2
    for body in calls:
        roles = [message["role"] for message in body["messages"]]
        assert roles == ["system", "user", "assistant", "user"]
        assert body["messages"][2]["content"].startswith("Feedback for ")
    assert {calls[0]["messages"][2]["content"], calls[1]["messages"][2]["content"]} == {
        "Feedback for vicuna-33b: tighten the second paragraph.",
        "Feedback for llama-2-7b-chat: tighten the second paragraph.",
    }

    fixed = read_back(data_root, tmp_path)
    assert fixed.features == ULTRAFEEDBACK_FEATURES  # exactly the published features
    assert len(fixed) == len(RECORDS)
    for got, published, scores in zip(fixed, RECORDS, FIXED, strict=True):
        assert [c["overall_score"] for c in got["completions"]] == scores
        # Everything else is what was published, field by field.
        expected = copy.deepcopy(published)
        for item, score in zip(expected["completions"], scores, strict=True):
            item["overall_score"] = score
        for item, want in zip(got["completions"], expected["completions"], strict=True):
            assert item.pop("fine-grained_score") == pytest.approx(want.pop("fine-grained_score"))
        assert got == expected


def test_without_re_annotation_no_call_is_made_and_candidates_keep_their_score(
    tmp_path, run_kedro, fake_llm
):
    source = write_records(tmp_path, "jsonl")
    params = {
        "endpoints": endpoints_via(fake_llm),
        "ultrafeedback_fix": {"records_path": str(source), "reannotate": False},
    }
    catalog = run_kedro("ultrafeedback_fix", params)["catalog"]
    assert fake_llm.request_count == 0
    scores = catalog.load("uf_overall_scores")
    assert sorted(scores["fix_action"].value_counts().items()) == [
        ("flipped", 2),
        ("kept", 6),
        ("reannotate", 2),
    ]
    fixed = read_back(tmp_path / "data", tmp_path)
    planned = [[1.0, 10.0, 10.0, 6.0], [10.0, 9.0, 1.0, 8.5], [10.0, 7.0]]
    assert [[c["overall_score"] for c in r["completions"]] for r in fixed] == planned


def test_a_rejudged_aspect_replaces_the_published_one(tmp_path, run_kedro):
    """`rejudge_aspects: [truthfulness]`: one call per prompt rates it again; the fix uses
    the new ratings (all 1 here), the other aspects stay as published."""

    def judge(body, ctx):
        schema = body["response_format"]["json_schema"]["schema"]
        if "ratings" not in schema["properties"]:
            return RESCORE
        keys = schema["properties"]["ratings"]["required"]
        rating = {"types": ["1"], "type_rationale": "new", "rating": 1, "rationale": "new"}
        return json.dumps({"ratings": dict.fromkeys(keys, rating)})

    source = write_records(tmp_path)
    with FakeLLMServer(responder=judge) as server:
        params = {
            "endpoints": endpoints_via(server),
            "ultrafeedback_fix": {"records_path": str(source), "rejudge_aspects": ["truthfulness"]},
        }
        catalog = run_kedro("ultrafeedback_fix", params)["catalog"]
    aspects = catalog.load("uf_aspect_annotations").read()
    truthfulness = aspects[aspects["aspect"] == "truthfulness"]
    assert (truthfulness["rating"] == 1).all() and (truthfulness["judge_model"] != "gpt-4").all()
    others = aspects[aspects["aspect"] != "truthfulness"]
    assert (others["judge_model"] == "gpt-4").all() and len(others) == 3 * 10
    fixed = read_back(tmp_path / "data", tmp_path)
    first = fixed[0]["completions"][2]  # gpt-4: 5, 4, (5 -> 1), 5 -> fine 3.75: re-annotated
    assert first["annotations"]["truthfulness"]["Rating"] == "1"
    assert first["fine-grained_score"] == pytest.approx(3.75)
    assert first["overall_score"] == 7.0


def test_published_tables_map_ratings_types_and_rationales(tmp_path):
    tables = PublishedTables(write_records(tmp_path, "jsonl"))
    completions = tables.completions
    assert len(completions) == 10 and completions["completion_idx"].tolist()[:4] == [0, 1, 2, 3]
    assert completions["prompt_id"].nunique() == 3
    truthful = completions[completions["source"] == "truthful_qa"].iloc[0]
    assert "seven years" in truthful["world_knowledge"]
    assert truthful["system_prompt"] == "System prompt of llama-2-7b-chat."
    aspects = tables.aspect_annotations.frame().set_index(["completion_idx", "aspect"])
    first = aspects[aspects["prompt_id"] == completions["prompt_id"].iloc[0]]
    honesty = first.loc[(1, "honesty")]
    assert honesty["is_na"] and honesty["parse_status"] == "na" and pd.isna(honesty["rating"])
    helpfulness = first.loc[(1, "helpfulness")]
    assert (helpfulness["rating"], list(helpfulness["types"])) == (3.0, ["1", "3"])
    assert helpfulness["rationale"] == "helpfulness rated 3 for vicuna-33b"
    assert helpfulness["type_rationale"] == "helpfulness types of vicuna-33b"
    critiques = tables.critiques.frame()
    assert critiques["overall_score"].tolist()[:4] == [10.0, 10.0, 10.0, 6.0]


def test_bad_records_name_the_file_record_and_field(tmp_path):
    broken = copy.deepcopy(RECORDS[:1])
    broken[0]["instruction"] = ""
    path = tmp_path / "broken.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in broken))
    with pytest.raises(InputError, match=r"broken.jsonl, line 1: field 'instruction'"):
        PublishedTables(path)
    broken[0]["instruction"] = "fine"
    broken[0]["completions"][2]["overall_score"] = "ten"
    path.write_text(json.dumps(broken[0]) + "\n")
    with pytest.raises(InputError, match=r"line 1, completions\[2\]: field 'overall_score'"):
        PublishedTables(path)
    with pytest.raises(InputError, match="neither .parquet nor .jsonl"):
        csv = tmp_path / "records.csv"
        csv.write_text("source,instruction\n")
        PublishedTables(csv)
    with pytest.raises(InputError, match="missing.parquet does not exist"):
        PublishedTables(tmp_path / "missing.parquet")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="empty holds no .parquet file"):
        PublishedTables(tmp_path / "empty")


def test_a_folder_of_parquet_shards_is_read_as_the_records_in_name_order(tmp_path):
    """The Hub's Parquet conversion comes as shards (and our export past 512 MiB as
    parts): a folder of them is the records, shard after shard."""
    dataset = Dataset.from_list(copy.deepcopy(RECORDS), features=ULTRAFEEDBACK_FEATURES)
    folder = tmp_path / "shards"
    folder.mkdir()
    # Written out of order, so that only sorting by name gives the published order.
    for shard in (2, 0, 1):
        dataset.select([shard]).to_parquet(str(folder / f"train-{shard:05d}-of-00003.parquet"))
    (folder / "README.md").write_text("not a shard")
    whole = PublishedTables(write_records(tmp_path))
    sharded = PublishedTables(folder)
    pd.testing.assert_frame_equal(sharded.completions, whole.completions)
    pd.testing.assert_frame_equal(
        sharded.aspect_annotations.frame(), whole.aspect_annotations.frame()
    )


def test_recritique_replaces_the_published_critiques_before_the_fix(tmp_path, run_kedro):
    def judge(body, ctx):
        schema = body["response_format"]["json_schema"]["schema"]
        if "feedback" in schema["properties"]:
            return json.dumps({"feedback": "Our own review.", "overall_score": 10})
        return RESCORE

    source = write_records(tmp_path)
    with FakeLLMServer(responder=judge) as server:
        params = {
            "endpoints": endpoints_via(server),
            "ultrafeedback_fix": {"records_path": str(source), "recritique": True},
        }
        catalog = run_kedro("ultrafeedback_fix", params)["catalog"]
    critiques = catalog.load("uf_critiques").read()
    assert len(critiques) == 10 and (critiques["critique"] == "Our own review.").all()
    fixed = read_back(tmp_path / "data", tmp_path)
    # Every completion now has a 10: fine-grained <= 2 flips, <= 4 is re-annotated (7).
    expected = [[1.0, 7.0, 10.0, 1.0], [7.0, 10.0, 1.0, 7.0], [10.0, 7.0]]
    assert [[c["overall_score"] for c in r["completions"]] for r in fixed] == expected
    assert {c["critique"] for r in fixed for c in r["completions"]} == {"Our own review."}
