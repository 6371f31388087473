"""MLflow tracking of a run (the `mlflow` extra, imported only when tracking is enabled).

`tracking.mlflow` in the parameters (conf/base/parameters_tracking.yml) turns it on; the
Kedro hook (`pipelines/tracking_hooks.py`) hands this module what a run produces:

- parameters: every parameter, flattened to dotted names (`annotate.judge.model`); the
  value of a secret's name (`api_key`, `token`, `password`, `secret`, `authorization`,
  `credentials`, whole words at the end of the name: `hf_token`, not `max_tokens`) is
  never logged;
- tags: the Kedro session, pipelines and environment, and the project's git commit
  (`mlflow.source.git.commit`, MLflow's own tag, which its UI shows);
- datasets: each free input of the run (what it read and did not write) through
  `log_inputs`, with its file, Kedro version and (for a table in memory) its schema;
- the headline figures as metrics, named (`HEADLINES`: each model's ranking score and
  mean scores, evaluate's overall metrics, the cost totals, the run's time), a few dozen
  rather than one per cell of every table;
- every reporting table (layer 08_reporting: the annotate report's tables, `eval_metrics`,
  `cost_table`) as a table artifact `tables/<name>.json`, node times as
  `tables/node_times.json`, the report as `report/report.md`, each figure as
  `figures/<name>.png`.

The default store is SQLite (`sqlite:///mlruns.db`), which MLflow 3 reads as it is. A
`file:` URI is MLflow's file store, which MLflow 3 keeps in maintenance mode and refuses
unless MLFLOW_ALLOW_FILE_STORE is set: configuring one is taken as that consent, with a
warning that reading it back needs the same variable.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import subprocess
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.core.errors import ConfigError

logger = logging.getLogger(__name__)

DEFAULT_EXPERIMENT = "llm_feedback"
DEFAULT_TRACKING_URI = "sqlite:///mlruns.db"
# Integer columns that name a row rather than measure it.
LABEL_COLUMNS = frozenset({"k", "position"})
# A secret's name: the word itself or a name ending in it (`hf_token`, `openai_api_key`,
# `Authorization`), never a name that merely contains it (`max_tokens`, `token_budget`).
SECRET_NAME = re.compile(
    r"^(?:.*[_.\-])?(?:api[_\-]?key|token|secret|password|passwd|authorization|credentials?"
    r"|private[_\-]?key)$",
    re.IGNORECASE,
)
# The headline figures logged as metrics: table -> (label columns, value columns, which rows:
# None for all, else the columns that must be empty, i.e. the overall rows). Every table is
# logged whole as an artifact besides.
HEADLINES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...] | None]] = {
    "model_ranking": (("model",), ("score", "win_rate", "style_controlled_score"), None),
    "model_score_metrics": (("model",), ("mean_overall_fixed", "mean_fine_grained"), None),
    "eval_model_ranking": (("model",), ("score", "win_rate"), None),
    "eval_metrics": (
        ("benchmark", "mode", "model", "metric", "k"),
        ("value",),
        ("category", "level", "raters", "criterion"),
    ),
}
# MLflow's own tag for the source's commit (mlflow.utils.mlflow_tags.MLFLOW_GIT_COMMIT).
GIT_COMMIT_TAG = "mlflow.source.git.commit"
# MLflow's tag of a dataset's role in a run (mlflow.utils.mlflow_tags.MLFLOW_DATASET_CONTEXT).
DATASET_CONTEXT_TAG = "mlflow.data.context"
DIGEST_ROWS = 10_000  # a dataset's digest hashes its first rows, as MLflow's own does
# MLflow 3's UI opens an experiment on its Traces page unless told what kind it is.
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}
REDACTED = "<redacted>"
# MLflow's limits: a param value's length, a key's length, entries per log_batch call.
MAX_PARAM_VALUE = 6000
MAX_KEY = 250
PARAMS_PER_BATCH = 100
METRICS_PER_BATCH = 1000
MAX_METRIC_ROWS = 500  # a larger table is logged as an artifact only
_KEY_CHARS = re.compile(r"[^\w./\- :]")


@dataclass(frozen=True)
class MlflowSettings:
    enabled: bool = False
    tracking_uri: str | None = None
    experiment: str = DEFAULT_EXPERIMENT
    run_name: str | None = None


def parse_tracking(block: Any) -> MlflowSettings:
    """The `tracking` parameter block; each error names the parameter at fault.

    Args:
        block: the `tracking` block (None: tracking off).

    Returns:
        The MLflow settings.
    """
    if block is None:
        return MlflowSettings()
    if not isinstance(block, Mapping):
        raise ConfigError("tracking must be a mapping with an `mlflow` block")
    unknown = set(block) - {"mlflow"}
    if unknown:
        raise ConfigError(f"tracking: unknown key(s) {sorted(unknown)}; known: ['mlflow']")
    mlflow = block.get("mlflow") or {}
    if not isinstance(mlflow, Mapping):
        raise ConfigError("tracking.mlflow must be a mapping")
    fields = {"enabled", "tracking_uri", "experiment", "run_name"}
    unknown = set(mlflow) - fields
    if unknown:
        raise ConfigError(
            f"tracking.mlflow: unknown key(s) {sorted(unknown)}; known: {sorted(fields)}"
        )
    enabled = mlflow.get("enabled", False)
    if not isinstance(enabled, bool):
        raise ConfigError(f"tracking.mlflow.enabled must be true or false, not {enabled!r}")
    for name in ("tracking_uri", "experiment", "run_name"):
        value = mlflow.get(name)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"tracking.mlflow.{name} must be a non-empty string, not {value!r}")
    return MlflowSettings(
        enabled=enabled,
        tracking_uri=mlflow.get("tracking_uri"),
        experiment=mlflow.get("experiment") or DEFAULT_EXPERIMENT,
        run_name=mlflow.get("run_name"),
    )


def flatten_params(parameters: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Parameters as MLflow params: dotted names, text values, secrets redacted.

    Args:
        parameters: the run's parameters.
        prefix: the dotted name of the block they are in.

    Returns:
        Dotted name -> text.
    """
    flat: dict[str, str] = {}
    for name, value in parameters.items():
        key = f"{prefix}{name}"
        if SECRET_NAME.match(str(name)):
            flat[key] = REDACTED  # the name of an env variable is no secret; its value is
        elif isinstance(value, Mapping) and value:
            flat.update(flatten_params(value, f"{key}."))
        else:
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            flat[key] = text[:MAX_PARAM_VALUE]
    return {metric_key(key): value for key, value in flat.items()}


def metric_key(text: str) -> str:
    """`text` as an MLflow metric key: characters MLflow refuses replaced, cut to its length limit.

    Args:
        text: the key wanted.

    Returns:
        The key.
    """
    return _KEY_CHARS.sub("_", text)[:MAX_KEY]


def table_metrics(name: str, frame: pd.DataFrame) -> dict[str, float]:
    """Each finite number of `frame` as a metric `<name>/<labels of its row>/<column>`.

    Args:
        name: the table's name.
        frame: the table.

    Returns:
        Metric key -> value.
    """
    if len(frame) > MAX_METRIC_ROWS:
        return {}
    labels = [
        column
        for column in frame.columns
        if column in LABEL_COLUMNS
        or not (
            _describes_method(column)
            or pd.api.types.is_numeric_dtype(frame[column])
            or frame[column].dtype == bool
        )
    ]
    values = [
        column
        for column in frame.columns
        if column not in labels and pd.api.types.is_numeric_dtype(frame[column])
    ]
    metrics: dict[str, float] = {}
    for fields in frame.to_dict("records"):
        path = "/".join(str(fields[label]) for label in labels if not _missing(fields.get(label)))
        for column in values:
            value = fields.get(column)
            if _missing(value) or not math.isfinite(float(value)):
                continue
            key = metric_key("/".join(part for part in (name, path, column) if part))
            metrics[_unique_key(key, metrics)] = float(value)
    return metrics


def headline_metrics(name: str, frame: pd.DataFrame) -> dict[str, float]:
    """The headline figures of one reporting table (`HEADLINES`) as metrics
    `<name>/<labels of the row>/<column>`; none for a table without headline figures.

    Args:
        name: the table's dataset name.
        frame: the table.

    Returns:
        Metric name -> value (NaN values left out).
    """
    if name not in HEADLINES:
        return {}
    labels, values, overall = HEADLINES[name]
    rows = frame
    for column in overall or ():
        if column in rows:
            rows = rows[rows[column].isna()]
    chosen = [c for c in labels if c in rows] + [c for c in values if c in rows]
    return table_metrics(name, rows[chosen].reset_index(drop=True))


def artifact_location(uri: str) -> str | None:
    """Where a new experiment keeps its artifacts: beside a SQLite store's file
    (`mlartifacts/`), since MLflow's own default is relative to the working directory; for
    other stores, the store's default.

    Args:
        uri: the tracking URI.

    Returns:
        A file URI, or None for the store's default.
    """
    if not uri.startswith("sqlite:///"):
        return None
    database = Path(uri.removeprefix("sqlite:///")).resolve()  # sqlite:////abs or ///rel
    return (database.parent / "mlartifacts").as_uri()


def git_commit(folder: str | os.PathLike[str]) -> tuple[str, bool] | None:
    """The commit checked out in `folder`'s git work tree, and whether tracked files differ
    from it; None outside a work tree or without git.

    Args:
        folder: the project's folder.

    Returns:
        (the commit's hash, dirty), or None.
    """
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        if commit.returncode != 0:
            return None
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return commit.stdout.strip(), bool(changed.stdout.strip())


def _describes_method(column: str) -> bool:
    """A column saying how a figure was made ("poisson-bootstrap-1000-cluster"), the
    same on every row: a label of it would only lengthen each key."""
    return column == "method" or column.endswith("_method")


def _unique_key(key: str, taken: Mapping[str, float]) -> str:
    """`key`, or with a numbered suffix inside the length limit when rows share labels
    (a key cut at the limit cannot be told apart by appending to it)."""
    count = 1
    unique = key
    while unique in taken:
        count += 1
        suffix = f"_{count}"
        unique = key[: MAX_KEY - len(suffix)] + suffix
    return unique


def cost_metrics(cost_table: pd.DataFrame) -> dict[str, float]:
    """The run's totals from `cost_table`; the upper bound of calls whose reply was never
    received (stage `unseen`) apart.

    Args:
        cost_table: the report's cost table.

    Returns:
        Metric key -> value.
    """
    stages = cost_table.get("stage")
    unseen = stages == "unseen" if stages is not None else None
    metrics = {}
    if unseen is not None and unseen.any():
        metrics["cost/unseen_upper_bound_usd"] = float(cost_table["estimated_cost"][unseen].sum())
        cost_table = cost_table[~unseen]
    totals = {
        "cost/estimated_usd": cost_table.get("estimated_cost"),
        "cost/prompt_tokens": cost_table.get("prompt_tokens"),
        "cost/completion_tokens": cost_table.get("completion_tokens"),
    }
    metrics |= {key: float(column.sum()) for key, column in totals.items() if column is not None}
    return metrics


def _missing(value: Any) -> bool:
    return value is None or (not isinstance(value, str) and bool(pd.isna(value)))


class MlflowTracker:
    """One MLflow run through `MlflowClient` (no global MLflow state is touched)."""

    def __init__(self, settings: MlflowSettings) -> None:
        """Open a client on the tracking store; ConfigError when MLflow is not installed.

        Args:
            settings: the `tracking.mlflow` settings.
        """
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise ConfigError(
                "tracking.mlflow.enabled is true but MLflow is not installed: "
                'pip install -e ".[mlflow]"'
            ) from None
        uri = settings.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI
        if uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            logger.warning(
                "MLflow store %s is MLflow's file store: MLflow 3 reads it back only with "
                "MLFLOW_ALLOW_FILE_STORE=true (mlflow ui, MlflowClient); sqlite:///mlruns.db "
                "needs nothing",
                uri,
            )
        self.settings = settings
        self.uri = uri
        self.client = MlflowClient(tracking_uri=uri)
        self.run_id: str | None = None

    def start(self, run_name: str, tags: Mapping[str, str], params: Mapping[str, str]) -> str:
        """Start the run (its experiment made if new) and log its parameters.

        Args:
            run_name: the run's name, unless the settings name one.
            tags: the run's tags.
            params: the flattened parameters.

        Returns:
            The run's id.
        """
        experiment = self.client.get_experiment_by_name(self.settings.experiment)
        experiment_id = (
            experiment.experiment_id
            if experiment is not None
            else self.client.create_experiment(
                self.settings.experiment,
                artifact_location=artifact_location(self.uri),
                tags=EXPERIMENT_KIND,
            )
        )
        run = self.client.create_run(
            experiment_id, run_name=self.settings.run_name or run_name, tags=dict(tags)
        )
        self.run_id = run.info.run_id
        self._log_params(params)
        return self.run_id

    def log_table(self, name: str, frame: pd.DataFrame) -> None:
        """Log a table as a JSON artifact and its headline figures as metrics.

        Args:
            name: the table's name.
            frame: the table.
        """
        self.client.log_table(self.run_id, data=frame, artifact_file=f"tables/{name}.json")
        self.log_metrics(headline_metrics(name, frame))

    def log_dataset(self, name: str, data: Any, path: str | None, version: str | None) -> None:
        """Log one input dataset of the run (`log_inputs`, context "input"), named by its
        file; its digest is a hash of its first rows when it was loaded as a DataFrame, of
        its file and version otherwise (a table read a batch at a time is not read here).
        A dataset without a file is not logged.

        Args:
            name: its catalog name.
            data: what the catalog loaded.
            path: its file or folder, when it has one.
            version: its Kedro version, when versioned.
        """
        from mlflow.data.dataset_source_registry import resolve_dataset_source  # noqa: PLC0415
        from mlflow.data.meta_dataset import MetaDataset  # noqa: PLC0415
        from mlflow.entities import DatasetInput, InputTag  # noqa: PLC0415

        if path is None:
            return
        if isinstance(data, pd.DataFrame):
            # MLflow's own pandas digest compares cells with `==`, which Arrow-backed
            # columns refuse; pandas' row hashes take every dtype.
            rows = pd.util.hash_pandas_object(data.head(DIGEST_ROWS).astype(str), index=False)
            digest = hashlib.sha256(rows.to_numpy().tobytes()).hexdigest()[:8]
        else:
            digest = hashlib.sha256(f"{path}|{version}".encode()).hexdigest()[:8]
        with warnings.catch_warnings():  # a local path reads as two kinds of source alike
            warnings.simplefilter("ignore", UserWarning)
            dataset = MetaDataset(resolve_dataset_source(path), name=name, digest=digest)
        tags = [InputTag(DATASET_CONTEXT_TAG, "input")]
        if version:
            tags.append(InputTag("kedro.version", version))
        entry = DatasetInput(dataset._to_mlflow_entity(), tags=tags)
        self.client.log_inputs(self.run_id, datasets=[entry])

    def log_metrics(self, metrics: Mapping[str, float]) -> None:
        """Log metrics, in batches MLflow accepts.

        Args:
            metrics: metric key -> value.
        """
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        entries = [Metric(key, value, stamp, 0) for key, value in metrics.items()]
        for start in range(0, len(entries), METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=entries[start : start + METRICS_PER_BATCH])

    def log_figure(self, name: str, figure: Any) -> None:
        """Log a figure as `figures/<name>.png`.

        Args:
            name: the figure's name.
            figure: a matplotlib figure.
        """
        self.client.log_figure(self.run_id, figure, f"figures/{name}.png")

    def log_text(self, path: str, text: str) -> None:
        """Log a text artifact.

        Args:
            path: its artifact path.
            text: the text.
        """
        self.client.log_text(self.run_id, text, path)

    def end(self, status: str) -> None:
        """End the run, if one is open.

        Args:
            status: MLflow's run status (FINISHED, FAILED, ...).
        """
        if self.run_id is not None:
            self.client.set_terminated(self.run_id, status)
            self.run_id = None

    def _log_params(self, params: Mapping[str, str]) -> None:
        from mlflow.entities import Param

        entries = [Param(key, value) for key, value in params.items()]
        for start in range(0, len(entries), PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=entries[start : start + PARAMS_PER_BATCH])
