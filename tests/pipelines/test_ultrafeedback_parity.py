"""Parity with UltraFeedback's own scripts, through the pipelines against the project's
server: what the server received (system prompts, orders, sampling, turns) and what the
runs wrote."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from llm_feedback.annotation import get_aspect, shuffle_orders
from llm_feedback.annotation.export import to_public
from llm_feedback.completions.principles import SYSTEM_PROMPTS
from llm_feedback.storage.schema import ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA
from llm_feedback.testing.server import FakeLLMServer, schema_responder
from tests.conftest import (
    documentation_text,
    endpoints_via,
    kedro_cli,
    run_kedro_cli,
)

ASPECTS = ("instruction_following", "honesty", "truthfulness", "helpfulness")


def _schema(body):
    return (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})


def _properties(body):
    return set(_schema(body).get("properties", {}))


def _is_aspect_call(body):
    return "ratings" in _properties(body)


def _is_critique_call(body):
    return "feedback" in _properties(body)


def _is_rescore_call(body):
    return _properties(body) == {"overall_score"}


def _aspect_of(body):
    text = body["messages"][-1]["content"]
    (aspect,) = [name for name in ASPECTS if f"Aspect: {get_aspect(name).title}" in text]
    return aspect


def _numbered_answers(body, ctx):
    """Completions that can be found again in a judge's prompt; the judge fills schemas."""
    if body.get("response_format"):
        return schema_responder(body, ctx)
    return f"<<answer {ctx.call_index}>>"


def _latest(data_root: Path, layer: str, name: str) -> pd.DataFrame:
    (path,) = sorted((data_root / layer).glob(f"{name}.parquet/*/{name}.parquet"))[-1:]
    return pd.read_parquet(path)


def test_a_prompt_file_of_a_new_source_gets_its_weights_or_helpfulness(tmp_path):
    """The documented `kedro run`: a source with configured weights is sampled with them; one
    without any falls back to helpfulness, as UltraFeedback did, and the log counts it."""
    readme_params = re.search(
        r'kedro run --pipelines sample --params "([^"]+)"', documentation_text()
    )[1]
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    rows = [
        {"prompt_id": f"mt-{i}", "source": "mt_bench", "instruction": f"MT-Bench question {i}?"}
        for i in range(6)
    ] + [
        {"prompt_id": f"rd-{i}", "source": "reddit", "instruction": f"Reddit question {i}?"}
        for i in range(5)
    ]
    (prompts / "mine.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    data_root = tmp_path / "data"
    with FakeLLMServer() as server:
        command = kedro_cli(
            data_root,
            server.base_url,
            f"raw_prompts_dir={prompts}",
            "sample.max_prompts=null",
            *readme_params.split(","),
        )
        sampled_run = run_kedro_cli(command, "sample")
        run_kedro_cli(command, "generate")
        received = server.requests

    # The console handler wraps lines and puts file:line beside the first one.
    log = " ".join((sampled_run.stdout + sampled_run.stderr).decode().split())
    assert "sample: 5 prompt(s) from source(s)" in log
    assert "use helpfulness (reddit: 5); give them weights in sample.principle_weights" in log
    sampled = _latest(data_root, "02_intermediate", "sampled_prompts")
    principles = sampled.groupby("source")["principle"].agg(set).to_dict()
    assert principles == {"mt_bench": {"truthfulness"}, "reddit": {"helpfulness"}}
    # Every generation request carried a system prompt of its prompt's principle.
    assert len(received) == 11 * 4
    for body in received:
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        principle = "truthfulness" if user.startswith("MT-Bench") else "helpfulness"
        assert system in SYSTEM_PROMPTS[principle]


def _shown_orders(received, completions):
    """(prompt_id, aspect) -> the completion_idx shown at each position, as the judge saw."""
    answers = {
        row.response: (row.prompt_id, row.completion_idx) for row in completions.itertuples()
    }
    shown = {}
    for body in received:
        if not _is_aspect_call(body):
            continue
        text = body["messages"][-1]["content"]
        found = sorted((text.index(a), key) for a, key in answers.items() if a in text)
        (prompt_id,) = {prompt_id for _, (prompt_id, _) in found}
        shown[prompt_id, _aspect_of(body)] = [idx for _, (_, idx) in found]
    return shown


def _recorded_orders(aspect_annotations):
    ordered = aspect_annotations.sort_values("position")
    return {
        key: group["completion_idx"].tolist()
        for key, group in ordered.groupby(["prompt_id", "aspect"])
    }


def test_each_aspect_shuffles_on_its_own_unless_orders_are_shared(run_kedro, tmp_path):
    with FakeLLMServer(_numbered_answers) as server:
        params = {"sample": {"max_prompts": 5}, "endpoints": endpoints_via(server)}
        run_kedro("sample", params)
        completions = run_kedro("generate", params)["catalog"].load("completions").read()
        server.reset()
        independent = run_kedro("annotate", params)["catalog"].load("aspect_annotations").read()
        independent_shown = _shown_orders(server.requests, completions)
        server.reset()
        shared_params = {
            **params,
            "annotate": {"aspect_orders": "shared"},
            "request_cache": str(tmp_path / "shared_orders.sqlite"),
        }
        shared = run_kedro("annotate", shared_params)["catalog"].load("aspect_annotations").read()
        shared_shown = _shown_orders(server.requests, completions)

    prompt_ids = sorted(completions["prompt_id"].unique())
    assert len(independent_shown) == len(shared_shown) == 5 * 4
    # The ratings were mapped back through the order each call really showed.
    assert _recorded_orders(independent) == independent_shown
    assert _recorded_orders(shared) == shared_shown
    # Default: every aspect draws its own order, as UltraFeedback did per aspect call.
    distinct = [
        len({tuple(independent_shown[prompt_id, aspect]) for aspect in ASPECTS})
        for prompt_id in prompt_ids
    ]
    assert max(distinct) > 1
    for prompt_id in prompt_ids:
        for aspect in ASPECTS:
            expected = shuffle_orders(prompt_id, 4, 1, 42, aspect=aspect)[0]
            assert independent_shown[prompt_id, aspect] == expected
    # Shared: one order per prompt for all aspects, the order earlier runs sent (so their
    # requests, and cache keys, are unchanged).
    for prompt_id in prompt_ids:
        orders = {tuple(shared_shown[prompt_id, aspect]) for aspect in ASPECTS}
        assert orders == {tuple(shuffle_orders(prompt_id, 4, 1, 42)[0])}


def _rates_by_position(body, ctx):
    """A judge with a position bias: the first text shown gets 5, the next 4, and so on,
    so the shuffles of one completion disagree."""
    if not _is_aspect_call(body):
        return _numbered_answers(body, ctx)
    keys = _schema(body)["properties"]["ratings"]["required"]
    return json.dumps(
        {
            "ratings": {
                key: {
                    "rating": 5 - position,
                    "rationale": f"shown at {position + 1}",
                    "types": [],
                    "type_rationale": "",
                }
                for position, key in enumerate(keys)
            }
        }
    )


def test_with_two_shuffles_a_record_shows_what_its_fine_grained_score_averages(run_kedro):
    with FakeLLMServer(_rates_by_position) as server:
        params = {
            "sample": {"max_prompts": 3},
            "endpoints": endpoints_via(server),
            "annotate": {"n_shuffles": 2},
        }
        for name in ("sample", "generate"):
            run_kedro(name, params)
        catalog = run_kedro("annotate", params)["catalog"]
        aspect_calls = [body for body in server.requests if _is_aspect_call(body)]
    assert len(aspect_calls) == 3 * 4 * 2

    aspects = catalog.load("aspect_annotations").read()
    per_shuffle = aspects.groupby(["prompt_id", "completion_idx", "aspect"])["rating"].agg(list)
    export = catalog.load("ultrafeedback")
    disagreeing = 0
    for record in export.itertuples():
        for idx, completion in enumerate(record.completions):
            for aspect in ASPECTS:
                annotation = completion["annotations"][aspect]
                ratings = per_shuffle[record.prompt_id, idx, aspect]
                assert len(ratings) == 2
                # UltraFeedback's readers call int(Rating): the first shuffle's rating ...
                assert int(annotation["Rating"]) == ratings[0]
                # ... with every shuffle's rating kept beside it.
                kept = record.shuffle_ratings[idx][aspect]
                assert [int(rating) for rating in kept] == ratings
                disagreeing += ratings[0] != ratings[1]
            # The fine-grained score averages every shuffle of every aspect.
            means = [sum(per_shuffle[record.prompt_id, idx, a]) / 2 for a in ASPECTS]
            assert completion["fine-grained_score"] == pytest.approx(sum(means) / len(means))
    assert disagreeing > 0
    # Still the public data set's columns and types.
    assert to_public(export).schema.equals(ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA)


def _critique_ten_then_rescore(body, ctx):
    if _is_aspect_call(body):
        keys = _schema(body)["properties"]["ratings"]["required"]
        rating = {"rating": 3, "rationale": "middling", "types": [], "type_rationale": ""}
        return json.dumps({"ratings": dict.fromkeys(keys, rating)})
    if _is_critique_call(body):
        return json.dumps({"feedback": "Clear, but misses a step.", "overall_score": 10})
    if _is_rescore_call(body):
        return json.dumps({"overall_score": 6})
    return _numbered_answers(body, ctx)


def test_the_re_score_continues_the_critique_with_the_judge_settings(run_kedro):
    """A 10 with fine-grained 3 is asked again: after the critique request and the stored
    critique as the judge's own turn, with the configured sampling (top_p 0.6, seed)."""
    with FakeLLMServer(_critique_ten_then_rescore) as server:
        params = {
            "sample": {"max_prompts": 2},
            "endpoints": endpoints_via(server),
            "annotate": {"judge": {"seed": 11}},
        }
        for name in ("sample", "generate"):
            run_kedro(name, params)
        catalog = run_kedro("annotate", params)["catalog"]
        received = server.requests

    critiques = [body for body in received if _is_critique_call(body)]
    rescores = [body for body in received if _is_rescore_call(body)]
    assert len(critiques) == len(rescores) == 2 * 4
    critique_turns = [body["messages"] for body in critiques]
    for body in rescores:
        assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user"]
        assert body["messages"][:2] in critique_turns  # the critique request, unchanged
        assert body["messages"][2]["content"] == "Clear, but misses a step."
        assert body["messages"][3]["content"].startswith("Grade the answer 1-10 by your review.")
        assert (body["temperature"], body["top_p"], body["seed"]) == (0.0, 0.6, 11)
        assert body["max_tokens"] <= 16
    overall_scores = catalog.load("overall_scores").read()
    assert (overall_scores["fix_action"] == "reannotated").all()
    assert (overall_scores["overall_score_fixed"] == 6.0).all()
    export = catalog.load("ultrafeedback")
    assert {c["overall_score"] for r in export["completions"] for c in r} == {6.0}
