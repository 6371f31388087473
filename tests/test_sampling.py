import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llm_feedback.completions.principles import SOURCES, SYSTEM_PROMPTS, validate_principle_weights
from llm_feedback.completions.sampling import principle_weight_table, sample_prompts
from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.prompts.raw_prompts import (
    FALSE_PREMISE_NOTE,
    combine_prompt_sources,
    derive_prompt_id,
    truthfulqa_to_raw_prompts,
    validate_raw_prompts,
    world_knowledge,
)
from llm_feedback.storage.schema import (
    ANSWER_LIST_COLUMNS,
    RAW_PROMPTS_COLUMNS,
    RAW_PROMPTS_REQUIRED_COLUMNS,
    SAMPLED_PROMPTS_COLUMNS,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
TRUTHFULQA_CSV = SHARED_DATA / "truthfulqa" / "TruthfulQA.csv"
DEMO_PROMPTS = REPO_ROOT / "data" / "01_raw" / "prompts" / "demo_prompts.jsonl"
POOL = [f"model-{letter}" for letter in "abcdefghijklmnopq"]  # 17, as in UltraFeedback


def synthetic_prompts(n: int, sources=SOURCES, prefix: str = "p") -> pd.DataFrame:
    return pd.DataFrame(
        {
            "prompt_id": [f"{prefix}{i:06d}" for i in range(n)],
            "source": [sources[i % len(sources)] for i in range(n)],
            "instruction": [f"Question number {i}?" for i in range(n)],
        }
    )


def small_raw() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "prompt_id": ["a", "b", "c"],
            "source": ["flan", "truthful_qa", "sharegpt"],
            "instruction": ["Translate 'cat' to German.", "Are bats blind?", "Plan my week."],
            "correct_answers": [None, ["No, bats can see"], None],
            "incorrect_answers": [None, ["Yes, bats are blind"], None],
            "reference_answer": ["Katze", None, None],
        }
    )


# ------------------------------------------------------------------------- validation


def test_validated_frame_has_explicit_columns_and_dtypes():
    raw = small_raw().assign(extra="dropped")
    clean = validate_raw_prompts(raw)
    assert tuple(clean.columns) == RAW_PROMPTS_COLUMNS
    assert RAW_PROMPTS_REQUIRED_COLUMNS == ("source", "instruction")
    for column in ("prompt_id", "source", "instruction", "reference_answer"):
        assert clean[column].dtype == "str", column
    assert clean["correct_answers"].dtype == object
    assert clean["correct_answers"].tolist() == [[], ["No, bats can see"], []]
    assert clean["reference_answer"].isna().tolist() == [False, True, True]


def test_optional_columns_may_be_absent():
    clean = validate_raw_prompts(small_raw()[["source", "instruction"]])
    assert clean["correct_answers"].tolist() == [[], [], []]
    assert clean["incorrect_answers"].tolist() == [[], [], []]
    assert clean["reference_answer"].isna().all()


def test_missing_prompt_id_is_derived_from_a_stable_hash():
    raw = small_raw()
    raw.loc[1, "prompt_id"] = None
    clean = validate_raw_prompts(raw.drop(columns="prompt_id"))
    expected = derive_prompt_id("truthful_qa", "Are bats blind?")
    assert clean["prompt_id"][1] == expected
    assert expected.startswith("truthful_qa-") and len(expected) == len("truthful_qa-") + 16
    # Only the missing cell is filled in; given ids are kept.
    partly = validate_raw_prompts(raw)
    assert partly["prompt_id"].tolist() == ["a", expected, "c"]


def test_integer_prompt_ids_become_strings():
    raw = small_raw().assign(prompt_id=[1, 2, 3])
    assert validate_raw_prompts(raw)["prompt_id"].tolist() == ["1", "2", "3"]


def test_lists_read_back_from_parquet_are_accepted(tmp_path):
    path = tmp_path / "raw.parquet"
    validate_raw_prompts(small_raw()).to_parquet(path)
    clean = validate_raw_prompts(pd.read_parquet(path))
    assert clean["correct_answers"][1] == ["No, bats can see"]


def test_missing_required_column_is_named():
    with pytest.raises(InputError, match=r"my_prompts: required column 'instruction' is missing"):
        validate_raw_prompts(small_raw().drop(columns="instruction"), name="my_prompts")


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("instruction", "   ", "is empty or whitespace only"),
        ("instruction", None, "column 'instruction': is missing"),
        ("instruction", 42, "must be a string, got int"),
        ("source", " ", "must be a non-empty string, got ' '"),
        ("source", None, "must be a non-empty string, got None"),
        ("correct_answers", "No, bats can see", "must be a list of strings, got str"),
        ("incorrect_answers", ["fine", 3], "item 1 must be a string, got int"),
        ("reference_answer", 7, "must be a string, got int"),
        ("prompt_id", 1.5, "must be a non-empty string, got 1.5"),
        ("prompt_id", " ", "must be a non-empty string, got ' '"),
    ],
)
def test_bad_cells_are_reported_with_dataset_row_and_column(column, value, message):
    raw = small_raw().astype(object)
    raw.at[1, column] = value
    with pytest.raises(InputError) as raised:
        validate_raw_prompts(raw, name="demo_prompts")
    text = str(raised.value)
    assert "demo_prompts row 1" in text
    assert f"column '{column}'" in text
    assert message in text
    if column != "prompt_id":
        assert "(prompt_id 'b')" in text


def test_duplicate_prompt_id_names_both_rows():
    raw = small_raw().assign(prompt_id=["a", "b", "a"])
    with pytest.raises(
        InputError,
        match=r"row 2 \(prompt_id 'a'\), column 'prompt_id': "
        r"duplicate prompt_id, first used at row 0",
    ):
        validate_raw_prompts(raw)


def test_repeated_prompt_without_ids_is_a_duplicate():
    raw = pd.DataFrame({"source": ["flan", "flan"], "instruction": ["Same text.", "Same text."]})
    with pytest.raises(InputError, match=r"row 1 .*derived from source and text"):
        validate_raw_prompts(raw)


def test_all_problems_are_listed_not_just_the_first():
    raw = synthetic_prompts(30).assign(instruction="")
    with pytest.raises(InputError) as raised:
        validate_raw_prompts(raw)
    text = str(raised.value)
    assert text.startswith("raw_prompts: 30 invalid value(s)")
    assert "row 9 (prompt_id 'p000009')" in text and "... and 20 more" in text


def test_any_named_source_is_a_valid_prompt_source():
    raw = small_raw().assign(source="mt_bench")
    assert validate_raw_prompts(raw)["source"].eq("mt_bench").all()


def test_a_source_without_weights_gets_helpfulness_and_is_counted(caplog):
    raw = synthetic_prompts(80, sources=("mt_bench", "flan"))
    with caplog.at_level("WARNING", logger="llm_feedback.completions.sampling"):
        sampled = sample_prompts(raw, POOL)
    unweighted = sampled[sampled["source"] == "mt_bench"]
    assert unweighted["principle"].eq("helpfulness").all()
    assert set(sampled.loc[sampled["source"] == "flan", "principle"]) == {
        "helpfulness",
        "verbalized_calibration",
    }
    assert "40 prompt(s)" in caplog.text and "mt_bench: 40" in caplog.text


def test_configured_weights_replace_a_sources_defaults_and_keep_the_others():
    table = principle_weight_table({"mt_bench": {"honesty": 1}, "flan": {"harmlessness": 2}})
    assert table["mt_bench"] == {"honesty": 1.0}
    assert table["flan"] == {"harmlessness": 1.0}
    assert table["truthful_qa"] == pytest.approx({"honesty": 0.5, "truthfulness": 0.5})
    assert principle_weight_table(None) == validate_principle_weights(None)


def test_not_a_dataframe_is_an_input_error():
    with pytest.raises(InputError, match="expected a pandas DataFrame, got list"):
        validate_raw_prompts([{"source": "flan", "instruction": "x"}])


# ----------------------------------------------------------------- world knowledge


def test_world_knowledge_per_source():
    rows = validate_raw_prompts(small_raw()).to_dict("records")
    assert world_knowledge(rows[0]) == "Reference answer: Katze"
    truthful = world_knowledge(rows[1])
    assert "No, bats can see" in truthful and "Yes, bats are blind" in truthful
    assert truthful.index("No, bats can see") < truthful.index("Yes, bats are blind")
    assert world_knowledge(rows[2]) == ""
    false_premise = {"source": "false_qa", "instruction": "Why do penguins fly south?"}
    assert world_knowledge(false_premise) == FALSE_PREMISE_NOTE


def test_world_knowledge_accepts_a_series_with_null_reference():
    row = validate_raw_prompts(small_raw()).iloc[2]
    assert world_knowledge(row) == ""


# -------------------------------------------------------------------------- sampling


def test_output_is_long_with_the_documented_columns_and_dtypes():
    sampled = sample_prompts(small_raw(), POOL, n_completions=4, seed=1)
    assert tuple(sampled.columns) == SAMPLED_PROMPTS_COLUMNS
    assert len(sampled) == 12
    assert sampled["completion_idx"].dtype == np.int64
    assert sampled["completion_idx"].tolist() == [0, 1, 2, 3] * 3
    assert sampled["prompt_id"].tolist() == ["a"] * 4 + ["b"] * 4 + ["c"] * 4
    # Every column but the index and the answer lists is text.
    for column in set(SAMPLED_PROMPTS_COLUMNS) - {"completion_idx", *ANSWER_LIST_COLUMNS}:
        assert sampled[column].dtype == "str", column
    for column in ANSWER_LIST_COLUMNS:
        assert sampled[column].dtype == object, column
    assert sampled["world_knowledge"].tolist()[:4] == ["Reference answer: Katze"] * 4
    assert isinstance(sampled.index, pd.RangeIndex)


def test_system_prompt_belongs_to_the_drawn_principle():
    sampled = sample_prompts(synthetic_prompts(600), POOL)
    for principle, group in sampled.groupby("principle"):
        assert set(group["system_prompt"]) <= set(SYSTEM_PROMPTS[principle])
    used = set(sampled["system_prompt"])
    assert set(SYSTEM_PROMPTS["helpfulness"]) <= used
    assert set(SYSTEM_PROMPTS["honesty"]) <= used


def test_same_seed_gives_identical_frames_and_another_seed_differs():
    raw = synthetic_prompts(200)
    first = sample_prompts(raw, POOL, seed=7)
    pd.testing.assert_frame_equal(first, sample_prompts(raw, POOL, seed=7))
    other = sample_prompts(raw, POOL, seed=8)
    assert (first["model"] != other["model"]).mean() > 0.5
    assert not first["principle"].equals(other["principle"])


GOLDEN_MODELS = [
    "model-b",
    "model-m",
    "model-d",
    "model-h",
    "model-p",
    "model-g",
    "model-l",
    "model-n",
]
GOLDEN_PRINCIPLES = ["helpfulness"] * 4 + [
    "verbalized_calibration",
    "honesty",
    "truthfulness",
    "truthfulness",
]


def test_draws_are_pinned_across_processes_and_platforms():
    # Fixed expectations: a change here silently changes every sampled dataset.
    sampled = sample_prompts(synthetic_prompts(2), POOL, seed=42)
    assert sampled["model"].tolist() == GOLDEN_MODELS
    assert sampled["principle"].tolist() == GOLDEN_PRINCIPLES


def test_adding_or_removing_other_prompts_does_not_change_a_prompts_draws():
    base = synthetic_prompts(300)
    alone = sample_prompts(base, POOL, seed=3)
    extra = synthetic_prompts(500, prefix="x")
    mixed = pd.concat([extra.iloc[:250], base.iloc[::-1], extra.iloc[250:]], ignore_index=True)
    together = sample_prompts(mixed, POOL, seed=3)
    together = together[together["prompt_id"].isin(base["prompt_id"])]
    key = ["prompt_id", "completion_idx"]
    pd.testing.assert_frame_equal(
        alone.sort_values(key).reset_index(drop=True),
        together.sort_values(key).reset_index(drop=True),
    )
    subset = sample_prompts(base.iloc[100:110], POOL, seed=3)
    pd.testing.assert_frame_equal(subset, alone.iloc[400:440].reset_index(drop=True))


def test_models_are_drawn_without_replacement():
    sampled = sample_prompts(synthetic_prompts(2000), POOL, n_completions=4)
    assert sampled.groupby("prompt_id")["model"].nunique().eq(4).all()
    whole_pool = sample_prompts(synthetic_prompts(50), POOL[:5], n_completions=5)
    assert whole_pool.groupby("prompt_id")["model"].agg(frozenset).eq(frozenset(POOL[:5])).all()


def test_models_are_drawn_uniformly_from_the_pool():
    sampled = sample_prompts(synthetic_prompts(8500), POOL, n_completions=4)
    shares = sampled["model"].value_counts(normalize=True)
    assert set(shares.index) == set(POOL)
    assert np.allclose(shares, 1 / len(POOL), atol=0.004)
    # No slot favours a model: the first completion is as uniform as the rest.
    first_slot = sampled[sampled["completion_idx"] == 0]["model"].value_counts(normalize=True)
    assert np.allclose(first_slot, 1 / len(POOL), atol=0.01)


# Expected shares after the honesty -> verbalized_calibration rule at 10%.
EXPECTED_SHARES = {
    "sharegpt": {
        "helpfulness": 0.6,
        "truthfulness": 0.2,
        "honesty": 0.18,
        "verbalized_calibration": 0.02,
    },
    "ultrachat": {
        "helpfulness": 0.6,
        "truthfulness": 0.2,
        "honesty": 0.18,
        "verbalized_calibration": 0.02,
    },
    "flan": {"helpfulness": 0.8, "verbalized_calibration": 0.2},
    "evol_instruct": {"helpfulness": 1.0},
    "truthful_qa": {"honesty": 0.45, "truthfulness": 0.5, "verbalized_calibration": 0.05},
    "false_qa": {"honesty": 0.45, "truthfulness": 0.5, "verbalized_calibration": 0.05},
}


def test_principle_frequencies_follow_the_source_weights():
    sampled = sample_prompts(synthetic_prompts(20_000), POOL, n_completions=4, seed=11)
    for source, expected in EXPECTED_SHARES.items():
        shares = sampled.loc[sampled["source"] == source, "principle"].value_counts(normalize=True)
        assert set(shares.index) == set(expected), source
        for principle, share in expected.items():
            assert shares[principle] == pytest.approx(share, abs=0.012), (source, principle)


def test_calibration_rate_and_custom_weights_are_honoured():
    custom = {"quiz": {"honesty": 1.0}}
    raw = synthetic_prompts(5000, sources=("quiz",))
    sampled = sample_prompts(raw, POOL, principle_weights=custom, verbalized_calibration_rate=0.3)
    shares = sampled["principle"].value_counts(normalize=True)
    assert shares["verbalized_calibration"] == pytest.approx(0.3, abs=0.015)
    never = sample_prompts(raw, POOL, principle_weights=custom, verbalized_calibration_rate=0)
    assert never["principle"].eq("honesty").all()


def test_max_prompts_keeps_a_stable_seeded_subset_in_input_order():
    raw = synthetic_prompts(300)
    sampled = sample_prompts(raw, POOL, max_prompts=40)
    kept = sampled["prompt_id"].unique().tolist()
    assert len(kept) == 40 and kept == sorted(kept)
    assert set(sampled["source"]) == set(SOURCES)  # not just the first rows
    full = sample_prompts(raw, POOL)
    pd.testing.assert_frame_equal(
        sampled, full[full["prompt_id"].isin(kept)].reset_index(drop=True)
    )
    assert len(sample_prompts(raw.iloc[:10], POOL, max_prompts=40)) == 40


def test_empty_input_gives_an_empty_frame_with_the_columns():
    sampled = sample_prompts(synthetic_prompts(0), POOL)
    assert len(sampled) == 0 and tuple(sampled.columns) == SAMPLED_PROMPTS_COLUMNS


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"model_pool": POOL[:3]}, r"model_pool has 3 model\(s\) but n_completions is 4"),
        (
            {"model_pool": ["a", "b", "a", "c", "b"]},
            "model_pool lists a model more than once: a, b",
        ),
        ({"model_pool": "gpt-4"}, "model_pool must be a list"),
        ({"model_pool": ["a", "", "c", "d"]}, r"model_pool\[1\]"),
        ({"n_completions": 0}, "n_completions must be at least 1"),
        ({"n_completions": 2.0}, "n_completions must be an integer"),
        ({"seed": "42"}, "seed must be an integer"),
        ({"max_prompts": 0}, "max_prompts must be a positive integer"),
        ({"verbalized_calibration_rate": 2}, "verbalized_calibration_rate"),
        ({"principle_weights": {"flan": {"wit": 1}}}, r"principle_weights\['flan'\]\['wit'\]"),
    ],
)
def test_bad_parameters_fail_before_the_data_is_looked_at(arguments, message):
    bad_data = pd.DataFrame({"source": ["nowhere"], "instruction": [""]})
    call = {"model_pool": POOL, **arguments}
    with pytest.raises(ConfigError, match=message):
        sample_prompts(bad_data, **call)


def test_bad_data_is_an_input_error_from_sample_prompts():
    with pytest.raises(InputError, match=r"raw_prompts row 0, column 'source'"):
        sample_prompts(pd.DataFrame({"source": [""], "instruction": ["Hi"]}), POOL)


# ------------------------------------------------------------- sources and demo data


def truthfulqa_layout() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "\ufeffType": ["Adversarial", "Non-Adversarial"],
            "Category": ["Animals", "Food"],
            "Question": ["Do owls turn their heads all the way round?", "Is honey spoiled?"],
            "Best Answer": ["No, owls turn their heads about 270 degrees", "It depends"],
            "Correct Answers": [
                "No, about 270 degrees; No, not a full circle; ",
                "Sealed honey keeps for years",
            ],
            "Incorrect Answers": ["Yes, a full 360 degrees", "Yes; all honey spoils in a week"],
            "Source": ["https://example.org/owls", None],
        }
    )


def test_truthfulqa_layout_is_converted():
    raw = truthfulqa_layout()
    converted = truthfulqa_to_raw_prompts(raw)
    assert tuple(converted.columns) == RAW_PROMPTS_COLUMNS
    assert converted["source"].eq("truthful_qa").all()
    # A best answer missing from the correct answers is put first; empty pieces are dropped.
    assert converted["correct_answers"][0] == [
        "No, owls turn their heads about 270 degrees",
        "No, about 270 degrees",
        "No, not a full circle",
    ]
    assert converted["correct_answers"][1] == ["It depends", "Sealed honey keeps for years"]
    assert converted["incorrect_answers"][1] == ["Yes", "all honey spoils in a week"]
    assert converted["reference_answer"][0] == "No, owls turn their heads about 270 degrees"
    assert converted["prompt_id"][0] == derive_prompt_id(
        "truthful_qa", "Do owls turn their heads all the way round?"
    )


def test_truthfulqa_missing_column_is_named():
    with pytest.raises(InputError, match=r"TruthfulQA: required column 'Incorrect Answers'"):
        truthfulqa_to_raw_prompts(truthfulqa_layout().drop(columns="Incorrect Answers"))


def test_truthfulqa_bad_cell_is_named():
    raw = truthfulqa_layout().astype(object)
    raw.at[1, "Correct Answers"] = 5
    with pytest.raises(InputError, match=r"TruthfulQA row 1, column 'Correct Answers'"):
        truthfulqa_to_raw_prompts(raw)


def test_real_truthfulqa_converts_and_samples():
    if not TRUTHFULQA_CSV.is_file():
        pytest.skip(f"TruthfulQA reference data not found at {TRUTHFULQA_CSV} (needs ../shared)")
    converted = truthfulqa_to_raw_prompts(pd.read_csv(TRUTHFULQA_CSV))
    assert len(converted) >= 800
    assert converted["prompt_id"].is_unique
    assert converted["correct_answers"].map(len).ge(1).all()
    assert converted["incorrect_answers"].map(len).ge(1).all()
    assert converted["incorrect_answers"].map(lambda answers: "" not in answers).all()
    sampled = sample_prompts(converted, POOL, seed=42)
    assert len(sampled) == 4 * len(converted)
    assert set(sampled["principle"]) == {"honesty", "truthfulness", "verbalized_calibration"}
    assert sampled["world_knowledge"].str.contains("Answers known to be wrong").all()


def load_demo() -> pd.DataFrame:
    return pd.DataFrame([json.loads(line) for line in DEMO_PROMPTS.read_text().splitlines()])


def test_demo_prompts_validate_and_cover_every_source():
    demo = validate_raw_prompts(load_demo(), name="demo_prompts")
    assert len(demo) >= 30
    counts = demo["source"].value_counts()
    assert set(counts.index) == set(SOURCES)
    assert counts.min() >= 5
    assert demo["prompt_id"].str.match(r"^demo-[a-z_]+-\d{3}$").all()
    assert (demo["prompt_id"].str.rsplit("-", n=1).str[0] == "demo-" + demo["source"]).all()
    flan = demo[demo["source"] == "flan"]
    assert flan["reference_answer"].notna().all()
    truthful = demo[demo["source"] == "truthful_qa"]
    assert truthful["correct_answers"].map(len).ge(1).all()
    assert truthful["incorrect_answers"].map(len).ge(1).all()
    # Short enough for a 135M model: a sentence or two.
    assert demo["instruction"].str.split().map(len).le(60).all()


def test_demo_prompts_read_like_the_catalog_reads_them():
    # The catalog reads JSON lines with pandas, which infers dtypes per column.
    demo = pd.read_json(DEMO_PROMPTS, lines=True)
    assert len(sample_prompts(demo, POOL)) == 4 * len(demo)


def test_combining_sources_keeps_every_prompt_and_names_the_dataset_at_fault():
    combined = combine_prompt_sources(
        {"demo_prompts": load_demo(), "truthfulqa": truthfulqa_to_raw_prompts(truthfulqa_layout())}
    )
    assert len(combined) == len(load_demo()) + 2
    assert tuple(combined.columns) == RAW_PROMPTS_COLUMNS
    assert isinstance(combined.index, pd.RangeIndex)

    broken = small_raw().assign(instruction=["ok", "", "ok too"])
    with pytest.raises(InputError, match=r"extra_prompts row 1 \(prompt_id 'b'\)"):
        combine_prompt_sources({"demo_prompts": load_demo(), "extra_prompts": broken})

    clash = small_raw().assign(prompt_id=["x", "demo-flan-001", "y"])
    with pytest.raises(InputError, match=r"extra_prompts row 1 .*also used in demo_prompts row"):
        combine_prompt_sources({"demo_prompts": load_demo(), "extra_prompts": clash})

    with pytest.raises(InputError, match="at least one"):
        combine_prompt_sources({})
