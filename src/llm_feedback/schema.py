"""The datasets' columns: keys, order and dtypes, one place.

`<DATASET>_COLUMN_TYPES` maps the columns of the catalog dataset `<dataset>`, in their
order, to the pandas dtype its producer gives them, so that the Parquet schema does not
depend on which values happened to occur; `..._KEY` tuples name the columns that tell one
row from another; `..._COLUMNS` tuples list columns without dtypes. The dtype strings are
the producers' own ("string" in the generate, annotate and evaluate tables, "str" in the
report tables) and are not unified here.

The outputs other tools read (`ultrafeedback`, `preference_pairs`) are defined by an Arrow
schema instead, `<DATASET>_ARROW_SCHEMA`, written with the types of the public Hugging Face
datasets they follow (`string`, not `large_string`; `list<struct<content, role>>` chat
messages), so that `datasets` loads them with the public features and
`concatenate_datasets` accepts them. Their pandas dtypes are derived from it
(`pandas_dtypes`), and `SchemaFrame` carries the schema to `to_parquet`: Kedro's
ParquetDataset calls `frame.to_parquet(...)`, and a pyarrow schema cannot be given in the
catalog's YAML.

These are not the JSON schemas that judges' structured replies follow: those are the
`..._REPLY_SCHEMA` constants and `..._reply_schema()` functions next to their prompts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

# The evaluate tables live in schema_evaluate.py; imported here so that every table is
# found in one module.
from llm_feedback.schema_evaluate import (  # noqa: F401 - re-exported
    EVAL_ANNOTATOR_AGREEMENT_COLUMN_TYPES,
    EVAL_GOLD_COLUMN_TYPES,
    EVAL_INSTANCE_COLUMNS,
    EVAL_JUDGMENTS_COLUMN_TYPES,
    EVAL_MEDIA_COLUMN_TYPES,
    EVAL_METRICS_COLUMN_TYPES,
    EVAL_MODEL_RANKING_COLUMN_TYPES,
    EVAL_PAIRWISE_JUDGMENTS_COLUMN_TYPES,
    EVAL_RECORDED_COLUMN_TYPES,
    EVAL_SAMPLES_COLUMN_TYPES,
    EVAL_SAMPLES_INTERNAL_COLUMNS,
    EVAL_SAMPLES_PRIOR_COLUMNS,
    EVAL_SAMPLES_REQUIRED_COLUMNS,
    JUDGE_IDENTITY_COLUMNS,
    JUDGE_VALIDATION_COLUMN_TYPES,
)

# The report's metric tables, the cost table and the run plan live in schema_report.py.
from llm_feedback.schema_report import (  # noqa: F401 - re-exported
    COST_TABLE_COLUMN_TYPES,
    JUDGE_BIAS_COLUMN_TYPES,
    JUDGE_HEALTH_COLUMN_TYPES,
    MODEL_ASPECT_METRICS_COLUMN_TYPES,
    MODEL_RANKING_COLUMN_TYPES,
    MODEL_SCORE_METRICS_COLUMN_TYPES,
    POSITION_CONSISTENCY_COLUMN_TYPES,
    RATING_BY_LENGTH_COLUMN_TYPES,
    RATING_BY_POSITION_COLUMN_TYPES,
    RUN_PLAN_COLUMN_TYPES,
    SHUFFLE_AGREEMENT_COLUMN_TYPES,
    SOURCE_ASPECT_METRICS_COLUMN_TYPES,
    STYLE_COEFFICIENTS_COLUMN_TYPES,
)

# --- keys ---------------------------------------------------------------------------------

# One completion: a row of `completions` and `overall_scores`, and the completion an
# `aspect_annotations` or `critiques` row is about.
COMPLETION_KEY = ("prompt_id", "completion_idx")
# What tells one sample (and its judge call) from another.
EVAL_SAMPLE_KEY = ("instance_id", "turn", "model", "replicate", "ensemble_member")

# --- sample: raw_prompts, sampled_prompts -------------------------------------------------

RAW_PROMPTS_REQUIRED_COLUMNS: tuple[str, ...] = ("source", "instruction")
ANSWER_LIST_COLUMNS: tuple[str, ...] = ("correct_answers", "incorrect_answers")
RAW_PROMPTS_COLUMNS: tuple[str, ...] = (
    "prompt_id",
    "source",
    "instruction",
    *ANSWER_LIST_COLUMNS,
    "reference_answer",
)
SAMPLED_PROMPTS_COLUMNS: tuple[str, ...] = (
    "prompt_id",
    "completion_idx",
    "source",
    "instruction",
    *ANSWER_LIST_COLUMNS,
    "reference_answer",
    "world_knowledge",
    "model",
    "principle",
    "system_prompt",
)

# --- generate: completions ----------------------------------------------------------------

# `correct_answers` / `incorrect_answers` are carried from `sampled_prompts` (Python lists of
# strings, empty when the source has none) for the UltraFeedback export.
COMPLETIONS_COLUMN_TYPES = {
    "prompt_id": "string",
    "completion_idx": "int64",
    "source": "string",
    "instruction": "string",
    "correct_answers": "object",
    "incorrect_answers": "object",
    "world_knowledge": "string",
    "model": "string",
    "principle": "string",
    "system_prompt": "string",
    "endpoint": "string",
    "backend": "string",
    "response": "string",
    "finish_reason": "string",
    "prompt_tokens": "int64",
    "completion_tokens": "int64",
    "latency_s": "float64",
    "cached": "bool",
    "via_batch": "bool",  # answered through a Batch API (priced at the batch rate)
    "error": "string",
}

# --- annotate: aspect_annotations, critiques, ultrafeedback -------------------------------

# `overall_scores` has no dtype map of its own: `annotation.score_fix` builds it from
# `completions` and `critiques` by merges, keyed by `COMPLETION_KEY`.

# `types` holds Python lists of strings (Parquet list<string>).
ASPECT_ANNOTATIONS_COLUMN_TYPES: Mapping[str, Any] = {
    "prompt_id": "string",
    "completion_idx": "int64",
    "aspect": "string",
    "shuffle_idx": "int64",
    "position": "int64",
    "rating": "Float64",
    "is_na": "bool",
    "rationale": "string",
    "types": "object",
    "type_rationale": "string",
    "parse_status": "string",  # a word of llm_feedback.replies.status
    "parse_error": "string",  # why the rating is null (call error or parse failure)
    "reasks": "int64",
    "judge_model": "string",
    "judge_endpoint": "string",  # the endpoint's name in parameters.yml
    "judge_backend": "string",  # local | openai | azure | vllm | ...
    "judge_via_batch": "bool",  # the judge answered through a Batch API
    "suspected_injection": "bool",  # addresses the evaluator or carries a verdict: rated
    # alone, as written and without those spans, the lower rating kept (annotation.isolation)
    # The call's reply, shared by its rows: each distinct reply stored once (Parquet
    # dictionary), as a call rates several completions.
    "raw_reply": "category",
    "prompt_tokens": "float64",  # this row's share of its call's tokens
    "completion_tokens": "float64",
}

CRITIQUES_COLUMN_TYPES: Mapping[str, Any] = {
    "prompt_id": "string",
    "completion_idx": "int64",
    "critique": "string",
    "overall_score": "Float64",
    "parse_status": "string",  # a word of llm_feedback.replies.status
    "parse_error": "string",
    "reasks": "int64",
    "judge_model": "string",
    "judge_endpoint": "string",
    "judge_backend": "string",
    "judge_via_batch": "bool",
    "suspected_injection": "bool",
    "raw_reply": "string",
}

# One record per prompt. The public openbmb/UltraFeedback features, as its dataset card lists
# them (ratings are strings: "1".."5" or "N/A"; `Type` lists type codes).
_RATED = pa.struct([("Rating", pa.string()), ("Rationale", pa.string())])
_RATED_WITH_TYPES = pa.struct(
    [
        ("Type", pa.list_(pa.string())),
        ("Rationale", pa.string()),
        ("Rating", pa.string()),
        ("Rationale For Rating", pa.string()),
    ]
)
# The aspects of the public `annotations` struct, in the card's order.
ULTRAFEEDBACK_ASPECTS: tuple[str, ...] = (
    "instruction_following",
    "honesty",
    "truthfulness",
    "helpfulness",
)
# Aspects we rate beyond the public four; the export keeps them outside `completions`.
ULTRAFEEDBACK_EXTRA_ASPECTS: tuple[str, ...] = ("harmlessness",)
ULTRAFEEDBACK_COMPLETION = pa.struct(
    [
        (
            "annotations",
            pa.struct(
                [
                    ("instruction_following", _RATED),
                    ("honesty", _RATED),
                    ("truthfulness", _RATED_WITH_TYPES),
                    ("helpfulness", _RATED_WITH_TYPES),
                ]
            ),
        ),
        ("critique", pa.string()),
        ("custom_system_prompt", pa.string()),
        ("fine-grained_score", pa.float64()),
        ("model", pa.string()),
        ("overall_score", pa.float64()),
        ("principle", pa.string()),
        ("response", pa.string()),
    ]
)
ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("instruction", pa.string()),
        ("models", pa.list_(pa.string())),
        ("completions", pa.list_(ULTRAFEEDBACK_COMPLETION)),
        ("correct_answers", pa.list_(pa.string())),
        ("incorrect_answers", pa.list_(pa.string())),
    ]
)
# Ours, as top-level columns: inside `completions` an extra field would make the list's
# type differ from the public one, which `datasets.concatenate_datasets` refuses; extra
# top-level columns it accepts (null in the public rows), and `annotation.export.to_public`
# drops them. `extra_annotations` and `annotation_status` hold one entry per completion, in
# the order of `completions`; a status is the aspect's `parse_status` word.
# `shuffle_ratings` holds, per completion and aspect, every shuffle's rating string in
# shuffle order (the public `Rating` is one shuffle's; see annotation/export.py).
ULTRAFEEDBACK_OWN_COLUMNS: tuple[str, ...] = (
    "prompt_id",
    "extra_annotations",
    "annotation_status",
    "shuffle_ratings",
)
ULTRAFEEDBACK_ARROW_SCHEMA = pa.schema(
    [
        ("prompt_id", pa.string()),
        *ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA,
        (
            "extra_annotations",
            pa.list_(pa.struct([(aspect, _RATED) for aspect in ULTRAFEEDBACK_EXTRA_ASPECTS])),
        ),
        (
            "annotation_status",
            pa.list_(
                pa.struct(
                    [
                        (aspect, pa.string())
                        for aspect in (*ULTRAFEEDBACK_ASPECTS, *ULTRAFEEDBACK_EXTRA_ASPECTS)
                    ]
                )
            ),
        ),
        (
            "shuffle_ratings",
            pa.list_(
                pa.struct(
                    [
                        (aspect, pa.list_(pa.string()))
                        for aspect in (*ULTRAFEEDBACK_ASPECTS, *ULTRAFEEDBACK_EXTRA_ASPECTS)
                    ]
                )
            ),
        ),
    ]
)

# --- evaluate: in schema_evaluate.py (imported above) -------------------------------------


# --- report: preference_pairs, pair_drops, pair_counts (the rest: schema_report.py) -------

# Chat messages as the Hugging Face datasets store them.
CHAT_MESSAGES = pa.list_(pa.struct([("content", pa.string()), ("role", pa.string())]))

# `report.pairs.layout: trl` (default): TRL's conversational preference format with an
# explicit prompt: `prompt` holds the user message, `chosen` / `rejected` the assistant
# message only.
PREFERENCE_PAIRS_ARROW_SCHEMA = pa.schema(
    [
        ("prompt_id", pa.string()),
        ("prompt", CHAT_MESSAGES),
        ("chosen", CHAT_MESSAGES),
        ("rejected", CHAT_MESSAGES),
        ("score_chosen", pa.float64()),
        ("score_rejected", pa.float64()),
        ("source", pa.string()),
        ("model_chosen", pa.string()),
        ("model_rejected", pa.string()),
        ("completion_idx_chosen", pa.int64()),
        ("completion_idx_rejected", pa.int64()),
        ("score_kind", pa.string()),
    ]
)
# `report.pairs.layout: h4`: HuggingFaceH4/ultrafeedback_binarized's features, exactly:
# `prompt` text, `chosen` / `rejected` whole conversations (user + assistant), `messages`
# the chosen one.
PREFERENCE_PAIRS_H4_ARROW_SCHEMA = pa.schema(
    [
        ("prompt", pa.string()),
        ("prompt_id", pa.string()),
        ("chosen", CHAT_MESSAGES),
        ("rejected", CHAT_MESSAGES),
        ("messages", CHAT_MESSAGES),
        ("score_chosen", pa.float64()),
        ("score_rejected", pa.float64()),
    ]
)
PREFERENCE_PAIRS_ARROW_SCHEMAS: Mapping[str, pa.Schema] = {
    "trl": PREFERENCE_PAIRS_ARROW_SCHEMA,
    "h4": PREFERENCE_PAIRS_H4_ARROW_SCHEMA,
}
PAIR_DROPS_COLUMN_TYPES = {"reason": "str", "n_prompts": "int64"}
# One row: how many pairs, from how many prompts (the report's line, without reading them).
PAIR_COUNTS_COLUMN_TYPES = {"pairs": "int64", "prompts": "int64"}


# --- Arrow-typed outputs --------------------------------------------------------------------


def pandas_dtypes(schema: pa.Schema) -> dict[str, str]:
    """The in-memory pandas dtype of each column of `schema`: "str" for text, the numpy
    dtype for numbers and booleans, "object" (Python lists and dicts) for nested types."""
    flat = {pa.string(): "str", pa.float64(): "float64", pa.int64(): "int64", pa.bool_(): "bool"}
    return {field.name: flat.get(field.type, "object") for field in schema}


class SchemaFrame(pd.DataFrame):
    """A DataFrame that `to_parquet` writes with `arrow_schema` rather than the types pyarrow
    would infer (`large_string` for pandas' "str", `null` for a column or struct field
    without a value, `list<null>` for lists that are all empty).

    Only the frame itself carries the schema: anything derived from it (a slice, a copy) is
    a plain DataFrame. Build one with `schema_frame`.
    """

    _metadata: ClassVar[list[str]] = ["arrow_schema"]
    arrow_schema: pa.Schema | None = None

    def to_parquet(self, path: Any = None, *args: Any, **kwargs: Any) -> Any:
        if self.arrow_schema is not None and "schema" not in kwargs:
            if list(self.columns) != self.arrow_schema.names:
                raise ValueError(
                    f"columns {list(self.columns)} do not match the Arrow schema's "
                    f"{self.arrow_schema.names}"
                )
            kwargs["schema"] = self.arrow_schema
            kwargs.setdefault("index", False)
            if any(isinstance(dtype, pd.ArrowDtype) for dtype in self.dtypes):
                return self._write_arrow_backed(path, *args, **kwargs)
        return super().to_parquet(path, *args, **kwargs)

    def _write_arrow_backed(self, path: Any, *args: Any, **kwargs: Any) -> None:
        """Arrow-backed nested columns written as-is, without copying them into Python values.

        pandas would record their dtypes as "list<...>[pyarrow]", which `read_parquet` cannot
        restore: the file records the dtypes of `pandas_dtypes`, as a frame of Python lists
        and dicts does, so it is the same file.
        """
        schema = kwargs.pop("schema")
        if args or kwargs.pop("index") or kwargs.pop("engine", "pyarrow") != "pyarrow":
            raise ValueError("an Arrow-backed SchemaFrame is written by pyarrow, without index")
        table = pa.Table.from_pandas(self, schema=schema, preserve_index=False)
        pq.write_table(table.replace_schema_metadata(pandas_metadata(schema)), path, **kwargs)


def pandas_metadata(schema: pa.Schema) -> dict[bytes, bytes]:
    """The schema metadata pandas writes for a frame of `pandas_dtypes(schema)` (Python
    values in nested columns), which `read_parquet` reads back to the same dtypes."""
    described = pa.Table.from_pandas(schema_frame([], schema), schema=schema, preserve_index=False)
    return described.schema.metadata


def schema_frame(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> SchemaFrame:
    """`rows` (dicts of Python values) as a `SchemaFrame` with `schema`'s columns, in its
    order, and the dtypes of `pandas_dtypes(schema)`; empty rows give an empty, typed frame."""
    dtypes = pandas_dtypes(schema)
    columns = {
        name: pd.Series([row[name] for row in rows], dtype=dtype) for name, dtype in dtypes.items()
    }
    frame = SchemaFrame(columns)
    frame.arrow_schema = schema
    return frame
