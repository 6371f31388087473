"""The Kedro side of MLflow tracking (`llm_feedback.runs.tracking`): inert unless the run's
parameters say `tracking.mlflow.enabled: true`, and MLflow is imported only then.

The MLflow run starts at the first node, so a run its guards stop before any node (a plan,
a locked root, an endpoint down) leaves no empty run behind; it ends FINISHED, FAILED, or
KILLED when the process exits mid-run (Ctrl-C skips Kedro's error hook). Logged from the
process that runs the hooks: with ParallelRunner the tables saved in worker processes are
not seen. The free inputs of the run (the datasets it reads and does not write) are
logged as MLflow datasets when first loaded.
"""

from __future__ import annotations

import atexit
import logging
from pathlib import Path
from typing import Any

import pandas as pd
from kedro.framework.hooks import hook_impl
from kedro.io import CatalogProtocol
from kedro.pipeline import Pipeline

from llm_feedback.pipelines.stage_times import StageTimesHooks
from llm_feedback.runs.tracking import (
    GIT_COMMIT_TAG,
    MlflowTracker,
    cost_metrics,
    flatten_params,
    git_commit,
    parse_tracking,
)

logger = logging.getLogger(__name__)

TABLE_LAYER = "08_reporting"
REPORT = "report"
COST_TABLE = "cost_table"
FIGURE_SUFFIX = "_figure"


class MlflowTrackingHooks:
    def __init__(self) -> None:
        self._tracker: MlflowTracker | None = None
        self._pending: dict[str, Any] | None = None
        self._catalog: CatalogProtocol | None = None
        self._inputs: set[str] = set()  # free inputs not logged yet
        self._loaded: list[tuple[str, Any]] = []  # loaded before the MLflow run started

    @hook_impl
    def before_pipeline_run(
        self, run_params: dict[str, Any], pipeline: Pipeline, catalog: CatalogProtocol
    ) -> None:
        self._end("KILLED")  # a previous run in this process that never ended
        parameters = catalog.load("parameters")
        settings = parse_tracking(parameters.get("tracking"))
        if not settings.enabled:
            return
        self._tracker = MlflowTracker(settings)  # a missing extra stops the run here
        self._catalog = catalog
        names = run_params.get("pipeline_names") or ["__default__"]
        tags = {
            "kedro.session_id": str(run_params.get("run_id")),
            "kedro.pipelines": ",".join(names),
            "kedro.env": str(run_params.get("env")),
            "data_root": str(parameters.get("data_root", "data")),
        }
        commit = git_commit(run_params.get("project_path") or Path.cwd())
        if commit:
            tags[GIT_COMMIT_TAG] = commit[0]
            tags["git.dirty"] = str(commit[1]).lower()
        self._inputs = {
            name for name in pipeline.inputs() if name != "parameters" and ":" not in name
        }
        self._pending = {
            "run_name": f"{'+'.join(names)} {run_params.get('run_id')}",
            "tags": tags,
            "params": flatten_params(parameters),
        }

    @hook_impl
    def before_node_run(self) -> None:
        if self._tracker is None or self._pending is None:
            return
        run_id = self._tracker.start(**self._pending)
        self._pending = None
        atexit.register(self._end, "KILLED")
        logger.info("MLflow run %s in %s", run_id, self._tracker.client.tracking_uri)
        for name, data in self._loaded:
            self._log_dataset(name, data)
        self._loaded = []

    @hook_impl
    def after_dataset_loaded(self, dataset_name: str, data: Any) -> None:
        if self._tracker is None or dataset_name not in self._inputs:
            return
        self._inputs.discard(dataset_name)
        if self._tracker.run_id is None:  # the first node's inputs load before its start
            self._loaded.append((dataset_name, data))
        else:
            self._log_dataset(dataset_name, data)

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, data: Any) -> None:
        tracker = self._tracker
        if tracker is None or tracker.run_id is None:
            return
        if isinstance(data, pd.DataFrame) and self._layer(dataset_name) == TABLE_LAYER:
            tracker.log_table(dataset_name, data)
            if dataset_name == COST_TABLE:
                tracker.log_metrics(cost_metrics(data))
        elif dataset_name == REPORT and isinstance(data, str):
            tracker.log_text("report/report.md", data)
        elif dataset_name.endswith(FIGURE_SUFFIX) and hasattr(data, "savefig"):
            tracker.log_figure(dataset_name.removesuffix(FIGURE_SUFFIX), data)

    @hook_impl
    def after_pipeline_run(self) -> None:
        if self._tracker is not None and self._tracker.run_id is not None:
            times = StageTimesHooks.last_run
            self._tracker.log_metrics({"time_s/total": float(sum(times.values()))})
            table = pd.DataFrame({"node": list(times), "seconds": list(times.values())})
            self._tracker.client.log_table(
                self._tracker.run_id, data=table, artifact_file="tables/node_times.json"
            )
        self._end("FINISHED")

    @hook_impl
    def on_pipeline_error(self) -> None:
        self._end("FAILED")

    def _log_dataset(self, name: str, data: Any) -> None:
        dataset = self._catalog.get(name) if self._catalog is not None else None
        described = _describe(dataset)
        path = described.get("filepath") or described.get("path")
        version = getattr(described.get("version"), "load", None)
        try:
            self._tracker.log_dataset(
                name, data, str(path) if path else None, str(version) if version else None
            )
        except Exception as error:  # noqa: BLE001 - a dataset MLflow cannot describe is no failed run
            logger.warning("MLflow: input dataset %s not logged: %s", name, error)

    def _layer(self, name: str) -> str | None:
        dataset = self._catalog.get(name) if self._catalog is not None else None
        metadata = getattr(dataset, "metadata", None) or {}
        return (metadata.get("kedro-viz") or {}).get("layer")

    def _end(self, status: str) -> None:
        if self._tracker is not None:
            atexit.unregister(self._end)
            self._tracker.end(status)
        self._tracker = None
        self._pending = None
        self._catalog = None
        self._inputs = set()
        self._loaded = []


def _describe(dataset: Any) -> dict[str, Any]:
    """What a Kedro dataset says of itself (its file, its version), or nothing."""
    try:
        described = dataset._describe() if dataset is not None else {}
    except Exception:  # noqa: BLE001 - a third-party dataset's description is optional
        return {}
    return described if isinstance(described, dict) else {}
