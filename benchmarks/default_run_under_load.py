"""The default run on a busy machine: does the embedded model finish, slower, not fail?

python benchmarks/default_run_under_load.py [--limit-s 900] [--loops 2]

Starts `--loops` busy-loop processes (one per core by default), runs the README's default
job (`default_run.py`'s child: `__default__` on the embedded model, a fresh data root, no
request cache) with a time limit, stops the loops, and prints JSON: wall time, the load
average seen during the run, whether it finished, and how many calls timed out (the
run's log lines that report a timeout). Writes results/default_run_under_load.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import machine, save  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RUN = Path(__file__).with_name("default_run.py")
TIMED_OUT = re.compile(r"APITimeoutError|timed out", re.IGNORECASE)


def busy_loop() -> None:
    while True:
        pass


def sample_load(samples: list[float], stop: threading.Event) -> None:
    while not stop.wait(10):
        samples.append(os.getloadavg()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-s", type=float, default=900)
    parser.add_argument("--loops", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--params", default="", help="runtime parameters, as kedro run's")
    args = parser.parse_args()
    loops = [multiprocessing.Process(target=busy_loop, daemon=True) for _ in range(args.loops)]
    samples: list[float] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample_load, args=(samples, stop), daemon=True)
    with tempfile.TemporaryDirectory(prefix="default-run-load-") as tmp:
        data_root = Path(tmp) / "data"
        shutil.copytree(ROOT / "data" / "01_raw", data_root / "01_raw")
        command = [
            sys.executable,
            str(DEFAULT_RUN),
            "--child",
            str(data_root),
            str(Path(tmp) / "out.json"),
        ]
        command += ["--params", args.params]
        load_before = os.getloadavg()[0]
        for loop in loops:
            loop.start()
        sampler.start()
        started = time.perf_counter()
        try:
            run = subprocess.run(
                command,
                cwd=ROOT,
                env={**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"},
                capture_output=True,
                text=True,
                timeout=args.limit_s,
                check=False,
            )
            finished, output = run.returncode == 0, run.stdout + run.stderr
            nodes = json.loads((Path(tmp) / "out.json").read_text())["nodes"] if finished else {}
        except subprocess.TimeoutExpired as expired:
            nodes = {}
            finished = False
            output = (expired.stdout or b"").decode() + (expired.stderr or b"").decode()
        wall_s = time.perf_counter() - started
        stop.set()
        for loop in loops:
            loop.terminate()
            loop.join()
    result = {
        "machine": machine(),
        "busy_loops": args.loops,
        "limit_s": args.limit_s,
        "finished": finished,
        "wall_s": round(wall_s, 1),
        "load_average_before": round(load_before, 2),
        "load_average_during": {
            "mean": round(sum(samples) / len(samples), 2) if samples else None,
            "max": round(max(samples), 2) if samples else None,
        },
        "timed_out_call_lines": sum(1 for line in output.splitlines() if TIMED_OUT.search(line)),
        "params": args.params,
        "node_wall_s": {name: round(node["wall_s"], 1) for name, node in nodes.items()},
        "output_tail": output[-1500:] if not finished else "",
    }
    save("default_run_under_load", result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
