"""The default run (`make run`, install excluded): where its time goes, and how long it takes.

python benchmarks/default_run.py [--repeats 3] [--params endpoints.local.parallel_slots=2,...]

Each repetition runs the `__default__` pipeline on the embedded model in its own process
and its own fresh data root (raw prompts copied, no request cache), so every repetition
pays for every call. Per node it reads llama.cpp's counters (prompt tokens evaluated,
prompt tokens served from the prompt cache, tokens generated, seconds of each) and the
number of answered calls, and over the whole process its wall time and peak RSS (the
model server runs inside the process, so its KV cache is counted). Writes
results/default_run.json and the "default-run" section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import results_runs  # noqa: E402
from common import machine, peak_rss_mib, save, write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
COUNTERS = (
    "prompt_tokens_total",
    "prompt_tokens_cached_total",
    "prompt_seconds_total",
    "tokens_predicted_total",
    "tokens_predicted_seconds_total",
)


def _scrape_counters() -> dict[str, float]:
    """Sum llama.cpp's counters over the embedded servers running in this process."""
    from llm_feedback.backends import local

    totals = dict.fromkeys(COUNTERS, 0.0)
    for server in list(local._servers.values()):
        base = server.listening_address.rstrip("/")
        with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
            for line in response.read().decode().splitlines():
                name, _, value = line.partition(" ")
                key = name.removeprefix("llamacpp:")
                if key in totals:
                    totals[key] += float(value)
    return totals


def _answered_calls(cache: Path) -> int:
    if not cache.is_file():
        return 0
    with sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=30) as db:
        return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]


class _CounterHooks:
    """Counter deltas per node. A node that starts no server reads zeros."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        self.per_node: dict[str, dict[str, float]] = {}
        self._before: dict[str, float] = {}

    def _now(self) -> dict[str, float]:
        return {**_scrape_counters(), "calls": _answered_calls(self.cache)}

    def before_node_run(self, node) -> None:
        self._before = self._now()

    def after_node_run(self, node) -> None:
        after = self._now()
        # A server started inside the node has counters from zero.
        self.per_node[node.name] = {
            key: after[key] - (self._before[key] if self._before[key] <= after[key] else 0)
            for key in after
        }


def _runtime_params(data_root: Path, settings: str) -> dict:
    """`kedro run --params` style "a.b=value,..." as the nested dict a session takes."""
    import yaml

    params: dict = {"data_root": str(data_root)}
    for item in filter(None, settings.split(",")):
        dotted, _, value = item.partition("=")
        *parents, leaf = dotted.strip().split(".")
        node = params
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = yaml.safe_load(value)
    return params


def run_once(data_root: Path, out: Path, settings: str) -> None:
    """One default run in this process (the child of `main`)."""
    from kedro.framework.hooks import hook_impl
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    from llm_feedback.pipelines.stage_times import StageTimesHooks

    hooks = _CounterHooks(data_root / "02_intermediate" / "request_cache.sqlite")
    bootstrap_project(ROOT)
    params = _runtime_params(data_root, settings)
    with KedroSession.create(ROOT, runtime_params=params) as session:
        plugin = type(
            "DefaultRunCounters",
            (),
            {
                "before_node_run": hook_impl(lambda self, node: hooks.before_node_run(node)),
                "after_node_run": hook_impl(lambda self, node: hooks.after_node_run(node)),
            },
        )()
        session._hook_manager.register(plugin)
        session.run()
    nodes = {
        name: {"wall_s": seconds, **hooks.per_node.get(name, {})}
        for name, seconds in StageTimesHooks.last_run.items()
    }
    out.write_text(json.dumps({"nodes": nodes, "peak_rss_mib": peak_rss_mib()}))


def one_repetition(index: int, settings: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="default-run-") as tmp:
        data_root = Path(tmp) / "data"
        shutil.copytree(ROOT / "data" / "01_raw", data_root / "01_raw")
        out = Path(tmp) / "result.json"
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, __file__, "--child", str(data_root), str(out), "--params", settings],
            check=True,
            cwd=ROOT,
            env={**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"},
        )
        result = json.loads(out.read_text())
        result["process_wall_s"] = time.perf_counter() - started
        report_dir = data_root / "08_reporting"
        result["report_files"] = sorted(
            str(p.relative_to(report_dir)) for p in report_dir.rglob("*") if p.is_file()
        )
    print(f"repetition {index}: {result['process_wall_s']:.0f} s", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--params", default="", help="runtime parameters, as kedro run's")
    parser.add_argument("--child", nargs=2, metavar=("DATA_ROOT", "OUT"))
    args = parser.parse_args()
    if args.child:
        run_once(Path(args.child[0]), Path(args.child[1]), args.params)
        return
    runs = [one_repetition(i + 1, args.params) for i in range(args.repeats)]
    payload = {"machine": machine(), "params": args.params, "runs": runs}
    if args.params:  # an experiment: the JSON only, RESULTS.md keeps the default's figures
        save("default_run_experiment", payload)
        print(results_runs.default_run([payload]))
        return
    save("default_run", payload)
    write_section("default-run", results_runs.default_run([payload]))


if __name__ == "__main__":
    main()
