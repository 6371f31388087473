"""In-process vLLM offline batch generation for GPU machines (`pip install -e ".[gpu]"`).

vLLM schedules a whole batch itself, so this backend takes every uncached request of a
call at once instead of going through the per-request concurrency path.

Images and audio go to vLLM as `multi_modal_data` beside the prompt: the chat template
sees `{"type": "image"}` / `{"type": "audio"}` parts where they stand (the Hugging Face
convention that multimodal chat templates render as their placeholder tokens); images are
decoded with Pillow, WAV with the standard library, MP3 with librosa (vLLM's audio extra).
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import logging
import time
import wave
from collections.abc import Sequence
from typing import Any, ClassVar

from llm_feedback.backends.base import BackendTraits, EndpointConfig
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.backends.media import Media, MediaError
from llm_feedback.backends.options import VLLMOptions
from llm_feedback.backends.token_logprobs import label_entries
from llm_feedback.core.errors import ConfigError

logger = logging.getLogger(__name__)


class VLLMBackend(BackendTraits):
    """vLLM's offline engine, loaded into this process (a `BatchBackend`)."""

    is_batch = True
    default_concurrency = 256
    options_type: ClassVar[type] = VLLMOptions

    @classmethod
    def chunk_size(cls, config: EndpointConfig) -> int:
        """Requests handed to the engine at a time: the endpoint's `engine_chunk_size`.

        Args:
            config: The endpoint.

        Returns:
            The chunk size.
        """
        return config.options.engine_chunk_size

    @classmethod
    def returns_logprobs(cls, config: EndpointConfig) -> bool:
        """The engine returns top log-probabilities (`SamplingParams(logprobs=N)`).

        Args:
            config: The endpoint.

        Returns:
            Always True.
        """
        return True  # SamplingParams(logprobs=N): the top N per generated token

    @classmethod
    def check_ready(cls, config: EndpointConfig, timeout_s: float) -> None:
        """vLLM is installed (the engine itself is loaded when the backend opens).

        Args:
            config: The endpoint.
            timeout_s: Unused: nothing is asked of a server.

        Raises:
            ConfigError: vLLM is not installed.
        """
        if importlib.util.find_spec("vllm") is None:
            raise ConfigError(
                f"endpoint '{config.name}' uses the vllm backend, which needs a GPU and the "
                'gpu extra: pip install -e ".[gpu]"'
            )

    def __init__(self, config: EndpointConfig) -> None:
        """A backend whose engine is loaded when it opens.

        Args:
            config: The endpoint.
        """
        self.config = config
        self.model = config.model
        self._engine: Any = None
        self._vllm: Any = None

    @property
    def cache_namespace(self) -> str:
        return "vllm"

    def open(self) -> None:
        if self._engine is not None:
            return
        try:
            self._vllm = importlib.import_module("vllm")
        except ImportError as error:
            raise ConfigError(
                f"endpoint '{self.config.name}' uses the vllm backend, which needs a GPU and "
                'the gpu extra: pip install -e ".[gpu]"'
            ) from error
        logger.info("Loading %s into vLLM", self.model)
        self._engine = self._vllm.LLM(model=self.model, **self.config.options.engine_kwargs)

    def _sampling_params(self, request: ChatRequest) -> Any:
        kwargs: dict[str, Any] = {
            "temperature": request.temperature,
            "top_p": request.top_p,
            "max_tokens": request.max_tokens,
        }
        if request.stop:
            kwargs["stop"] = list(request.stop)
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.top_logprobs:
            kwargs["logprobs"] = request.top_logprobs
        if request.json_schema is not None and self.config.uses_structured_output:
            structured = importlib.import_module("vllm.sampling_params").StructuredOutputsParams
            kwargs["structured_outputs"] = structured(json=request.json_schema)
        return self._vllm.SamplingParams(**kwargs)

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        """Answer the requests in one engine call, each row given its share of the wall time.

        Args:
            requests: The requests.

        Returns:
            One result per request, in order; a failed one for an unreadable attachment.
        """
        if not requests:
            return []
        tokenizer = self._engine.get_tokenizer()
        results: list[ChatResult | None] = [None] * len(requests)
        prompts, params, sent = [], [], []
        for index, request in enumerate(requests):
            try:
                prompts.append(self._prompt(tokenizer, request))
            except MediaError as error:
                results[index] = ChatResult.failure(str(error), model=self.model)
                continue
            params.append(self._sampling_params(request))
            sent.append(index)
        if not sent:
            return results  # type: ignore[return-value]
        started = time.perf_counter()
        outputs = self._engine.generate(prompts, params, use_tqdm=True)
        # vLLM finishes a batch as a whole; each row gets its share of the wall time.
        latency = (time.perf_counter() - started) / len(sent)
        for index, output in zip(sent, outputs, strict=True):
            completion = output.outputs[0]
            request = requests[index]
            results[index] = ChatResult(
                text=completion.text,
                finish_reason=completion.finish_reason,
                prompt_tokens=len(output.prompt_token_ids or ()),
                completion_tokens=len(completion.token_ids or ()),
                latency_s=latency,
                model=self.model,
                label_logprobs=label_entries(
                    {"content": openai_logprobs(completion, request.top_logprobs)},
                    request.logprob_labels,
                )
                if request.top_logprobs
                else None,
            )
        return results  # type: ignore[return-value]

    def _prompt(self, tokenizer: Any, request: ChatRequest) -> str | dict[str, Any]:
        """The chat-templated prompt; with attachments, vLLM's {prompt, multi_modal_data}."""
        media = request.media
        messages = [
            {**message, "content": _template_parts(message["content"])}
            if not isinstance(message["content"], str)
            else message
            for message in request.messages
        ]
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        if not media:
            return text
        data: dict[str, list[Any]] = {}
        for item in media:
            data.setdefault(item.kind, []).append(_decoded(item))
        # One item stays a single value: what vLLM's single-image models expect.
        return {
            "prompt": text,
            "multi_modal_data": {k: v[0] if len(v) == 1 else v for k, v in data.items()},
        }

    def is_ready(self) -> bool:
        return self._engine is not None

    def close(self) -> None:
        self._engine = None


def openai_logprobs(completion: Any, top: int) -> list[dict[str, Any]] | None:
    """vLLM's per-token log-probabilities (`CompletionOutput.logprobs`: for each generated
    token, {token id: Logprob(logprob, rank, decoded_token)}, the sampled token among them)
    in OpenAI's `logprobs.content` shape; None when there are none.

    Args:
        completion: vLLM's `CompletionOutput`.
        top: The alternatives to keep per token.

    Returns:
        One entry per generated token (`token`, `logprob`, `top_logprobs`), or None.
    """
    positions = getattr(completion, "logprobs", None)
    if not positions:
        return None
    content = []
    for token_id, alternatives in zip(completion.token_ids, positions, strict=False):
        chosen = alternatives.get(token_id)
        ranked = sorted(
            alternatives.values(), key=lambda a: a.rank if a.rank is not None else len(positions)
        )
        content.append(
            {
                "token": (chosen.decoded_token or "") if chosen is not None else "",
                "logprob": chosen.logprob if chosen is not None else None,
                "top_logprobs": [
                    {"token": a.decoded_token or "", "logprob": a.logprob} for a in ranked[:top]
                ],
            }
        )
    return content


def _template_parts(content: tuple[Any, ...]) -> list[dict[str, str]]:
    return [
        {"type": "text", "text": part} if isinstance(part, str) else {"type": part.kind}
        for part in content
    ]


def _decoded(item: Media) -> Any:
    """An image as a Pillow image, an audio clip as (float samples, sample rate)."""
    if item.is_url:
        raise MediaError(f"{item.source}: in-process vLLM takes image files or data: URIs")
    data = item.read()
    if item.kind == "image":
        image_module = importlib.import_module("PIL.Image")
        try:
            return image_module.open(io.BytesIO(data)).convert("RGB")
        except (OSError, ValueError) as error:  # a truncated or corrupt file
            raise MediaError(f"{item.source}: unreadable image ({error})") from None
    if item.format == "mp3":
        try:
            librosa = importlib.import_module("librosa")
        except ImportError as error:
            raise MediaError("MP3 for in-process vLLM needs librosa (vllm[audio])") from error
        return librosa.load(io.BytesIO(data), sr=None)
    return _wav_samples(data)


def _wav_samples(data: bytes) -> tuple[Any, int]:
    """16-bit PCM WAV as mono float32 samples in [-1, 1] and the sample rate."""
    numpy = importlib.import_module("numpy")
    try:
        with wave.open(io.BytesIO(data)) as clip:
            width, channels, rate = clip.getsampwidth(), clip.getnchannels(), clip.getframerate()
            frames = clip.readframes(clip.getnframes())
    except (wave.Error, EOFError) as error:
        raise MediaError(f"unreadable WAV: {error}") from None
    if width != 2:
        raise MediaError("WAV for in-process vLLM must be 16-bit PCM")
    samples = numpy.frombuffer(frames, dtype="<i2").astype(numpy.float32) / 32768.0
    return samples.reshape(-1, channels).mean(axis=1), rate
