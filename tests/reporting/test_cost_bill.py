"""The cost table equals what the server billed: duplicates sent once count once, a call's
token shares add up to its usage exactly, and a reply without usage is estimated and
flagged, not $0. Real stages against the project's server, which bills by its own count."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time

import pandas as pd
import pytest

from llm_feedback.annotation.rescore import fix_overall_scores
from llm_feedback.annotation.stages import aspect_annotations_table, critiques_table
from llm_feedback.backends import EndpointConfig, LLMClient
from llm_feedback.backends.cache import RequestCache, unseen_calls
from llm_feedback.backends.contract import ChatRequest
from llm_feedback.core.errors import InputError
from llm_feedback.reporting import cost_table
from llm_feedback.reporting.cost_tally import usage_totals
from llm_feedback.runs.tracking import cost_metrics
from llm_feedback.storage.parquet_source import ParquetSource
from llm_feedback.testing.server import FakeLLMServer, Reply, schema_responder

PRICES = {"judge-x": {"prompt_per_1k": 1.0, "completion_per_1k": 2.0}}


def _completions() -> pd.DataFrame:
    rows = []
    for prompt in range(3):
        for index in range(3):
            # p0's first two answers are identical: their critique requests are one request.
            text = "Lima." if prompt == 0 and index < 2 else f"Answer {index} to {prompt}, Lima"
            rows.append(
                {
                    "prompt_id": f"p{prompt}",
                    "completion_idx": index,
                    "instruction": f"Capital of Peru (question {prompt})?",
                    "response": text,
                    "principle": "helpfulness",
                    "model": f"m{index}",
                    "endpoint": "gen",
                    "backend": "openai",
                    "prompt_tokens": 10,
                    "completion_tokens": 20,
                }
            )
    return pd.DataFrame(rows)


def _billed_tokens(body: dict) -> int:
    """The server's own prompt count with `count_tokens=len` (OpenAI's chat framing)."""
    messages = body["messages"]
    return sum(len(m["content"]) for m in messages) + 3 * len(messages) + 3


class Bill:
    """Replies as the server sends them, with the tokens it bills, per judge stage."""

    def __init__(self, omit_usage_for_critiques: bool = False) -> None:
        self.prompt = {"annotate": 0, "critique": 0}
        self.completion = {"annotate": 0, "critique": 0}
        self.omit = omit_usage_for_critiques
        self.calls = {"annotate": 0, "critique": 0}

    def __call__(self, body, ctx):
        reply = schema_responder(body, ctx)
        schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
        if "feedback" in schema.get("properties", {}):  # a 10 is re-scored by the score fix
            reply = json.dumps({"feedback": "Fine.", "overall_score": 10})
        # A re-score continues a critique's conversation: billed as the critique stage.
        stage = "annotate" if "ratings" in schema.get("properties", {}) else "critique"
        self.calls[stage] += 1
        if stage == "critique" and self.omit:
            payload = {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "judge-x",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply},
                        "finish_reason": "stop",
                    }
                ],
            }
            return Reply(raw_body=json.dumps(payload))
        self.prompt[stage] += _billed_tokens(body)
        self.completion[stage] += len(reply)
        return reply


def _judged(bill: Bill, completions: pd.DataFrame | None = None):
    completions = _completions() if completions is None else completions
    with FakeLLMServer(bill, count_tokens=len) as server:
        config = EndpointConfig.from_dict(
            {"backend": "openai", "model": "judge-x", "base_url": server.base_url},
            name="judge",
        )
        with LLMClient(config, None, progress=False) as client:
            aspects = aspect_annotations_table(
                completions, client, aspects=["honesty", "helpfulness"]
            ).frame()
            critiques = critiques_table(completions, client).frame()
            # Thresholds that re-score most completions, so that re-scores are billed too.
            overall = fix_overall_scores(
                completions,
                aspects,
                critiques,
                client,
                flip_threshold=1.0,
                reannotate_threshold=5.0,
            )
        sent = server.request_count
    return completions, aspects, critiques, overall, sent


def test_the_cost_table_equals_the_servers_bill():
    bill = Bill()
    completions, aspects, critiques, overall, sent = _judged(bill)
    rescored = int(overall["fix_action"].isin(["reannotated", "reannotate_failed"]).sum())
    assert rescored > 0
    # The identical critique request went once; the re-scores were sent too.
    assert bill.calls["annotate"] == 3 * 2
    assert bill.calls["critique"] > 9 - 1
    assert sent == bill.calls["annotate"] + bill.calls["critique"]
    table = cost_table(completions, aspects, critiques, PRICES, overall_scores=overall).set_index(
        "stage"
    )
    for stage in ("annotate", "critique"):
        assert table.loc[stage, "prompt_tokens"] == bill.prompt[stage], stage
        assert table.loc[stage, "completion_tokens"] == bill.completion[stage], stage
        assert not table.loc[stage, "usage_estimated"]
    # Shares of a call that does not divide evenly still add up to the call's usage.
    assert (
        table.loc["critique", "estimated_cost"]
        == (bill.prompt["critique"] * 1.0 + bill.completion["critique"] * 2.0) / 1000
    )


def test_a_reply_without_usage_is_estimated_and_flagged(caplog):
    completions, aspects, critiques, _, _ = _judged(Bill(omit_usage_for_critiques=True))
    assert (critiques[["prompt_tokens", "completion_tokens"]] == 0).all().all()  # none given
    with caplog.at_level(logging.WARNING):
        table = cost_table(completions, aspects, critiques, PRICES).set_index("stage")
    critique = table.loc["critique"]
    assert critique["usage_estimated"]
    assert critique["prompt_tokens"] > 8 * 50 and critique["completion_tokens"] > 0
    assert critique["estimated_cost"] > 0
    assert not table.loc["annotate", "usage_estimated"]
    assert "usage_estimated" in caplog.text and "8 row(s)" in caplog.text


def _on_disk(tmp_path, **tables: pd.DataFrame) -> dict[str, ParquetSource]:
    sources = {}
    for name, table in tables.items():
        table.to_parquet(tmp_path / f"{name}.parquet", row_group_size=5)
        sources[name] = ParquetSource(str(tmp_path / f"{name}.parquet"), batch_rows=5)
    return sources


def test_the_cost_table_read_a_prompt_at_a_time_equals_the_servers_bill(tmp_path):
    # p3 repeats p0 word for word: its critiques, and its aspect calls that show p0's
    # order, are p0's requests, sent once, and they come in another chunk.
    base = _completions()
    completions = pd.concat([base, base[base["prompt_id"] == "p0"].assign(prompt_id="p3")])
    bill = Bill()
    completions, aspects, critiques, overall, _ = _judged(bill, completions)
    assert bill.calls["annotate"] < 4 * 2
    sources = _on_disk(
        tmp_path, completions=completions, aspects=aspects, critiques=critiques, overall=overall
    )
    streamed = usage_totals(
        sources["completions"],
        sources["aspects"],
        sources["critiques"],
        sources["overall"],
        prompts_per_chunk=1,
    )
    judged = streamed[streamed["stage"] != "generate"].groupby("stage")[
        ["prompt_tokens", "completion_tokens"]
    ]
    for stage, sums in judged.sum().round().iterrows():
        assert sums["prompt_tokens"] == bill.prompt[stage], stage
        assert sums["completion_tokens"] == bill.completion[stage], stage
    assert streamed.loc[streamed["stage"] == "generate", "prompt_tokens"].sum() == 10 * 12
    # The node's call (sources, default chunks) and the in-memory call agree.
    on_disk = cost_table(
        sources["completions"], sources["aspects"], sources["critiques"], PRICES, sources["overall"]
    )
    in_memory = cost_table(completions, aspects, critiques, PRICES, overall_scores=overall)
    pd.testing.assert_frame_equal(on_disk, in_memory)


def test_judge_rows_of_no_completion_stop_the_cost_table(tmp_path):
    completions, aspects, critiques, _, _ = _judged(Bill())
    stray = aspects[aspects["prompt_id"] == "p2"].assign(prompt_id="p9")
    sources = _on_disk(
        tmp_path,
        completions=completions,
        aspects=pd.concat([aspects, stray]),
        critiques=critiques,
    )
    with pytest.raises(InputError, match=r"aspect_annotations: 6 row\(s\) have no completion"):
        cost_table(sources["completions"], sources["aspects"], sources["critiques"], PRICES)


KILLED_CLIENT = """
import sys
from llm_feedback.backends import EndpointConfig, LLMClient
from llm_feedback.backends.contract import ChatRequest
config = EndpointConfig.from_dict(
    {"backend": "openai", "model": "judge-x", "base_url": sys.argv[1], "max_concurrent": 4},
    name="judge",
)
with LLMClient(config, sys.argv[2], progress=False) as client:
    client.complete_many(
        [ChatRequest.from_prompt(f"question {n} " + "x" * 300, max_tokens=100) for n in range(10)]
    )
"""


def test_calls_a_killed_run_sent_are_costed_as_unseen_at_their_upper_bound(tmp_path):
    cache = tmp_path / "request_cache.sqlite"
    # The first two calls are answered; the rest are still out when the client is killed.
    slow = Reply(content="late", delay_s=60)
    with FakeLLMServer(lambda body, ctx: "ok" if ctx.call_index < 2 else slow) as server:
        client = subprocess.Popen(
            [sys.executable, "-c", KILLED_CLIENT, server.base_url, str(cache)],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        try:
            deadline = time.monotonic() + 60
            while server.request_count < 6:  # 2 answered, then 4 in flight at once
                assert client.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
            time.sleep(0.5)  # the cache's writer commits what it was handed at once
        finally:
            client.kill()
            client.wait()
    unseen = unseen_calls(cache)
    assert len(unseen) == 4 and set(unseen["model"]) == {"judge-x"}
    assert (unseen["max_tokens"] == 100).all() and (unseen["prompt_tokens"] > 100).all()
    RequestCache(cache).close()  # the next run moves them aside: still counted, once
    assert len(unseen_calls(cache)) == 4
    completions, aspects, critiques, _, _ = _judged(Bill())
    table = cost_table(completions, aspects, critiques, PRICES, unseen=unseen_calls(cache))
    row = table.set_index("stage").loc["unseen"]
    assert row["unseen_calls"] == 4 and row["usage_estimated"]
    assert row["completion_tokens"] == 4 * 100
    assert row["prompt_tokens"] == unseen["prompt_tokens"].sum()
    bound = (row["prompt_tokens"] * 1.0 + 4 * 100 * 2.0) / 1000
    assert row["estimated_cost"] == pytest.approx(bound)
    assert (table.loc[table["stage"] != "unseen", "unseen_calls"] == 0).all()
    metrics = cost_metrics(table)  # tracked apart: a bound is not a bill
    assert metrics["cost/unseen_upper_bound_usd"] == pytest.approx(bound)
    billed = table.loc[table["stage"] != "unseen", "estimated_cost"].sum()
    assert metrics["cost/estimated_usd"] == pytest.approx(billed)


def test_a_run_that_ends_normally_leaves_no_unseen_call(tmp_path):
    cache = tmp_path / "request_cache.sqlite"
    with FakeLLMServer(lambda body, ctx: "ok") as server:
        config = EndpointConfig.from_dict(
            {"backend": "openai", "model": "judge-x", "base_url": server.base_url}, name="judge"
        )
        with LLMClient(config, cache, progress=False) as client:
            client.complete_many([ChatRequest.from_prompt(f"q {n}") for n in range(20)])
    assert unseen_calls(cache).empty
