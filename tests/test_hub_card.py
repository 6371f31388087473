"""The dataset card of a push: its metadata block read back with huggingface_hub's own
card parser (`DatasetCard` / `DatasetCardData`), its body's facts, the judge-validation
hook, and the merge that keeps another configuration's metadata on the Hub."""

from __future__ import annotations

import pyarrow as pa
import pytest
import yaml
from huggingface_hub import DatasetCard, DatasetCardData

from llm_feedback.publishing.dataset_card import (
    NOT_VALIDATED,
    feature_list,
    judge_validation_section,
    run_settings,
    size_category,
)
from llm_feedback.publishing.hub import build_push, merged_card
from llm_feedback.storage.schema import (
    PREFERENCE_PAIRS_ARROW_SCHEMAS,
    ULTRAFEEDBACK_ARROW_SCHEMA,
    ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA,
)
from tests.conftest import PROJECT_ROOT
from tests.test_hub import preference_pairs, ultrafeedback

JUDGE_CARD = "Agreement with 200 human labels: 0.81 (95% CI 0.75-0.86)."


def parameters() -> dict:
    """The project's own parameter files, as Kedro merges them (one block per file)."""
    merged: dict = {}
    for path in sorted((PROJECT_ROOT / "conf" / "base").glob("parameters*.yml")):
        merged.update(yaml.safe_load(path.read_text()) or {})
    return merged


def build(frame, name, **options):
    judge, settings = run_settings(parameters())
    return build_push(
        frame,
        name=name,
        repo_id="someone/feedback",
        token="hf_x",
        token_source="HF_TOKEN",
        judge=judge,
        settings=settings,
        **options,
    )


def test_the_metadata_block_reads_back_with_the_hub_parser():
    data = ultrafeedback()
    card = DatasetCard(build(data, "ultrafeedback", license="mit").card)
    assert isinstance(card.data, DatasetCardData)
    meta = card.data
    assert meta.license == "mit"
    assert meta.task_categories == ["text-generation"]
    assert meta.size_categories == [size_category(len(data))] == ["n<1K"]
    assert meta.configs == [
        {
            "config_name": "ultrafeedback",
            "data_files": [{"split": "train", "path": "ultrafeedback/train-*"}],
        }
    ]
    info = meta.dataset_info[0]
    assert info["splits"] == [{"name": "train", "num_examples": len(data)}]
    names = [feature["name"] for feature in info["features"]]
    assert names == [
        "source",
        "instruction",
        "models",
        "completions",
        "correct_answers",
        "incorrect_answers",
    ]


def test_the_body_names_models_judge_principles_parameters_and_counts():
    data = ultrafeedback()
    card = DatasetCard(build(data, "ultrafeedback").card)
    models = {c["model"] for completions in data["completions"] for c in completions}
    principles = {c["principle"] for completions in data["completions"] for c in completions}
    for text in (*models, *principles, *set(data["source"])):
        assert f"| {text} |" in card.text
    # The embedded judge named by its GGUF file too: another file is another judge.
    assert "judge: SmolLM2-135M-Instruct (local backend, model file sha256:" in card.text
    assert "n_shuffles: 1" in card.text and "shuffle_seed: 42" in card.text
    assert f"rows: {len(data):,}" in card.text
    assert "licence: not stated" in card.text and card.data.license == "other"
    assert NOT_VALIDATED in card.text
    assert "base_url" not in card.text and "127.0.0.1" not in card.text  # endpoints stay home


def test_a_judge_card_goes_into_the_card_and_pairs_get_their_own_card():
    pairs = preference_pairs()
    card = DatasetCard(build(pairs, "preference_pairs", judge_card=JUDGE_CARD).card)
    assert JUDGE_CARD in card.text and NOT_VALIDATED not in card.text
    assert "Every column of the dataset is included" in card.text
    assert card.data.configs[0]["config_name"] == "preference_pairs"
    assert judge_validation_section("  ") == NOT_VALIDATED


def test_the_merge_keeps_the_other_configuration_already_on_the_hub():
    ours = build(preference_pairs(), "preference_pairs").card
    on_hub = DatasetCard(build(ultrafeedback(), "ultrafeedback").card).data.to_dict()
    merged = DatasetCard(merged_card(ours, on_hub))
    assert [c["config_name"] for c in merged.data.configs] == ["ultrafeedback", "preference_pairs"]
    assert [i["config_name"] for i in merged.data.dataset_info] == [
        "ultrafeedback",
        "preference_pairs",
    ]
    assert DatasetCard(merged_card(ours, None)).data.configs[0]["config_name"] == "preference_pairs"


def test_the_annotate_pipeline_writes_a_card_beside_the_export(run_kedro, fake_llm):
    from tests.conftest import endpoints_via

    params = {"endpoints": endpoints_via(fake_llm), "sample": {"max_prompts": 3}}
    for name in ("sample", "generate", "annotate"):
        catalog = run_kedro(name, params)["catalog"]
    card = DatasetCard(catalog.load("ultrafeedback_card"))
    completions = catalog.load("completions").read()
    assert card.data.dataset_info[0]["splits"][0]["num_examples"] == 3
    assert card.data.configs[0]["config_name"] == "ultrafeedback"
    assert f"| {completions['model'].iloc[0]} |" in card.text
    assert "judge: fake-model (openai backend)" in card.text
    assert NOT_VALIDATED in card.text


@pytest.mark.parametrize(
    "schema",
    [
        ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA,
        ULTRAFEEDBACK_ARROW_SCHEMA,
        *PREFERENCE_PAIRS_ARROW_SCHEMAS.values(),
    ],
)
def test_the_card_features_are_those_datasets_writes(schema):
    """The annotate run writes its card's features without importing `datasets`; the Hub
    reads them as `datasets` itself would have written them."""
    datasets = pytest.importorskip("datasets")
    assert feature_list(schema) == datasets.Features.from_arrow_schema(schema)._to_yaml_list()


def test_a_column_type_without_a_hub_name_is_named_in_the_error():
    with pytest.raises(TypeError, match="Arrow type date32"):
        feature_list(pa.schema([("day", pa.date32())]))
