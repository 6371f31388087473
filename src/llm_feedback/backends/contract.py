"""The one request/response contract shared by every model backend.

Generation, annotation and judging all speak in `ChatRequest` and `ChatResult`, so that
caching, retries, concurrency and token accounting live in exactly one place.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_feedback.errors import ConfigError

# The sampling settings a request carries; every parameter block that sets them uses these.
SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "stop", "seed")


def check_sampling(settings: Any, where: str) -> dict[str, Any]:
    """`settings` as sampling keyword arguments; ConfigError naming `where` if it is not one."""
    if settings is None:
        return {}
    if not isinstance(settings, Mapping):
        raise ConfigError(f"{where} must be a mapping of sampling settings, got {settings!r}")
    unknown = sorted(set(settings) - set(SAMPLING_KEYS))
    if unknown:
        raise ConfigError(
            f"{where}.{unknown[0]}: unknown sampling setting; allowed: {', '.join(SAMPLING_KEYS)}"
        )
    return {key: _sampling_value(key, value, f"{where}.{key}") for key, value in settings.items()}


def _sampling_value(key: str, value: Any, name: str) -> Any:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if key in ("temperature", "top_p"):
        if not is_number or value < 0 or (key == "top_p" and value > 1):
            limits = "between 0 and 1" if key == "top_p" else ">= 0"
            raise ConfigError(f"{name} must be a number {limits}, got {value!r}")
        return float(value)
    if key == "max_tokens":
        if not (is_number and isinstance(value, int)) or value < 1:
            raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        return value
    if key == "seed":
        if value is not None and not (is_number and isinstance(value, int)):
            raise ConfigError(f"{name} must be an integer or null, got {value!r}")
        return value
    if value is None:  # stop
        return None
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list | tuple) or not all(isinstance(s, str) for s in stops):
        raise ConfigError(f"{name} must be a string or a list of strings, got {value!r}")
    return list(stops)


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat completion to make.

    `attempt` distinguishes deliberate repeats of identical messages (a re-ask after a
    malformed reply, a replicate at temperature 1); it is part of the cache key so that a
    repeat is a new call while a rerun of the same attempt is served from the cache.
    """

    messages: tuple[dict[str, str], ...]
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 1024
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    json_schema: dict[str, Any] | None = None
    attempt: int = 0

    def __post_init__(self) -> None:
        if not self.messages:
            raise ValueError("a ChatRequest needs at least one message")
        for message in self.messages:
            if not isinstance(message.get("content"), str) or message.get("role") not in {
                "system",
                "user",
                "assistant",
            }:
                raise ValueError(f"malformed chat message: {message!r}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")

    @classmethod
    def from_prompt(cls, user: str, system: str | None = None, **sampling: Any) -> ChatRequest:
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": user}
        ]
        stop = sampling.pop("stop", None)
        return cls(
            messages=tuple(messages),
            stop=tuple(stop) if stop else None,
            **sampling,
        )

    def estimated_input_tokens(self) -> int:
        """A conservative token count without a tokenizer: ~3 characters a token (English
        averages ~4) plus a few tokens of chat framing per message."""
        return sum(len(m["content"]) // 3 + 8 for m in self.messages)

    def with_bounded_strings(self, max_chars: int) -> ChatRequest:
        """This request with every free-text field of its JSON schema capped at max_chars."""
        if self.json_schema is None:
            return self
        return dataclasses.replace(self, json_schema=_bounded_schema(self.json_schema, max_chars))

    def cache_key(self, backend: str, model: str) -> str:
        payload = {
            "backend": backend,
            "model": model,
            "messages": self.messages,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "stop": self.stop,
            "seed": self.seed,
            "json_schema": self.json_schema,
            "attempt": self.attempt,
        }
        encoded = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=list)
        return hashlib.sha256(encoded.encode()).hexdigest()


@dataclass(slots=True)
class ChatResult:
    """What came back for one request. `error` is set (and `text` is None) on failure."""

    text: str | None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    error: str | None = None
    cached: bool = False
    model: str = ""
    # Answered through a Batch API (priced at the batch rate).
    via_batch: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and self.text is not None

    @classmethod
    def failure(cls, error: str, latency_s: float = 0.0, model: str = "") -> ChatResult:
        return cls(text=None, error=error, latency_s=latency_s, model=model)


# Requests of one shape share one schema object; so do their capped copies. The original
# is kept in the entry so that its id cannot be reused while the entry lives.
_bounded_schemas: dict[tuple[int, int], tuple[dict[str, Any], dict[str, Any]]] = {}


def _bounded_schema(schema: dict[str, Any], max_chars: int) -> dict[str, Any]:
    entry = _bounded_schemas.get((id(schema), max_chars))
    if entry is None or entry[0] is not schema:
        if len(_bounded_schemas) > 256:
            _bounded_schemas.clear()
        entry = (schema, _bound_strings(schema, max_chars))
        _bounded_schemas[(id(schema), max_chars)] = entry
    return entry[1]


def _bound_strings(schema: Any, max_chars: int) -> Any:
    if isinstance(schema, dict):
        bounded = {key: _bound_strings(value, max_chars) for key, value in schema.items()}
        if schema.get("type") == "string" and "enum" not in schema:
            bounded["maxLength"] = min(schema.get("maxLength", max_chars), max_chars)
        return bounded
    if isinstance(schema, list):
        return [_bound_strings(item, max_chars) for item in schema]
    return schema
