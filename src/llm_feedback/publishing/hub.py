"""Publishing `ultrafeedback` or `preference_pairs` on the Hugging Face Hub.

Two steps, so that what would be sent can be checked without sending it: `build_push`
builds the `datasets.DatasetDict` with the features of the dataset's explicit Arrow schema
and checks what the Hub would refuse (repository id, split name, token); `send_push` is
the only function that talks to the Hub. `datasets` is the optional `hub` extra, imported
only here, when a push is built.

Every push carries its dataset card (`hub_card`), uploaded as the repository's README.md
after the data. `ultrafeedback` is pushed with the public openbmb/UltraFeedback columns only
unless `public_only=False` (our `prompt_id`, `extra_annotations`, `annotation_status` and
`shuffle_ratings` stay home); `preference_pairs` has no private columns.

Preference pairs go up as the Hub splits `train` and `test`: the trl layout's `split`
column says which (and is not pushed: the Hub split says it); the h4 layout, which has no
such column, is split by `prompt_id` with the test fraction and seed of the run that wrote
it (`test_split`, from its run record), as the trl layout's column was drawn
(`reporting.pairs.split_of_prompts`); with none recorded it goes up as one split.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.publishing.dataset_card import (
    COUNTED_COLUMNS,
    DEFAULT_LICENSE,
    CardFacts,
    contamination_rows,
    counts_of,
    dataset_card,
)
from llm_feedback.reporting.pairs import pair_split
from llm_feedback.storage.parquet_source import ParquetSource
from llm_feedback.storage.schema import (
    PAIR_SPLITS,
    PREFERENCE_PAIRS_ARROW_SCHEMAS,
    ULTRAFEEDBACK_ARROW_SCHEMA,
    ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA,
    ultrafeedback_arrow_schema,
    ultrafeedback_extra_aspects,
)

# The trl pairs as written before they had `margin` and `split`: still pushed (as one
# split, or split by prompt_id where their run recorded a test fraction).
PREFERENCE_PAIRS_UNSPLIT_ARROW_SCHEMA = pa.schema(
    [
        field
        for field in PREFERENCE_PAIRS_ARROW_SCHEMAS["trl"]
        if field.name not in ("margin", "split")
    ]
)
# Dataset name -> the Arrow schemas its Parquet files may have (preference pairs: a layout;
# ultrafeedback: that of the public four aspects, or one with the run's extra aspects, read
# from the table).
HUB_DATASETS: Mapping[str, tuple[pa.Schema, ...]] = {
    "ultrafeedback": (ULTRAFEEDBACK_ARROW_SCHEMA,),
    "preference_pairs": (
        *PREFERENCE_PAIRS_ARROW_SCHEMAS.values(),
        PREFERENCE_PAIRS_UNSPLIT_ARROW_SCHEMA,
    ),
}
SPLIT_COLUMN = "split"  # the trl pairs' train / test column, pushed as the Hub splits
TOKEN_ENV = "HF_TOKEN"
CREDENTIALS_KEY = "huggingface"  # conf/local/credentials.yml: huggingface: {token: ...}


@dataclass(frozen=True)
class HubPush:
    """One checked push: the data as the Hub will store it and where it goes."""

    repo_id: str
    config_name: str  # the dataset's name: one repository can hold both datasets
    data: Any  # datasets.DatasetDict, one split
    private: bool
    token_source: str
    token: str = field(repr=False)  # never printed: not in repr, not in describe()
    card: str = field(default="", repr=False)  # README.md: metadata block and body

    def describe(self) -> str:
        lines = [
            f"repository: https://huggingface.co/datasets/{self.repo_id} "
            f"({'private' if self.private else 'public'})",
            f"configuration: {self.config_name}",
            f"token: from {self.token_source}",
        ]
        for split, dataset in self.data.items():
            lines.append(f"split {split}: {dataset.num_rows:,} rows")
        lines.append("features: " + ", ".join(self.data[next(iter(self.data))].features))
        return "\n".join(lines)


def hub_token(credentials: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[str, str]:
    """The Hub token and where it came from: credentials.yml's `huggingface.token`, else
    the HF_TOKEN environment variable.

    Args:
        credentials: the project's credentials (conf/local/credentials.yml).
        environ: the environment variables.

    Returns:
        (token, where it came from, for messages); ConfigError when there is none.
    """
    entry = credentials.get(CREDENTIALS_KEY) or {}
    token = entry.get("token") if isinstance(entry, Mapping) else None
    if token:
        return str(token), f"conf/local/credentials.yml ({CREDENTIALS_KEY}.token)"
    if environ.get(TOKEN_ENV):
        return environ[TOKEN_ENV], TOKEN_ENV
    raise ConfigError(
        f"no Hugging Face token: set {TOKEN_ENV} or {CREDENTIALS_KEY}: {{token: ...}} in "
        "conf/local/credentials.yml (a token with write access)"
    )


def _written_schema(table: pd.DataFrame | ParquetSource) -> pa.Schema:
    """The Arrow schema `table` was (or will be) written with."""
    if isinstance(table, ParquetSource):
        return table.schema
    written = getattr(table, "arrow_schema", None)  # a SchemaFrame
    if written is not None:
        return written
    return pa.Schema.from_pandas(table.head(1), preserve_index=False)


def _schema_of(name: str, table: pd.DataFrame | ParquetSource) -> pa.Schema:
    if name not in HUB_DATASETS:
        raise ConfigError(f"dataset must be one of {', '.join(HUB_DATASETS)}, got {name!r}")
    columns = list(table.columns)
    if name == "ultrafeedback":
        try:
            return ultrafeedback_arrow_schema(ultrafeedback_extra_aspects(_written_schema(table)))
        except ValueError as error:
            raise InputError(f"{name}: {error}") from None
    for schema in HUB_DATASETS[name]:
        if columns == schema.names:
            return schema
    expected = " or ".join(str(schema.names) for schema in HUB_DATASETS[name])
    raise InputError(f"{name}: columns {columns} are not those expected ({expected})")


def _from_source(source: ParquetSource, features: Any, workdir: Path) -> Any:
    """The `datasets.Dataset` of `source`'s columns in `features`, memory-mapped from an
    Arrow file in `workdir` rather than held: a table on object storage (a file or its
    parts) is first copied there a row group at a time (`datasets` reads local files)."""
    import datasets
    import pyarrow.parquet as pq

    columns = list(features)
    paths = source.part_paths()  # one file, or the parts of a large table
    if source.filesystem is not None:
        paths = [str(workdir / "table.parquet")]
        schema = pa.schema([source.schema.field(column) for column in columns])
        with pq.ParquetWriter(paths[0], schema) as writer:
            for part in source.part_paths():
                with source.filesystem.open(part, "rb") as handle:
                    parquet = pq.ParquetFile(handle)
                    for group in range(parquet.num_row_groups):
                        writer.write_table(parquet.read_row_group(group, columns=columns))
    return datasets.Dataset.from_parquet(
        paths, features=features, columns=columns, cache_dir=str(workdir / "datasets")
    )


def build_push(
    table: pd.DataFrame | ParquetSource,
    *,
    name: str,
    repo_id: str,
    token: str,
    token_source: str,
    private: bool = True,
    split: str | None = None,
    public_only: bool | None = None,
    license: str = DEFAULT_LICENSE,  # noqa: A002 - the Hub's own word for it
    judge: str | None = None,
    judge_endpoint: str | None = None,
    settings: Mapping[str, Any] | None = None,
    judge_card: str | None = None,
    workdir: Path | None = None,
    contamination: pd.DataFrame | None = None,
    test_split: tuple[float, int] | None = None,
) -> HubPush:
    """Check and build a push of `table` (the dataset `name`) to `repo_id`, with its card;
    sends nothing. `split` names the one split (default "train"); preference pairs with
    their own train / test split (the `split` column, or `test_split`: the (test_fraction,
    split_seed) of the run that wrote h4 pairs) go up as those splits, and a `split` given
    with them is refused. `public_only` (default: True for `ultrafeedback`) drops our own
    columns; `judge`, `judge_endpoint`, `settings` (see `runs.record.card_lineage`) and
    `judge_card` (the judge's validation, markdown) go into the card, and `contamination`
    (`contamination_counts`). A `ParquetSource` is read a batch at a time and pushed from
    an Arrow file in `workdir` (which must outlive the push), so a table of a million
    prompts is never held.

    Args:
        table: the dataset's rows, in memory or as a Parquet version read in batches.
        name: the dataset's catalog name (`ultrafeedback`, `preference_pairs`, ...).
        repo_id: the Hub repository, "owner/name".
        token: the Hub token (from `hub_token`).
        token_source: where the token came from, named in messages.
        private: create the repository private.
        split: the one split's name (default "train"); refused for pairs with their own.
        public_only: drop the project's own columns (default: True for `ultrafeedback`).
        license: the card's license identifier.
        judge: the judge model named in the card.
        judge_endpoint: the judge's endpoint, described in the card.
        settings: the run's settings for the card (see `runs.record.card_lineage`).
        judge_card: the judge's validation section (markdown) for the card.
        workdir: where a `ParquetSource` is written as Arrow; must outlive the push.
        contamination: the `contamination_counts` table for the card.
        test_split: (test_fraction, split_seed) of the run that wrote h4 pairs.

    Returns:
        The checked push, ready for `send_push`.
    """
    try:
        import datasets
        from huggingface_hub.utils import HFValidationError, validate_repo_id
    except ImportError as error:
        hint = 'pip install -e ".[hub]"'
        raise ConfigError(f"pushing needs the hub extra: {hint} ({error})") from None
    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise ConfigError(f"repo_id {repo_id!r}: {error}") from None
    if repo_id.count("/") != 1:
        raise ConfigError(f"repo_id must be 'owner/name', got {repo_id!r}")
    if not token:
        raise ConfigError(f"the Hugging Face token from {token_source} is empty")
    columns = list(table.columns)
    schema = _schema_of(name, table)
    own_splits = name == "preference_pairs" and (
        SPLIT_COLUMN in schema.names or test_split is not None
    )
    if own_splits and split is not None:
        raise ConfigError(
            f"split {split!r}: these preference pairs carry their own train and test splits "
            "(report.pairs.test_fraction), pushed as the Hub splits; leave --split out"
        )
    split = split or "train"
    try:
        datasets.NamedSplit(split)
    except ValueError as error:
        raise ConfigError(f"split {split!r}: {error}") from None
    excluded: tuple[str, ...] = ()
    if name == "ultrafeedback" and public_only is not False:
        schema = ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA
        excluded = tuple(c for c in columns if c not in schema.names)
    features = datasets.Features.from_arrow_schema(schema)
    if isinstance(table, pd.DataFrame):
        frame = table[schema.names]
        dataset = datasets.Dataset.from_pandas(frame, features=features, preserve_index=False)
        counts = counts_of(name, [frame])
    else:
        if workdir is None:
            raise ValueError("a push from a ParquetSource needs a workdir")
        dataset = _from_source(table, features, workdir)
        counted = [c for c in COUNTED_COLUMNS if c in schema.names]
        counts = counts_of(name, table.row_batches(counted) if counted else [])
    split_note = None
    if own_splits:
        data = _own_splits(dataset, test_split)
        pushed = [column for column in schema.names if column != SPLIT_COLUMN]
        split_note = _split_note(test_split, SPLIT_COLUMN in schema.names)
    else:
        data = datasets.DatasetDict({split: dataset})
        pushed = list(schema.names)
    features = data[next(iter(data))].features
    facts = CardFacts(
        dataset=name,
        config_name=name,
        split=next(iter(data)),
        n_rows=sum(part.num_rows for part in data.values()),
        columns=tuple(pushed),
        excluded_columns=excluded,
        judge=judge,
        judge_endpoint=judge_endpoint,
        settings=dict(settings or {}),
        license=license,
        features=features._to_yaml_list(),
        contamination=contamination_rows(contamination),
        splits={name: part.num_rows for name, part in data.items()} if own_splits else {},
        split_note=split_note,
        **counts,
    )
    card = dataset_card(facts, judge_card)
    return HubPush(repo_id, name, data, private, token_source, token, card)


def _own_splits(dataset: Any, test_split: tuple[float, int] | None) -> Any:
    """The pairs as the DatasetDict of their train and test splits (an empty test split
    left out): by the `split` column, which is then dropped, or, for pairs without one,
    by each prompt_id's `pair_split` with the test fraction and seed of `test_split`."""
    import datasets

    if SPLIT_COLUMN in dataset.column_names:
        column, side = SPLIT_COLUMN, list
    else:
        fraction, seed = test_split  # type: ignore[misc] - own splits: one of the two
        column = "prompt_id"

        def side(values: list[str]) -> list[str]:
            return [pair_split(str(value), fraction, seed) for value in values]

    bars_were_on = not datasets.utils.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # a bar per filter would bury the push's own output
    try:
        parts = {}
        for name in PAIR_SPLITS:
            part = dataset.filter(
                lambda values, name=name: [value == name for value in side(values)],
                input_columns=column,
                batched=True,
            )
            if SPLIT_COLUMN in part.column_names:
                part = part.remove_columns(SPLIT_COLUMN)
            if part.num_rows or name == "train":
                parts[name] = part
    finally:
        if bars_were_on:
            datasets.enable_progress_bars()
    return datasets.DatasetDict(parts)


def _split_note(test_split: tuple[float, int] | None, from_column: bool) -> str:
    how = (
        "as the pairs' `split` column says (report.pairs.test_fraction and split_seed of the "
        "run that wrote them)"
        if from_column
        else f"drawn here by prompt_id with the recorded test_fraction {test_split[0]:g} and "
        f"split_seed {test_split[1]}"  # type: ignore[index]
    )
    return (
        f"`train` and `test` are split by prompt, {how}: every pair of a prompt is on one "
        "side, so no prompt is in both; `margin` (where present) is score_chosen - "
        "score_rejected, the margin TRL's RewardTrainer reads."
    )


def send_push(push: HubPush) -> str:
    """Upload a built push, then its card.

    Args:
        push: what `build_push` made.

    Returns:
        The URL of the Hub commit.
    """
    commit = push.data.push_to_hub(
        push.repo_id,
        config_name=push.config_name,
        private=push.private,
        token=push.token,
        commit_message=f"llm_feedback: {push.config_name}",
    )
    _send_card(push)
    return str(commit.commit_url)


def merged_card(card: str, on_hub: Mapping[str, Any] | None) -> str:
    """`card` with the `configs` and `dataset_info` of every configuration the repository
    already holds (what `push_to_hub` wrote for this one and the others): a repository can
    hold both datasets, and our card must not drop the other one's metadata.

    Args:
        card: our card: YAML metadata between `---` lines, then markdown.
        on_hub: the metadata of the card on the Hub (None: no card there).

    Returns:
        `card` with the merged metadata.
    """
    import yaml

    head, body = card.split("\n---\n", 1)
    metadata = yaml.safe_load(head.removeprefix("---\n"))
    for key in ("configs", "dataset_info"):
        ours = {entry["config_name"]: entry for entry in metadata.get(key, [])}
        theirs = (on_hub or {}).get(key) or []
        if isinstance(theirs, Mapping):  # one configuration, written as a mapping
            theirs = [theirs]
        merged = {entry.get("config_name", "default"): entry for entry in theirs}
        merged.update(ours)
        if merged:
            metadata[key] = list(merged.values())
    return "---\n" + yaml.safe_dump(metadata, sort_keys=False) + "---\n" + body


def _send_card(push: HubPush) -> None:
    from huggingface_hub import DatasetCard
    from huggingface_hub.utils import EntryNotFoundError

    try:
        on_hub = DatasetCard.load(push.repo_id, token=push.token).data.to_dict()
    except EntryNotFoundError:
        on_hub = None
    DatasetCard(merged_card(push.card, on_hub)).push_to_hub(
        push.repo_id,
        token=push.token,
        repo_type="dataset",
        commit_message=f"llm_feedback: card of {push.config_name}",
    )
