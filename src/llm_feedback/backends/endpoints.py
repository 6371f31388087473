"""Named endpoints and the model pool, as written in `conf/base/parameters.yml`.

`endpoints` says where models live; `model_pool` gives each completion model a name, the
endpoint that serves it and its own sampling settings. Everything is checked here, before
any server starts or any paid call is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llm_feedback.backends.base import EndpointConfig, endpoint_from_env
from llm_feedback.backends.contract import check_sampling
from llm_feedback.core.errors import ConfigError

# The endpoint reference that means "from the seed environment variables".
FROM_ENVIRONMENT = "env"


def parse_endpoints(definitions: Mapping[str, Any]) -> dict[str, EndpointConfig]:
    """The endpoints of the `endpoints` parameter block, each checked.

    Args:
        definitions: Endpoint name -> its definition.

    Returns:
        Endpoint name -> its `EndpointConfig`.

    Raises:
        ConfigError: The block is empty or not a mapping, or a definition is invalid.
    """
    if not isinstance(definitions, Mapping) or not definitions:
        raise ConfigError("parameter 'endpoints' must map endpoint names to definitions")
    return {
        name: EndpointConfig.from_dict(definition, name=name)
        for name, definition in definitions.items()
    }


# How a model gets its principle's system prompt: as a system message (keep), folded into
# the user message before the instruction (fold: a chat template without a system role),
# or not at all (drop: UltraFeedback gave such a model no principle prompt).
SYSTEM_PROMPT_HANDLING = ("keep", "fold", "drop")


@dataclass(frozen=True)
class ResponseCleanup:
    """UltraFeedback's clean-up of a raw completion: cut at the first run of
    `cut_at_newlines` newlines (its generations ran on past the answer), then remove every
    `strip` string (end-of-sequence tokens such as `</s>`) and surrounding whitespace."""

    cut_at_newlines: int | None = None
    strip: tuple[str, ...] = ()

    def apply(self, text: str | None) -> str | None:
        """The completion cleaned up as configured.

        Args:
            text: The raw completion; None for a failed call.

        Returns:
            The cleaned text (None stays None; the text unchanged when nothing is configured).
        """
        if text is None or (self.cut_at_newlines is None and not self.strip):
            return text
        if self.cut_at_newlines is not None:
            text = text.split("\n" * self.cut_at_newlines, 1)[0]
        for token in self.strip:
            text = text.replace(token, "")
        return text.strip()


@dataclass(frozen=True)
class ModelSpec:
    """One completion model of the pool: an endpoint plus its sampling settings."""

    name: str
    endpoint: EndpointConfig
    sampling: dict[str, Any]
    system_prompt: str = "keep"  # one of SYSTEM_PROMPT_HANDLING
    cleanup: ResponseCleanup = ResponseCleanup()


def _cleanup(value: Any, where: str) -> ResponseCleanup:
    if value is None:
        return ResponseCleanup()
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a mapping {{cut_at_newlines: N, strip: [...]}}")
    for key in value:
        if key not in ("cut_at_newlines", "strip"):
            raise ConfigError(f"{where}.{key}: unknown setting; allowed: cut_at_newlines, strip")
    cut = value.get("cut_at_newlines")
    if cut is not None and (isinstance(cut, bool) or not isinstance(cut, int) or cut < 1):
        raise ConfigError(f"{where}.cut_at_newlines must be an integer >= 1 or null, got {cut!r}")
    strip = value.get("strip", [])
    if not isinstance(strip, list) or not all(isinstance(s, str) and s for s in strip):
        raise ConfigError(f"{where}.strip must be a list of non-empty strings, got {strip!r}")
    return ResponseCleanup(cut_at_newlines=cut, strip=tuple(strip))


def parse_model_pool(
    pool: Mapping[str, Any],
    endpoints: Mapping[str, EndpointConfig],
    defaults: Mapping[str, Any],
) -> dict[str, ModelSpec]:
    """The completion models of the `model_pool` parameter block, each checked.

    Args:
        pool: Model name -> its definition (an `endpoint`, optionally `system_prompt`,
            `response_cleanup` and sampling settings).
        endpoints: The defined endpoints, by name.
        defaults: Sampling settings a model's own settings override.

    Returns:
        Model name -> its `ModelSpec`.

    Raises:
        ConfigError: The block is empty or not a mapping, or a model names no or an undefined
            endpoint, or has an invalid setting.
    """
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
        handling = definition.get("system_prompt", "keep")
        if handling not in SYSTEM_PROMPT_HANDLING:
            raise ConfigError(
                f"model_pool.{name}.system_prompt must be one of "
                f"{', '.join(SYSTEM_PROMPT_HANDLING)}, got {handling!r}"
            )
        cleanup = _cleanup(
            definition.get("response_cleanup"), f"model_pool.{name}.response_cleanup"
        )
        handled = ("endpoint", "system_prompt", "response_cleanup")
        own = {key: value for key, value in definition.items() if key not in handled}
        sampling = {**dict(defaults), **check_sampling(own, f"model_pool.{name}")}
        specs[name] = ModelSpec(
            name=name,
            endpoint=endpoints[endpoint_name],
            sampling=sampling,
            system_prompt=handling,
            cleanup=cleanup,
        )
    return specs


def resolve_endpoint(
    reference: str | Mapping[str, Any] | EndpointConfig | None,
    endpoints: Mapping[str, Any] | None,
    where: str = "judge endpoint",
) -> EndpointConfig:
    """The one way an endpoint is named anywhere: the name of an endpoint defined under
    `endpoints`, "env" (the seed environment variables, unless an endpoint is called so),
    an inline definition, or None (the environment too).

    Args:
        reference: The endpoint's name, an inline definition, a ready `EndpointConfig`, or
            None.
        endpoints: The `endpoints` parameter block.
        where: Where the reference stands in the configuration, for error messages.

    Returns:
        The endpoint.

    Raises:
        ConfigError: The reference is of the wrong type, names an undefined endpoint, or
            leads to an invalid definition.
    """
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
