"""openbmb/UltraFeedback records as published, read into the project's tables and written
back in the same shape.

A record (Parquet or JSON Lines, the dataset card's features) holds `source`,
`instruction`, `models`, `completions` (each with `model`, `principle`,
`custom_system_prompt`, `response`, `annotations` {aspect: {Rating, Rationale[, Type,
Rationale For Rating]}}, `critique`, `overall_score`, `fine-grained_score`),
`correct_answers` and `incorrect_answers`. `published_tables` turns them into
`completions`, `aspect_annotations` (one row per completion and aspect, `shuffle_idx` 0 and
`position` = the completion's index, as the published data keeps no shown order) and
`critiques`, so that the score fix (`stages.fix_overall_scores`) and any annotate stage run
on them; `PublishedExport` writes the records back with exactly the public features.

Mapping: a `Rating` "1".."5" is that rating (`ok`); "N/A" is N/A (`na`); anything else or
none is a null rating with status `no_match` and the published text in `parse_error`. For
the typed aspects (truthfulness, helpfulness) `Rationale` is the type rationale and
`Rationale For Rating` the rating's, as in our export. A record's prompt id is
`derive_prompt_id(source, instruction)`, with `-2`, `-3`, ... for a repeated instruction.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from llm_feedback.annotation.aspects import get_aspect
from llm_feedback.annotation.export import UltraFeedbackExport
from llm_feedback.core.errors import InputError
from llm_feedback.prompts.raw_prompts import derive_prompt_id, world_knowledge
from llm_feedback.storage.parquet_source import file_batches
from llm_feedback.storage.schema import (
    ASPECT_ANNOTATIONS_COLUMN_TYPES,
    COMPLETIONS_COLUMN_TYPES,
    CRITIQUES_COLUMN_TYPES,
    ULTRAFEEDBACK_ASPECTS,
    ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA,
)
from llm_feedback.storage.spool import ChunkedParquet, SpooledTable, TableBuilder

# Who wrote the published annotations and critiques (UltraFeedback's judge).
PUBLISHED_JUDGE = "gpt-4"
_BATCH_RECORDS = 2_000
_RATINGS = {str(n): float(n) for n in range(1, 6)}


def _records_in(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, record) for each record of a Parquet or JSON Lines file, or of a folder of
    Parquet files (the Hub's shards, or a table saved in parts) in name order."""
    if path.is_dir():
        files = sorted(path.glob("*.parquet"))
        if not files:
            raise InputError(f"UltraFeedback records: the folder {path} holds no .parquet file")
        for file in files:
            yield from _parquet_records(file)
        return
    if not path.is_file():
        raise InputError(f"UltraFeedback records: {path} does not exist")
    if path.suffix == ".parquet":
        yield from _parquet_records(path)
        return
    if path.suffix not in (".jsonl", ".json"):
        raise InputError(f"UltraFeedback records: {path} is neither .parquet nor .jsonl")
    with path.open(encoding="utf-8", newline="\n") as lines:  # JSON Lines' own line ends
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise InputError(f"{path}, line {number}: not JSON ({error.msg})") from None
            if not isinstance(record, dict):
                raise InputError(f"{path}, line {number}: not a JSON object")
            yield f"{path}, line {number}", record


def _parquet_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    number = 0
    for batch in file_batches(pq.ParquetFile(path), _BATCH_RECORDS):
        for record in batch.to_pylist():
            number += 1
            yield f"{path}, record {number}", record


def _text(value: Any, where: str, field: str, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise InputError(f"{where}: field '{field}' must be a non-empty string, got {value!r}")
    return value


def _strings(value: Any, where: str, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{where}: field '{field}' must be a list of strings, got {value!r}")
    return list(value)


def _score(value: Any, where: str, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InputError(f"{where}: field '{field}' must be a number, got {value!r}")
    try:
        return float(value)
    except ValueError:
        raise InputError(f"{where}: field '{field}' must be a number, got {value!r}") from None


def _published_judge(judge_model: str) -> dict[str, Any]:
    """The judge's columns of a published annotation or critique: no call, reply or reask."""
    return {
        "reasks": 0,
        "judge_model": judge_model,
        "judge_endpoint": "published",
        "judge_backend": "published",
        "judge_via_batch": False,
        "suspected_injection": False,
        "raw_reply": None,
    }


def _aspect_row(
    key: tuple[str, int], aspect: str, annotation: Mapping[str, Any], judge_model: str
) -> dict[str, Any]:
    written = annotation.get("Rating")
    rating = _RATINGS.get(str(written).strip()) if written is not None else None
    is_na = isinstance(written, str) and written.strip().upper() == "N/A"
    status = "ok" if rating is not None else "na" if is_na else "no_match"
    typed = get_aspect(aspect).has_types
    rationale = annotation.get("Rationale For Rating") if typed else annotation.get("Rationale")
    return {
        "prompt_id": key[0],
        "completion_idx": key[1],
        "aspect": aspect,
        "shuffle_idx": 0,
        "position": key[1],
        "rating": rating,
        "is_na": is_na,
        "rationale": rationale,
        "types": [str(code) for code in annotation.get("Type") or []] if typed else [],
        "type_rationale": annotation.get("Rationale") if typed else None,
        "parse_status": status,
        "parse_error": None if status != "no_match" else f"published Rating {written!r}",
        **_published_judge(judge_model),
        "prompt_tokens": 0.0,
        "completion_tokens": 0.0,
        "cached_prompt_tokens": None,
        "cache_write_tokens": None,
    }


class PublishedTables:
    """The three tables of a file of published records (see the module docstring)."""

    def __init__(self, path: str | Path, judge_model: str = PUBLISHED_JUDGE) -> None:
        """Read every record of the file and build the three tables.

        Args:
            path: the published records (a file, or a folder of them).
            judge_model: the judge named in the tables (the published data's: gpt-4).
        """
        completions: list[dict[str, Any]] = []
        aspects = TableBuilder(ASPECT_ANNOTATIONS_COLUMN_TYPES)
        critiques = TableBuilder(CRITIQUES_COLUMN_TYPES)
        seen: dict[str, int] = {}
        aspect_rows = 0
        for where, record in _records_in(Path(path)):
            source = _text(record.get("source"), where, "source", required=True)
            instruction = _text(record.get("instruction"), where, "instruction", required=True)
            base = derive_prompt_id(source, instruction)
            seen[base] = seen.get(base, 0) + 1
            prompt_id = base if seen[base] == 1 else f"{base}-{seen[base]}"
            prompt = {
                "prompt_id": prompt_id,
                "source": source,
                "instruction": instruction,
                "correct_answers": _strings(
                    record.get("correct_answers"), where, "correct_answers"
                ),
                "incorrect_answers": _strings(
                    record.get("incorrect_answers"), where, "incorrect_answers"
                ),
            }
            prompt["world_knowledge"] = world_knowledge(prompt)
            listed = record.get("completions")
            if not isinstance(listed, list):
                raise InputError(f"{where}: field 'completions' must be a list, got {listed!r}")
            for idx, completion in enumerate(listed):
                at = f"{where}, completions[{idx}]"
                if not isinstance(completion, dict):
                    raise InputError(f"{at}: must be an object, got {completion!r}")
                completions.append(self._completion(prompt, idx, completion, at))
                annotations = completion.get("annotations") or {}
                for aspect in ULTRAFEEDBACK_ASPECTS:
                    annotation = annotations.get(aspect)
                    if isinstance(annotation, dict):
                        row = _aspect_row((prompt_id, idx), aspect, annotation, judge_model)
                        aspects.add(aspect_rows, row)
                        aspect_rows += 1
                score = _score(completion.get("overall_score"), at, "overall_score")
                critiques.add(
                    len(completions),
                    {
                        "prompt_id": prompt_id,
                        "completion_idx": idx,
                        "critique": _text(completion.get("critique"), at, "critique"),
                        "overall_score": score,
                        "parse_status": "ok" if score is not None else "no_match",
                        "parse_error": None if score is not None else "no published score",
                        **_published_judge(judge_model),
                    },
                )
        if not completions:
            raise InputError(f"UltraFeedback records: {path} holds no completions")
        self.completions = pd.DataFrame(completions, columns=list(COMPLETIONS_COLUMN_TYPES)).astype(
            {k: v for k, v in COMPLETIONS_COLUMN_TYPES.items() if v != "object"}
        )
        self.aspect_annotations: SpooledTable = aspects.finish()
        self.critiques: SpooledTable = critiques.finish()

    @staticmethod
    def _completion(
        prompt: Mapping[str, Any], idx: int, completion: Mapping[str, Any], at: str
    ) -> dict[str, Any]:
        return {
            **prompt,
            "completion_idx": idx,
            "model": _text(completion.get("model"), at, "model", required=True),
            "principle": _text(completion.get("principle"), at, "principle") or "",
            "system_prompt": _text(
                completion.get("custom_system_prompt"), at, "custom_system_prompt"
            )
            or "",
            "endpoint": "published",
            "backend": "published",
            "response": _text(completion.get("response"), at, "response"),
            "finish_reason": None,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "latency_s": float("nan"),
            "cached": False,
            "via_batch": False,
            "error": None,
        }


class PublishedExport(ChunkedParquet):
    """An `UltraFeedbackExport` written with only the public features (what was read):
    `to_parquet` as a Kedro `ParquetDataset` calls it, one row group per chunk."""

    arrow_schema = ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA

    def __init__(self, export: UltraFeedbackExport) -> None:
        """Keep the export to write.

        Args:
            export: the export, built when written.
        """
        self._export = export

    def __len__(self) -> int:
        return len(self._export)

    def arrow_chunks(self) -> Iterator[pa.Table]:
        names: Sequence[str] = ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA.names
        for chunk in self._export.arrow_chunks():
            yield chunk.select(names).cast(ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA)
