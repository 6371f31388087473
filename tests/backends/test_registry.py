"""The backend registry: a backend registered under a new name is what LLMClient uses."""

from collections.abc import Sequence

import pytest

from llm_feedback.backends import (
    BACKENDS,
    BatchBackend,
    ChatRequest,
    ChatResult,
    EndpointConfig,
    LLMClient,
    RequestBackend,
    RetryableError,
    make_backend,
    register_backend,
)
from llm_feedback.backends.client import make_backend as make_backend_from_client
from llm_feedback.core.errors import ConfigError

ANSWERS = {"Capital of France?": "Paris", "2 + 2?": "4"}


class _Session:
    """What `make_sdk_client` hands back: the client closes it on its loop."""

    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


class DictBackend:
    """Answers from a dict, one request at a time; no network."""

    is_batch = False
    default_concurrency = 3
    instances: list["DictBackend"] = []

    def __init__(self, config: EndpointConfig) -> None:
        self.config = config
        self.model = config.model
        self.sent: list[str] = []
        self.events: list[str] = []
        self.sessions: list[_Session] = []
        self.flaky_once = {"flaky?"}
        DictBackend.instances.append(self)

    @property
    def cache_namespace(self) -> str:
        return "dict"

    def open(self) -> None:
        self.events.append("open")

    def close(self) -> None:
        self.events.append("close")

    def make_sdk_client(self) -> _Session:
        self.sessions.append(_Session())
        return self.sessions[-1]

    async def send(self, sdk: _Session, request: ChatRequest) -> ChatResult:
        question = request.messages[-1]["content"]
        self.sent.append(question)
        if question in self.flaky_once:
            self.flaky_once.discard(question)
            raise RetryableError("try again")
        if question == "flaky?":
            return ChatResult(text="steady now", model=self.model)
        if question not in ANSWERS:
            return ChatResult.failure(f"no answer for {question!r}", model=self.model)
        return ChatResult(
            text=ANSWERS[question], finish_reason="stop", completion_tokens=1, model=self.model
        )

    async def probe(self, sdk: _Session, timeout_s: float) -> bool:
        return sdk is not None and not sdk.closed


class DictBatchBackend:
    """The batch kind: every uncached request of a call in one `generate`."""

    is_batch = True
    default_concurrency = 1

    def __init__(self, config: EndpointConfig) -> None:
        self.config = config
        self.model = config.model
        self.batches: list[list[str]] = []
        self._open = False

    @property
    def cache_namespace(self) -> str:
        return "dict-batch"

    def open(self) -> None:
        self._open = True

    def close(self) -> None:
        self._open = False

    def is_ready(self) -> bool:
        return self._open

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        questions = [request.messages[-1]["content"] for request in requests]
        self.batches.append(questions)
        return [ChatResult(text=ANSWERS.get(q, "?"), model=self.model) for q in questions]


@pytest.fixture
def registered():
    """Register the in-test backends; leave the registry as it was afterwards."""
    before = dict(BACKENDS)
    DictBackend.instances.clear()
    register_backend("dict", DictBackend)
    register_backend("dict-batch", DictBatchBackend)
    yield
    BACKENDS.clear()
    BACKENDS.update(before)


def _config(backend: str = "dict", **extra) -> EndpointConfig:
    return EndpointConfig.from_dict(
        {"backend": backend, "model": "lookup", "backoff_base_s": 0.001, **extra}, name="t"
    )


def test_the_builtin_backends_are_registered():
    assert {"local", "openai", "azure", "vllm"} <= set(BACKENDS)
    assert make_backend_from_client is make_backend
    assert _config("openai").concurrency == 32
    assert _config("azure", azure_endpoint="https://x.example").concurrency == 32
    assert _config("vllm").concurrency == 256
    assert _config("local", parallel_slots=3).concurrency == 3
    assert isinstance(make_backend(_config("openai")), RequestBackend)
    assert isinstance(make_backend(_config("vllm")), BatchBackend)


def test_a_registered_backend_is_used_by_the_client(registered, tmp_path):
    config = _config()
    assert config.concurrency == DictBackend.default_concurrency
    requests = [
        ChatRequest.from_prompt(q, temperature=0.0)
        for q in ("Capital of France?", "2 + 2?", "Capital of France?", "flaky?", "?")
    ]
    with LLMClient(config, tmp_path / "cache.sqlite", progress=False) as client:
        assert isinstance(client.backend, DictBackend)
        assert client.is_available()
        results = client.complete_many(requests)
    backend = DictBackend.instances[-1]
    assert [r.text for r in results] == ["Paris", "4", "Paris", "steady now", None]
    assert "no answer" in results[4].error
    assert sorted(backend.sent) == sorted(["Capital of France?", "2 + 2?", "flaky?", "flaky?", "?"])
    # The repeated question is sent once: it waits for the first one's answer, or finds it
    # in the cache when the first was answered before it was taken.
    assert client.stats.retries == 1
    assert client.stats.deduplicated + client.stats.cache_hits == 1
    assert backend.events == ["open", "close"]
    assert [s.closed for s in backend.sessions] == [True]

    # The cache keys on the backend's namespace: a rerun sends only what failed.
    with LLMClient(config, tmp_path / "cache.sqlite", progress=False) as client:
        again = client.complete_many(requests)
    assert DictBackend.instances[-1].sent == ["?"]
    assert [r.text for r in again] == [r.text for r in results]


def test_a_registered_batch_backend_gets_one_batch(registered):
    with LLMClient(_config("dict-batch"), None, progress=False) as client:
        assert client.is_available()
        results = client.complete_many(
            [ChatRequest.from_prompt(q) for q in ("2 + 2?", "Capital of France?", "2 + 2?")]
        )
        assert client.backend.batches == [["2 + 2?", "Capital of France?"]]
    assert [r.text for r in results] == ["4", "Paris", "4"]
    assert not client.backend.is_ready()


def test_an_unknown_backend_is_rejected_naming_the_known_ones(registered):
    with pytest.raises(ConfigError) as error:
        EndpointConfig.from_dict({"backend": "ollama", "model": "m"}, name="x")
    message = str(error.value)
    assert "endpoints.x: unknown backend 'ollama'" in message
    for name in ("local", "openai", "azure", "vllm", "dict", "dict-batch"):
        assert name in message


def test_registration_checks_the_backend_class():
    class NoKind:
        default_concurrency = 1

    class NoConcurrency:
        is_batch = False

    with pytest.raises(TypeError, match="is_batch"):
        register_backend("bad", NoKind)
    with pytest.raises(TypeError, match="default_concurrency"):
        register_backend("bad", NoConcurrency)
    with pytest.raises(ValueError, match="already registered"):
        register_backend("openai", DictBackend)
    assert "bad" not in BACKENDS


def test_a_backend_missing_its_kinds_methods_is_refused(registered):
    class HalfBackend(DictBackend):
        is_batch = True  # claims the batch kind but has no generate()/is_ready()

    register_backend("half", HalfBackend)
    with pytest.raises(TypeError, match="does not implement BatchBackend"):
        LLMClient(_config("half"), None)
