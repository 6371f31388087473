"""Project hooks: hand credentials to the endpoint layer, check a run before its first
node (parameters, its priced plan, one run per data root, endpoints that answer), stop
local model servers, tell the report which dataset versions it was built from, and print
how long each node took."""

import logging
import time
from pathlib import Path
from typing import Any

from kedro.config import MissingConfigException
from kedro.framework.hooks import hook_impl
from kedro.io import AbstractVersionedDataset, CatalogProtocol, MemoryDataset
from kedro.pipeline import Node, Pipeline

from llm_feedback.backends import register_credentials, stop_local_servers
from llm_feedback.backends.preflight import preflight
from llm_feedback.backends.secrets import mask_secrets_in_logs
from llm_feedback.params.run import check_run, parse_run_options
from llm_feedback.pipelines.report.pipeline import INPUT_VERSIONS
from llm_feedback.pipelines.run_plan import plan_for_run
from llm_feedback.planning import PlanOnly, check_cost_limit, describe_plan
from llm_feedback.runlock import RunLock

logger = logging.getLogger(__name__)

# The catalog entry the plan is saved to (conf/base/catalog.yml).
RUN_PLAN = "run_plan"

# What the report shows for an input that is not a versioned dataset.
UNVERSIONED = "unversioned"
# Nodes quicker than this are summed into one "other nodes" line of the stage times.
QUICK_NODE_S = 1.0

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
    - with `plan_only` or `max_cost_usd`, the run's priced plan (`llm_feedback.planning`):
      `plan_only` saves it as `run_plan` and stops (`PlanOnly`), a plan above
      `max_cost_usd` stops the run (`CostLimitExceeded`), both before any call;
    - a run that calls models takes the data root's lock (one run per request cache);
    - every endpoint it will call answers one cheap request (`backends.preflight`).
    """

    # The request cache of the run in progress, for the CLI's message on Ctrl-C.
    current_request_cache: str | None = None

    def __init__(self) -> None:
        self._lock: RunLock | None = None

    @hook_impl
    def before_pipeline_run(self, pipeline: Pipeline, catalog: CatalogProtocol) -> None:
        parameters = catalog.load("parameters")
        blocks = {
            name.removeprefix("params:").split(".")[0]
            for name in pipeline.inputs()
            if name.startswith("params:")
        }
        checked = check_run(parameters, blocks)
        endpoints = checked.endpoints
        options = parse_run_options(parameters)
        if options.plan_only or options.max_cost_usd is not None:
            plan = plan_for_run(pipeline, catalog, parameters, checked)
            if options.plan_only:
                catalog.save(RUN_PLAN, plan)
                raise PlanOnly(describe_plan(plan, options.max_cost_usd))
            check_cost_limit(plan, options.max_cost_usd)
            logger.info(
                "run plan: estimated cost $%.4f, within max_cost_usd $%.4f",
                plan["estimated_cost"].sum(),
                options.max_cost_usd,
            )
        cache = parameters.get("request_cache")
        RunGuardHooks.current_request_cache = cache
        if not endpoints or not cache:
            return
        lock = RunLock(Path(f"{cache}.lock"))
        lock.acquire()
        self._lock = lock
        try:
            for endpoint in endpoints:
                preflight(endpoint)
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    @hook_impl
    def after_pipeline_run(self) -> None:
        self._release()

    @hook_impl
    def on_pipeline_error(self) -> None:
        self._release()


class ReportProvenanceHooks:
    """Tell the report which version of each dataset it was built from.

    A node sees data, not versions; this hook sees the catalog before the run starts: a
    dataset that the run writes gets the run's save version, any other the version the
    catalog will load (`--load-versions`, else the latest on disk).
    """

    @hook_impl
    def before_pipeline_run(self, pipeline: Pipeline, catalog: CatalogProtocol) -> None:
        consumers = [n.name for n in pipeline.nodes if INPUT_VERSIONS in n.inputs]
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
        catalog.save(INPUT_VERSIONS, versions)


class StageTimesHooks:
    """At the end of a run, one table of where its time went, node by node, in run order.

    `last_run` keeps the figures ({node name: seconds}) for benchmarks/default_run.py.
    """

    last_run: dict[str, float] = {}

    def __init__(self) -> None:
        self._started: dict[str, float] = {}
        self._run_started = 0.0

    @hook_impl
    def before_pipeline_run(self) -> None:
        StageTimesHooks.last_run = {}
        self._run_started = time.perf_counter()

    @hook_impl
    def before_node_run(self, node: Node) -> None:
        self._started[node.name] = time.perf_counter()

    @hook_impl
    def after_node_run(self, node: Node) -> None:
        started = self._started.pop(node.name, None)
        if started is not None:
            StageTimesHooks.last_run[node.name] = time.perf_counter() - started

    @hook_impl
    def after_pipeline_run(self) -> None:
        total = time.perf_counter() - self._run_started
        slow = {n: s for n, s in StageTimesHooks.last_run.items() if s >= QUICK_NODE_S}
        quick = sum(StageTimesHooks.last_run.values()) - sum(slow.values())
        width = max([len(name) for name in slow] + [len("other nodes")])
        lines = [f"  {name:<{width}}  {_minutes(seconds)}" for name, seconds in slow.items()]
        lines.append(f"  {'other nodes':<{width}}  {_minutes(quick)}")
        lines.append(f"  {'whole run':<{width}}  {_minutes(total)}")
        logger.info("Time per node:\n%s", "\n".join(lines))


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{seconds % 60:04.1f}"
