"""Per-model handling in generate: `system_prompt: keep | fold | drop` (UltraFeedback gave a
model without a system role no principle prompt) and response clean-up (UltraFeedback cut
a response at four newlines and stripped `</s>`), against the project's server."""

import pytest
import yaml

from llm_feedback.backends.endpoints import parse_endpoints, parse_model_pool
from llm_feedback.core.errors import ConfigError
from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import PROJECT_ROOT, endpoints_via

REPLY = "First part.</s>\n\n\n\nA rambling tail that should go.</s>"


def test_each_model_sends_or_folds_or_drops_its_system_prompt_and_cleans_up(run_kedro):
    # Runtime params merge into conf/base's pool of five: two of them get other handling.
    pool = {
        "smollm2-t0.7": {"system_prompt": "fold"},
        "smollm2-t0.4": {
            "system_prompt": "drop",
            "response_cleanup": {"cut_at_newlines": 4, "strip": ["</s>"]},
        },
    }
    with FakeLLMServer(responder=lambda body, ctx: REPLY) as server:
        params = {
            "sample": {"max_prompts": 3, "n_completions": 5},
            "endpoints": endpoints_via(server),
            "model_pool": pool,
        }
        run_kedro("sample", params)
        catalog = run_kedro("generate", params)["catalog"]
        bodies = server.requests
    sampled = catalog.load("sampled_prompts").read()
    completions = catalog.load("completions").read()
    assert len(bodies) == len(completions) == 15
    sent = [body["messages"] for body in bodies]
    for row in completions.merge(
        sampled[["prompt_id", "completion_idx", "system_prompt"]].rename(
            columns={"system_prompt": "drawn"}
        )
    ).itertuples():
        if row.model not in pool:
            system = {"role": "system", "content": row.drawn}
            assert [system, {"role": "user", "content": row.instruction}] in sent
            assert row.system_prompt == row.drawn and row.response == REPLY
        elif row.model == "smollm2-t0.7":
            assert [{"role": "user", "content": f"{row.drawn}\n\n{row.instruction}"}] in sent
            assert row.system_prompt == row.drawn
        else:
            assert [{"role": "user", "content": row.instruction}] in sent
            assert row.system_prompt == ""  # what the model was given
            assert row.response == "First part."


@pytest.mark.parametrize(
    ("definition", "problem"),
    [
        ({"system_prompt": "hide"}, r"model_pool.m.system_prompt must be one of keep, fold, drop"),
        ({"response_cleanup": {"cut_at": 4}}, r"model_pool.m.response_cleanup.cut_at: unknown"),
        (
            {"response_cleanup": {"cut_at_newlines": 0}},
            r"model_pool.m.response_cleanup.cut_at_newlines must be an integer >= 1",
        ),
        (
            {"response_cleanup": {"strip": "</s>"}},
            r"model_pool.m.response_cleanup.strip must be a list of non-empty strings",
        ),
    ],
)
def test_bad_model_handling_is_named(definition, problem):
    endpoints = parse_endpoints(
        {"local": {"backend": "openai", "model": "x", "base_url": "http://h"}}
    )
    with pytest.raises(ConfigError, match=problem):
        parse_model_pool({"m": {"endpoint": "local", **definition}}, endpoints, {})


def test_the_diverse_pool_documented_in_conf_base_parses():
    text = (PROJECT_ROOT / "conf" / "base" / "parameters.yml").read_text()
    block = text.split("#   model_pool:\n", 1)[1].split("\n# Per model:", 1)[0]
    pool = yaml.safe_load("\n".join(line.removeprefix("#   ") for line in block.splitlines()))
    assert len(pool) == 8
    names = {definition["endpoint"] for definition in pool.values()}
    endpoint = {"backend": "openai", "model": "m", "base_url": "http://h"}
    specs = parse_model_pool(pool, parse_endpoints(dict.fromkeys(names, endpoint)), {})
    assert specs["wizardlm-7b"].system_prompt == "drop"
    assert specs["wizardlm-7b"].cleanup.apply("Answer.</s>\n\n\n\nMore") == "Answer."
    assert specs["gemma-2-9b"].system_prompt == "fold"
