"""The dataset card (the Hub repository's README.md) of a pushed `ultrafeedback` or
`preference_pairs`: a YAML metadata block the Hub reads (license, task_categories,
size_categories, configs, dataset_info features) and a body saying how the data was made
(generator models, judge, principles, parameters, counts, licence, the judge's validation).

Written with every `kedro push-to-hub` (and printed by `--dry-run`) and beside each export
(`ultrafeedback_card`, 07_model_output). Pure: the run's parameters come in as a mapping.

The judge's validation is a hook: `judge_validation_section(markdown)` takes the judge
card's markdown (written by the judge-validation step) or None, in which case the card says
that this judge has not been validated.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa
import yaml

from llm_feedback.params import parse_annotate

NOT_VALIDATED = (
    "This judge has not been validated: no judge card was given, so how well its ratings "
    "agree with human labels is unknown. Review a sample (the judgment viewer's labels) "
    "before training on these preferences."
)
TAGS = ("preference", "rlhf", "dpo", "llm-as-judge", "ultrafeedback", "synthetic")
# The Hub's size categories, by upper bound.
SIZE_CATEGORIES = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
    (100_000_000, "10M<n<100M"),
)
DEFAULT_LICENSE = "other"
# The Hub's names of the Arrow types our schemas use (datasets' `Value` dtypes).
HUB_DTYPES = {
    pa.string(): "string",
    pa.large_string(): "large_string",
    pa.bool_(): "bool",
    pa.int32(): "int32",
    pa.int64(): "int64",
    pa.float32(): "float32",
    pa.float64(): "float64",
}


@dataclass(frozen=True)
class CardFacts:
    """What the card says about one pushed dataset."""

    dataset: str  # "ultrafeedback" or "preference_pairs"
    config_name: str
    split: str
    n_rows: int
    columns: tuple[str, ...]
    excluded_columns: tuple[str, ...] = ()
    models: Mapping[str, int] = field(default_factory=dict)  # generator -> completions
    sources: Mapping[str, int] = field(default_factory=dict)  # prompt source -> rows
    principles: Mapping[str, int] = field(default_factory=dict)  # principle -> completions
    judge: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    license: str = DEFAULT_LICENSE
    features: list[dict[str, Any]] | None = None  # datasets' YAML feature list


def size_category(n_rows: int) -> str:
    return next((label for bound, label in SIZE_CATEGORIES if n_rows < bound), "n>100M")


def counts_of(name: str, frames: Iterable[pd.DataFrame]) -> dict[str, Mapping[str, int]]:
    """Generator models, prompt sources and principles counted in the pushed table, given
    as frames (one, or a batch of rows each)."""
    models: Counter[str] = Counter()
    principles: Counter[str] = Counter()
    sources: Counter[str] = Counter()
    for frame in frames:
        if name == "ultrafeedback" and "completions" in frame:
            for completions in frame["completions"]:
                for completion in completions if completions is not None else []:
                    models[str(completion["model"])] += 1
                    principles[str(completion["principle"])] += 1
        for column in ("model_chosen", "model_rejected"):
            if column in frame:
                models.update(frame[column].astype(str))
        if "source" in frame:
            sources.update(frame["source"].astype(str))
    return {
        "models": dict(models.most_common()),
        "sources": dict(sources.most_common()),
        "principles": dict(principles.most_common()),
    }


# The columns `counts_of` reads.
COUNTED_COLUMNS = ("completions", "model_chosen", "model_rejected", "source")


def run_settings(parameters: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """(the judge, in words; the settings the card lists) from the run's parameters.
    Endpoint URLs and keys are left out: they are private."""
    settings: dict[str, Any] = {}
    judge = None
    if parameters.get("annotate") is not None or "endpoints" in parameters:
        annotate = parse_annotate(parameters.get("annotate"), parameters.get("endpoints"))
        endpoint = annotate.endpoint
        judge = f"{endpoint.model} ({endpoint.backend} backend)"
        settings["annotate"] = {
            "aspects": list(annotate.aspects),
            "n_shuffles": annotate.n_shuffles,
            "shuffle_seed": annotate.shuffle_seed,
            "aspect_orders": annotate.aspect_orders,
            "max_reasks": annotate.max_reasks,
            "score_fix": {
                "flip_threshold": annotate.score_fix.flip_threshold,
                "reannotate_threshold": annotate.score_fix.reannotate_threshold,
            },
        }
    sample = parameters.get("sample") or {}
    settings["sample"] = {
        key: sample[key] for key in ("n_completions", "seed", "max_prompts") if key in sample
    }
    if parameters.get("model_pool"):
        settings["model_pool"] = sorted(parameters["model_pool"])
    pairs = (parameters.get("report") or {}).get("pairs")
    if pairs:
        settings["preference_pairs"] = dict(pairs)
    return judge, {key: value for key, value in settings.items() if value}


def judge_validation_section(markdown: str | None) -> str:
    """The card's "Judge validation" body: the judge card's markdown as given, or a plain
    statement that the judge has not been validated."""
    text = (markdown or "").strip()
    return text if text else NOT_VALIDATED


def card_metadata(facts: CardFacts) -> dict[str, Any]:
    data_dir = facts.config_name
    metadata: dict[str, Any] = {
        "license": facts.license,
        "task_categories": ["text-generation"],
        "language": ["en"],
        "tags": list(TAGS),
        "size_categories": [size_category(facts.n_rows)],
        "pretty_name": f"llm_feedback {facts.dataset}",
        "configs": [
            {
                "config_name": facts.config_name,
                "data_files": [{"split": facts.split, "path": f"{data_dir}/{facts.split}-*"}],
            }
        ],
    }
    if facts.features is not None:
        metadata["dataset_info"] = [
            {
                "config_name": facts.config_name,
                "features": facts.features,
                "splits": [{"name": facts.split, "num_examples": facts.n_rows}],
            }
        ]
    return metadata


def _table(counts: Mapping[str, int], what: str) -> list[str]:
    if not counts:
        return [f"No {what} recorded in this dataset."]
    lines = [f"| {what} | count |", "|---|---:|"]
    lines += [f"| {name} | {count:,} |" for name, count in counts.items()]
    return lines


def dataset_card(facts: CardFacts, judge_card: str | None = None) -> str:
    """The README.md text: `---` YAML metadata `---`, then the body."""
    metadata = yaml.safe_dump(card_metadata(facts), sort_keys=False, allow_unicode=True)
    layout = (
        "the openbmb/UltraFeedback layout (one row per prompt, its completions with their "
        "aspect ratings, critique and overall score)"
        if facts.dataset == "ultrafeedback"
        else "preference pairs (prompt, chosen, rejected, their scores) for DPO or reward "
        "model training"
    )
    excluded = (
        "Our own columns (" + ", ".join(facts.excluded_columns) + ") are left out: this "
        "push has the public columns only."
        if facts.excluded_columns
        else "Every column of the dataset is included."
    )
    licence = (
        f"`{facts.license}`."
        if facts.license != DEFAULT_LICENSE
        else "not stated (`other`): pass `--license` to push-to-hub. The completions are "
        "outputs of the generator models below, whose terms apply."
    )
    body = [
        f"# llm_feedback: {facts.dataset}",
        "",
        f"Made with the llm_feedback pipeline (sample -> generate -> annotate -> report), a "
        f"reproduction of UltraFeedback. This is {layout}.",
        "",
        f"- rows: {facts.n_rows:,} in split `{facts.split}` (configuration `{facts.config_name}`)",
        f"- columns: {', '.join(facts.columns)}",
        f"- {excluded}",
        f"- judge: {facts.judge or 'not recorded'}",
        f"- licence: {licence}",
        "",
        "## Generator models",
        "",
        *_table(facts.models, "model"),
        "",
        "## Principles",
        "",
        *_table(facts.principles, "principle"),
        "",
        "## Prompt sources",
        "",
        *_table(facts.sources, "source"),
        "",
        "## Parameters",
        "",
        "```yaml",
        yaml.safe_dump(dict(facts.settings), sort_keys=False).rstrip() or "{}",
        "```",
        "",
        "## Judge validation",
        "",
        judge_validation_section(judge_card),
        "",
    ]
    return f"---\n{metadata}---\n\n" + "\n".join(body)


def feature_list(schema: pa.Schema) -> list[dict[str, Any]]:
    """The card's `dataset_info.features` for `schema`, as `datasets.Features.from_arrow_schema
    (schema)._to_yaml_list()` writes it (tests/test_hub_card.py compares the two). Written
    here because importing `datasets` costs a second or two of every annotate run, which
    writes this card."""
    return [{"name": column.name, **_feature(column.type)} for column in schema]


def _feature(arrow_type: pa.DataType) -> dict[str, Any]:
    if pa.types.is_struct(arrow_type):
        return {"struct": [{"name": part.name, **_feature(part.type)} for part in arrow_type]}
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        item = _feature(arrow_type.value_type)
        if list(item) in (["dtype"], ["struct"]):  # a list of values or of structs, inlined
            item = next(iter(item.values()))
        return {"large_list" if pa.types.is_large_list(arrow_type) else "list": item}
    if arrow_type not in HUB_DTYPES:
        raise TypeError(f"no Hub feature type for the Arrow type {arrow_type}")
    return {"dtype": HUB_DTYPES[arrow_type]}


def export_card(
    completions: pd.DataFrame,
    parameters: Mapping[str, Any],
    features: list[dict[str, Any]] | None = None,
    judge_card: str | None = None,
) -> str:
    """The card written beside the `ultrafeedback` export, counted from the run's
    `completions` (one export row per prompt) and describing the default push: the public
    columns. `kedro push-to-hub` builds its own card from the data it sends."""
    from llm_feedback.schema import ULTRAFEEDBACK_ARROW_SCHEMA, ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA

    judge, settings = run_settings(parameters)
    public = ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA.names
    per_prompt = completions.drop_duplicates("prompt_id")
    facts = CardFacts(
        dataset="ultrafeedback",
        config_name="ultrafeedback",
        split="train",
        n_rows=len(per_prompt),
        columns=tuple(public),
        excluded_columns=tuple(c for c in ULTRAFEEDBACK_ARROW_SCHEMA.names if c not in public),
        models=dict(Counter(completions["model"].astype(str)).most_common()),
        sources=dict(Counter(per_prompt["source"].astype(str)).most_common()),
        principles=dict(Counter(completions["principle"].astype(str)).most_common()),
        judge=judge,
        settings=settings,
        features=features,
    )
    return dataset_card(facts, judge_card)
