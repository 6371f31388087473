"""The extension points docs/extending.md describes, each added the way it says and run
through `kedro run`: an aspect (one registry entry) and a judge kind (one small module
built by the reference-scale factory) against the project's fake LLM server, and a backend
of one's own (one class, registered) in place of a server."""

from __future__ import annotations

import dataclasses
import re

import pyarrow.parquet as pq
import pytest

from llm_feedback.annotation import ASPECTS, DEFAULT_ASPECTS, build_aspect_request
from llm_feedback.backends import BACKENDS, ChatResult, register_backend
from llm_feedback.core.errors import ConfigError
from llm_feedback.judges import register_kind, unregister_kind
from llm_feedback.params import parse_annotate
from llm_feedback.storage.schema import ULTRAFEEDBACK_ASPECTS, ultrafeedback_arrow_schema
from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import endpoints_via
from tests.fixtures import likert_1_7 as likert_module
from tests.fixtures.conciseness import CONCISENESS

SMALL = {"sample": {"max_prompts": 3}}


@pytest.fixture
def conciseness(monkeypatch):
    """`conciseness` in the aspect registry for one test, and out of it afterwards."""
    monkeypatch.setitem(ASPECTS, CONCISENESS.name, CONCISENESS)
    return CONCISENESS.name


def _generated(run_kedro, server):
    params = {**SMALL, "endpoints": endpoints_via(server)}
    run_kedro("sample", params)
    run_kedro("generate", params)
    return params


def test_an_aspect_added_to_the_registry_is_rated_and_exported(
    run_kedro, fake_llm, conciseness, tmp_path
):
    params = _generated(run_kedro, fake_llm)
    aspects = [*DEFAULT_ASPECTS, conciseness]
    catalog = run_kedro("annotate", {**params, "annotate": {"aspects": aspects}})["catalog"]

    rated = catalog.load("aspect_annotations").read()
    assert set(rated["aspect"]) == set(aspects)
    assert rated.loc[rated["aspect"] == conciseness, "parse_status"].eq("ok").all()
    export = catalog.load("ultrafeedback")
    for record in export.itertuples():
        for extra, status in zip(record.extra_annotations, record.annotation_status, strict=True):
            assert set(extra) == {conciseness}  # harmlessness, not rated, has no field
            assert 1 <= int(extra[conciseness]["Rating"]) <= 5
            assert status[conciseness] == "ok"
        for completion in record.completions:  # the public four stay as published
            assert set(completion["annotations"]) == set(ULTRAFEEDBACK_ASPECTS)
    (written,) = (tmp_path / "data" / "07_model_output" / "ultrafeedback.parquet").glob("*/*")
    schema = pq.read_schema(written).remove_metadata()
    assert schema.equals(ultrafeedback_arrow_schema({conciseness: False}))


BAD_ASPECTS = {
    # a spec named like a public aspect but shaped otherwise: the public field cannot hold it
    "honesty": (
        dataclasses.replace(
            ASPECTS["honesty"], type_question="which kinds", type_codes={"1": "hedged"}
        ),
        "aspect 'honesty' has type codes, but the public UltraFeedback field honesty has none",
    ),
    # an entry keyed by another name than its spec's
    "brevity": (CONCISENESS, "aspect 'brevity' is registered under another name"),
}


@pytest.mark.parametrize("key", list(BAD_ASPECTS))
def test_an_aspect_the_export_cannot_hold_is_refused_before_any_call(
    run_kedro, fake_llm, monkeypatch, key
):
    spec, problem = BAD_ASPECTS[key]
    params = _generated(run_kedro, fake_llm)
    monkeypatch.setitem(ASPECTS, key, spec)
    before = fake_llm.request_count
    with pytest.raises(ConfigError, match=f"^annotate.aspects: {problem}") as refused:
        run_kedro("annotate", {**params, "annotate": {"aspects": ["helpfulness", key]}})
    assert "\n" not in str(refused.value)  # one line
    assert fake_llm.request_count == before  # no call was sent, let alone paid for


@pytest.fixture
def likert_1_7():
    """The fixture module's kind in the registry for one test, and out of it afterwards."""
    register_kind(likert_module.KIND)
    yield likert_module.KIND.name
    unregister_kind(likert_module.KIND.name)


def agrees_when_the_answer_names_the_reference(body, ctx):
    text = body["messages"][-1]["content"]
    reference = re.search(r"BEGIN \w+>>>\n(.*?)\n<<<REFERENCE ANSWER END", text, re.S)
    answer = text.rsplit("Answer:", 1)[1]
    rating = 7 if reference and reference.group(1).lower() in answer.lower() else 2
    return f"The answer {'agrees' if rating == 7 else 'differs'}.\nRating: {rating}"


def test_a_reference_scale_kind_of_a_few_lines_is_judged_end_to_end(run_kedro, likert_1_7):
    with FakeLLMServer(agrees_when_the_answer_names_the_reference) as server:
        endpoints = endpoints_via(server, structured_output=False)
        run = run_kedro("evaluate", {"endpoints": endpoints, "evaluate": {"mode": likert_1_7}})
        prompts = [body["messages"][-1]["content"] for body in server.requests]
    judgments = run["catalog"].load("eval_judgments")
    metrics = run["catalog"].load("eval_metrics")

    assert set(judgments["mode"]) == {likert_1_7}
    asked = judgments[judgments["parse_status"] == "ok"]
    assert len(asked) == len(prompts) == 40  # every demo row with a known reference
    assert (judgments["parse_status"] == "invalid").sum() == 8  # no reference: no call
    assert set(asked["score"]) <= {2.0, 7.0} and asked["success"].all()
    for prompt in prompts:  # the kind's template, and the shared reply line for its scale
        assert prompt.startswith("From 1 (strongly disagree) to 7 (strongly agree)")
        assert '"Rating: N", where N is a whole number from 1 to 7.' in prompt
    # The metrics read the kind's scale: the normalised mean maps 1..7 onto 0..100.
    overall = metrics[metrics["category"].isna() & metrics["level"].isna()]
    means = overall.set_index(["model", "metric"])["value"]
    for model, scores in asked.groupby("model")["score"]:
        expected = 100 * (scores.mean() - 1) / 6
        assert means[(model, "normalised_mean")] == pytest.approx(expected)


class CannedJudge:
    """A backend of one's own: every request answered with one fixed rating, no network.
    The attributes and methods below are all a request backend must have (`Backend` and
    `RequestBackend` in backends/base.py); docs/extending.md lists the same."""

    is_batch = False
    default_concurrency = 2

    def __init__(self, config):
        self.config = config
        self.model = config.model
        self.sent = 0

    @property
    def cache_namespace(self) -> str:
        return f"canned:{self.model}"

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def make_sdk_client(self):
        return _NoConnection()

    async def send(self, sdk, request):
        self.sent += 1
        return ChatResult(text="It agrees with the reference.\nRating: 4", model=self.model)

    async def probe(self, sdk, timeout_s: float) -> bool:
        return True


class _NoConnection:
    async def close(self) -> None:
        pass


@pytest.fixture
def canned_backend():
    """`backend: canned` in the registry for one test, and out of it afterwards."""
    before = dict(BACKENDS)
    register_backend("canned", CannedJudge)
    yield "canned"
    BACKENDS.clear()
    BACKENDS.update(before)


def test_a_backend_of_ones_own_answers_a_kedro_run(run_kedro, canned_backend):
    endpoints = {"local": {"backend": canned_backend, "model": "canned-1"}}
    run = run_kedro("evaluate", {"endpoints": endpoints, "evaluate": {"mode": "score_0_5"}})
    judgments = run["catalog"].load("eval_judgments")
    asked = judgments[judgments["parse_status"] == "ok"]
    assert len(asked) == 40 and (asked["score"] == 4).all()
    assert set(asked["judge_model"]) == {"canned-1"}


def test_an_added_aspect_takes_its_own_prompt_template(conciseness, tmp_path):
    """`aspect_<name>.txt` in the `prompt_templates` folder replaces the shared template
    for an aspect registered at run time too."""
    (tmp_path / f"aspect_{conciseness}.txt").write_text("--- text ---\n[[{position}]]\n{text}\n")
    endpoints = {"local": {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9"}}
    annotate = {"judge": {"endpoint": "local"}, "aspects": [conciseness]}
    templates = parse_annotate(annotate, endpoints, str(tmp_path)).templates
    own = build_aspect_request(conciseness, "Q?", ["a", "b"], [1, 0], templates=templates)
    other = build_aspect_request("honesty", "Q?", ["a", "b"], [1, 0], templates=templates)
    assert "[[1]]" in own.messages[-1]["content"] and "Conciseness" in own.messages[-1]["content"]
    assert "[[1]]" not in other.messages[-1]["content"]
