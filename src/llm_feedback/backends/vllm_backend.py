"""In-process vLLM offline batch generation for GPU machines (`pip install -e ".[gpu]"`).

vLLM schedules a whole batch itself, so this backend takes every uncached request of a
call at once instead of going through the per-request concurrency path.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Sequence
from typing import Any

from llm_feedback.backends.config import EndpointConfig
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.errors import ConfigError

logger = logging.getLogger(__name__)


class VLLMBackend:
    """vLLM's offline engine, loaded into this process (a `BatchBackend`)."""

    is_batch = True
    default_concurrency = 256

    def __init__(self, config: EndpointConfig) -> None:
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
        self._engine = self._vllm.LLM(model=self.model, **self.config.engine_kwargs)

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
        if request.json_schema is not None and self.config.uses_structured_output:
            structured = importlib.import_module("vllm.sampling_params").StructuredOutputsParams
            kwargs["structured_outputs"] = structured(json=request.json_schema)
        return self._vllm.SamplingParams(**kwargs)

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        if not requests:
            return []
        tokenizer = self._engine.get_tokenizer()
        prompts = [
            tokenizer.apply_chat_template(
                list(request.messages), tokenize=False, add_generation_prompt=True
            )
            for request in requests
        ]
        params = [self._sampling_params(request) for request in requests]
        started = time.perf_counter()
        outputs = self._engine.generate(prompts, params, use_tqdm=True)
        # vLLM finishes a batch as a whole; each row gets its share of the wall time.
        latency = (time.perf_counter() - started) / len(requests)
        results = []
        for output in outputs:
            completion = output.outputs[0]
            results.append(
                ChatResult(
                    text=completion.text,
                    finish_reason=completion.finish_reason,
                    prompt_tokens=len(output.prompt_token_ids or ()),
                    completion_tokens=len(completion.token_ids or ()),
                    latency_s=latency,
                    model=self.model,
                )
            )
        return results

    def is_ready(self) -> bool:
        return self._engine is not None

    def close(self) -> None:
        self._engine = None
