"""The whole default pipeline on the real embedded model (SmolLM2-135M via llama.cpp)."""

import socket
from urllib.parse import urlparse

import pytest

from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient, local
from llm_feedback.backends.local import embedded_model_path, stop_local_servers
from llm_feedback.core.errors import ConfigError
from llm_feedback.replies.status import UNREADABLE

try:
    embedded_model_path()
except ConfigError as missing:  # pragma: no cover - the default install has it
    pytest.skip(f"embedded model not installed: {missing}", allow_module_level=True)

TINY_RUN = {
    "sample": {"max_prompts": 2},
    "generation": {"max_tokens": 48},
    # Short rationales keep the run quick; the judge's token budget stays the default so
    # that four capped rationales always fit (a 135M judge fills every string to the cap).
    "annotate": {"critique": {"max_tokens": 160}},
    "endpoints": {"local": {"max_string_chars": 40}},
}


def test_default_pipeline_on_the_embedded_model(run_kedro):
    result = run_kedro("__default__", TINY_RUN)
    catalog = result["catalog"]

    completions = catalog.load("completions").read()
    assert len(completions) == 2 * 4
    assert completions["error"].isna().all()
    assert completions["response"].str.strip().str.len().gt(0).all()
    # Each model's own cap wins over the run's default (smollm2-brief has 96).
    caps = completions["model"].map(lambda model: 96 if model == "smollm2-brief" else 48)
    assert completions["completion_tokens"].between(1, caps).all()

    aspects = catalog.load("aspect_annotations").read()
    assert len(aspects) == 8 * 4
    readable = aspects["parse_status"].isin(["ok", "na"]).mean()
    assert readable >= 0.95, aspects.loc[
        aspects["parse_status"].isin(UNREADABLE), ["parse_error", "raw_reply"]
    ].to_string()
    assert aspects.loc[aspects["parse_status"] == "ok", "rating"].between(1, 5).all()

    overall_scores = catalog.load("overall_scores").read()
    assert len(overall_scores) == 8
    assert catalog.load("ultrafeedback")["completions"].map(len).eq(4).all()
    report = catalog.load("report")
    assert "Built from" in report
    # `make run`'s report states its judge's validation on the first screen: these sampling
    # settings are not validated, and the embedded model's measured card is named.
    screen = "\n".join(report.splitlines()[:40])
    assert screen.index("## Judge validation") < screen.index("## Headline")
    assert "**Judge not validated**: no card measures SmolLM2-135M-Instruct at local" in screen
    assert "Measured for the same model and file with other sampling" in screen
    assert "`natural/dataset.json`: task evaluate, mode pairwise" in screen
    assert "cannot be told apart from always_first" in screen

    assert not local._servers  # the run's hook stopped the embedded server


def test_the_embedded_server_listens_on_loopback_and_stops():
    config = EndpointConfig.from_dict(
        {"backend": "local", "model": "smollm2", "parallel_slots": 1}, name="local"
    )
    with LLMClient(config, None, progress=False) as client:
        url = urlparse(client.backend._base_url)
        assert url.hostname == "127.0.0.1"
        reply = client.complete(ChatRequest.from_prompt("Say hello.", max_tokens=8))
        assert reply.ok and reply.completion_tokens > 0
    stop_local_servers()
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", url.port)) != 0
