"""Reasoning models' replies over the chat completions API: the answer apart from the
thinking, and the thinking's tokens.

A reasoning model thinks before it answers, and servers hand the thinking back in one of
three ways: in a field of its own (`message.reasoning_content`: `vllm serve
--reasoning-parser`, DeepSeek's API; `message.reasoning`: OpenRouter, newer vLLM), inside
the content between `<think>` and `</think>` (DeepSeek-R1-style models served without a
parser; a chat template that opens the tag itself leaves only the closing one), or not
at all (OpenAI's o-series, which bill it as `usage.completion_tokens_details.
reasoning_tokens`). The verdict is read from what follows the thinking only, so a
rating the model weighed and discarded while thinking is never taken for its answer; a
reply cut off while still thinking (an unterminated `<think>`) has no answer at all.
"""

from __future__ import annotations

import re
from typing import Any

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
# OpenAI's reasoning models refuse `logprobs` and a temperature other than 1 (the o-series
# and gpt-5, also on Azure).
_REASONING_MODEL = re.compile(r"^(o\d|gpt-5)", re.IGNORECASE)


def is_reasoning_model(model: str) -> bool:
    """Whether `model` is one of OpenAI's reasoning models by its name.

    Args:
        model: A model name, path or deployment name (its last part is read).

    Returns:
        True for the o-series and gpt-5.
    """
    return bool(_REASONING_MODEL.match(model.rsplit("/", 1)[-1]))


def split_thinking(content: str) -> tuple[str, str | None]:
    """The answer and the thinking of a reply's content.

    The answer is what follows the last `</think>`; content that opens `<think>` and never
    closes it was cut off while thinking: its answer is "".

    Args:
        content: The message's content.

    Returns:
        (answer, thinking); the thinking is None when the content has no `<think>` section.
    """
    opened = content.lstrip().startswith(THINK_OPEN)
    if THINK_CLOSE in content:
        thinking, _, answer = content.rpartition(THINK_CLOSE)
        thinking = thinking.lstrip()
        if thinking.startswith(THINK_OPEN):
            thinking = thinking[len(THINK_OPEN) :]
        return answer.strip(), thinking.strip()
    if opened:
        return "", content.lstrip()[len(THINK_OPEN) :].strip()
    return content, None


def reasoning_tokens(usage: Any) -> int:
    """The reasoning tokens a decoded body's usage reports.

    Args:
        usage: The body's `usage` object.

    Returns:
        `completion_tokens_details.reasoning_tokens`, 0 when absent or malformed.
    """
    if not isinstance(usage, dict):
        return 0
    details = usage.get("completion_tokens_details")
    if not isinstance(details, dict):
        return 0
    value = details.get("reasoning_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def billed_completion_tokens(completion_tokens: int, thinking: int) -> int:
    """The output tokens billed for a reply.

    Args:
        completion_tokens: The usage's completion tokens (OpenAI's include the reasoning).
        thinking: Its reasoning tokens.

    Returns:
        `completion_tokens`, plus the reasoning where a server counts it apart (fewer
        completion tokens than reasoning tokens).
    """
    return completion_tokens + thinking if completion_tokens < thinking else completion_tokens
