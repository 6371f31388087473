"""The Kedro side of MLflow tracking (`llm_feedback.tracking`): inert unless the run's
parameters say `tracking.mlflow.enabled: true`, and MLflow is imported only then.

The MLflow run starts at the first node, so a run its guards stop before any node (a plan,
a locked root, an endpoint down) leaves no empty run behind; it ends FINISHED, FAILED, or
KILLED when the process exits mid-run (Ctrl-C skips Kedro's error hook). Logged from the
process that runs the hooks: with ParallelRunner the tables saved in worker processes are
not seen.
"""

from __future__ import annotations

import atexit
import logging
from typing import Any

import pandas as pd
from kedro.framework.hooks import hook_impl
from kedro.io import CatalogProtocol
from kedro.pipeline import Pipeline

from llm_feedback.pipelines.stage_times import StageTimesHooks
from llm_feedback.tracking import (
    MlflowTracker,
    cost_metrics,
    flatten_params,
    metric_key,
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
            self._tracker.log_metrics({metric_key(f"time_s/{n}"): s for n, s in times.items()})
        self._end("FINISHED")

    @hook_impl
    def on_pipeline_error(self) -> None:
        self._end("FAILED")

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
