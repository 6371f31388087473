"""Named endpoints and the model pool, as written in `conf/base/parameters.yml`.

`endpoints` says where models live; `model_pool` gives each completion model a name, the
endpoint that serves it and its own sampling settings. Everything is checked here, before
any server starts or any paid call is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llm_feedback.backends.config import EndpointConfig, endpoint_from_env
from llm_feedback.backends.contract import check_sampling
from llm_feedback.errors import ConfigError

# The endpoint reference that means "from the seed environment variables".
FROM_ENVIRONMENT = "env"


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
        endpoint_name = definition["endpoint"]
        if endpoint_name not in endpoints:
            raise ConfigError(
                f"model_pool.{name}.endpoint: '{endpoint_name}' is not defined in "
                f"'endpoints' ({', '.join(sorted(endpoints))})"
            )
        own = {key: value for key, value in definition.items() if key != "endpoint"}
        sampling = {**dict(defaults), **check_sampling(own, f"model_pool.{name}")}
        specs[name] = ModelSpec(name=name, endpoint=endpoints[endpoint_name], sampling=sampling)
    return specs


def resolve_endpoint(
    reference: str | Mapping[str, Any] | EndpointConfig | None,
    endpoints: Mapping[str, Any] | None,
    where: str = "judge endpoint",
) -> EndpointConfig:
    """The one way an endpoint is named anywhere: the name of an endpoint defined under
    `endpoints`, "env" (the seed environment variables, unless an endpoint is called so),
    an inline definition, or None (the environment too)."""
    if isinstance(reference, EndpointConfig):
        return reference
    if reference is None:
        return endpoint_from_env()
    if isinstance(reference, Mapping):
        return EndpointConfig.from_dict(reference, name=str(reference.get("name", "inline")))
    if not isinstance(reference, str):
        raise ConfigError(f"{where}: an endpoint name or definition, got {reference!r}")
    if reference == FROM_ENVIRONMENT and FROM_ENVIRONMENT not in (endpoints or {}):
        return endpoint_from_env()
    defined = parse_endpoints(endpoints)
    if reference not in defined:
        raise ConfigError(
            f"{where}: '{reference}' is not defined in 'endpoints' ({', '.join(sorted(defined))})"
        )
    return defined[reference]
