"""Project hooks: hand credentials to the endpoint layer, check a run before its first
node (parameters, its priced plan, one run per data root, endpoints that answer, input
tables that exist), stop local model servers, tell the report which dataset versions it
was built from, put the report's figures in place as a set, and print how long each node
took."""

import importlib
import logging
from pathlib import Path
from typing import Any

from kedro.config import MissingConfigException
from kedro.framework.hooks import hook_impl
from kedro.io import AbstractVersionedDataset, CatalogProtocol, MemoryDataset
from kedro.io.core import VersionNotFoundError
from kedro.pipeline import Pipeline

from llm_feedback.backends import register_credentials, stop_local_servers
from llm_feedback.backends.preflight import preflight
from llm_feedback.backends.secrets import mask_secrets_in_logs
from llm_feedback.core.errors import ConfigError, InputError, PlanOnly
from llm_feedback.params.run import check_run, describe_pool, parse_run_options
from llm_feedback.pipeline_registry import FEEDBACK_ORDER, pipeline_names
from llm_feedback.runs.lineage import describe_mixed_runs, mixed_runs
from llm_feedback.runs.lock import RootGuard, root_guard
from llm_feedback.storage.remote_root import require_local

logger = logging.getLogger(__name__)

# The catalog entry the plan is saved to (conf/base/catalog.yml).
RUN_PLAN = "run_plan"
# Every node that calls a model takes the request cache: a run without it calls none.
REQUEST_CACHE_INPUT = "params:request_cache"

# The report's input that this hook fills: a catalog entry (catalog_report.yml), named in
# pipelines/report/pipeline.py as every dataset is.
INPUT_VERSIONS = "report_input_versions"
# What the report shows for an input that is not a versioned dataset.
UNVERSIONED = "unversioned"

logger = logging.getLogger(__name__)


class ModelEndpointHooks:
    @hook_impl
    def after_context_created(self, context: Any) -> None:
        # Keys go straight from conf/local/credentials.yml to the clients: never into
        # parameters, so never into kedro-viz, logs or datasets.
        try:
            credentials = context.config_loader["credentials"]
        except MissingConfigException:  # no conf/local/credentials.yml: env vars only
            credentials = {}
        register_credentials(credentials)
        mask_secrets_in_logs()  # whatever a server echoes back, keys never reach a log

    @hook_impl
    def after_pipeline_run(self) -> None:
        stop_local_servers()

    @hook_impl
    def on_pipeline_error(self) -> None:
        stop_local_servers()


class RunGuardHooks:
    """Before the first node of a run, so that a run that cannot do its job costs nothing:

    - every parameter block the selected pipelines read is parsed and checked once here
      (the plan below uses these; the nodes, which may run in other processes, parse their
      block into the objects they use; checking here catches a bad annotate block before
      generate has paid for anything);
    - with `plan_only` or `max_cost_usd`, the run's priced plan (`llm_feedback.runs.plan`):
      `plan_only` saves it as `run_plan` and stops (`PlanOnly`), a plan above
      `max_cost_usd` stops the run (`CostLimitExceeded`), both before any call;
    - a run that calls models takes the data root's lock (one run per request cache); on a
      remote data root it also pulls the root's request cache into its local mirror and
      pushes it back after each node and at the end (`llm_feedback.runs.lock`);
    - every endpoint it will call answers one cheap request (`backends.preflight`);
    - a run that calls models under `--runner ParallelRunner` is refused: its worker
      processes would each open the request cache and start local model servers outside
      this process's lock and shutdown (runs that call no model, e.g. `--pipeline report`,
      may use it).
    """

    # The request cache of the run in progress, for the CLI's message on Ctrl-C.
    current_request_cache: str | None = None

    def __init__(self) -> None:
        self._guard: RootGuard | None = None

    @hook_impl
    def before_pipeline_run(
        self, run_params: dict[str, Any], pipeline: Pipeline, catalog: CatalogProtocol
    ) -> None:
        parameters = catalog.load("parameters")
        blocks = {
            name.removeprefix("params:").split(".")[0]
            for name in pipeline.inputs()
            if name.startswith("params:")
        }
        checked = check_run(parameters, blocks)
        pool = describe_pool(checked)
        if pool:
            logger.info("%s", pool)  # what conf/local, --params and null entries left
        endpoints = checked.endpoints
        if REQUEST_CACHE_INPUT not in pipeline.inputs():
            endpoints = []  # e.g. `--from-nodes export_ultrafeedback`: no node calls a model
        if endpoints and "ParallelRunner" in str(run_params.get("runner")):
            calling = sorted(n.name for n in pipeline.nodes if REQUEST_CACHE_INPUT in n.inputs)
            raise ConfigError(
                f"--runner ParallelRunner: nodes {', '.join(calling)} call models, and worker "
                "processes would bypass the run's request-cache lock and local servers; run "
                "them with the default runner (calls are already concurrent) and use "
                "ParallelRunner only for runs that call no model (e.g. --pipeline report)"
            )
        options = parse_run_options(parameters)
        cache = parameters.get("request_cache")
        if cache:
            require_local(cache, "request_cache")
        guard = root_guard(parameters, cache) if endpoints and cache else None
        if options.plan_only or options.max_cost_usd is not None:
            # Planning imports every stage's request builders: only when a plan is asked for.
            from llm_feedback.pipelines.run_plan import plan_for_run
            from llm_feedback.runs.plan import check_cost_limit, describe_plan

            if guard is not None and guard.sync is not None:
                guard.sync.pull()  # the plan counts the remote root's cached answers
            plan = plan_for_run(pipeline, catalog, parameters, checked)
            if options.plan_only:
                catalog.save(RUN_PLAN, plan)
                text = describe_plan(plan, options.max_cost_usd)
                raise PlanOnly(f"{text}\n{pool}" if pool else text)
            check_cost_limit(plan, options.max_cost_usd)
            logger.info(
                "run plan: estimated cost $%.4f, within max_cost_usd $%.4f",
                plan["estimated_cost"].sum(),
                options.max_cost_usd,
            )
        RunGuardHooks.current_request_cache = cache
        if guard is None:
            return
        guard.acquire()
        self._guard = guard
        try:
            for endpoint in endpoints:
                preflight(endpoint)
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        if self._guard is not None:
            self._guard.release()
            self._guard = None

    @hook_impl
    def after_node_run(self) -> None:
        if self._guard is not None:
            self._guard.checkpoint()

    @hook_impl
    def after_pipeline_run(self) -> None:
        self._release()

    @hook_impl
    def on_pipeline_error(self) -> None:
        self._release()


class RunInputsHooks:
    """Before the first node: every table the run reads but does not write (a slice such as
    `--from-nodes fix_ultrafeedback_scores`, or `--pipelines report` on a new data root)
    has a version to read; one that has none stops the run with one line naming it and the
    pipeline that writes it, instead of Kedro's traceback at its first load."""

    @hook_impl
    def before_pipeline_run(self, pipeline: Pipeline, catalog: CatalogProtocol) -> None:
        missing = []
        for name in sorted(pipeline.inputs()):
            dataset = catalog.get(name) if not name.startswith("params:") else None
            if not isinstance(dataset, AbstractVersionedDataset):
                continue
            try:
                dataset.resolve_load_version()
            except VersionNotFoundError:
                missing.append(name)
        if missing:
            raise InputError(describe_missing_inputs(missing, catalog))


class FigureSetHooks:
    """The report's figures are replaced as a set: each is staged as it is drawn
    (`pipelines/figure_dataset.py`), and all are moved into place when the run succeeds, or
    removed when it fails (a full disk mid-report leaves the previous figures, all of them).
    Staged files are found on disk, so figures drawn in ParallelRunner's workers count."""

    def __init__(self) -> None:
        self._figures: list[Any] = []

    @hook_impl
    def before_pipeline_run(self, pipeline: Pipeline, catalog: CatalogProtocol) -> None:
        self._figures = [
            dataset
            for name in sorted(pipeline.all_outputs())
            if hasattr(dataset := catalog.get(name), "promote_staged")
        ]
        for dataset in self._figures:
            dataset.discard_staged()  # left by a run killed before its end

    @hook_impl
    def after_pipeline_run(self) -> None:
        for dataset in self._figures:
            dataset.promote_staged()
        self._figures = []

    @hook_impl
    def on_pipeline_error(self) -> None:
        for dataset in self._figures:
            dataset.discard_staged()
        self._figures = []


# What a pipeline needs besides its inputs' tables, said when a run lacks its tables.
PIPELINE_NEEDS = {"ultrafeedback_fix": "--params ultrafeedback_fix.records_path=<file or folder>"}


def describe_missing_inputs(missing: list[str], catalog: CatalogProtocol) -> str:
    """What to say of run inputs never written: their names and folders, grouped by the
    pipeline that writes them, with the command that does.

    Args:
        missing: the inputs' names.
        catalog: the run's catalog.

    Returns:
        The message.
    """
    writers: dict[str, str] = {}
    for pipeline_name in pipeline_names()[:-1]:  # each pipeline once, not __default__
        module = importlib.import_module(f"llm_feedback.pipelines.{pipeline_name}.pipeline")
        for output in module.create_pipeline().all_outputs():
            writers.setdefault(output, pipeline_name)
    by_writer: dict[str | None, list[str]] = {}
    for name in missing:
        by_writer.setdefault(writers.get(name), []).append(name)
    folders = sorted(
        {str(Path(str(getattr(catalog.get(name), "_filepath", name))).parent) for name in missing}
    )
    parts = []
    for pipeline_name, names in by_writer.items():
        text = ", ".join(names)
        if pipeline_name is not None:
            command = " ".join(
                filter(
                    None,
                    ["kedro run --pipelines", pipeline_name, PIPELINE_NEEDS.get(pipeline_name)],
                )
            )
            text += f" (written by `{command}`: run it first)"
        parts.append(text)
    return (
        f"this run reads tables with no version in {', '.join(folders)}: {'; '.join(parts)}; "
        "or pick existing versions with --load-versions"
    )


def project_lineage() -> dict[str, list[str]]:
    """Dataset -> the datasets its producing node reads, over every pipeline of the project
    (not only a run's: Kedro finds only those)."""
    computed_from: dict[str, list[str]] = {}
    for name in (*FEEDBACK_ORDER, "evaluate"):
        module = importlib.import_module(f"llm_feedback.pipelines.{name}.pipeline")
        for node in module.create_pipeline().nodes:
            sources = [name for name in node.inputs if not name.startswith("params:")]
            for output in node.outputs:
                computed_from.setdefault(output, sources)
    return computed_from


def refuse_a_stale_push(catalog: CatalogProtocol, name: str, allow_mixed_runs: bool) -> None:
    """`kedro push-to-hub`: refuse to publish the latest `name` when a table it is computed
    from has a newer version (a later run that did not write it, e.g. failed part-way).

    Args:
        catalog: the project's catalog.
        name: the dataset pushed.
        allow_mixed_runs: push anyway, with a warning in the log.
    """
    lineage = project_lineage()
    versions, seen, todo = {}, set(), [name]
    while todo:
        dataset_name = todo.pop()
        if dataset_name in seen:
            continue
        seen.add(dataset_name)
        dataset = catalog.get(dataset_name)
        if isinstance(dataset, AbstractVersionedDataset):
            try:
                versions[dataset_name] = dataset.resolve_load_version()
            except Exception:  # noqa: BLE001 - never written: nothing to compare
                continue
        todo.extend(lineage.get(dataset_name, ()))
    stale = mixed_runs({k: v for k, v in versions.items() if v}, lineage)
    if not stale:
        return
    message = describe_mixed_runs(stale, "--allow-mixed-runs (or report.allow_mixed_runs)")
    if not allow_mixed_runs:
        raise InputError(message.replace(": true to report", " to push"))
    logger.warning("pushing mixed runs, as asked: %s", message)


# Nodes whose inputs must come from one run, as the report's (`report.allow_mixed_runs`).
CHECKED_EXPORTS = frozenset({"export_ultrafeedback"})


class ReportProvenanceHooks:
    """Tell the report which version of each dataset it was built from.

    A node sees data, not versions; this hook sees the catalog before the run starts: a
    dataset that the run writes gets the run's save version, any other the version the
    catalog will load (`--load-versions`, else the latest on disk).

    It also refuses inputs from different runs before any node runs (`llm_feedback.runs.lineage`:
    a table older than one it is computed from), naming their versions, unless
    `report.allow_mixed_runs` is true or one of the two was chosen with `--load-versions`
    (then it only warns).
    """

    @hook_impl
    def before_pipeline_run(
        self, run_params: dict[str, Any], pipeline: Pipeline, catalog: CatalogProtocol
    ) -> None:
        reporting = [n.name for n in pipeline.nodes if INPUT_VERSIONS in n.inputs]
        # The export publishes what it reads: checked like the report, nothing recorded.
        consumers = reporting + [n.name for n in pipeline.nodes if n.name in CHECKED_EXPORTS]
        if not consumers:
            return
        upstream = pipeline.to_nodes(*consumers)
        produced = upstream.all_outputs()
        # Read before written (stable sort keeps the nodes' order within each group).
        names = sorted(
            dict.fromkeys(name for n in upstream.nodes for name in n.inputs),
            key=lambda name: name in produced,
        )
        versions = {}
        for name in names:
            dataset = catalog.get(name)
            if dataset is None or isinstance(dataset, MemoryDataset):  # parameters, in memory
                continue
            # A versioned dataset always has a save version: the run's.
            save_version = (
                dataset.resolve_save_version()
                if isinstance(dataset, AbstractVersionedDataset)
                else None
            )
            if save_version is None:
                versions[name] = UNVERSIONED
            elif name in produced:
                versions[name] = save_version
            else:
                versions[name] = dataset.resolve_load_version()
        loaded = {
            name: version
            for name, version in versions.items()
            if name not in produced and version not in (None, UNVERSIONED)
        }
        pinned = set((run_params or {}).get("load_versions") or {})
        self._check_one_history(loaded, pinned, catalog)
        if reporting:
            catalog.save(INPUT_VERSIONS, versions)

    @staticmethod
    def _check_one_history(
        loaded: dict[str, str], pinned: set[str], catalog: CatalogProtocol
    ) -> None:
        """Refuse mixed runs; a version chosen with --load-versions counts as asked for."""
        if len(loaded) < 2:  # mixed runs take two tables read; spare importing every pipeline
            return
        stale = mixed_runs(loaded, project_lineage())
        chosen = [item for item in stale if {item.dataset, item.source} & pinned]
        if chosen:
            logger.warning(
                "report: versions chosen with --load-versions mix runs: %s",
                "; ".join(item.describe() for item in chosen),
            )
        stale = [item for item in stale if item not in chosen]
        if not stale:
            return
        message = describe_mixed_runs(stale, "report.allow_mixed_runs")
        from llm_feedback.params import parse_report  # the report's libraries, only here

        if parse_report(catalog.load("parameters").get("report") or {}).allow_mixed_runs:
            logger.warning("report.allow_mixed_runs is true: %s", message)
            return
        raise InputError(message)
