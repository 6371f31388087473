"""Judge endpoints from the environment variables users of the seed evaluators have set."""

import pytest

from llm_feedback.backends import EndpointConfig, endpoint_from_env
from llm_feedback.params import parse_annotate
from llm_feedback.testing.server import FakeLLMServer, schema_responder

SEED_VARIABLES = (
    "MODEL_VERSION",
    "API_TYPE",
    "OPENAI_API_URL",
    "OPENAI_BASE_URL",
    "AZURE_ENDPOINT",
    "AZURE_OPENAI_ENDPOINT",
    "AZURE_API_VERSION",
    "OPENAI_API_VERSION",
    "API_VERSION",
    "AZURE_API_KEY",
    "AZURE_OPENAI_API_KEY",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in SEED_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    "url",
    [
        "http://h:1/v1/chat/completions",
        "http://h:1/v1/chat/completions/",
        "http://h:1/v1",
        "http://h:1/v1/chat/completions?api-version=x",
    ],
)
def test_openai_api_url_may_be_the_full_chat_completions_url(monkeypatch, url):
    monkeypatch.setenv("MODEL_VERSION", "gpt-x")
    monkeypatch.setenv("OPENAI_API_URL", url)
    assert endpoint_from_env().options.resolved_base_url() == "http://h:1/v1"


def test_the_azure_sdks_own_variable_names_are_read(monkeypatch):
    monkeypatch.setenv("MODEL_VERSION", "my-deployment")
    monkeypatch.setenv("API_TYPE", "azure")
    monkeypatch.setenv(
        "AZURE_OPENAI_ENDPOINT",
        "https://res.openai.azure.com/openai/deployments/my-deployment/chat/completions",
    )
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-key")
    monkeypatch.setenv("OPENAI_API_VERSION", "2025-01-01")
    config = endpoint_from_env()
    assert config.options.resolved_endpoint() == "https://res.openai.azure.com"
    assert config.api_key() == "azure-key"
    assert config.options.resolved_api_version() == "2025-01-01"
    monkeypatch.delenv("OPENAI_API_VERSION")
    monkeypatch.setenv("API_VERSION", "2024-06-01")  # lmms-eval's name
    assert config.options.resolved_api_version() == "2024-06-01"
    explicit = EndpointConfig.from_dict({"backend": "azure", "model": "d", "api_version": "v1"})
    assert explicit.options.resolved_api_version() == "v1"


def test_annotate_judge_endpoint_env_calls_the_full_url_server(monkeypatch):
    """`annotate.judge.endpoint: env` with lmms-eval's full URL reaches the server."""
    from llm_feedback.backends import ChatRequest, LLMClient

    with FakeLLMServer(schema_responder) as server:
        monkeypatch.setenv("MODEL_VERSION", "judge-model")
        monkeypatch.setenv("OPENAI_API_URL", f"{server.base_url}/chat/completions")
        params = parse_annotate({"judge": {"endpoint": "env"}}, {})
        with LLMClient(params.endpoint, None, progress=False) as client:
            assert client.complete(ChatRequest.from_prompt("hi")).ok
        assert server.request_count == 1
