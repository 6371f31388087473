"""Peak memory and time of the pipelines' own bookkeeping at UltraFeedback scale.

64,000 prompts x 4 completions against the fake server at zero latency, so what is
measured is our code (sampling, request building, caching, parsing, DataFrames), not a
model. Texts have UltraFeedback's sizes (`sized_responder`): memory grows with them. Each
stage runs in a fresh process, as a Kedro node does its work between loading its inputs
and saving its output, so its peak RSS is its own.

    python benchmarks/scale.py --stage sample --workdir /tmp/scale [--prompts 64000]
    python benchmarks/scale.py --stage generate --workdir /tmp/scale   # reads the sample
    python benchmarks/scale.py --stage aspects --workdir /tmp/scale   # reads its completions
    python benchmarks/scale.py --stage critique --workdir /tmp/scale
    python benchmarks/scale.py --stage score_fix --workdir /tmp/scale  # re-asks suspicious 10s
    python benchmarks/scale.py --stage export --workdir /tmp/scale     # UltraFeedback records

Every stage reads its inputs as the catalog loads them (`ParquetSource`s) and streams them
a chunk at a time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from common import cpu_seconds, peak_rss_mib, save, save_table  # noqa: E402

from llm_feedback.annotation import ultrafeedback_export  # noqa: E402
from llm_feedback.annotation.rescore import overall_scores_table  # noqa: E402
from llm_feedback.annotation.stages import (  # noqa: E402
    aspect_annotations_table,
    critiques_table,
)
from llm_feedback.backends import EndpointConfig, LLMClient  # noqa: E402
from llm_feedback.backends.endpoints import parse_endpoints, parse_model_pool  # noqa: E402
from llm_feedback.completions.generation import completions_table  # noqa: E402
from llm_feedback.completions.sampling import sample_prompt_file  # noqa: E402
from llm_feedback.storage.parquet_source import ROW_GROUP_ROWS, ParquetSource  # noqa: E402
from llm_feedback.testing.server import (  # noqa: E402
    RequestContext,
    schema_responder,
    serve_in_subprocess,
)

SOURCES = ("evol_instruct", "false_qa", "flan", "sharegpt", "truthful_qa", "ultrachat")
MODELS = [f"model-{i:02d}" for i in range(17)]  # UltraFeedback's pool had 17 models
ASPECTS = ["instruction_following", "honesty", "truthfulness", "helpfulness"]
# About the mean lengths in UltraFeedback's public data: a completion, one aspect rationale,
# one critique.
COMPLETION_CHARS = 1200
RATIONALE_CHARS = 250
FEEDBACK_CHARS = 600
_WORDS = "the model answers question with some detail and example because it reads well".split()
# In pipeline order; each stage reads the tables the earlier ones left in --workdir.
STAGES = ("sample", "generate", "aspects", "critique", "score_fix", "export")


def _prose(seed: str, chars: int) -> str:
    words = random.Random(seed).choices(_WORDS, k=chars // 4)
    return " ".join(words)[:chars]


def _padded(value: object, key: str = "") -> object:
    if isinstance(value, dict):
        return {name: _padded(item, name) for name, item in value.items()}
    if isinstance(value, str) and key.endswith("rationale"):
        return _prose(value, RATIONALE_CHARS)
    if isinstance(value, str) and key == "feedback":
        return _prose(value, FEEDBACK_CHARS)
    return value


def sized_responder(body: dict, ctx: RequestContext) -> str:
    """Completions, rationales and critiques of UltraFeedback's sizes; the same request
    always gets the same answer (cached reruns and re-asks behave as with a model)."""
    if body.get("response_format") is None:
        return _prose(json.dumps(body["messages"]), COMPLETION_CHARS)
    return json.dumps(_padded(json.loads(schema_responder(body, ctx))))


def raw_prompts(start: int, stop: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "prompt_id": [f"p{i:07d}" for i in range(start, stop)],
            "source": [SOURCES[i % 6] for i in range(start, stop)],
            "instruction": [
                f"Question {i}: explain, with one example, how topic {i % 997} works "
                "and why it matters to a newcomer in two short paragraphs."
                for i in range(start, stop)
            ],
            "correct_answers": [["yes"] if i % 6 == 4 else [] for i in range(start, stop)],
            "incorrect_answers": [["no"] if i % 6 == 4 else [] for i in range(start, stop)],
            "reference_answer": ["ref" if i % 6 == 2 else None for i in range(start, stop)],
        }
    )


def write_raw_prompts(n: int, path: Path) -> None:
    """`n` raw prompts as the catalog's `raw_prompts`, written a row group at a time."""
    writer = None
    for start in range(0, n, ROW_GROUP_ROWS):
        table = pa.Table.from_pandas(
            raw_prompts(start, min(n, start + ROW_GROUP_ROWS)), preserve_index=False
        )
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table)
    if writer is not None:
        writer.close()


def run_sample(n: int, workdir: Path) -> dict:
    """`n` prompts from all six sources (the raw prompt file the combine node saves), 4
    slots each, drawn as the sample node does (a record batch at a time) and saved as the
    catalog does."""
    write_raw_prompts(n, workdir / "raw_prompts.parquet")
    started = time.perf_counter()
    raw = ParquetSource(str(workdir / "raw_prompts.parquet"))
    sampled = sample_prompt_file(raw, MODELS, n_completions=4, seed=1)
    output = save_table(sampled, workdir / "sampled.parquet")
    wall = time.perf_counter() - started
    return {"sample": {"wall_s": wall, "rows": len(sampled), "output": output}}


def generated_completions(n: int, url: str, cache: Path) -> pd.DataFrame:
    """`n` prompts sampled and answered by the server at `url`, as a DataFrame (for the
    benchmarks that judge them); the sample and the completions stay in `cache`'s folder."""
    run_sample(n, cache.parent)
    run_generate(url, cache)
    return pd.read_parquet(cache.parent / "completions.parquet")


def run_generate(url: str, cache: Path) -> dict:
    """The generate node: the sample read as the catalog loads it (a `ParquetSource`),
    every slot answered by the server at `url`, the completions saved a row group at a time."""
    endpoints = parse_endpoints(
        {"fake": {"backend": "openai", "model": "fake", "base_url": url, "max_concurrent": 64}}
    )
    pool = parse_model_pool(
        {m: {"endpoint": "fake"} for m in MODELS},
        endpoints,
        {"temperature": 1.0, "top_p": 1.0, "max_tokens": 1024},
    )
    started = time.perf_counter()
    sampled = ParquetSource(str(cache.parent / "sampled.parquet"))
    completions = completions_table(sampled, pool, cache, progress=False)
    output = save_table(completions, cache.parent / "completions.parquet")
    wall = time.perf_counter() - started
    return {
        "generate": {
            "wall_s": wall,
            "rows": len(completions),
            "requests_per_s": len(completions) / wall,
            "output": output,
        }
    }


def _judge(url: str) -> EndpointConfig:
    return EndpointConfig.from_dict(
        {"backend": "openai", "model": "fake", "base_url": url, "max_concurrent": 64}, name="judge"
    )


def run_judge_stage(stage: str, url: str, cache: Path) -> dict:
    """One annotate node as Kedro runs it: load its inputs, do its work, save its table.
    Every input is a `ParquetSource`, as the catalog loads it: the stages stream them a
    chunk of prompts at a time."""
    workdir = cache.parent
    completions = ParquetSource(str(workdir / "completions.parquet"))
    calls = 0
    started = time.perf_counter()
    aspect_source = ParquetSource(str(workdir / "aspects.parquet"))
    critique_source = ParquetSource(str(workdir / "critique.parquet"))
    if stage == "export":
        # Built as it is written.
        table = ultrafeedback_export(
            completions,
            aspect_source,
            critique_source,
            ParquetSource(str(workdir / "score_fix.parquet")),
            aspects=ASPECTS,
        )
    else:
        with LLMClient(_judge(url), cache, progress=False) as judge:
            if stage == "aspects":
                table = aspect_annotations_table(completions, judge, max_reasks=1, aspects=ASPECTS)
            elif stage == "critique":
                table = critiques_table(completions, judge, max_reasks=1)
            else:
                table = overall_scores_table(
                    completions, aspect_source, critique_source, judge, max_reasks=1
                )
            calls = judge.stats.calls
    # Row groups, and parts past 512 MiB, as the catalog writes them.
    output = save_table(table, workdir / f"{stage}.parquet")
    wall = time.perf_counter() - started
    return {
        stage: {
            "wall_s": wall,
            "rows": len(table),
            "calls": calls,
            "calls_per_s": calls / wall,
            "output": output,
        }
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stage", choices=STAGES, required=True)
    parser.add_argument("--prompts", type=int, default=64_000)
    parser.add_argument("--workdir", default=None, help="keeps the cache between stages")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="llmfb-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    cache = workdir / "request_cache.sqlite"
    cpu = cpu_seconds()
    # Sampling and the export ask no model: they run without a server.
    serving = (
        contextlib.nullcontext("")
        if args.stage in ("sample", "export")
        else serve_in_subprocess(latency_s=0.0, responder="scale:sized_responder", timeout_s=120)
    )
    with serving as url:
        if args.stage == "sample":
            stages = run_sample(args.prompts, workdir)
        elif args.stage == "generate":
            # Run alone (or by before_after.py, whose older commits sample in this stage),
            # it samples first, in this process.
            early = (
                {} if (workdir / "sampled.parquet").exists() else run_sample(args.prompts, workdir)
            )
            stages = {**early, **run_generate(url, cache)}
        else:
            stages = run_judge_stage(args.stage, url, cache)
    save(
        f"scale_{args.stage}",
        {
            "prompts": args.prompts,
            "completions": args.prompts * 4,
            "stages": stages,
            "cpu_s": cpu_seconds() - cpu,
            "peak_rss_mib": peak_rss_mib(),
            "workdir": str(workdir),
        },
    )


if __name__ == "__main__":
    main()
