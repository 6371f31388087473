"""`kedro push-to-hub`: the push is built and checked by our code and, in a dry run, not
sent. Nothing here reaches the Hub (HF_HUB_OFFLINE=1 would make any attempt fail)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from datasets import Features
from huggingface_hub import DatasetCard

from llm_feedback.annotation import to_ultrafeedback_records, ultrafeedback_frame
from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.publishing.hub import build_push, hub_token
from llm_feedback.reporting import binarize
from llm_feedback.storage.schema import (
    PREFERENCE_PAIRS_H4_ARROW_SCHEMA,
    ULTRAFEEDBACK_ARROW_SCHEMA,
    ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA,
)
from tests.conftest import KEDRO_CLI_ENV, PROJECT_ROOT
from tests.reporting.builders import build_frames, typical_specs

SECRET = "hf_not-a-real-token-0123456789"
VERSION = "2026-12-01T09.00.00.000Z"


def ultrafeedback() -> pd.DataFrame:
    frames = build_frames(typical_specs())
    records = to_ultrafeedback_records(
        frames.completions, frames.aspect_annotations, frames.critiques, frames.overall_scores
    )
    return ultrafeedback_frame(records)


def preference_pairs(layout: str = "trl") -> pd.DataFrame:
    frames = build_frames(typical_specs())
    return binarize(
        frames.completions, frames.overall_scores, frames.aspect_annotations, layout=layout
    ).pairs


def push(frame: pd.DataFrame, name: str, **overrides):
    settings = {"repo_id": "someone/feedback", "token": SECRET, "token_source": "HF_TOKEN"}
    return build_push(frame, name=name, **{**settings, **overrides})


@pytest.mark.parametrize(
    ("name", "frame", "schema", "public_only"),
    [
        ("ultrafeedback", ultrafeedback, ULTRAFEEDBACK_ARROW_SCHEMA, False),
        # The trl pairs go up as their own train and test splits: test_hub_splits.py.
        (
            "preference_pairs",
            lambda: preference_pairs("h4"),
            PREFERENCE_PAIRS_H4_ARROW_SCHEMA,
            None,
        ),
    ],
)
def test_the_push_holds_the_dataset_with_its_schema_features(name, frame, schema, public_only):
    data = frame()
    built = push(data, name, split="train_prefs", public_only=public_only)
    assert built.repo_id == "someone/feedback" and built.config_name == name
    assert built.private  # private unless asked otherwise
    assert list(built.data) == ["train_prefs"]
    dataset = built.data["train_prefs"]
    assert dataset.features == Features.from_arrow_schema(schema)
    assert dataset.num_rows == len(data) > 0
    assert dataset[0]["prompt_id"] == data["prompt_id"].iloc[0]
    assert SECRET not in repr(built) and SECRET not in built.describe()
    assert not push(data, name, private=False).private


def test_ultrafeedback_is_pushed_with_the_public_columns_by_default():
    data = ultrafeedback()
    built = push(data, "ultrafeedback")
    dataset = built.data["train"]
    assert dataset.features == Features.from_arrow_schema(ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA)
    assert dataset.num_rows == len(data)
    assert "prompt_id" not in dataset.features
    assert "left out" in built.card and "annotation_status" in built.card


@pytest.mark.parametrize(
    ("name", "frame"), [("ultrafeedback", ultrafeedback), ("preference_pairs", preference_pairs)]
)
@pytest.mark.parametrize("through_filesystem", [False, True])
@pytest.mark.parametrize("in_parts", [False, True])
def test_a_push_read_a_batch_at_a_time_from_parquet_is_the_push_of_the_whole_frame(
    name, frame, through_filesystem, in_parts, tmp_path
):
    import fsspec

    from llm_feedback.pipelines.datasets import ParquetDataset
    from llm_feedback.storage.parquet_source import ParquetSource

    data = frame()
    path = tmp_path / "table.parquet"
    # Several row groups, as a large table has; in parts, a part per group.
    save_args = {"row_group_size": 2, "part_bytes": 1 if in_parts else 2**30}
    ParquetDataset(filepath=str(path), save_args=save_args).save(data)
    assert path.is_dir() == in_parts
    filesystem = fsspec.filesystem("file") if through_filesystem else None  # as object storage
    workdir = tmp_path / "push"
    workdir.mkdir()
    streamed = push(ParquetSource(str(path), filesystem, batch_rows=3), name, workdir=workdir)
    whole = push(data, name)
    assert streamed.data["train"].features == whole.data["train"].features
    assert streamed.data["train"].to_list() == whole.data["train"].to_list()
    assert streamed.card == whole.card  # the same counts of models, sources, principles
    assert streamed.describe() == whole.describe()


@pytest.mark.parametrize(
    "repo_id", ["feedback", "someone/feed--back", "a/b/c", "someone/bad name", "-x/feedback"]
)
def test_a_bad_repo_id_is_refused_naming_it(repo_id):
    with pytest.raises(ConfigError, match="repo_id") as error:
        push(preference_pairs(), "preference_pairs", repo_id=repo_id)
    assert repo_id in str(error.value)


def test_a_bad_split_name_or_empty_token_or_wrong_columns_is_refused():
    pairs = preference_pairs()
    with pytest.raises(ConfigError, match="split 'train set'"):
        push(pairs, "preference_pairs", split="train set")
    with pytest.raises(ConfigError, match="token from HF_TOKEN is empty"):
        push(pairs, "preference_pairs", token="")
    with pytest.raises(InputError, match="ultrafeedback: columns"):
        push(pairs, "ultrafeedback")


def test_the_token_comes_from_credentials_then_hf_token():
    from_credentials = hub_token({"huggingface": {"token": "hf_a"}}, {"HF_TOKEN": "hf_b"})
    assert from_credentials == ("hf_a", "conf/local/credentials.yml (huggingface.token)")
    assert hub_token({}, {"HF_TOKEN": "hf_b"}) == ("hf_b", "HF_TOKEN")
    with pytest.raises(ConfigError, match="HF_TOKEN"):
        hub_token({"huggingface": {}}, {})


def write_version(data_root: Path, layer: str, name: str, frame: pd.DataFrame) -> None:
    """One version of a catalog dataset, laid out as the versioned ParquetDataset writes it."""
    folder = data_root / layer / f"{name}.parquet" / VERSION
    folder.mkdir(parents=True)
    frame.to_parquet(folder / f"{name}.parquet")


def push_to_hub_cli(data_root: Path, *options: str, token: str | None = SECRET):
    env = {key: value for key, value in KEDRO_CLI_ENV.items() if key != "HF_TOKEN"}
    env["HF_HUB_OFFLINE"] = "1"
    if token is not None:
        env["HF_TOKEN"] = token
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kedro",
            "push-to-hub",
            *options,
            "--params",
            f"data_root={data_root}",
        ],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_dry_run_from_the_cli_builds_checks_and_sends_nothing(tmp_path):
    data_root = tmp_path / "data"
    pairs, records = preference_pairs(), ultrafeedback()
    write_version(data_root, "07_model_output", "preference_pairs", pairs)
    write_version(data_root, "07_model_output", "ultrafeedback", records)
    for name, frame in (("preference_pairs", pairs), ("ultrafeedback", records)):
        result = push_to_hub_cli(
            data_root, "--dataset", name, "--repo-id", "someone/feedback", "--dry-run"
        )
        output = result.stdout + result.stderr
        assert result.returncode == 0, output
        assert "repository: https://huggingface.co/datasets/someone/feedback (private)" in output
        assert f"configuration: {name}" in output
        sides = frame["split"] if "split" in frame else pd.Series(["train"] * len(frame))
        for side, rows in sides.value_counts().items():  # the trl pairs: train and test
            assert f"split {side}: {rows:,} rows" in output
        assert "token: from HF_TOKEN" in output
        assert "dry run: nothing was sent" in output
        assert SECRET not in output
        # The card, printed: its metadata block parses with the Hub's own parser.
        card = DatasetCard(output.split("dataset card (README.md):\n", 1)[1].split("dry run:")[0])
        assert card.data.size_categories == ["n<1K"]
        assert card.data.configs[0]["config_name"] == name
        assert "This judge has not been validated" in card.text


def test_without_a_token_the_cli_says_where_to_put_one(tmp_path):
    data_root = tmp_path / "data"
    write_version(data_root, "07_model_output", "preference_pairs", preference_pairs())
    result = push_to_hub_cli(
        data_root,
        "--dataset",
        "preference_pairs",
        "--repo-id",
        "someone/feedback",
        "--dry-run",
        token=None,
    )
    assert result.returncode != 0
    assert "no Hugging Face token: set HF_TOKEN" in result.stderr


def test_a_push_of_a_dataset_never_written_says_which_pipeline_writes_it(tmp_path):
    result = push_to_hub_cli(
        tmp_path, "--dataset", "preference_pairs", "--repo-id", "someone/feedback", "--dry-run"
    )
    assert result.returncode == 1
    assert "preference_pairs has no version under data root" in result.stderr
    assert "kedro run --pipelines report" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_a_push_whose_sources_have_a_newer_run_is_refused_naming_the_versions(tmp_path):
    data_root = tmp_path / "data"
    write_version(data_root, "07_model_output", "ultrafeedback", ultrafeedback())
    newer = "2099-01-01T00.00.00.000Z"  # a later annotate that did not reach the export
    folder = data_root / "03_primary" / "overall_scores.parquet" / newer
    folder.mkdir(parents=True)
    pd.DataFrame({"completion_id": ["c"]}).to_parquet(folder / "overall_scores.parquet")
    options = ("--dataset", "ultrafeedback", "--repo-id", "someone/feedback", "--dry-run")

    refused = push_to_hub_cli(data_root, *options)
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert f"ultrafeedback {VERSION} is older than overall_scores {newer}" in output
    assert "--allow-mixed-runs" in output

    allowed = push_to_hub_cli(data_root, *options, "--allow-mixed-runs")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
