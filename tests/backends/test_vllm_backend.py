"""The in-process vLLM backend, checked call by call against a test double of `vllm`."""

import math
import sys
from pathlib import Path

import pytest
import yaml

from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient
from llm_feedback.backends.media import load_media, with_media
from llm_feedback.core.errors import ConfigError
from tests.conftest import readme_block, readme_command
from tests.media_files import png_bytes, wav_bytes, write

DOUBLE = Path(__file__).parent / "vllm_double"


@pytest.fixture
def fake_vllm(monkeypatch):
    monkeypatch.syspath_prepend(str(DOUBLE))
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    import vllm

    vllm.CALLS.clear()
    yield vllm
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        sys.modules.pop(name, None)


def _config(**extra):
    return EndpointConfig.from_dict(
        {
            "backend": "vllm",
            "model": "org/tiny-model",
            "engine_kwargs": {"max_model_len": 2048},
            **extra,
        },
        name="gpu",
    )


def test_offline_batch_makes_exactly_the_expected_calls(fake_vllm, tmp_path):
    schema = {"type": "object", "properties": {"rating": {"type": "integer"}}}
    requests = [
        ChatRequest.from_prompt(
            "Hello?",
            system="Be brief.",
            temperature=0.0,
            top_p=0.6,
            max_tokens=32,
            stop=["</s>"],
            seed=7,
        ),
        ChatRequest.from_prompt("Rate it.", temperature=0.0, max_tokens=16, json_schema=schema),
    ]
    with LLMClient(_config(), tmp_path / "cache.sqlite", progress=False) as client:
        results = client.complete_many(requests)

    kinds = [kind for kind, _ in fake_vllm.CALLS]
    assert kinds == ["LLM", "apply_chat_template", "apply_chat_template", "generate"]
    assert fake_vllm.CALLS[0][1] == {"model": "org/tiny-model", "max_model_len": 2048}
    messages, tokenize, add_prompt = fake_vllm.CALLS[1][1]
    assert messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello?"},
    ]
    assert tokenize is False and add_prompt is True

    prompts, params, _ = fake_vllm.CALLS[3][1]
    assert prompts[0] == "<|system|>Be brief.<|user|>Hello?<|assistant|>"
    first, second = params
    assert (first.temperature, first.top_p, first.max_tokens, first.stop, first.seed) == (
        0.0,
        0.6,
        32,
        ["</s>"],
        7,
    )
    assert first.structured_outputs is None
    assert second.structured_outputs.json == schema

    assert all(r.ok for r in results)
    assert results[0].finish_reason == "stop"
    assert results[0].prompt_tokens > 0 and results[0].completion_tokens > 0


def test_cached_rerun_sends_nothing_to_vllm(fake_vllm, tmp_path):
    requests = [ChatRequest.from_prompt(f"q{i}", temperature=0.0) for i in range(3)]
    with LLMClient(_config(), tmp_path / "cache.sqlite", progress=False) as client:
        first = client.complete_many(requests)
    fake_vllm.CALLS.clear()
    with LLMClient(_config(), tmp_path / "cache.sqlite", progress=False) as client:
        again = client.complete_many(requests)
    assert [kind for kind, _ in fake_vllm.CALLS] == ["LLM"]
    assert [r.text for r in again] == [r.text for r in first]
    assert all(r.cached for r in again)


def test_structured_output_can_be_switched_off(fake_vllm, tmp_path):
    request = ChatRequest.from_prompt("x", json_schema={"type": "object"})
    with LLMClient(_config(structured_output=False), None, progress=False) as client:
        client.complete(request)
    _, params, _ = fake_vllm.CALLS[-1][1]
    assert params[0].structured_outputs is None


def test_missing_vllm_gives_an_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ConfigError, match=r'pip install -e "\.\[gpu\]"'):
        LLMClient(_config(), None).open()


def test_images_and_audio_go_to_vllm_as_multi_modal_data(fake_vllm, tmp_path):
    image = load_media(
        str(write(tmp_path / "a.png", png_bytes(3, 2, (0, 128, 255)))), "image", tmp_path, 1 << 20
    )
    clip = load_media(
        str(write(tmp_path / "a.wav", wav_bytes(160, 8000, 16384))), "audio", tmp_path, 1 << 20
    )
    requests = [
        ChatRequest(
            messages=({"role": "user", "content": with_media("What is this?", [image, clip])},),
            temperature=0.0,
        ),
        ChatRequest.from_prompt("Text only.", temperature=0.0),
    ]
    with LLMClient(_config(), None, progress=False) as client:
        results = client.complete_many(requests)
    assert all(result.ok for result in results)

    messages, _, _ = fake_vllm.CALLS[1][1]
    assert messages == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image"},
                {"type": "audio"},
            ],
        }
    ]
    prompts, _, _ = fake_vllm.CALLS[-1][1]
    multimodal, text_only = prompts
    assert text_only == "<|user|>Text only.<|assistant|>"
    assert multimodal["prompt"] == "<|user|>What is this?<image><audio><|assistant|>"
    picture = multimodal["multi_modal_data"]["image"]
    assert picture.size == (3, 2) and picture.getpixel((2, 1)) == (0, 128, 255)
    samples, rate = multimodal["multi_modal_data"]["audio"]
    assert rate == 8000 and len(samples) == 160
    assert {round(float(value), 3) for value in samples} == {-0.5, 0.5}


def test_multi_gpu_engine_kwargs_reach_vllm_unchanged(fake_vllm, tmp_path):
    parallel = {
        "tensor_parallel_size": 4,
        "data_parallel_size": 2,
        "distributed_executor_backend": "ray",
        "max_model_len": 8192,
    }
    config = _config(engine_kwargs=parallel)
    with LLMClient(config, tmp_path / "cache.sqlite", progress=False) as client:
        assert client.complete(ChatRequest.from_prompt("hi")).ok
    assert fake_vllm.CALLS[0] == ("LLM", {"model": "org/tiny-model", **parallel})


@pytest.mark.parametrize(
    ("engine_kwargs", "message"),
    [
        ({"tensor_parallel_size": 0}, "engine_kwargs.tensor_parallel_size must be an integer"),
        ({"data_parallel_size": "2"}, "engine_kwargs.data_parallel_size must be an integer"),
        ({"distributed_executor_backend": "slurm"}, "must be one of ray, mp, uni"),
        ("tp=2", r"endpoints\.gpu\.engine_kwargs must be dict"),
    ],
)
def test_bad_multi_gpu_settings_are_named_before_vllm_loads(engine_kwargs, message):
    with pytest.raises(ConfigError, match=message):
        _config(engine_kwargs=engine_kwargs)


def test_requests_reach_vllm_in_chunks_while_later_ones_are_still_being_built(fake_vllm, tmp_path):
    def requests():
        for i in range(600):
            if i % 100 == 0:
                fake_vllm.CALLS.append(("built", i))
            yield ChatRequest.from_prompt(f"prompt {i}", temperature=0.0)

    config = _config(engine_chunk_size=100)
    with LLMClient(config, tmp_path / "cache.sqlite", progress=False) as client:
        results = client.complete_many(requests(), total=600)

    assert all(r.ok for r in results) and len(results) == 600
    calls = [(kind, len(args[0]) if kind == "generate" else args) for kind, args in fake_vllm.CALLS]
    generated = [size for kind, size in calls if kind == "generate"]
    assert generated == [100] * 6
    # The first prompts were generated before the last ones were built: no 600-long list.
    assert calls.index(("generate", 100)) < calls.index(("built", 500))


def test_the_readme_multi_gpu_endpoint_reaches_vllm_as_written(fake_vllm, tmp_path):
    endpoints = yaml.safe_load(readme_block("Past one machine: multi-GPU vLLM"))["endpoints"]
    config = EndpointConfig.from_dict(endpoints["gpu"], name="gpu")
    assert readme_command("### Multi-GPU vLLM").endswith("annotate.judge.endpoint=gpu")
    with LLMClient(config, tmp_path / "cache.sqlite", progress=False) as client:
        assert client.complete(ChatRequest.from_prompt("hi")).ok
    assert fake_vllm.CALLS[0] == ("LLM", {"model": config.model, **config.options.engine_kwargs})
    assert config.options.engine_kwargs["distributed_executor_backend"] == "ray"


def test_log_probabilities_are_asked_of_vllm_and_kept_at_the_label_tokens(fake_vllm, tmp_path):
    """The double's reply "reply to N chars at t=0.0" has the label token "to"; each token
    was sampled at 1/2 with "B" second at 1/4."""
    request = ChatRequest.from_prompt(
        "which?", temperature=0.0, top_logprobs=2, logprob_labels=("to", "B")
    )
    with LLMClient(_config(), tmp_path / "cache.sqlite", progress=False) as client:
        (result,) = client.complete_many([request], desc=None)
    _, (_, params, _) = next(call for call in fake_vllm.CALLS if call[0] == "generate")
    assert params[0].logprobs == 2
    (entry,) = result.label_logprobs
    assert (entry["offset"], entry["token"]) == (len("reply"), " to")
    assert [(a["token"], round(a["logprob"], 6)) for a in entry["top_logprobs"]] == [
        (" to", round(math.log(0.5), 6)),
        ("B", round(math.log(0.25), 6)),
    ]
