"""The Kedro side of the run record (`llm_feedback.runs.record`): saved when a run that
writes a feedback stage's output starts, after the run's guards (a plan-only run, a locked
root or an endpoint down writes none), under the run's save version.

The same record is handed to the nodes that describe data (the report, the card beside the
export) as `run_lineage`, in memory, in every run that has such a node, even one that
writes no stage output and so saves no record (`--nodes render_report`): they name the
judge the data's own lineage records, never the configuration of the run that prints
them. Where this hook does not run, `run_lineage` is its catalog default, `{}`: nothing
recorded."""

from __future__ import annotations

import json
import logging
from typing import Any

from kedro.framework.hooks import hook_impl
from kedro.io import CatalogProtocol
from kedro.io.core import Version
from kedro.pipeline import Pipeline

from llm_feedback.runs.record import STAGE_OUTPUTS, build_record

logger = logging.getLogger(__name__)

RUN_RECORD = "run_record"
# The record as the run's nodes read it (catalog.yml: a MemoryDataset, `{}` by default).
RUN_LINEAGE = "run_lineage"


def load_run_record(catalog: CatalogProtocol, version: str) -> dict[str, Any] | None:
    """The run record saved under `version`, or None (none, or unreadable: logged).

    Args:
        catalog: the project's catalog.
        version: a save version.

    Returns:
        The record, or None.
    """
    dataset = catalog.get(RUN_RECORD, version=Version(version, None))
    if dataset is None or not dataset.exists():
        return None
    try:
        return json.loads(dataset.load())
    except ValueError as error:
        logger.warning("run_record %s is not JSON (%s): treated as not recorded", version, error)
        return None


def read_version(catalog: CatalogProtocol, name: str) -> str | None:
    """The version of `name` a run reads (--load-versions, else the latest), None if none.

    Args:
        catalog: the run's catalog.
        name: a versioned dataset's name.

    Returns:
        The version, or None.
    """
    dataset = catalog.get(name)
    try:
        return dataset.resolve_load_version() if dataset is not None else None
    except Exception:  # noqa: BLE001 - never written: nothing to describe
        return None


class RunRecordHooks:
    @hook_impl(trylast=True)
    def before_pipeline_run(self, pipeline: Pipeline, catalog: CatalogProtocol) -> None:
        produced = pipeline.all_outputs()
        ran = [stage for stage, output in STAGE_OUTPUTS.items() if output in produced]
        described = RUN_LINEAGE in pipeline.inputs()
        if not ran and not described:
            return
        version = catalog.get(RUN_RECORD).resolve_save_version()
        record = build_record(
            version,
            catalog.load("parameters"),
            ran,
            lambda name: read_version(catalog, name),
            lambda found: load_run_record(catalog, found),
        )
        if ran:
            catalog.save(RUN_RECORD, json.dumps(record, indent=1))
        if described:
            catalog.save(RUN_LINEAGE, record)
