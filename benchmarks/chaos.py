"""sample -> generate -> annotate -> report through a faulty server: is anything lost,
duplicated or paid for twice?

The project's server runs in its own process with the `chaos` responder: 20% of calls get
429 with Retry-After, 5% a 500, 2% stall past the client's 1 s timeout, 10% a reply no
parser can read; each retry or re-ask draws anew. The whole default pipeline runs in one
Kedro session, as `kedro run` would, on synthetic prompts from all six sources.

    python benchmarks/chaos.py [--prompts 250]

Writes results/chaos.json and prints it. Lost = expected rows missing from a table;
duplicated = rows whose key repeats; requests per needed call = chat requests the server
received / distinct calls the run needed (every answered one is in the request cache).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import results_runs  # noqa: E402
from common import machine, save, write_section  # noqa: E402

from llm_feedback.replies.status import READ  # noqa: E402
from llm_feedback.testing.server import (  # noqa: E402
    CHAOS_FAULTS,
    fetch_stats,
    serve_in_subprocess,
)

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("evol_instruct", "false_qa", "flan", "sharegpt", "truthful_qa", "ultrachat")


def write_prompts(directory: Path, n: int) -> None:
    directory.mkdir(parents=True)
    with (directory / "chaos.jsonl").open("w") as handle:
        for i in range(n):
            record = {
                "source": SOURCES[i % 6],
                "prompt_id": f"c{i:05d}",
                "instruction": f"Question {i}: explain topic {i % 97} in two sentences.",
            }
            if record["source"] == "truthful_qa":
                record |= {"correct_answers": ["yes"], "incorrect_answers": ["no"]}
            handle.write(json.dumps(record) + "\n")


def keyed(frame, keys: list[str]) -> dict[str, int]:
    return {"rows": len(frame), "duplicated": int(frame.duplicated(keys).sum())}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=250)
    args = parser.parse_args()
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(ROOT)
    with (
        tempfile.TemporaryDirectory() as tmp,
        serve_in_subprocess(latency_s=0.01, responder="chaos") as url,
    ):
        raw = Path(tmp) / "prompts"
        write_prompts(raw, args.prompts)
        data_root = Path(tmp) / "data"
        endpoint = {
            "backend": "openai",
            "model": "chaos",
            "base_url": url,
            "timeout_s": 1.0,
            "max_retries": 8,
            "backoff_base_s": 0.05,
            "backoff_max_s": 0.5,
            "max_concurrent": 32,
        }
        params = {
            "data_root": str(data_root),
            "raw_prompts_dir": str(raw),
            "sample": {"max_prompts": None},
            "endpoints": {"local": endpoint},
        }
        started = time.perf_counter()
        with KedroSession.create(project_path=ROOT, runtime_params=params) as session:
            session.run(pipeline_names=["__default__"])
            catalog = session.load_context().catalog
        wall = time.perf_counter() - started
        sent = fetch_stats(url)["chat_requests"]
        completions = catalog.load("completions")
        aspects = catalog.load("aspect_annotations").read()
        critiques = catalog.load("critiques").read()
        export = catalog.load("ultrafeedback")
        with sqlite3.connect(data_root / "02_intermediate" / "request_cache.sqlite") as db:
            answered_calls = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    usable = completions[completions["error"].isna()]
    n_aspects = aspects["aspect"].nunique()
    failed_calls = int(completions["error"].notna().sum()) + int(
        (critiques["parse_status"] == "call_failed").sum()
    )
    report = {
        "prompts": args.prompts,
        "faults": CHAOS_FAULTS,
        "wall_s": wall,
        "completions": {
            **keyed(completions, ["prompt_id", "completion_idx"]),
            "answered": len(usable),
            "failed": int(completions["error"].notna().sum()),
            "lost": args.prompts * 4 - len(completions),
        },
        "aspect_annotations": {
            **keyed(aspects, ["prompt_id", "completion_idx", "aspect", "shuffle_idx"]),
            "read": int(aspects["parse_status"].isin(READ).sum()),
            "unreadable_after_reasks": int((~aspects["parse_status"].isin(READ)).sum()),
            "lost": len(usable) * n_aspects - len(aspects),
        },
        "critiques": {
            **keyed(critiques, ["prompt_id", "completion_idx"]),
            "read": int(critiques["parse_status"].isin(READ).sum()),
            "lost": len(usable) - len(critiques),
        },
        "ultrafeedback_records": {"rows": len(export), "lost": args.prompts - len(export)},
        "requests_sent": sent,
        "distinct_calls_answered": answered_calls,
        "calls_failed_after_retries": failed_calls,
        "requests_per_needed_call": sent / max(answered_calls + failed_calls, 1),
    }
    save("chaos", report)
    write_section(
        "chaos",
        f"{results_runs.chaos([report])}\n\nWritten by `benchmarks/chaos.py` on "
        f"{time.strftime('%Y-%m-%d %H:%M')}: {machine()}.",
    )


if __name__ == "__main__":
    main()
