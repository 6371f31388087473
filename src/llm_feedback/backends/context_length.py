"""Recognising an endpoint's refusal of a request that does not fit its context window.

Such a refusal (an HTTP 400, sometimes 413 or 422) says nothing about the endpoint's
health: it is that one request's error. The client keeps it out of the circuit breaker,
and the engine gives the request the `skipped_too_long` status, so that a stage can judge
an over-long text on its own instead of losing the texts sent beside it.

Servers say it in their own words: OpenAI by the error code `context_length_exceeded`,
vLLM ("This model's maximum context length is 4096 tokens. However, you requested ..."),
llama.cpp (`exceed_context_size_error`, "the request exceeds the available context size"),
Text Generation Inference ("`inputs` tokens + `max_new_tokens` must be <= ..."), Claude
("prompt is too long"), Gemini ("The input token count (N) exceeds the maximum number of
tokens allowed (M)"), and
other OpenAI-compatible proxies in similar phrases.
"""

from __future__ import annotations

import re

# The error codes (or types) of a context-length refusal, as servers put them in the body.
CONTEXT_LENGTH_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})

_CONTEXT_LENGTH = re.compile(
    r"context_length_exceeded|exceed_context_size"
    r"|maximum context length|context length (?:of|is|exceeded)"
    r"|exceeds? (?:the )?(?:available |model'?s? )?context (?:size|window|length)"
    r"|longer than the model'?s? (?:context|maximum)"
    r"|prompt is too long|input is too long for (?:the|this) model"
    r"|input token count \(\d+\) exceeds the maximum number of tokens"
    r"|tokens \+ `?max_new_tokens`? must be <=",
    re.IGNORECASE,
)


def context_length_code(*fields: object) -> str | None:
    """The context-length code among an error body's `code` and `type` fields, if any.

    Args:
        fields: The error's `code` and `type` as the server sent them (any JSON value).

    Returns:
        The first field that is a known context-length code, or None.
    """
    return next((f for f in fields if isinstance(f, str) and f in CONTEXT_LENGTH_CODES), None)


def is_context_length_error(error: str | None) -> bool:
    """Whether a failed call's error text is an endpoint's refusal for context length.

    Args:
        error: The error of a failed `ChatResult` (None for an answered call).

    Returns:
        True when the text carries a known context-length code or phrase.
    """
    return bool(error) and _CONTEXT_LENGTH.search(error) is not None
