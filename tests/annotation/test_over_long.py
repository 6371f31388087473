"""One over-long text never silences its siblings (issue 41): an endpoint's refusal for
context length is that request's error, not a reason to stop the run, and a call of several
texts that does not fit is sent again with its longest text alone. Real HTTP to the
project's test server, scripted to refuse bodies over a size as each kind of server does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from llm_feedback.annotation.stages import aspect_annotations_table
from llm_feedback.backends import EndpointConfig, LLMClient
from llm_feedback.backends.contract import ChatRequest
from llm_feedback.core.errors import EndpointError
from llm_feedback.params import parse_annotate
from llm_feedback.replies.status import READ, SKIPPED_TOO_LONG
from llm_feedback.runs.plan import plan_run
from llm_feedback.testing.server import (
    CONTEXT_REFUSALS,
    FakeLLMServer,
    Reply,
    context_limited,
    schema_responder,
)
from tests.conftest import kedro_cli, kedro_cli_outcome

LONG_CHARS = 124_500  # the over-long completion, no answer-like line in it
BODY_LIMIT = 60_000  # the test server's "context": four ordinary texts fit, a long one not
ASPECTS = ["honesty", "helpfulness"]
TRANSPORTS = ["lean", "sdk"]


def long_text(seed: int) -> str:
    words = " ".join(f"w{seed}x{n % 997}" for n in range(LONG_CHARS // 4))
    return words[:LONG_CHARS]


def completions_with_long_ones(n_prompts: int = 6) -> tuple[pd.DataFrame, set[tuple[str, int]]]:
    """Four completions a prompt, one of them over-long (at another place in each)."""
    rows, long_ones = [], set()
    for p in range(n_prompts):
        for c in range(4):
            is_long = c == p % 4
            if is_long:
                long_ones.add((f"p{p}", c))
            rows.append(
                {
                    "prompt_id": f"p{p}",
                    "completion_idx": c,
                    "instruction": f"Question {p}?",
                    "response": long_text(p) if is_long else f"Answer {c} to question {p}.",
                    "principle": "helpfulness",
                }
            )
    return pd.DataFrame(rows), long_ones


def endpoint(server: FakeLLMServer, **extra: Any) -> EndpointConfig:
    settings = {
        "backend": "openai",
        "model": "m",
        "base_url": server.base_url,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.02,
        **extra,
    }
    return EndpointConfig.from_dict(settings, name="judge")


def check_every_sibling_rated(rows: pd.DataFrame, long_ones: set[tuple[str, int]]) -> None:
    keys = pd.MultiIndex.from_frame(rows[["prompt_id", "completion_idx"]])
    is_long = keys.isin(list(long_ones))
    siblings, long_rows = rows[~is_long], rows[is_long]
    assert len(siblings) == (6 * 4 - len(long_ones)) * len(ASPECTS)  # each rated once
    assert siblings["parse_status"].isin(READ).all()  # a rating, or "na" where allowed
    assert (siblings["rating"].notna() | siblings["is_na"]).all()
    assert len(long_rows) == len(long_ones) * len(ASPECTS)
    assert (long_rows["parse_status"] == SKIPPED_TOO_LONG).all()
    assert long_rows["rating"].isna().all()


@pytest.mark.parametrize("style", sorted(CONTEXT_REFUSALS))
def test_a_refused_call_is_sent_again_with_the_long_text_alone(style):
    completions, long_ones = completions_with_long_ones()
    responder = context_limited(schema_responder, BODY_LIMIT, style)
    with FakeLLMServer(responder) as server:
        with LLMClient(endpoint(server), None, progress=False) as client:
            rows = aspect_annotations_table(
                completions, client, aspects=ASPECTS, fail_loud=True
            ).frame()
        bodies = server.requests
    check_every_sibling_rated(rows, long_ones)
    assert (
        rows.loc[rows["parse_status"] == SKIPPED_TOO_LONG, "parse_error"]
        .str.contains("refused by the endpoint as too long")
        .all()
    )
    # Every text over the limit was last sent alone: the siblings never share its call.
    for prompt_id, completion_idx in long_ones:
        text = completions.set_index(["prompt_id", "completion_idx"]).at[
            (prompt_id, completion_idx), "response"
        ]
        shown_with = [json.dumps(body).count("Answer ") for body in bodies if text in str(body)]
        assert shown_with[-1] == 0 and max(shown_with) == 3  # first with its siblings


def test_with_max_input_tokens_nothing_too_long_is_sent_and_the_siblings_are_rated():
    completions, long_ones = completions_with_long_ones()
    responder = context_limited(schema_responder, BODY_LIMIT)
    with FakeLLMServer(responder) as server:
        with LLMClient(endpoint(server, max_input_tokens=8000), None, progress=False) as client:
            rows = aspect_annotations_table(
                completions, client, aspects=ASPECTS, fail_loud=True
            ).frame()
        bodies = server.requests
    check_every_sibling_rated(rows, long_ones)
    assert all(len(json.dumps(body)) < BODY_LIMIT for body in bodies)  # none refused


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("style", sorted(CONTEXT_REFUSALS))
def test_context_length_refusals_do_not_trip_the_breaker(style, transport):
    too_long = [ChatRequest.from_prompt(f"{n} " + "x" * 70_000) for n in range(12)]
    with FakeLLMServer(context_limited(schema_responder, BODY_LIMIT, style)) as server:
        with LLMClient(endpoint(server, transport=transport), None, progress=False) as client:
            results = client.complete_many(too_long, desc=None)
            assert client.stats.too_long == len(too_long) and client.stats.failures == 0
    assert all(not result.ok for result in results)


def test_other_400s_still_trip_the_breaker():
    refused = Reply(status=400, error_message="unsupported parameter: top_k")
    requests = [ChatRequest.from_prompt(f"question {n}") for n in range(12)]
    with FakeLLMServer(lambda body, ctx: refused) as server:
        with LLMClient(endpoint(server), None, progress=False) as client:
            with pytest.raises(EndpointError, match="calls failed, stopping"):
                client.complete_many(requests, desc=None)


def long_for_one_model(body: dict[str, Any], ctx: Any) -> str:
    """The pool's smollm2-t0.1 (temperature 0.1, top_p 0.8) writes an over-long answer."""
    if body.get("temperature") == 0.1 and body.get("top_p") == 0.8:
        return long_text(ctx.call_index)
    return schema_responder(body, ctx)


NAMES = ("completions", "aspect_annotations", "critiques")


def saved_table(dataset: Path) -> pd.DataFrame:
    """The latest version of a versioned Parquet dataset (one file, or a folder of parts)."""
    latest = sorted(path for path in dataset.iterdir() if path.is_dir())[-1]
    files = sorted(p for p in latest.rglob("*.parquet") if p.is_file())
    return pd.concat([pd.read_parquet(file) for file in files], ignore_index=True)


def test_a_run_with_one_over_long_completion_per_prompt_exits_0(tmp_path):
    data_root = tmp_path / "data"
    responder = context_limited(long_for_one_model, BODY_LIMIT)
    with FakeLLMServer(responder) as server:
        command = kedro_cli(
            data_root,
            server.base_url,
            "sample.max_prompts=6",
            "endpoints.local.max_reply_bytes=1000000",
            "endpoints.local.backoff_base_s=0.01",
        )
        run = kedro_cli_outcome(command, "sample,generate,annotate")
    assert run.returncode == 0, run.stderr[-3000:]
    tables = {name: saved_table(data_root / "03_primary" / f"{name}.parquet") for name in NAMES}
    completions, aspects = tables["completions"], tables["aspect_annotations"]
    is_long = completions["response"].fillna("").str.len() > BODY_LIMIT
    long_ones = set(
        completions.loc[is_long, ["prompt_id", "completion_idx"]].itertuples(index=False)
    )
    assert long_ones  # the run had over-long completions to judge
    keys = pd.MultiIndex.from_frame(aspects[["prompt_id", "completion_idx"]])
    on_long = keys.isin(list(long_ones))
    assert (aspects.loc[on_long, "parse_status"] == SKIPPED_TOO_LONG).all()
    assert aspects.loc[~on_long, "parse_status"].isin(READ).all()
    assert len(aspects.loc[~on_long]) == (len(completions) - len(long_ones)) * 4  # 4 aspects
    critiques = tables["critiques"]
    keys = pd.MultiIndex.from_frame(critiques[["prompt_id", "completion_idx"]])
    on_long = keys.isin(list(long_ones))
    assert (critiques.loc[on_long, "parse_status"] == SKIPPED_TOO_LONG).all()
    assert critiques.loc[~on_long, "parse_status"].isin(READ).all()


def test_the_plan_counts_the_parts_a_call_over_max_input_tokens_is_sent_in():
    completions, long_ones = completions_with_long_ones()
    with FakeLLMServer(context_limited(schema_responder, BODY_LIMIT)) as server:
        endpoints = {
            "judge": {
                "backend": "openai",
                "model": "m",
                "base_url": server.base_url,
                "max_input_tokens": 8000,
            }
        }
        annotate = parse_annotate(
            {"judge": {"endpoint": "judge"}, "aspects": ASPECTS, "max_reasks": 0}, endpoints
        )
        planned = plan_run(
            sampled=None,
            completions=completions,
            generate=None,
            annotate=annotate,
            prices={},
            cache_path=None,
            judge_stages=["annotate"],
        ).iloc[0]
        with LLMClient(annotate.endpoint, None, progress=False) as client:
            aspect_annotations_table(completions, client, aspects=ASPECTS, max_reasks=0)
        sent = server.request_count
    # Per prompt and aspect: the four together (skipped), then the long one alone
    # (skipped) and the other three together (sent).
    assert planned["calls"] == 6 * len(ASPECTS) * 2
    assert planned["skipped_too_long"] == len(long_ones) * len(ASPECTS)
    assert planned["calls_to_send"] == sent == 6 * len(ASPECTS)
