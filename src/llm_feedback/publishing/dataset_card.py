"""The dataset card (the Hub repository's README.md) of a pushed `ultrafeedback` or
`preference_pairs`: a YAML metadata block the Hub reads (license, task_categories,
size_categories, configs, dataset_info features) and a body saying how the data was made
(generator models, judge, principles, parameters, counts, licence, the judge's validation).

Written with every `kedro push-to-hub` (and printed by `--dry-run`) and beside each export
(`ultrafeedback_card`, 07_model_output). Pure: the judge and settings come in as values.

Both build the card from the data's own lineage (`run_record`: the judge and settings of
the runs that wrote the data; beside the export, the run's `run_lineage`), never from the
configuration current when the card is written: the judge in words, its endpoint's name,
backend, sampling and key as recorded (never its URL: a card is public). The judge's
validation: `judge_validation_section(markdown)` takes the judge card's markdown
(`--judge-card`, else `dataset_card_validation`: the cards of the recorded judge's model,
endpoint and sampling) or None, in which case the card says that this judge has not been
validated; after it, `annotate_judge_agreement`: the recorded judge's
agreement with reviewers' labels (its card from `report.labels.path`), or "not
validated". Names from configuration are escaped.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa
import yaml

from llm_feedback.params import parse_annotate
from llm_feedback.reporting.judge_card import annotate_judge_identity
from llm_feedback.reporting.markdown_escape import (
    code_fence,
    code_span,
    markdown_text,
    table_cell_text,
)
from llm_feedback.validation.identity import public_endpoint

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
    # The recorded judge's endpoint, in words (`judge_endpoint_words`); None: not recorded.
    judge_endpoint: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    license: str = DEFAULT_LICENSE
    features: list[dict[str, Any]] | None = None  # datasets' YAML feature list
    # The prompts' check against evaluation benchmarks: `contamination_counts` rows (one
    # per benchmark); empty when none was checked.
    contamination: tuple[Mapping[str, Any], ...] = ()
    # Split -> rows, when the data has several splits (preference pairs: train and test);
    # empty: all `n_rows` in `split`.
    splits: Mapping[str, int] = field(default_factory=dict)
    # How the test split was drawn (a sentence), when there is one.
    split_note: str | None = None

    def split_rows(self) -> dict[str, int]:
        return dict(self.splits) if self.splits else {self.split: self.n_rows}


def size_category(n_rows: int) -> str:
    """The Hub's size category of a dataset.

    Args:
        n_rows: the dataset's number of rows.

    Returns:
        The Hub's label for it, such as "1K<n<10K".
    """
    return next((label for bound, label in SIZE_CATEGORIES if n_rows < bound), "n>100M")


def counts_of(name: str, frames: Iterable[pd.DataFrame]) -> dict[str, Mapping[str, int]]:
    """Generator models, prompt sources and principles counted in the pushed table, given
    as frames (one, or a batch of rows each).

    Args:
        name: the dataset's catalog name (which columns it has to count).
        frames: the pushed table, whole or a batch of rows at a time.

    Returns:
        The counts by kind ("models", "sources", "principles"), each by value.
    """
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


def stage_settings(parameters: Mapping[str, Any], stage: str) -> dict[str, Any]:
    """What the card says about one stage ("sample", "generate", "annotate", "report") of
    the run whose `parameters` are given: the settings it lists (keyed as `run_settings`'s)
    and, for annotate, "judge" (in words) and "judge_identity" (the card key's columns).
    Endpoint URLs and keys are left out: they are private.

    Args:
        parameters: the run's parameters.
        stage: the stage.

    Returns:
        The stage's part; empty when the parameters do not configure it.
    """
    part: dict[str, Any] = {}
    if stage == "sample":
        sample = parameters.get("sample") or {}
        keys = ("n_completions", "seed", "max_prompts")
        chosen = {key: sample[key] for key in keys if key in sample}
        if chosen:
            part["sample"] = chosen
    elif stage == "generate" and parameters.get("model_pool"):
        part["model_pool"] = sorted(parameters["model_pool"])
    elif stage == "annotate" and (
        parameters.get("annotate") is not None or "endpoints" in parameters
    ):
        annotate = parse_annotate(
            parameters.get("annotate"),
            parameters.get("endpoints"),
            parameters.get("prompt_templates"),
        )
        endpoint = annotate.endpoint
        identity = annotate_judge_identity(annotate)
        weights = identity["judge_model_file"]
        part["judge"] = f"{endpoint.model} ({endpoint.backend} backend" + (
            f", model file {weights})" if weights else ")"
        )
        part["judge_identity"] = identity
        part["judge_endpoint"] = judge_endpoint_record(endpoint, weights)
        part["annotate"] = {
            "aspects": list(annotate.aspects),
            "judge_sampling": dict(annotate.aspect_sampling),
            "n_shuffles": annotate.n_shuffles,
            "shuffle_seed": annotate.shuffle_seed,
            "aspect_orders": annotate.aspect_orders,
            "max_reasks": annotate.max_reasks,
            "score_fix": {
                "flip_threshold": annotate.score_fix.flip_threshold,
                "reannotate_threshold": annotate.score_fix.reannotate_threshold,
            },
        }
    elif stage == "report":
        pairs = (parameters.get("report") or {}).get("pairs")
        if pairs:
            part["preference_pairs"] = dict(pairs)
    return part


def judge_endpoint_record(endpoint: Any, model_file: str = "") -> dict[str, Any]:
    """What the run record keeps of the judge's endpoint: its configured name, backend,
    model, model file and base URL, the URL without user, password, query or fragment
    (`validation.identity.public_endpoint`; None for an in-process model). The report shows
    it; a dataset card, which is public, leaves the URL out.

    Args:
        endpoint: the judge's `EndpointConfig`.
        model_file: the model file of an in-process model ("" when none).

    Returns:
        The record's endpoint fields.
    """
    url = endpoint.options.public_url()
    return {
        "name": endpoint.name,
        "backend": endpoint.backend,
        "model": endpoint.model,
        "model_file": model_file,
        "base_url": public_endpoint(url) if url else None,
    }


def judge_endpoint_words(
    endpoint: Mapping[str, Any], sampling: Mapping[str, Any], judge_key: str | None
) -> str:
    """The card's line on the recorded judge's endpoint: its configured name, backend,
    sampling and judge key, as the run recorded them. The URL is left out: a card is
    public, an endpoint's address is not.

    Args:
        endpoint: the recorded endpoint (`judge_endpoint_record`).
        sampling: the recorded judge sampling settings.
        judge_key: the recorded judge key (None: not recorded).

    Returns:
        The line, in words.
    """
    parts = (
        [f"backend {markdown_text(str(endpoint['backend']))}"] if endpoint.get("backend") else []
    )
    parts.append(f"sampling {code_span(json.dumps(dict(sampling), sort_keys=True))}")
    if judge_key:
        parts.append(f"judge key {code_span(judge_key)}")
    name = endpoint.get("name") or "unnamed"
    return f"{code_span(name)} ({'; '.join(parts)}; its URL is not published)"


# The keys of a stage's part (and of its run record entry) that are not settings.
NOT_SETTINGS = ("judge", "judge_identity", "judge_endpoint", "run", "recorded")
# The stages whose settings a card lists, in data-flow order.
CARD_STAGES = ("sample", "generate", "annotate", "report")


def card_settings(parts: Mapping[str, Mapping[str, Any]]) -> tuple[str | None, dict[str, Any]]:
    """(the judge, in words; the settings the card lists) from each stage's part
    (`stage_settings`), in the card's order.

    Args:
        parts: stage -> its part.

    Returns:
        The judge (None when no annotate part says) and the settings.
    """
    settings: dict[str, Any] = {}
    for stage in CARD_STAGES:
        part = parts.get(stage) or {}
        settings.update({k: v for k, v in part.items() if k not in NOT_SETTINGS})
    judge = (parts.get("annotate") or {}).get("judge")
    order = ("annotate", "sample", "model_pool", "preference_pairs")
    ordered = {key: settings[key] for key in order if settings.get(key)}
    ordered.update({k: v for k, v in settings.items() if k not in ordered and v})
    return judge, ordered


def run_settings(parameters: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """(the judge, in words; the settings the card lists) from one run's parameters, every
    stage as that run configured it (`stage_settings`). Endpoint URLs and keys are left
    out: they are private.

    Args:
        parameters: the run's parameters (all blocks).

    Returns:
        (the judge in words, or None; the settings the card lists).
    """
    return card_settings({stage: stage_settings(parameters, stage) for stage in CARD_STAGES})


def judge_validation_section(markdown: str | None) -> str:
    """The card's "Judge validation" body: the judge card's markdown as given, or a plain
    statement that the judge has not been validated.

    Args:
        markdown: the judge card's markdown (None: no validation).

    Returns:
        The section's body.
    """
    text = (markdown or "").strip()
    return text if text else NOT_VALIDATED


def dataset_card_validation(cards: pd.DataFrame, identity: Mapping[str, str]) -> str:
    """The card's "Judge validation" body for the judge that rated the data: the cards of
    its model, endpoint and sampling on any task (`validation.card.validation_standing`),
    or the statement that there is none.

    Args:
        cards: judge_validation rows.
        identity: the judge's identity columns, from the data's run record.

    Returns:
        Markdown.
    """
    from llm_feedback.validation.card import validation_standing  # noqa: PLC0415 - matplotlib

    standing = validation_standing(cards, identity)
    return "\n".join(f"- {line}" for line in standing.lines) + "\n\n" + standing.caveat


ANNOTATE_NOT_VALIDATED = (
    "Agreement with human labels: **not validated**. No reviewer labels have been matched to "
    "this judge's ratings (the judgment viewer's `labels.jsonl` as `report.labels.path`), "
    "so how far its ratings agree with people's is unknown."
)


# What an annotate card's figures compare with the labels (`validation.annotate_labels`):
# its ratings, and the pairs its ratings make (the argmax verdicts).
_MEASURED_ON = {"argmax": "pairs from its ratings", "ratings": "ratings"}


def annotate_judge_agreement(cards: pd.DataFrame, judge_key: str | None) -> str:
    """The card's lines on how far the annotate judge that rated the data agrees with human
    labels: its latest card from reviewers' labels on each validation set
    (`annotate_judge_validation`, made by the report pipeline from `report.labels.path`),
    every figure with its interval and size, or `ANNOTATE_NOT_VALIDATED`.

    Args:
        cards: annotate_judge_validation rows (every judge's, every run).
        judge_key: the key of the judge that rated the data (its run record's), or None.

    Returns:
        Markdown.
    """
    from llm_feedback.validation.card import JUDGE, latest_rows  # noqa: PLC0415 - matplotlib

    rows = latest_rows(cards, judge_key) if judge_key and len(cards) else cards.iloc[0:0]
    rows = rows[rows["kind"] == JUDGE] if len(rows) else rows
    if rows.empty:
        return ANNOTATE_NOT_VALIDATED
    table = [
        "| validation set | measured | on | metric | value | interval | n |",
        "| --- | --- | --- | --- | ---: | --- | ---: |",
    ]
    for _, row in rows.sort_values(["validation_set", "verdict_source", "metric"]).iterrows():
        low, high = float(row["ci_low"]), float(row["ci_high"])
        interval = f"[{low:.3f}, {high:.3f}]" if pd.notna(low) and pd.notna(high) else "none"
        cells = (
            row["validation_set"],
            row["created_at"],
            _MEASURED_ON.get(str(row["verdict_source"]), str(row["verdict_source"]))
            if pd.notna(row["verdict_source"])
            else "",
            row["metric"],
            f"{float(row['value']):.3f}",
            interval,
            str(int(row["n"])) if pd.notna(row["n"]) else "",
        )
        table.append("| " + " | ".join(table_cell_text(str(cell)) for cell in cells) + " |")
    method = next((str(m) for m in rows["ci_method"].dropna()), "")
    return "\n".join(
        [
            "Agreement of the judge that rated this data with human labels (its card from "
            "reviewers' labels"
            + (f"; intervals: {markdown_text(method)}" if method else "")
            + "):",
            "",
            *table,
        ]
    )


def card_metadata(facts: CardFacts) -> dict[str, Any]:
    """The card's YAML metadata (license, tags, size, configs, dataset_info).

    Args:
        facts: what the card says of the dataset.

    Returns:
        The metadata, as the Hub reads it.
    """
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
                "data_files": [
                    {"split": split, "path": f"{data_dir}/{split}-*"}
                    for split in facts.split_rows()
                ],
            }
        ],
    }
    if facts.features is not None:
        metadata["dataset_info"] = [
            {
                "config_name": facts.config_name,
                "features": facts.features,
                "splits": [
                    {"name": split, "num_examples": rows}
                    for split, rows in facts.split_rows().items()
                ],
            }
        ]
    return metadata


def _table(counts: Mapping[str, int], what: str) -> list[str]:
    if not counts:
        return [f"No {what} recorded in this dataset."]
    lines = [f"| {what} | count |", "|---|---:|"]
    lines += [f"| {table_cell_text(str(name))} | {count:,} |" for name, count in counts.items()]
    return lines


def contamination_section(counts: Iterable[Mapping[str, Any]]) -> list[str]:
    """The card's (and the report's) "Decontamination" lines: how the prompts were checked
    against evaluation benchmarks and how many matched, were removed or flagged per
    benchmark; or that they were not checked.

    Args:
        counts: `contamination_counts` rows (`contamination.overlap.COUNT_COLUMNS`).

    Returns:
        Markdown lines.
    """
    rows = list(counts)
    if not rows:
        return [
            "The prompts were not checked against any evaluation benchmark "
            "(`decontamination.benchmarks` was not set): overlap with benchmarks is unknown."
        ]
    checked = int(rows[0]["prompts_checked"])
    lines = [
        f"The {checked:,} prompts were checked against {len(rows)} evaluation benchmark(s) "
        f"by {markdown_text(str(rows[0]['method']))}. The table counts the prompts matching "
        "each benchmark and what was done with them; the matches, each with its benchmark "
        "item, are in `prompt_contamination`.",
        "",
        "| benchmark | items | prompts matched | of which equal | removed | flagged |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {table_cell_text(str(row['benchmark']))} | {int(row['items']):,} | "
        f"{int(row['matched']):,} | {int(row['exact']):,} | {int(row['removed']):,} | "
        f"{int(row['flagged']):,} |"
        for row in rows
    ]
    return lines


def dataset_card(facts: CardFacts, judge_card: str | None = None) -> str:
    """The README.md text: `---` YAML metadata `---`, then the body.

    Args:
        facts: what the card says of the dataset.
        judge_card: the judge's validation (markdown; None: not validated).

    Returns:
        The card's text.
    """
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
        "- rows: "
        + ", ".join(f"{rows:,} in split `{split}`" for split, rows in facts.split_rows().items())
        + f" (configuration `{facts.config_name}`)",
        *([f"- splits: {facts.split_note}"] if facts.split_note else []),
        f"- columns: {', '.join(facts.columns)}",
        f"- {excluded}",
        f"- judge: {markdown_text(facts.judge) if facts.judge else 'not recorded'}",
        *([f"- judge endpoint: {facts.judge_endpoint}"] if facts.judge_endpoint else []),
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
        "## Decontamination",
        "",
        *contamination_section(facts.contamination),
        "",
        "## Parameters",
        "",
        code_fence(yaml.safe_dump(dict(facts.settings), sort_keys=False).rstrip() or "{}", "yaml"),
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
    writes this card.

    Args:
        schema: the Arrow schema of the pushed table.

    Returns:
        One `{name, dtype}` (or nested) entry per column.
    """
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
    *,
    judge: str | None = None,
    settings: Mapping[str, Any] | None = None,
    features: list[dict[str, Any]] | None = None,
    judge_card: str | None = None,
    contamination: pd.DataFrame | None = None,
    judge_endpoint: str | None = None,
    export_schema: pa.Schema | None = None,
) -> str:
    """The card written beside the `ultrafeedback` export, counted from the run's
    `completions` (one export row per prompt) and describing the default push: the public
    columns, the others of `export_schema` (default: an export of the public four aspects)
    left out; `contamination` is `contamination_counts`. `judge`, `settings` and
    `judge_endpoint` are the data's lineage (`runs.record.card_lineage` and
    `RecordedJudge.endpoint_words` of the run's `run_lineage`), never the configuration of
    a run that only writes the card; None says "not recorded". `kedro push-to-hub` builds
    its own card from the data it sends.

    Args:
        completions: the run's completions, one export row per prompt.
        judge: the recorded judge, in words (None: not recorded).
        settings: the recorded settings of the run's stages.
        features: the card's `dataset_info.features` (default: from `export_schema`).
        judge_card: the judge's validation (markdown).
        contamination: the `contamination_counts` table.
        judge_endpoint: the recorded judge endpoint, in words.
        export_schema: the export's Arrow schema (default: the public four aspects').

    Returns:
        The card's text.
    """
    from llm_feedback.storage.schema import (
        ULTRAFEEDBACK_ARROW_SCHEMA,
        ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA,
    )

    written = ULTRAFEEDBACK_ARROW_SCHEMA if export_schema is None else export_schema
    public = ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA.names
    per_prompt = completions.drop_duplicates("prompt_id")
    facts = CardFacts(
        dataset="ultrafeedback",
        config_name="ultrafeedback",
        split="train",
        n_rows=len(per_prompt),
        columns=tuple(public),
        excluded_columns=tuple(c for c in written.names if c not in public),
        models=dict(Counter(completions["model"].astype(str)).most_common()),
        sources=dict(Counter(per_prompt["source"].astype(str)).most_common()),
        principles=dict(Counter(completions["principle"].astype(str)).most_common()),
        judge=judge,
        judge_endpoint=judge_endpoint,
        settings=dict(settings or {}),
        features=features,
        contamination=contamination_rows(contamination),
    )
    return dataset_card(facts, judge_card)


def contamination_rows(counts: pd.DataFrame | None) -> tuple[Mapping[str, Any], ...]:
    """`contamination_counts` as `CardFacts.contamination`: its rows, none when the table is
    missing or empty (no benchmark checked).

    Args:
        counts: the `contamination_counts` table, or None.

    Returns:
        One mapping per row.
    """
    if counts is None or counts.empty:
        return ()
    return tuple(counts.to_dict("records"))
