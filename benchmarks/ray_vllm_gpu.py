"""Tokens/s of the ray backend's vLLM processor on a GPU machine or a Ray cluster of them.

Runs the same generation twice through `LLMClient` with a `backend: ray`,
`ray_processor: vllm` endpoint: data parallel (one engine replica per GPU, tensor
parallel 1) and tensor parallel (one replica over all GPUs). With one GPU both variants
are the same single engine; the point then is that the path works end to end. Each
variant gets its own cache, so both really generate; the script then reruns the first
variant from its cache and checks that nothing reached Ray.

The driver and every GPU node need ray[llm] (it brings its own vLLM, so not the gpu
extra) and a model they can load (a hub name, or a local path on every node):

    pip install -e ".[ray-gpu]"
    python benchmarks/ray_vllm_gpu.py --model Qwen/Qwen2.5-0.5B-Instruct [--gpus 2]
        [--prompts 512] [--max-tokens 256] [--batch-size 64] [--ray-address auto]

Without --ray-address (or RAY_ADDRESS) it starts a local Ray on this machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import save  # noqa: E402

from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient  # noqa: E402


def endpoint(args: argparse.Namespace, replicas: int, tensor_parallel: int) -> EndpointConfig:
    return EndpointConfig.from_dict(
        {
            "backend": "ray",
            "ray_processor": "vllm",
            "model": args.model,
            "ray_address": args.ray_address,
            "ray_replicas": replicas,
            "ray_batch_size": args.batch_size,
            "engine_kwargs": {
                "tensor_parallel_size": tensor_parallel,
                "max_model_len": args.max_model_len,
            },
        },
        name=f"ray-vllm-dp{replicas}-tp{tensor_parallel}",
    )


def generate(config: EndpointConfig, requests: list[ChatRequest], cache: Path) -> dict:
    with LLMClient(config, cache) as client:
        started = time.perf_counter()
        answers = client.complete_many(requests, desc=config.name)
        wall = time.perf_counter() - started
        calls = client.stats.calls
    tokens = sum(a.completion_tokens for a in answers)
    return {
        "requests": len(answers),
        "failed": sum(not a.ok for a in answers),
        "sent_to_ray": calls,
        "completion_tokens": tokens,
        "wall_s": wall,
        "tokens_per_s": tokens / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--prompts", type=int, default=512)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--ray-address", default=None)
    args = parser.parse_args()
    requests = [
        ChatRequest.from_prompt(
            f"In three sentences, explain idea number {i} of good software design.",
            temperature=1.0,
            max_tokens=args.max_tokens,
        )
        for i in range(args.prompts)
    ]
    report: dict = {"model": args.model, "gpus": args.gpus, "prompts": args.prompts}
    with tempfile.TemporaryDirectory() as tmp:
        variants = {
            "data_parallel": endpoint(args, replicas=args.gpus, tensor_parallel=1),
            "tensor_parallel": endpoint(args, replicas=1, tensor_parallel=args.gpus),
        }
        for name, config in variants.items():
            report[name] = generate(config, requests, Path(tmp) / f"{name}.sqlite")
            print(f"{name}: {report[name]['tokens_per_s']:.0f} tokens/s", flush=True)
        rerun = generate(variants["data_parallel"], requests, Path(tmp) / "data_parallel.sqlite")
        report["cached_rerun_sent_to_ray"] = rerun["sent_to_ray"]
    save("ray_vllm_gpu", report)
    if report["cached_rerun_sent_to_ray"] or any(report[v]["failed"] for v in variants):
        sys.exit("some requests failed, or the cached rerun reached Ray")


if __name__ == "__main__":
    main()
