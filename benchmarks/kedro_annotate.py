"""`kedro run --pipelines annotate` against the concurrency/latency bound.

A completions dataset (`--prompts` x 4, from all six sources) is prepared in a fresh data
root, then `kedro run --pipelines annotate` runs as a subprocess, its judge endpoint the
project's server in its own process at `--latency` s a call. The server records the time
and body of every judge call, so afterwards the very same requests go through a bare
`AsyncOpenAI` loop with the same concurrency: the ceiling for these payloads.

    python benchmarks/kedro_annotate.py [--prompts 800] [--latency 0.2] [--concurrency 32]

Calls/s are over the judge window: first call received to last call answered (aspects,
critiques and the score fix's re-scores, sent together on one queue by one node, the
re-scores as each prompt's judge calls finish; the fix node after it reads them from the
request cache); the process wall time adds Python, Kedro and Parquet around it.

Two floors are measured beside it, so that the share of the bound the whole process can
reach on this machine is known: the same bodies posted by a raw aiohttp loop that reads
nothing of the answers (what the server and the machine allow any client), and
`python -m kedro --version` in the project (Python, Kedro and the project's settings
starting, no pipeline).
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import openai

sys.path.insert(0, str(Path(__file__).parent))
from common import cpu_seconds, save  # noqa: E402
from scale import generated_completions  # noqa: E402

from llm_feedback.testing.server import (  # noqa: E402
    fetch_stats,
    schema_responder,
    serve_in_subprocess,
)

ROOT = Path(__file__).resolve().parents[1]
RECORD_ENV = "KEDRO_ANNOTATE_RECORD"
RESPONDER = "kedro_annotate:recording_responder"
# A server process imports this module (and openai) to start: seconds on a loaded machine.
SERVER_START_S = 120  # imported by the server's own process
_record: Any = None


def recording_responder(body: dict[str, Any], ctx: Any) -> str:
    """The schema responder, appending each call's arrival time and body to a JSON Lines file."""
    global _record  # noqa: PLW0603 - one file per server process, opened on its first call
    if _record is None:
        _record = open(os.environ[RECORD_ENV], "a")  # noqa: SIM115 - closed at process exit
    _record.write(json.dumps({"arrived": time.time(), "body": body}) + "\n")
    _record.flush()
    return schema_responder(body, ctx)


def prepare_completions(prompts: int, data_root: Path) -> int:
    """Save `prompts` x 4 completions as the catalog's versioned `completions` dataset."""
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    with (
        tempfile.TemporaryDirectory() as tmp,
        serve_in_subprocess(latency_s=0.0, responder="echo", timeout_s=SERVER_START_S) as url,
    ):
        completions = generated_completions(prompts, url, Path(tmp) / "cache.sqlite")
    # The server echoes the prompt, so a prompt's completions would be one text and the
    # judge client would send each critique once; give each its own text, as 4 models would.
    completions["response"] = [
        f"{model} on {prompt_id}: " + "a sentence of the answer. " * 40
        for model, prompt_id in zip(completions["model"], completions["prompt_id"], strict=True)
    ]
    bootstrap_project(ROOT)
    with KedroSession.create(ROOT, runtime_params={"data_root": str(data_root)}) as session:
        session.load_context().catalog.save("completions", completions)
    return len(completions)


def run_kedro(data_root: Path, url: str, concurrency: int) -> tuple[float, float]:
    """The run's process wall time, and when (epoch seconds) it was started."""
    settings = [
        f"data_root={data_root}",
        "endpoints.local.backend=openai",
        f"endpoints.local.base_url={url}",
        "endpoints.local.model=judge",
        f"endpoints.local.max_concurrent={concurrency}",
    ]
    # The project's bytecode written first, as a user's second run finds it: where
    # PYTHONDONTWRITEBYTECODE is set (this machine) every run would compile it again.
    compileall.compile_dir(ROOT / "src", quiet=1)
    started_at, started = time.time(), time.perf_counter()
    finished = subprocess.run(
        [sys.executable, "-m", "kedro", "run", "--pipelines", "annotate"]
        + ["--params", ",".join(settings)],
        cwd=ROOT,
        env={**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"},
        check=False,
        capture_output=True,
        text=True,
    )
    if finished.returncode:
        tail = "\n".join(finished.stderr.splitlines()[-30:])
        raise RuntimeError(f"kedro run --pipelines annotate exited {finished.returncode}:\n{tail}")
    return time.perf_counter() - started, started_at


def kedro_start_s() -> float:
    """Wall time of `python -m kedro --version` in the project: the start-up of any run."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "kedro", "--version"],
        cwd=ROOT,
        env={**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"},
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def replay_raw(url: str, bodies: list[dict[str, Any]], concurrency: int) -> dict[str, float]:
    """The recorded bodies, encoded beforehand, posted by a raw aiohttp loop that reads
    the answers' bytes and nothing more: the most any client gets from this server here."""
    encoded = [json.dumps(body).encode() for body in bodies]
    headers = {"Content-Type": "application/json", "Authorization": "Bearer x"}

    async def send_all() -> None:
        semaphore = asyncio.Semaphore(concurrency)
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=concurrency)
        ) as session:

            async def one(data: bytes) -> None:
                async with (
                    semaphore,
                    session.post(f"{url}/chat/completions", data=data, headers=headers) as reply,
                ):
                    await reply.read()

            await asyncio.gather(*(one(data) for data in encoded))

    wall = time.perf_counter()
    asyncio.run(send_all())
    wall = time.perf_counter() - wall
    return {"calls": len(bodies), "wall_s": wall, "calls_per_s": len(bodies) / wall}


def replay(url: str, bodies: list[dict[str, Any]], concurrency: int) -> dict[str, float]:
    """The recorded bodies through a bare AsyncOpenAI loop bounded by a semaphore."""

    async def send_all() -> None:
        client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
        semaphore = asyncio.Semaphore(concurrency)

        async def one(body: dict[str, Any]) -> None:
            async with semaphore:
                await client.chat.completions.create(**body)

        await asyncio.gather(*(one(body) for body in bodies))
        await client.close()

    wall, cpu = time.perf_counter(), cpu_seconds()
    asyncio.run(send_all())
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    return {
        "calls": len(bodies),
        "wall_s": wall,
        "calls_per_s": len(bodies) / wall,
        "cpu_ms_per_call": 1000 * cpu / len(bodies),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=800)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    bound = args.concurrency / args.latency
    with tempfile.TemporaryDirectory(prefix="kedro-annotate-") as tmp:
        data_root = Path(tmp) / "data"
        completions = prepare_completions(args.prompts, data_root)
        record = Path(tmp) / "judge_calls.jsonl"
        os.environ[RECORD_ENV] = str(record)
        with serve_in_subprocess(
            latency_s=args.latency, responder=RESPONDER, timeout_s=SERVER_START_S
        ) as url:
            process_wall, started_at = run_kedro(data_root, url, args.concurrency)
            received = fetch_stats(url)["chat_requests"]
        calls = [json.loads(line) for line in record.read_text().splitlines()]
        if len(calls) != received:
            raise RuntimeError(f"the server answered {received} calls but recorded {len(calls)}")
        first = min(c["arrived"] for c in calls)
        last_answered = max(c["arrived"] for c in calls) + args.latency
        window = last_answered - first
        bodies = [c["body"] for c in calls]
        with serve_in_subprocess(
            latency_s=args.latency, responder="schema", timeout_s=SERVER_START_S
        ) as url:
            bare = replay(url, bodies, args.concurrency)
            raw = replay_raw(url, bodies, args.concurrency)
        start_floor = kedro_start_s()
    kedro = {
        "calls": len(calls),
        "process_wall_s": process_wall,
        "judge_window_s": window,
        "first_call_after_s": first - started_at,
        "after_last_answer_s": started_at + process_wall - last_answered,
        "calls_per_s": len(calls) / window,
        "calls_per_s_process": len(calls) / process_wall,
    }
    # The whole process at best: the raw loop's rate, after the start-up no run can skip.
    best_process_s = len(calls) / raw["calls_per_s"] + start_floor
    save(
        "kedro_annotate",
        {
            "latency_s": args.latency,
            "concurrency": args.concurrency,
            "bound_calls_per_s": bound,
            "prompts": args.prompts,
            "completions": completions,
            "kedro_run": {
                **kedro,
                "ratio_of_bound": kedro["calls_per_s"] / bound,
                "process_ratio_of_bound": kedro["calls_per_s_process"] / bound,
            },
            "plain_async_openai_same_requests": {
                **bare,
                "ratio_of_bound": bare["calls_per_s"] / bound,
            },
            "ratio_of_plain_client": kedro["calls_per_s"] / bare["calls_per_s"],
            "raw_aiohttp_same_requests": {**raw, "ratio_of_bound": raw["calls_per_s"] / bound},
            "kedro_start_s": start_floor,
            "process_ceiling_ratio_of_bound": len(calls) / best_process_s / bound,
        },
    )


if __name__ == "__main__":
    main()
