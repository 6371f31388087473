"""A test double of the `vllm` package: records every call the backend makes.

It implements only the surface our backend uses (LLM, SamplingParams, the tokenizer's
chat template, generate) and answers deterministically, so the exact calls can be checked
on a machine without a GPU.
"""

import math
from dataclasses import dataclass, field
from typing import Any

from vllm.sampling_params import SamplingParams, StructuredOutputsParams  # noqa: F401

CALLS: list[tuple[str, Any]] = []


def _rendered(content):
    """Text as it is; content parts as multimodal templates do: a placeholder per item."""
    if isinstance(content, str):
        return content
    return "".join(
        part["text"] if part["type"] == "text" else f"<{part['type']}>" for part in content
    )


class _Tokenizer:
    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        CALLS.append(("apply_chat_template", (messages, tokenize, add_generation_prompt)))
        rendered = "".join(f"<|{m['role']}|>{_rendered(m['content'])}" for m in messages)
        return rendered + ("<|assistant|>" if add_generation_prompt else "")


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    text: str
    token_ids: list[int]
    finish_reason: str
    logprobs: list[dict[int, Logprob]] | None = None


# With `logprobs`, each word of a reply is a token, sampled at probability 1/2; its top
# alternatives are itself and, ranked second, "B" (token id 1000) at 1/4.
_ALTERNATIVE = 1000


def _logprobs(words: list[str], top: int) -> list[dict[int, Logprob]]:
    positions = []
    for token_id, word in enumerate(words):
        token = word if token_id == 0 else f" {word}"
        found = {token_id: Logprob(math.log(0.5), 1, token)}
        if top > 1:
            found[_ALTERNATIVE] = Logprob(math.log(0.25), 2, "B")
        positions.append(found)
    return positions


@dataclass
class RequestOutput:
    prompt: str
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)


class LLM:
    def __init__(self, model: str, **engine_kwargs: Any) -> None:
        CALLS.append(("LLM", {"model": model, **engine_kwargs}))
        self.model = model

    def get_tokenizer(self) -> _Tokenizer:
        return _Tokenizer()

    def generate(self, prompts, sampling_params, use_tqdm=True):
        CALLS.append(("generate", (list(prompts), list(sampling_params), use_tqdm)))
        outputs = []
        for given, params in zip(prompts, sampling_params, strict=True):
            prompt = given["prompt"] if isinstance(given, dict) else given  # multimodal: a dict
            text = f"reply to {len(prompt)} chars at t={params.temperature}"
            words = text.split()
            logprobs = _logprobs(words, params.logprobs) if params.logprobs else None
            outputs.append(
                RequestOutput(
                    prompt=prompt,
                    prompt_token_ids=list(range(len(prompt.split()))),
                    outputs=[CompletionOutput(text, list(range(len(words))), "stop", logprobs)],
                )
            )
        return outputs
