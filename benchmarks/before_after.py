"""Two commits side by side, in one sitting: every benchmark of each, interleaved.

Each commit is checked out into its own git worktree and runs its own benchmark scripts
against its own code (PYTHONPATH=<worktree>/src), in fresh processes, alternating which
commit goes first in each repetition, so both see the same machine state. The script then
writes the medians, the ratio after/before and whether a figure got worse by more than the
tolerance into `results/before_after.json` and into RESULTS.md (its before-after section).

    python benchmarks/before_after.py --before fe3cd64 [--after HEAD] [--repetitions 3]
        [--scale-prompts 64000]   # 0 skips the UltraFeedback-scale stages
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import results_runs  # noqa: E402
from common import cpu_model, write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TOLERANCE = 0.05

# (script, arguments, result file) run once per repetition and commit.
THROUGHPUT_RUNS = (
    # 30,000 zero-latency calls, not the script's 3,000: those last 0.3 s, and their CPU per
    # call ranged 0.098-0.125 ms over five repetitions of one commit (2026-12-06).
    ("throughput.py", ["--runs", "1", "--zero-latency-requests", "30000"], "throughput"),
    ("annotate_throughput.py", [], "annotate_throughput"),
    ("judge_throughput.py", ["--runs", "1"], "judge_throughput"),
)
SCALE_STAGES = ("generate", "aspects", "critique")

# (label, result file, path in its JSON, True when higher is better)
FIGURES = (
    ("client calls/s, 0.2 s latency, C=32", "throughput", "latency_run.ours.requests_per_s", True),
    (
        "bare AsyncOpenAI calls/s, same requests",
        "throughput",
        "latency_run.plain_async_openai.requests_per_s",
        True,
    ),
    (
        "client CPU ms/call, zero latency",
        "throughput",
        "zero_latency_run.ours.cpu_ms_per_request",
        False,
    ),
    (
        "bare AsyncOpenAI CPU ms/call, zero latency",
        "throughput",
        "zero_latency_run.plain_async_openai.cpu_ms_per_request",
        False,
    ),
    ("annotate aspect calls/s", "annotate_throughput", "aspects.calls_per_s", True),
    ("annotate aspect CPU ms/call", "annotate_throughput", "aspects.cpu_ms_per_call", False),
    (
        "annotate aspects / bare client",
        "annotate_throughput",
        "aspects.ratio_of_plain_client",
        True,
    ),
    ("critique calls/s", "annotate_throughput", "critiques.calls_per_s", True),
    ("critique CPU ms/call", "annotate_throughput", "critiques.cpu_ms_per_call", False),
    ("judge 1-10 judgments/s", "judge_throughput", "single_1_10.judgments_per_s", True),
    ("judge binary judgments/s", "judge_throughput", "binary.judgments_per_s", True),
    (
        "judge CPU ms/judgment, zero latency",
        "judge_throughput",
        "zero_latency.judge.cpu_ms_per_judgment",
        False,
    ),
    ("scale: generate wall s", "scale_generate", "stages.generate.wall_s", False),
    ("scale: generate peak RSS MiB", "scale_generate", "peak_rss_mib", False),
    ("scale: aspects wall s", "scale_aspects", "stages.aspects.wall_s", False),
    ("scale: aspects peak RSS MiB", "scale_aspects", "peak_rss_mib", False),
    ("scale: critiques wall s", "scale_critique", "stages.critique.wall_s", False),
    ("scale: critiques peak RSS MiB", "scale_critique", "peak_rss_mib", False),
)


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def run_script(tree: Path, script: str, args: list[str], result: str, store: Path) -> dict:
    """Run one benchmark script of `tree` against `tree`'s code; return its JSON."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "KEDRO_DISABLE_TELEMETRY": "1"}
    subprocess.run(
        [sys.executable, str(tree / "benchmarks" / script), *args],
        cwd=tree,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    produced = tree / "benchmarks" / "results" / f"{result}.json"
    data = json.loads(produced.read_text())
    shutil.copy(produced, store)
    return data


def lookup(data: dict, path: str) -> float | None:
    for key in path.split("."):
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return float(data) if isinstance(data, int | float) else None


def summarise(runs: dict[str, dict[str, list[dict]]]) -> list[dict]:
    rows = []
    for label, result, path, higher_is_better in FIGURES:
        values = {
            side: [v for run in runs[side].get(result, []) if (v := lookup(run, path)) is not None]
            for side in ("before", "after")
        }
        if not values["before"] or not values["after"]:
            continue
        before, after = (statistics.median(values[side]) for side in ("before", "after"))
        ratio = after / before if before else float("nan")
        worse = ratio < 1 - TOLERANCE if higher_is_better else ratio > 1 + TOLERANCE
        rows.append(
            {
                "figure": label,
                "before": values["before"],
                "after": values["after"],
                "median_before": before,
                "median_after": after,
                "ratio": ratio,
                "higher_is_better": higher_is_better,
                "worse_than_tolerance": worse,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, help="a commit, e.g. the one before a change")
    parser.add_argument("--after", default="HEAD")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--scale-prompts", type=int, default=64_000)
    args = parser.parse_args()
    commits = {
        "before": git("rev-parse", "--short", args.before),
        "after": git("rev-parse", "--short", args.after),
    }
    runs: dict[str, dict[str, list[dict]]] = {"before": {}, "after": {}}
    with tempfile.TemporaryDirectory(prefix="before_after_") as tmp:
        trees = {side: Path(tmp) / side for side in commits}
        store = Path(tmp) / "json"
        store.mkdir()
        for side, commit in commits.items():
            git("worktree", "add", "--detach", str(trees[side]), commit)
        try:
            for repetition in range(args.repetitions):
                order = ("before", "after") if repetition % 2 == 0 else ("after", "before")
                for script, extra, result in THROUGHPUT_RUNS:
                    for side in order:
                        print(f"[{repetition + 1}/{args.repetitions}] {side}: {script}", flush=True)
                        data = run_script(
                            trees[side],
                            script,
                            extra,
                            result,
                            store / f"{result}_{side}_{repetition}.json",
                        )
                        runs[side].setdefault(result, []).append(data)
            if args.scale_prompts:
                # Stage by stage, the two commits one after the other: each stage of one
                # commit reads its own earlier stage's cache from its own workdir.
                for stage in SCALE_STAGES:
                    for side in ("before", "after"):
                        workdir = Path(tmp) / f"scale_{side}"
                        print(f"scale {side}: {stage}", flush=True)
                        data = run_script(
                            trees[side],
                            "scale.py",
                            [
                                "--stage",
                                stage,
                                "--prompts",
                                str(args.scale_prompts),
                                "--workdir",
                                str(workdir),
                            ],
                            f"scale_{stage}",
                            store / f"scale_{stage}_{side}.json",
                        )
                        runs[side].setdefault(f"scale_{stage}", []).append(data)
        finally:
            for tree in trees.values():
                git("worktree", "remove", "--force", str(tree))
    meta = {
        "before": commits["before"],
        "after": commits["after"],
        "when": time.strftime("%Y-%m-%d %H:%M"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "repetitions": args.repetitions,
        "scale_prompts": args.scale_prompts,
    }
    rows = summarise(runs)
    RESULTS.mkdir(exist_ok=True)
    data = {**meta, "tolerance": TOLERANCE, "figures": rows}
    (RESULTS / "before_after.json").write_text(json.dumps({**data, "runs": runs}, indent=2))
    write_section("before-after", results_runs.before_after(data))
    for row in rows:
        flag = "  <-- worse" if row["worse_than_tolerance"] else ""
        print(
            f"{row['figure']:<45} {row['median_before']:>10.4g} {row['median_after']:>10.4g} "
            f"{row['ratio']:>6.3f}{flag}"
        )


if __name__ == "__main__":
    main()
