"""Reading one parameter block: unknown keys rejected, each value type-checked, each error
naming the parameter by its dotted path, and every default taken from the one dataclass
that declares it."""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

from llm_feedback.core.errors import ConfigError

_MISSING = object()


def defaults_of(cls: type) -> dict[str, Any]:
    """The declared default of each field of a dataclass that has one."""
    found = {}
    for item in dataclasses.fields(cls):
        if item.default is not dataclasses.MISSING:
            found[item.name] = item.default
        elif item.default_factory is not dataclasses.MISSING:
            found[item.name] = item.default_factory()
    return found


class Block:
    """One mapping of parameters, e.g. `params:annotate`, read key by key."""

    def __init__(
        self, values: Any, path: str, allowed: Iterable[str], defaults: Mapping[str, Any]
    ) -> None:
        """Check the block's keys; ConfigError naming an unknown one.

        Args:
            values: the block as written (None: empty).
            path: its dotted name, for messages.
            allowed: the keys it may have.
            defaults: the default of each key that has one.
        """
        if values is None:
            values = {}
        if not isinstance(values, Mapping):
            raise ConfigError(f"{path} must be a mapping, got {values!r}")
        allowed = tuple(allowed)
        unknown = sorted(set(values) - set(allowed))
        if unknown:
            raise ConfigError(
                f"{self._name(path, unknown[0])}: unknown setting; allowed under {path}: "
                f"{', '.join(allowed)}"
            )
        self.values = values
        self.path = path
        self.defaults = defaults

    @staticmethod
    def _name(path: str, key: str) -> str:
        return f"{path}.{key}" if path else key

    def name(self, key: str) -> str:
        """The dotted name of a setting, for messages.

        Args:
            key: the setting's key in this block.

        Returns:
            The name.
        """
        return self._name(self.path, key)

    def raw(self, key: str) -> Any:
        """A setting as written, else its default; ConfigError when required and absent.

        Args:
            key: the setting's key in this block.

        Returns:
            The value.
        """
        value = self.values.get(key, _MISSING)
        if value is _MISSING:
            if key not in self.defaults:
                raise ConfigError(f"{self.name(key)} is required")
            return self.defaults[key]
        return value

    def integer(self, key: str, minimum: int | None = None, nullable: bool = False) -> int | None:
        """An integer setting; ConfigError naming it when it is not one.

        Args:
            key: the setting's key in this block.
            minimum: the least value allowed (None: no bound).
            nullable: whether null is accepted (and returned as None).

        Returns:
            The integer, or None.
        """
        value = self.raw(key)
        if value is None and nullable:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Integral)
            or (minimum is not None and value < minimum)
        ):
            bound = "" if minimum is None else f" >= {minimum}"
            allowed = " or null" if nullable else ""
            raise ConfigError(f"{self.name(key)} must be an integer{bound}{allowed}, got {value!r}")
        return int(value)

    def number(
        self,
        key: str,
        minimum: float | None = None,
        maximum: float | None = None,
        nullable: bool = False,
    ) -> float | None:
        """A number setting; ConfigError naming it when it is not one in bounds.

        Args:
            key: the setting's key in this block.
            minimum: the least value allowed (None: no bound).
            maximum: the greatest value allowed (None: no bound).
            nullable: whether null is accepted (and returned as None).

        Returns:
            The number as a float, or None.
        """
        value = self.raw(key)
        if value is None and nullable:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or (minimum is not None and value < minimum)
            or (maximum is not None and value > maximum)
        ):
            limits = [f">= {minimum}"] if minimum is not None else []
            limits += [f"<= {maximum}"] if maximum is not None else []
            wanted = " ".join(["a number", " and ".join(limits)]).strip()
            wanted += " or null" if nullable else ""
            raise ConfigError(f"{self.name(key)} must be {wanted}, got {value!r}")
        return float(value)

    def boolean(self, key: str) -> bool:
        """A true/false setting; ConfigError naming it otherwise.

        Args:
            key: the setting's key in this block.

        Returns:
            The boolean.
        """
        value = self.raw(key)
        if not isinstance(value, bool):
            raise ConfigError(f"{self.name(key)} must be true or false, got {value!r}")
        return value

    def choice(self, key: str, choices: Iterable[str]) -> str:
        """A setting that must be one of `choices`; ConfigError naming them otherwise.

        Args:
            key: the setting's key in this block.
            choices: the values allowed.

        Returns:
            The value.
        """
        value = self.raw(key)
        choices = tuple(choices)
        if value not in choices:
            raise ConfigError(
                f"{self.name(key)} must be one of {', '.join(choices)}, got {value!r}"
            )
        return value

    def text(self, key: str, nullable: bool = False) -> str | None:
        """A string setting; ConfigError naming it otherwise.

        Args:
            key: the setting's key in this block.
            nullable: whether null is accepted (and returned as None).

        Returns:
            The string, or None.
        """
        value = self.raw(key)
        if value is None and nullable:
            return None
        if not isinstance(value, str):
            raise ConfigError(f"{self.name(key)} must be a string, got {value!r}")
        return value

    def mapping(self, key: str, nullable: bool = False) -> Mapping[str, Any] | None:
        """A mapping setting; ConfigError naming it otherwise.

        Args:
            key: the setting's key in this block.
            nullable: whether null is accepted (and returned as None).

        Returns:
            The mapping, or None.
        """
        value = self.raw(key)
        if value is None and nullable:
            return None
        if not isinstance(value, Mapping):
            raise ConfigError(f"{self.name(key)} must be a mapping, got {value!r}")
        return value

    def block(self, key: str, allowed: Iterable[str], defaults: Mapping[str, Any]) -> Block:
        """A nested block, read like this one.

        Args:
            key: the setting's key in this block.
            allowed: the keys it may have.
            defaults: the default of each key that has one.

        Returns:
            The nested block.
        """
        return Block(self.values.get(key), self.name(key), allowed, defaults)
