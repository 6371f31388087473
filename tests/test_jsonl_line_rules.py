"""JSON Lines are split on "\n" alone: a JSON string may hold a raw U+2028, U+2029, U+0085
or form feed (valid JSON), which `str.splitlines()` would take for line ends. Every reader
of JSON Lines input keeps such a string whole (issue 41)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_feedback.backends.cache import RequestCache, unsaved_path
from llm_feedback.evaluation.sample_files import read_samples_file, samples_from_file
from llm_feedback.prompts.sources import read_source
from llm_feedback.storage.jsonl import read_jsonl
from llm_feedback.validation.records import load_records

# Line ends for str.splitlines() that JSON keeps raw inside a string (control characters
# such as a form feed must be escaped in JSON, so they never reach a reader raw).
SEPARATORS = ["\u2028", "\u2029", "\u0085"]


def text_with(separator: str) -> str:
    return f"first part{separator}second part"


def write_jsonl(path: Path, records: list[dict]) -> Path:
    # ensure_ascii=False writes each separator raw, as any UTF-8 JSON writer may.
    path.write_text(
        "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records),
        encoding="utf-8",
    )
    raw = path.read_text(encoding="utf-8")
    assert any(separator in raw for separator in SEPARATORS)
    return path


@pytest.mark.parametrize("separator", SEPARATORS)
def test_a_prompt_file_keeps_the_string_whole(tmp_path, separator):
    path = write_jsonl(
        tmp_path / "prompts.jsonl",
        [
            {"source": "flan", "instruction": text_with(separator)},
            {"source": "flan", "instruction": "b"},
        ],
    )
    frame = read_jsonl(path)
    assert frame["instruction"].tolist() == [text_with(separator), "b"]


@pytest.mark.parametrize("separator", SEPARATORS)
def test_an_eval_samples_file_keeps_the_string_whole(tmp_path, separator):
    rows = [
        {"id": f"s{n}", "prompt": text_with(separator), "response": f"answer {n}{separator}end"}
        for n in range(2)
    ]
    path = write_jsonl(tmp_path / "samples.jsonl", rows)
    samples = samples_from_file(read_samples_file(path))
    assert samples["prompt"].tolist() == [text_with(separator)] * 2
    assert samples["response"].tolist() == [f"answer {n}{separator}end" for n in range(2)]
    records = load_records(path)  # the reader of gold labels and viewer labels too
    assert [record.where for record in records] == ["line 1", "line 2"]


@pytest.mark.parametrize("separator", SEPARATORS)
def test_a_source_file_keeps_the_string_whole(tmp_path, separator):
    path = write_jsonl(
        tmp_path / "evol.jsonl", [{"instruction": text_with(separator)}, {"instruction": "b"}]
    )
    assert read_source("evol_instruct", path)["instruction"].tolist() == [
        text_with(separator),
        "b",
    ]


def test_unsaved_answers_with_a_separator_are_read_back(tmp_path):
    path = tmp_path / "cache.sqlite"
    RequestCache(path).close()
    answer = {"text": text_with("\u2028"), "finish_reason": "stop"}
    unsaved_path(path).write_text(
        json.dumps(
            {"key": "k", "result": json.dumps(answer, ensure_ascii=False)}, ensure_ascii=False
        )
        + "\n",
        encoding="utf-8",
    )
    cache = RequestCache(path)
    assert cache.get("k").text == text_with("\u2028")
    cache.close()
