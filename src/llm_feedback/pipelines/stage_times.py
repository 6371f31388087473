"""Where a run's time went, node by node: logged at its end, kept for MLflow tracking
(`tracking_hooks.py`) and benchmarks/default_run.py."""

from __future__ import annotations

import logging
import time

from kedro.framework.hooks import hook_impl
from kedro.pipeline import Node

logger = logging.getLogger(__name__)

# Nodes quicker than this are summed into one "other nodes" line of the stage times.
QUICK_NODE_S = 1.0


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
