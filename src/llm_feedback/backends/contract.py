"""The one request/response contract shared by every model backend.

Generation, annotation and judging all speak in `ChatRequest` and `ChatResult`, so that
caching, retries, concurrency and token accounting live in exactly one place.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_feedback.backends.media import MEDIA_TOKEN_ESTIMATE, Media, content_media, content_text
from llm_feedback.core.errors import ConfigError

# The sampling settings a request carries; every parameter block that sets them uses these.
SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "stop", "seed")

# Encoding a JSON schema was most of a cache key's cost, and a stage shares a few schema
# objects across all its requests: their encodings are kept, by object, for the recent ones.
_SCHEMA_SLOT = "\x00json_schema\x00"
_ENCODED_SCHEMA_SLOT = json.dumps(_SCHEMA_SLOT)
_ENCODED_SCHEMAS_KEPT = 64
_encoded_schemas: OrderedDict[int, tuple[Any, str]] = OrderedDict()
_encoded_schemas_lock = threading.Lock()


def _encode_for_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=_key_part)


def _encoded_schema(schema: Any) -> str:
    """`_encode_for_key(schema)`, computed once per schema object while it is recent.

    An entry holds its schema, so its id cannot be reused by another object meanwhile;
    schemas are read-only once attached to a request.
    """
    with _encoded_schemas_lock:
        entry = _encoded_schemas.get(id(schema))
        if entry is not None and entry[0] is schema:
            _encoded_schemas.move_to_end(id(schema))
            return entry[1]
    encoded = _encode_for_key(schema)
    with _encoded_schemas_lock:
        _encoded_schemas[id(schema)] = (schema, encoded)
        if len(_encoded_schemas) > _ENCODED_SCHEMAS_KEPT:
            _encoded_schemas.popitem(last=False)
    return encoded


def check_sampling(settings: Any, where: str) -> dict[str, Any]:
    """Validate a block of sampling settings and return them as keyword arguments.

    Args:
        settings: The block as configured: a mapping of `SAMPLING_KEYS`, or None.
        where: The block's name in the configuration, used in error messages.

    Returns:
        The settings as sampling keyword arguments (`{}` when `settings` is None).

    Raises:
        ConfigError: `settings` is not a mapping, names an unknown key, or holds a value out
            of range (naming `where` and the key).
    """
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

    A message's content is text, or a tuple of text and `Media` parts (images, audio;
    see `backends.media`), which the cache key knows by their content hash.

    `top_logprobs` > 0 asks the endpoint for that many alternatives per generated token
    (where its backend can give them); the reply keeps those at the `logprob_labels`
    tokens only (`backends.token_logprobs`). Both are part of the cache key when asked
    (an answer cached without probabilities cannot stand in for one with them).

    `reasoning_tokens` is a reasoning model's thinking budget, apart from `max_tokens`
    (the answer's own): the call may generate both, so a judge that thinks long still has
    room for its verdict. `reasoning_effort` ("minimal" ... "high") is what OpenAI's
    reasoning models take instead. Both come from the endpoint (`sent_form`) and are part
    of the cache key when set.
    """

    messages: tuple[dict[str, Any], ...]
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 1024
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    json_schema: dict[str, Any] | None = None
    attempt: int = 0
    top_logprobs: int = 0
    logprob_labels: tuple[str, ...] = ()
    reasoning_tokens: int = 0
    reasoning_effort: str | None = None

    def __post_init__(self) -> None:
        if not self.messages:
            raise ValueError("a ChatRequest needs at least one message")
        for message in self.messages:
            if not _is_content(message.get("content")) or message.get("role") not in {
                "system",
                "user",
                "assistant",
            }:
                raise ValueError(f"malformed chat message: {message!r}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.top_logprobs < 0:
            raise ValueError(f"top_logprobs must be >= 0, got {self.top_logprobs}")
        if self.reasoning_tokens < 0:
            raise ValueError(f"reasoning_tokens must be >= 0, got {self.reasoning_tokens}")

    @property
    def token_budget(self) -> int:
        """The tokens the call may generate: the answer's and the reasoning's."""
        return self.max_tokens + self.reasoning_tokens

    @classmethod
    def from_prompt(cls, user: str, system: str | None = None, **sampling: Any) -> ChatRequest:
        """A request of one user turn, after a system turn when one is given.

        Args:
            user: The user turn's text.
            system: The system prompt; None or empty for none.
            **sampling: Sampling settings, as `from_messages` takes them.

        Returns:
            The request.
        """
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": user}
        ]
        return cls.from_messages(messages, **sampling)

    @classmethod
    def from_messages(cls, messages: Sequence[dict[str, str]], **sampling: Any) -> ChatRequest:
        """A request from chat turns and sampling settings as parameter blocks give them.

        Args:
            messages: The chat turns, each a mapping with `role` and `content`.
            **sampling: The request's other fields (`temperature`, `stop` as a list, ...).

        Returns:
            The request.
        """
        stop = sampling.pop("stop", None)
        return cls(messages=tuple(messages), stop=tuple(stop) if stop else None, **sampling)

    def estimated_input_tokens(self) -> int:
        """A conservative token count without a tokenizer: ~3 characters a token (English
        averages ~4) plus a few tokens of chat framing per message."""
        return sum(
            len(content_text(m["content"])) // 3
            + 8
            + MEDIA_TOKEN_ESTIMATE * len(content_media(m["content"]))
            for m in self.messages
        )

    @property
    def media(self) -> list[Media]:
        """Every image and audio clip the messages carry."""
        return [part for message in self.messages for part in content_media(message["content"])]

    def with_bounded_strings(self, max_chars: int) -> ChatRequest:
        """This request with every free-text field of its JSON schema capped at max_chars.

        Args:
            max_chars: The longest string the schema lets each free-text field hold.

        Returns:
            A copy with the capped schema, or this request when it has no schema.
        """
        if self.json_schema is None:
            return self
        return dataclasses.replace(self, json_schema=_bounded_schema(self.json_schema, max_chars))

    def cache_key(self, backend: str, model: str) -> str:
        """The request's cache key: a hash of everything that shapes the reply.

        Args:
            backend: The backend's name.
            model: The model's name.

        Returns:
            The SHA-256 hex digest of the backend, model, messages, sampling and attempt (and
            of the log-probability and reasoning settings when they are set).
        """
        payload = {
            "backend": backend,
            "model": model,
            "messages": self.messages,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "stop": self.stop,
            "seed": self.seed,
            "json_schema": self.json_schema if self.json_schema is None else _SCHEMA_SLOT,
            "attempt": self.attempt,
        }
        if self.top_logprobs:  # absent otherwise: the keys of earlier caches stay valid
            payload["logprobs"] = [self.top_logprobs, self.logprob_labels]
        if self.reasoning_tokens or self.reasoning_effort:  # likewise
            payload["reasoning"] = [self.reasoning_tokens, self.reasoning_effort]
        encoded = _encode_for_key(payload)
        if self.json_schema is not None:
            # Sorted keys put "json_schema" after "attempt" and "backend" (a backend name),
            # so the first slot is the schema's: the key equals encoding the whole payload.
            encoded = encoded.replace(_ENCODED_SCHEMA_SLOT, _encoded_schema(self.json_schema), 1)
        return hashlib.sha256(encoded.encode()).hexdigest()


def _is_content(content: Any) -> bool:
    if isinstance(content, str):
        return True
    return (
        isinstance(content, tuple)
        and bool(content)
        and all(isinstance(part, str | Media) for part in content)
    )


def _key_part(value: Any) -> Any:
    """Media by their content hash (so a renamed file keeps its key); other values as lists,
    as before media existed, so that text-only keys never change."""
    return value.identity() if isinstance(value, Media) else list(value)


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
    # The top log-probabilities at the request's label tokens (`backends.token_logprobs`):
    # None when none were asked for or the endpoint returned none.
    label_logprobs: list[dict[str, Any]] | None = None
    # Of `completion_tokens`, those a reasoning model spent thinking (billed as output).
    reasoning_tokens: int = 0
    # Of `prompt_tokens`, those the provider's prompt cache served (billed at its cached
    # rate) and those it wrote (Anthropic bills writes above the input price); None where
    # the reply does not say.
    cached_prompt_tokens: int | None = None
    cache_write_tokens: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.text is not None

    @classmethod
    def failure(cls, error: str, latency_s: float = 0.0, model: str = "") -> ChatResult:
        """A failed result: no text, with the error that explains why.

        Args:
            error: What went wrong.
            latency_s: Seconds the failed call took.
            model: The model that was called.

        Returns:
            The result.
        """
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
