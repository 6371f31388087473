"""The two parameter classes of the `vllm` test double."""

from dataclasses import dataclass
from typing import Any


@dataclass
class StructuredOutputsParams:
    json: Any = None


@dataclass
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 16
    stop: list[str] | None = None
    seed: int | None = None
    structured_outputs: StructuredOutputsParams | None = None
    logprobs: int | None = None
