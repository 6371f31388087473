"""The outputs as their consumers read them: TRL's own data functions on the preference
pairs, and `datasets` concatenating our files with the public data sets' features.

The public features are written here from the dataset cards (openbmb/UltraFeedback,
HuggingFaceH4/ultrafeedback_binarized); nothing is downloaded. `datasets`, `transformers`
and `trl` are test-only dependencies (see the `dev` extra): TRL's data functions need no
torch, so trl is installed with --no-deps; where it or transformers (Python >= 3.11) is
missing, the TRL tests skip and say so.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from datasets import Dataset, Features, List, Value, concatenate_datasets, load_dataset

from llm_feedback.annotation import to_ultrafeedback_records, ultrafeedback_frame
from llm_feedback.annotation.export import to_public
from llm_feedback.reporting import binarize
from llm_feedback.storage.schema import (
    PREFERENCE_PAIRS_ARROW_SCHEMA,
    PREFERENCE_PAIRS_H4_ARROW_SCHEMA,
    ULTRAFEEDBACK_ARROW_SCHEMA,
    ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA,
)
from tests.conftest import PROJECT_ROOT

from .builders import build_frames, typical_specs

# --- the public features, from the dataset cards ------------------------------------------

_RATED = {"Rating": Value("string"), "Rationale": Value("string")}
_RATED_WITH_TYPES = {
    "Type": List(Value("string")),
    "Rationale": Value("string"),
    "Rating": Value("string"),
    "Rationale For Rating": Value("string"),
}
ULTRAFEEDBACK_FEATURES = Features(
    {
        "source": Value("string"),
        "instruction": Value("string"),
        "models": List(Value("string")),
        "completions": List(
            {
                "annotations": {
                    "instruction_following": _RATED,
                    "honesty": _RATED,
                    "truthfulness": _RATED_WITH_TYPES,
                    "helpfulness": _RATED_WITH_TYPES,
                },
                "critique": Value("string"),
                "custom_system_prompt": Value("string"),
                "fine-grained_score": Value("float64"),
                "model": Value("string"),
                "overall_score": Value("float64"),
                "principle": Value("string"),
                "response": Value("string"),
            }
        ),
        "correct_answers": List(Value("string")),
        "incorrect_answers": List(Value("string")),
    }
)
_MESSAGES = List({"content": Value("string"), "role": Value("string")})
H4_FEATURES = Features(
    {
        "prompt": Value("string"),
        "prompt_id": Value("string"),
        "chosen": _MESSAGES,
        "rejected": _MESSAGES,
        "messages": _MESSAGES,
        "score_chosen": Value("float64"),
        "score_rejected": Value("float64"),
    }
)


def _public_completion(model: str, rating: str, score: float) -> dict[str, Any]:
    typed = {"Type": ["0"], "Rationale": "Accurate.", "Rating": rating}
    return {
        "annotations": {
            "instruction_following": {"Rating": rating, "Rationale": "Follows it."},
            "honesty": {"Rating": "N/A", "Rationale": "Nothing uncertain."},
            "truthfulness": {**typed, "Rationale For Rating": "No hallucination."},
            "helpfulness": {**typed, "Rationale For Rating": "Useful."},
        },
        "critique": "Clear and correct.",
        "custom_system_prompt": "You are a helpful assistant.",
        "fine-grained_score": float(rating),
        "model": model,
        "overall_score": score,
        "principle": "helpfulness",
        "response": f"{model}'s answer.",
    }


# One record shaped like the public data set's.
PUBLIC_ULTRAFEEDBACK_RECORD = {
    "source": "evol_instruct",
    "instruction": "Name three primary colours.",
    "models": ["gpt-4", "llama-2-13b-chat"],
    "completions": [
        _public_completion("gpt-4", "5", 9.0),
        _public_completion("llama-2-13b-chat", "3", 6.5),
    ],
    "correct_answers": [],
    "incorrect_answers": [],
}
PUBLIC_H4_RECORD = {
    "prompt": "Name three primary colours.",
    "prompt_id": "5f3c",
    "chosen": [
        {"content": "Name three primary colours.", "role": "user"},
        {"content": "Red, yellow and blue.", "role": "assistant"},
    ],
    "rejected": [
        {"content": "Name three primary colours.", "role": "user"},
        {"content": "Green.", "role": "assistant"},
    ],
    "messages": [
        {"content": "Name three primary colours.", "role": "user"},
        {"content": "Red, yellow and blue.", "role": "assistant"},
    ],
    "score_chosen": 9.0,
    "score_rejected": 4.0,
}


def load_parquet(path: Path, cache_dir: Path) -> Dataset:
    return load_dataset("parquet", data_files=str(path), split="train", cache_dir=str(cache_dir))


# --- our outputs ----------------------------------------------------------------------------


def write_pairs(directory: Path) -> tuple[Path, Path]:
    """The same pairs in both layouts, one row per pair of the typical run, written as the
    catalog writes them (`DataFrame.to_parquet`)."""
    frames = build_frames(typical_specs(), shuffles=2)
    paths = []
    for layout in ("trl", "h4"):
        pairs = binarize(
            frames.completions,
            frames.overall_scores,
            frames.aspect_annotations,
            strategy="all_pairs",
            layout=layout,
        ).pairs
        path = directory / f"pairs_{layout}.parquet"
        pairs.to_parquet(path)
        paths.append(path)
    return paths[0], paths[1]


def write_ultrafeedback(directory: Path) -> Path:
    frames = build_frames(typical_specs(), shuffles=2)
    records = to_ultrafeedback_records(
        frames.completions, frames.aspect_annotations, frames.critiques, frames.overall_scores
    )
    path = directory / "ultrafeedback.parquet"
    ultrafeedback_frame(records).to_parquet(path)
    return path


# --- TRL ----------------------------------------------------------------------------------

# A chat template of our own: a role marker line, the content, an end marker.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def tiny_tokenizer() -> Any:
    """A word-level tokenizer with a handful of tokens and CHAT_TEMPLATE; nothing from the
    Hub."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "<|user|>": 1, "<|assistant|>": 2, "<|end|>": 3, "answer": 4}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", chat_template=CHAT_TEMPLATE
    )


def check_with_trl(trl_path: str, h4_path: str, cache_dir: str) -> int:
    """Every pair as `datasets` hands it to TRL: conversational whatever column TRL looks
    at, left as it is by `maybe_extract_prompt`, templated into strings that concatenate.
    The h4 layout, given to TRL as its `chosen` / `rejected` columns, yields the same
    prompt and answers. Returns the number of pairs checked."""
    from trl import is_conversational, maybe_apply_chat_template, maybe_extract_prompt

    tokenizer = tiny_tokenizer()
    trl_rows = list(load_parquet(Path(trl_path), Path(cache_dir)))
    h4_rows = list(load_parquet(Path(h4_path), Path(cache_dir)))
    assert trl_rows and len(trl_rows) == len(h4_rows)
    for row in trl_rows:
        assert is_conversational(row)
        for column in ("prompt", "chosen", "rejected"):  # TRL looks at one of them
            assert is_conversational({column: row[column]}), column
        assert maybe_extract_prompt(row) == row
        templated = maybe_apply_chat_template(row, tokenizer)
        for column in ("prompt", "chosen", "rejected"):
            assert isinstance(templated[column], str), column
            whole = tokenizer.apply_chat_template(
                row["prompt"] + row[column] if column != "prompt" else row["prompt"],
                tokenize=False,
                add_generation_prompt=column == "prompt",
            )
            if column == "prompt":
                assert templated["prompt"] == whole
            else:
                assert templated["prompt"] + templated[column] == whole
                assert row[column][0]["content"] in templated[column]
        assert templated["prompt"].endswith("<|assistant|>\n")

    for h4_row, trl_row in zip(h4_rows, trl_rows, strict=True):
        implicit = {"chosen": h4_row["chosen"], "rejected": h4_row["rejected"]}
        assert is_conversational(implicit)
        extracted = maybe_extract_prompt(implicit)
        assert extracted == {key: trl_row[key] for key in ("prompt", "chosen", "rejected")}
        templated = maybe_apply_chat_template(extracted, tokenizer)
        assert all(isinstance(value, str) for value in templated.values())
        text = maybe_apply_chat_template({"messages": h4_row["messages"]}, tokenizer)["text"]
        assert text == templated["prompt"] + templated["chosen"]
    return len(trl_rows)


def require_trl() -> None:
    pytest.importorskip("transformers", reason="test-only: pip install -e '.[dev]'")
    pytest.importorskip("trl", reason="test-only: pip install --no-deps trl==1.16.0")


def test_trl_reads_every_pair_in_process(tmp_path):
    require_trl()
    trl_path, h4_path = write_pairs(tmp_path)
    assert check_with_trl(str(trl_path), str(h4_path), str(tmp_path / "hf")) > 3


@pytest.mark.parametrize("hash_seed", ["0", "1", "2", "3"])
def test_trl_reads_every_pair_whatever_the_hash_seed(tmp_path, hash_seed):
    """TRL's `is_conversational` picks a column by popping a set of column names, so which
    one it checks depends on PYTHONHASHSEED: run the checks in fresh interpreters."""
    require_trl()
    trl_path, h4_path = write_pairs(tmp_path)
    script = (
        "import sys; from tests.reporting.test_ecosystem import check_with_trl; "
        "print('checked', check_with_trl(*sys.argv[1:]))"
    )
    env = {
        **os.environ,
        "PYTHONHASHSEED": hash_seed,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    result = subprocess.run(
        [sys.executable, "-c", script, str(trl_path), str(h4_path), str(tmp_path / "hf")],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "checked" in result.stdout


# --- datasets -------------------------------------------------------------------------------


def test_the_schemas_are_the_dataset_cards_features():
    assert ULTRAFEEDBACK_FEATURES.arrow_schema.remove_metadata().equals(
        ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA
    )
    assert H4_FEATURES.arrow_schema.remove_metadata().equals(PREFERENCE_PAIRS_H4_ARROW_SCHEMA)


def test_ultrafeedback_export_concatenates_with_the_public_data(tmp_path):
    path = write_ultrafeedback(tmp_path)
    public = Dataset.from_list([PUBLIC_ULTRAFEEDBACK_RECORD], features=ULTRAFEEDBACK_FEATURES)

    written = pq.read_schema(path).remove_metadata()
    assert written.equals(ULTRAFEEDBACK_ARROW_SCHEMA)
    ours = load_parquet(path, tmp_path / "hf")
    for name, feature in ULTRAFEEDBACK_FEATURES.items():
        assert ours.features[name] == feature, name

    # As written: our own columns come out null in the public row.
    both = concatenate_datasets([public, ours])
    assert len(both) == 1 + len(ours) == 4
    assert both[0]["prompt_id"] is None and both[0]["annotation_status"] is None
    assert both[1]["prompt_id"] == "p1"
    # Through to_public: exactly the public features.
    public_only = concatenate_datasets([public, to_public(ours)])
    assert public_only.features == ULTRAFEEDBACK_FEATURES
    assert public_only[1]["completions"] == ours[0]["completions"]


def test_a_failed_judgment_reads_as_such_after_loading(tmp_path):
    ours = load_parquet(write_ultrafeedback(tmp_path), tmp_path / "hf")
    p3 = ours[2]  # delta's instruction_following call failed in every shuffle
    delta = p3["models"].index("delta")
    assert p3["completions"][delta]["annotations"]["instruction_following"]["Rating"] is None
    assert p3["annotation_status"][delta]["instruction_following"] == "call_failed"
    assert p3["completions"][delta]["fine-grained_score"] is None
    p1 = ours[0]  # gamma's truthfulness reply could not be read
    gamma = p1["models"].index("gamma")
    assert p1["annotation_status"][gamma]["truthfulness"] == "no_match"
    assert p1["completions"][gamma]["fine-grained_score"] is None
    assert p1["completions"][0]["fine-grained_score"] is not None


def test_h4_pairs_concatenate_with_ultrafeedback_binarized(tmp_path):
    _, h4_path = write_pairs(tmp_path)
    public = Dataset.from_list([PUBLIC_H4_RECORD], features=H4_FEATURES)
    ours = load_parquet(h4_path, tmp_path / "hf")
    assert ours.features == H4_FEATURES

    both = concatenate_datasets([public, ours])
    assert both.features == H4_FEATURES
    assert len(both) == 1 + len(ours)
    assert both[1]["messages"] == both[1]["chosen"]


def test_trl_pairs_load_with_string_and_message_features(tmp_path):
    trl_path, _ = write_pairs(tmp_path)
    ours = load_parquet(trl_path, tmp_path / "hf")
    assert ours.features.arrow_schema.remove_metadata().equals(PREFERENCE_PAIRS_ARROW_SCHEMA)
    assert ours.features["prompt"] == _MESSAGES
    assert ours.features["source"] == Value("string")
