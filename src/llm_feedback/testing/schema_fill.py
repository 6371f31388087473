"""A generator of JSON values that validate against a JSON Schema, for `schema_responder`."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any


class SchemaFiller:
    """Builds one JSON value that validates against a JSON Schema (the subset LLM APIs use).

    Branches (anyOf/oneOf, type lists) prefer non-null alternatives so the document
    carries usable values; past `_MAX_DEPTH` it takes the shortest way out of recursive
    schemas (null where allowed, minimal arrays). `pattern`, `multipleOf` and
    `uniqueItems` are not honoured.
    """

    _MAX_DEPTH = 12
    _WORDS = ("alpha", "bravo", "delta", "kilo", "lima", "oscar", "sierra", "tango")

    def __init__(self, root: dict[str, Any], rng: random.Random) -> None:
        """Keep the root schema (for `$ref`s) and the random source.

        Args:
            root: the whole schema.
            rng: the seeded random source.
        """
        self._root = root
        self._rng = rng

    def make(self, schema: dict[str, Any], depth: int = 0) -> Any:
        """One value that validates against `schema`.

        Args:
            schema: a (sub)schema.
            depth: how deep in the document it is.

        Returns:
            The value.
        """
        schema = self._resolve(schema)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return self._rng.choice(schema["enum"])
        for combinator in ("anyOf", "oneOf"):
            if combinator in schema:
                branch = self._pick(schema[combinator], _is_null_schema, depth)
                merged = {k: v for k, v in schema.items() if k != combinator}
                return self.make({**merged, **self._resolve(branch)}, depth + 1)
        if "allOf" in schema:
            return self.make(self._merge_all_of(schema), depth + 1)
        schema_type = schema.get("type", self._implied_type(schema))
        if isinstance(schema_type, list):
            schema_type = self._pick(schema_type, lambda name: name == "null", depth)
        maker = getattr(self, f"_make_{schema_type}", None)
        if maker is None:
            raise ValueError(f"unsupported JSON Schema type {schema_type!r}")
        return maker(schema, depth)

    def _pick(self, options: list[Any], is_null: Callable[[Any], bool], depth: int) -> Any:
        nulls = [option for option in options if is_null(option)]
        non_nulls = [option for option in options if not is_null(option)]
        if nulls and (depth >= self._MAX_DEPTH or not non_nulls):
            return nulls[0]
        return self._rng.choice(non_nulls)

    def _resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        """Follows local ``$ref``s (``#/$defs/Name``), keeping sibling keywords."""
        while "$ref" in schema:
            reference = schema["$ref"]
            if not reference.startswith("#"):
                raise ValueError(f"only local $ref is supported, got {reference!r}")
            target: Any = self._root
            for part in filter(None, reference[1:].split("/")):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **siblings}
        return schema

    def _merge_all_of(self, schema: dict[str, Any]) -> dict[str, Any]:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for unresolved_part in schema["allOf"]:
            part = self._resolve(unresolved_part)
            properties = {**merged.get("properties", {}), **part.get("properties", {})}
            required = [*merged.get("required", []), *part.get("required", [])]
            merged = {**merged, **part, "properties": properties, "required": required}
        return merged

    @staticmethod
    def _implied_type(schema: dict[str, Any]) -> str:
        if "properties" in schema or "additionalProperties" in schema:
            return "object"
        if "items" in schema or "prefixItems" in schema:
            return "array"
        return "string"

    def _make_object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        # Optional properties are filled too, except where recursion must end.
        return {
            name: self.make(subschema, depth + 1)
            for name, subschema in properties.items()
            if name in required or depth < self._MAX_DEPTH
        }

    def _make_array(self, schema: dict[str, Any], depth: int) -> list[Any]:
        prefix = [self.make(item, depth + 1) for item in schema.get("prefixItems", [])]
        min_items = max(schema.get("minItems", 0), len(prefix))
        max_items = schema.get("maxItems", min_items + 3)
        if depth >= self._MAX_DEPTH or schema.get("items") is False:
            length = min_items
        else:
            length = self._rng.randint(min(max(min_items, 1), max_items), max_items)
        item_schema = schema.get("items", {})
        return prefix + [self.make(item_schema, depth + 1) for _ in range(length - len(prefix))]

    def _make_string(self, schema: dict[str, Any], depth: int) -> str:
        formatted = self._formatted_string(schema.get("format"))
        if formatted is not None:
            return formatted
        text = f"{self._rng.choice(self._WORDS)}-{self._rng.randrange(16**6):06x}"
        min_length = schema.get("minLength", 0)
        if len(text) < min_length:
            text += "x" * (min_length - len(text))
        return text[: schema.get("maxLength", len(text))]

    def _formatted_string(self, string_format: str | None) -> str | None:
        day = f"2024-{self._rng.randint(1, 12):02d}-{self._rng.randint(1, 28):02d}"
        clock = f"{self._rng.randint(0, 23):02d}:{self._rng.randint(0, 59):02d}:00"
        token = f"{self._rng.getrandbits(128):032x}"
        return {
            "date": day,
            "time": clock,
            "date-time": f"{day}T{clock}Z",
            "email": f"user{token[:6]}@example.com",
            "uri": f"https://example.com/{token[:8]}",
            "uuid": f"{token[:8]}-{token[8:12]}-4{token[13:16]}-a{token[17:20]}-{token[20:]}",
        }.get(string_format or "")

    @staticmethod
    def _integer_bounds(schema: dict[str, Any]) -> tuple[int, int]:
        low: int | None = None
        high: int | None = None
        if "minimum" in schema:
            low = math.ceil(schema["minimum"])
        if "exclusiveMinimum" in schema:
            low = math.floor(schema["exclusiveMinimum"]) + 1
        if "maximum" in schema:
            high = math.floor(schema["maximum"])
        if "exclusiveMaximum" in schema:
            high = math.ceil(schema["exclusiveMaximum"]) - 1
        if low is None:
            low = 0 if high is None else high - 100
        return low, low + 100 if high is None else high

    def _make_integer(self, schema: dict[str, Any], depth: int) -> int:
        low, high = self._integer_bounds(schema)
        return self._rng.randint(low, high)

    def _make_number(self, schema: dict[str, Any], depth: int) -> float:
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        low = float(low) if low is not None else (float(high) - 100 if high is not None else 0.0)
        high = float(high) if high is not None else low + 100
        value = round(low + (high - low) * self._rng.random(), 3)
        # Rounding can land on or past an exclusive bound; the midpoint never does.
        if not low <= value <= high or value in (
            schema.get("exclusiveMinimum"),
            schema.get("exclusiveMaximum"),
        ):
            value = (low + high) / 2
        return value

    def _make_boolean(self, schema: dict[str, Any], depth: int) -> bool:
        return self._rng.random() < 0.5

    def _make_null(self, schema: dict[str, Any], depth: int) -> None:
        return None


def _is_null_schema(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null"
