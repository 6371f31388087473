"""A test double of the `vllm` package: records every call the backend makes.

It implements only the surface our backend uses (LLM, SamplingParams, the tokenizer's
chat template, generate) and answers deterministically, so the exact calls can be checked
on a machine without a GPU.
"""

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
class CompletionOutput:
    text: str
    token_ids: list[int]
    finish_reason: str


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
            outputs.append(
                RequestOutput(
                    prompt=prompt,
                    prompt_token_ids=list(range(len(prompt.split()))),
                    outputs=[CompletionOutput(text, list(range(len(text.split()))), "stop")],
                )
            )
        return outputs
