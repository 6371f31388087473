"""Named endpoints and the model pool, as written in `conf/base/parameters.yml`.

`endpoints` says where models live; `model_pool` gives each completion model a name, the
endpoint that serves it and its own sampling settings. Everything is checked here, before
any server starts or any paid call is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llm_feedback.backends.config import EndpointConfig
from llm_feedback.errors import ConfigError

SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "stop", "seed")


def parse_endpoints(definitions: Mapping[str, Any]) -> dict[str, EndpointConfig]:
    if not isinstance(definitions, Mapping) or not definitions:
        raise ConfigError("parameter 'endpoints' must map endpoint names to definitions")
    return {
        name: EndpointConfig.from_dict(definition, name=name)
        for name, definition in definitions.items()
    }


@dataclass(frozen=True)
class ModelSpec:
    """One completion model of the pool: an endpoint plus its sampling settings."""

    name: str
    endpoint: EndpointConfig
    sampling: dict[str, Any]


def parse_model_pool(
    pool: Mapping[str, Any],
    endpoints: Mapping[str, EndpointConfig],
    defaults: Mapping[str, Any],
) -> dict[str, ModelSpec]:
    if not isinstance(pool, Mapping) or not pool:
        raise ConfigError("parameter 'model_pool' must map model names to definitions")
    specs = {}
    for name, definition in pool.items():
        if not isinstance(definition, Mapping) or "endpoint" not in definition:
            raise ConfigError(f"model_pool.{name}: needs an 'endpoint'")
        unknown = sorted(set(definition) - {"endpoint", *SAMPLING_KEYS})
        if unknown:
            raise ConfigError(
                f"model_pool.{name}: unknown setting(s) {', '.join(unknown)}; "
                f"allowed: endpoint, {', '.join(SAMPLING_KEYS)}"
            )
        endpoint_name = definition["endpoint"]
        if endpoint_name not in endpoints:
            raise ConfigError(
                f"model_pool.{name}: endpoint '{endpoint_name}' is not defined in "
                f"'endpoints' ({', '.join(sorted(endpoints))})"
            )
        sampling = {key: defaults[key] for key in SAMPLING_KEYS if key in defaults}
        sampling.update({key: definition[key] for key in SAMPLING_KEYS if key in definition})
        specs[name] = ModelSpec(name=name, endpoint=endpoints[endpoint_name], sampling=sampling)
    return specs


def resolve_endpoint(
    reference: str | Mapping[str, Any], endpoints: Mapping[str, Any]
) -> EndpointConfig:
    """A judge's endpoint: the name of a defined endpoint, or an inline definition."""
    if isinstance(reference, str):
        parsed = parse_endpoints(endpoints)
        if reference not in parsed:
            raise ConfigError(
                f"judge endpoint '{reference}' is not defined in 'endpoints' "
                f"({', '.join(sorted(parsed))})"
            )
        return parsed[reference]
    return EndpointConfig.from_dict(reference, name="inline")
