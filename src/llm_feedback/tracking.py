"""MLflow tracking of a run (the `mlflow` extra, imported only when tracking is enabled).

`tracking.mlflow` in the parameters (conf/base/parameters_tracking.yml) turns it on; the
Kedro hook (`pipelines/tracking_hooks.py`) hands this module what a run produces:

- parameters: every parameter, flattened to dotted names (`annotate.judge.model`); a value
  under a name that reads like a secret (key, token, secret, password) is never logged;
- metric tables: each reporting table (layer 08_reporting: the annotate report's tables,
  `eval_metrics`, `cost_table`) as a table artifact `tables/<name>.json` and, row by row,
  as metrics `<table>/<row labels>/<column>` (labels: the row's text columns, `k` and
  `position`); the cost table's totals as `cost/*`;
- the report as `report/report.md`, each figure as `figures/<name>.png`, node times as
  `time_s/<node>`.

A `file:` tracking URI is MLflow's file store, which MLflow 3 keeps in maintenance mode and
refuses unless MLFLOW_ALLOW_FILE_STORE is set: configuring one is taken as that consent.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from llm_feedback.errors import ConfigError

DEFAULT_EXPERIMENT = "llm_feedback"
DEFAULT_TRACKING_URI = "file:./mlruns"
# Integer columns that name a row rather than measure it.
LABEL_COLUMNS = frozenset({"k", "position"})
SECRET_NAME = re.compile(r"(api_?key|token|secret|password|credential)", re.IGNORECASE)
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
    """The `tracking` parameter block; each error names the parameter at fault."""
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
    """Parameters as MLflow params: dotted names, text values, secrets redacted."""
    flat: dict[str, str] = {}
    for name, value in parameters.items():
        key = f"{prefix}{name}"
        if SECRET_NAME.search(str(name)) and not str(name).endswith("_env"):
            flat[key] = REDACTED  # the name of an env variable is no secret; its value is
        elif isinstance(value, Mapping) and value:
            flat.update(flatten_params(value, f"{key}."))
        else:
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            flat[key] = text[:MAX_PARAM_VALUE]
    return {metric_key(key): value for key, value in flat.items()}


def metric_key(text: str) -> str:
    return _KEY_CHARS.sub("_", text)[:MAX_KEY]


def table_metrics(name: str, frame: pd.DataFrame) -> dict[str, float]:
    """Each finite number of `frame` as a metric `<name>/<labels of its row>/<column>`."""
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
    received (stage `unseen`) apart."""
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
        self.settings = settings
        self.client = MlflowClient(tracking_uri=uri)
        self.run_id: str | None = None

    def start(self, run_name: str, tags: Mapping[str, str], params: Mapping[str, str]) -> str:
        experiment = self.client.get_experiment_by_name(self.settings.experiment)
        experiment_id = (
            experiment.experiment_id
            if experiment is not None
            else self.client.create_experiment(self.settings.experiment)
        )
        run = self.client.create_run(
            experiment_id, run_name=self.settings.run_name or run_name, tags=dict(tags)
        )
        self.run_id = run.info.run_id
        self._log_params(params)
        return self.run_id

    def log_table(self, name: str, frame: pd.DataFrame) -> None:
        self.client.log_table(self.run_id, data=frame, artifact_file=f"tables/{name}.json")
        self.log_metrics(table_metrics(name, frame))

    def log_metrics(self, metrics: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        entries = [Metric(key, value, stamp, 0) for key, value in metrics.items()]
        for start in range(0, len(entries), METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=entries[start : start + METRICS_PER_BATCH])

    def log_figure(self, name: str, figure: Any) -> None:
        self.client.log_figure(self.run_id, figure, f"figures/{name}.png")

    def log_text(self, path: str, text: str) -> None:
        self.client.log_text(self.run_id, text, path)

    def end(self, status: str) -> None:
        if self.run_id is not None:
            self.client.set_terminated(self.run_id, status)
            self.run_id = None

    def _log_params(self, params: Mapping[str, str]) -> None:
        from mlflow.entities import Param

        entries = [Param(key, value) for key, value in params.items()]
        for start in range(0, len(entries), PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=entries[start : start + PARAMS_PER_BATCH])
