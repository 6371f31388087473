"""The request cache key: a hash of everything that shapes the answer, stable across versions."""

from __future__ import annotations

import hashlib
import json

from llm_feedback.annotation import build_aspect_request
from llm_feedback.backends.contract import ChatRequest


def whole_payload_key(request: ChatRequest, backend: str, model: str) -> str:
    """The key's definition: the sorted JSON of the whole payload, hashed."""
    payload = {
        "backend": backend,
        "model": model,
        "messages": request.messages,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "max_tokens": request.max_tokens,
        "stop": request.stop,
        "seed": request.seed,
        "json_schema": request.json_schema,
        "attempt": request.attempt,
    }
    encoded = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=list)
    return hashlib.sha256(encoded.encode()).hexdigest()


def test_keys_with_a_shared_schema_equal_the_whole_payload_key() -> None:
    requests = [
        build_aspect_request(
            aspect, f"Question {i}?", ["one", "two"], [1, 0], structured=True, sampling={"seed": i}
        )
        for i in range(3)
        for aspect in ("honesty", "helpfulness")
    ]
    for request in requests * 2:  # the second pass reads the kept schema encodings
        assert request.cache_key("openai", "judge") == whole_payload_key(request, "openai", "judge")


def test_a_message_holding_the_schema_placeholder_cannot_alter_the_key() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    tricky = ChatRequest.from_prompt('"\x00json_schema\x00" and "\\u0000json_schema\\u0000"')
    tricky = ChatRequest(messages=tricky.messages, json_schema=schema)
    assert tricky.cache_key("openai", "m") == whole_payload_key(tricky, "openai", "m")
    plain = ChatRequest(messages=tricky.messages)
    assert plain.cache_key("openai", "m") == whole_payload_key(plain, "openai", "m")
    assert plain.cache_key("openai", "m") != tricky.cache_key("openai", "m")
