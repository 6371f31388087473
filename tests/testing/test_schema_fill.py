"""`schema_responder` and its JSON Schema filler (`schema_fill`): every document it makes
validates against the request's schema, checked by a small validator written here."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llm_feedback.testing.in_process import FakeLLMServer
from llm_feedback.testing.replies import RequestContext, schema_responder
from tests.testing.conftest import USER_QUESTION, client_for, user_message

# --- a small JSON Schema validator, independent of the server's generator -----------------


def schema_violations(instance: Any, schema: dict[str, Any], root: dict[str, Any]) -> list[str]:
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return schema_violations(instance, target, root)
    problems: list[str] = []
    if "const" in schema and instance != schema["const"]:
        problems.append(f"{instance!r} != const {schema['const']!r}")
    if "enum" in schema and instance not in schema["enum"]:
        problems.append(f"{instance!r} not in {schema['enum']!r}")
    for part in schema.get("allOf", []):
        problems += schema_violations(instance, part, root)
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        matching = [branch for branch in branches if not schema_violations(instance, branch, root)]
        if not matching or ("oneOf" in schema and len(matching) > 1):
            problems.append(f"{instance!r} matches {len(matching)} branches")
    if "type" in schema:
        problems += typed_violations(instance, schema, root)
    return problems


PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "null": type(None),
}


def typed_violations(instance: Any, schema: dict[str, Any], root: dict[str, Any]) -> list[str]:
    expected_types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    # bool is an int subclass in Python but not an integer in JSON Schema.
    if isinstance(instance, bool) and "boolean" not in expected_types:
        return [f"{instance!r} is a boolean, expected {expected_types}"]
    if not any(isinstance(instance, PYTHON_TYPES[name]) for name in expected_types):
        return [f"{instance!r} is not of type {expected_types}"]
    problems: list[str] = []
    if isinstance(instance, dict):
        properties = schema.get("properties", {})
        problems += [
            f"missing {name}" for name in schema.get("required", []) if name not in instance
        ]
        if schema.get("additionalProperties") is False:
            problems += [f"extra {name}" for name in instance if name not in properties]
        for name, value in instance.items():
            if name in properties:
                problems += schema_violations(value, properties[name], root)
    elif isinstance(instance, list):
        if not schema.get("minItems", 0) <= len(instance) <= schema.get("maxItems", len(instance)):
            problems.append(f"array length {len(instance)} out of bounds")
        for item in instance:
            problems += schema_violations(item, schema.get("items", {}), root)
    elif isinstance(instance, str):
        if (
            not schema.get("minLength", 0)
            <= len(instance)
            <= schema.get("maxLength", len(instance))
        ):
            problems.append(f"{instance!r} has a length out of bounds")
    elif isinstance(instance, (int, float)) and not isinstance(instance, bool):
        if instance < schema.get("minimum", instance) or instance > schema.get("maximum", instance):
            problems.append(f"{instance} outside [minimum, maximum]")
        if instance <= schema.get("exclusiveMinimum", instance - 1):
            problems.append(f"{instance} <= exclusiveMinimum")
        if instance >= schema.get("exclusiveMaximum", instance + 1):
            problems.append(f"{instance} >= exclusiveMaximum")
    return problems


RATING_REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "Rating": {
            "type": "object",
            "properties": {
                "aspect": {"type": "string", "enum": ["helpfulness", "honesty", "truthfulness"]},
                "score": {"type": "integer", "minimum": 1, "maximum": 5},
                "rationale": {"type": "string", "minLength": 30},
            },
            "required": ["aspect", "score", "rationale"],
            "additionalProperties": False,
        }
    },
    "properties": {
        "ratings": {
            "type": "array",
            "items": {"$ref": "#/$defs/Rating"},
            "minItems": 2,
            "maxItems": 4,
        },
        "overall": {"type": ["number", "null"], "minimum": 0, "exclusiveMaximum": 10},
        "flagged": {"type": "boolean"},
        "verdict": {"anyOf": [{"type": "string", "const": "accept"}, {"type": "null"}]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 0},
    },
    "required": ["ratings", "overall", "flagged", "verdict", "tags"],
    "additionalProperties": False,
}


# --- the filler, through schema_responder -------------------------------------------------


def test_schema_responder_output_validates_and_varies_with_the_request() -> None:
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "ratings", "schema": RATING_REPLY_SCHEMA, "strict": True},
    }
    with FakeLLMServer(schema_responder) as server, client_for(server) as client:
        documents = [
            json.loads(
                client.chat.completions.create(
                    model="judge",
                    messages=user_message(f"Rate answer {index}"),
                    response_format=response_format,
                )
                .choices[0]
                .message.content
                or ""
            )
            for index in range(25)
        ]
        repeated = client.chat.completions.create(
            model="judge", messages=user_message("Rate answer 0"), response_format=response_format
        )

    for document in documents:
        assert schema_violations(document, RATING_REPLY_SCHEMA, RATING_REPLY_SCHEMA) == []
    scores = {rating["score"] for document in documents for rating in document["ratings"]}
    aspects = {rating["aspect"] for document in documents for rating in document["ratings"]}
    assert len(scores) >= 4  # spread over 1..5, not stuck on one value
    assert aspects == {"helpfulness", "honesty", "truthfulness"}
    assert json.loads(repeated.choices[0].message.content or "") == documents[0]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 3},
        {"type": "number", "minimum": -1.5, "maximum": -1.25},
        {"type": ["integer", "null"], "minimum": 7, "maximum": 7},
        {"type": "null"},
        {"const": {"fixed": [1, 2]}},
        {"oneOf": [{"type": "boolean"}, {"type": "string", "minLength": 40}]},
        {"type": "string", "maxLength": 3},
        {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 5, "maxItems": 5},
        {
            "allOf": [
                {"$ref": "#/definitions/Named"},
                {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            ]
        },
    ],
)
def test_schema_responder_covers_each_keyword(schema: dict[str, Any]) -> None:
    named = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    root = {**schema, "definitions": {"Named": named}}
    body = {
        "messages": USER_QUESTION,
        "response_format": {"type": "json_object", "schema": root},
    }
    for call_index in range(5):
        context = RequestContext(call_index, 0, f"{call_index:032x}", "/v1/chat/completions")
        document = json.loads(schema_responder(body, context))
        assert schema_violations(document, root, root) == [], document


def test_schema_responder_without_schema_falls_back_to_echo() -> None:
    context = RequestContext(0, 0, "0" * 32, "/v1/chat/completions")
    plain = {"messages": USER_QUESTION}
    json_mode = {**plain, "response_format": {"type": "json_object"}}

    assert schema_responder(plain, context) == "Echo: What is the capital of France?"
    assert json.loads(schema_responder(json_mode, context)) == {
        "echo": "Echo: What is the capital of France?"
    }
