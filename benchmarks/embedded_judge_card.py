"""The embedded default judge (SmolLM2-135M via the `local` backend) validated on LLMBar's
Natural pairs: its card with argmax and probability-weighted verdicts, as JSON.

python benchmarks/embedded_judge_card.py [--items 100] [--dataset path/to/Natural/dataset.json]

Each pair is judged in both orders with the evaluate pipeline's own pairwise requests
(`judge_tasks`, in the body the endpoint's backend sends), plus `logprobs: true,
top_logprobs: 5`, posted to the embedded llama.cpp server directly: the pipeline's client
does not ask for log-probabilities, so this is where the probability-weighted verdicts are
measured. Prints wall time, calls and the card (rows and Markdown). After `--budget-s`
seconds the pairs answered in both orders so far are validated.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.backends import make_backend
from llm_feedback.backends.client import sent_form
from llm_feedback.backends.local import stop_local_servers
from llm_feedback.evaluation import prepare_samples
from llm_feedback.evaluation.judge_validation import evaluation_identity
from llm_feedback.evaluation.judging import judge_tasks
from llm_feedback.judges import Judge
from llm_feedback.judges.kinds.pairwise import parse_pairwise
from llm_feedback.params import parse_evaluate
from llm_feedback.validation.card import card_lines
from llm_feedback.validation.formats import read_samples
from llm_feedback.validation.logprobs import logprob_content, pairwise_verdict
from llm_feedback.validation.validate import validate_pairwise
from llm_feedback.validation.verdicts import FLIPPED, ORIGINAL, SWAPPED

DEFAULT_DATASET = Path(__file__).resolve().parents[2] / "shared/data/llmbar/natural/dataset.json"
LOCAL = {
    "backend": "local",
    "model": "SmolLM2-135M-Instruct",
    "parallel_slots": 4,
    "context_per_slot": 4096,
    "timeout_s": 300,
    "max_string_chars": 24,
    "cache": False,
}
SHOWN = {"A": "first", "B": "second", "tie": "tie"}


def post(url: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - local
        return json.loads(response.read())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--budget-s", type=float, default=480.0, help="then validate what is done")
    args = parser.parse_args()
    if not args.dataset.is_file():
        sys.exit(f"{args.dataset}: not found (LLMBar's Natural dataset.json)")

    gold = read_samples(args.dataset, "llmbar")
    gold = gold[gold["instance_id"].isin(gold["instance_id"].drop_duplicates()[: args.items])]
    config = parse_evaluate({"mode": "pairwise", "judge": {"endpoint": "local"}}, {"local": LOCAL})
    samples = prepare_samples(gold, config)
    endpoint = config.judge.endpoint
    judge = Judge(endpoint, sampling=config.judge.sampling, connect=False)
    tasks = judge_tasks(samples, config, judge)
    # judge_tasks: each pair's original order (A first), then the swapped one.
    keys = [
        (instance, order)
        for instance in samples["instance_id"].drop_duplicates()
        for order in (ORIGINAL, SWAPPED)
    ]
    backend = make_backend(endpoint)
    started = time.perf_counter()
    backend.open()
    url = backend._base_url + "/chat/completions"  # noqa: SLF001 - the embedded server's URL
    bodies = [
        {
            **backend.request_body(sent_form(endpoint, t.request)),
            "logprobs": True,
            "top_logprobs": 5,
        }
        for t in tasks
    ]
    replies: list[dict[str, Any] | None] = [None] * len(bodies)
    pool = ThreadPoolExecutor(LOCAL["parallel_slots"])
    futures = {pool.submit(post, url, body, LOCAL["timeout_s"]): i for i, body in enumerate(bodies)}
    try:
        for future in as_completed(futures, timeout=args.budget_s):
            replies[futures[future]] = future.result()
            done = sum(reply is not None for reply in replies)
            if done % 20 == 0:
                print(f"{done} calls, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    except TimeoutError:
        print(f"time budget of {args.budget_s} s spent: validating the pairs answered so far")
    pool.shutdown(wait=False, cancel_futures=True)
    wall = time.perf_counter() - started
    # Only pairs answered in both orders are validated.
    answered = {instance for (instance, _), reply in zip(keys, replies, strict=True) if reply}
    complete = {
        instance
        for instance in answered
        if all(reply for (i, _), reply in zip(keys, replies, strict=True) if i == instance)
    }
    gold = gold[gold["instance_id"].isin(complete)]

    verdicts, calls = [], []
    for (instance, order), reply in zip(keys, replies, strict=True):
        if instance not in complete:
            continue
        text = reply["choices"][0]["message"]["content"]
        shown = parse_pairwise(text, config.scale).value.verdict  # "A"/"B"/"tie" as shown
        original = shown if order == ORIGINAL or shown is None else FLIPPED[shown]
        verdicts.append({"instance_id": instance, "order": order, "verdict": original})
        probabilities = pairwise_verdict(logprob_content(reply), SHOWN.get(shown), tie_label="C")
        calls.append({"instance_id": instance, "order": order, **probabilities})
    identity = evaluation_identity(config)
    validation = validate_pairwise(
        gold,
        identity,
        f"{args.dataset.parent.name}/{args.dataset.name}",
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        verdicts=pd.DataFrame(verdicts).astype({"verdict": object}),
        calls=pd.DataFrame(calls),
    )
    card = validation.card[validation.card["category"].isna()]
    print(
        json.dumps(
            {
                "wall_s": round(wall, 1),
                "calls": sum(reply is not None for reply in replies),
                "items": len(complete),
                "usable_probability_share": float(card["usable_probability_share"].iloc[0]),
                "card": card[
                    ["kind", "judge", "verdict_source", "metric", "value", "ci_low", "ci_high", "n"]
                ].to_dict("records"),
            },
            indent=1,
            default=str,
        )
    )
    print(card_lines(validation.card, identity["judge_key"]), flush=True)
    # Calls still in flight after the budget would keep the server (and the exit) waiting.
    if any(reply is None for reply in replies):
        os._exit(0)
    stop_local_servers()


if __name__ == "__main__":
    main()
