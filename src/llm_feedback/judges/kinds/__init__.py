"""The registry of judge kinds: one module per kind, each defining its `KIND`.

Built in: `binary`, `score_0_5`, `single_1_10`, `rubric`, `pairwise` (the names
`evaluate.mode` takes): every module of this package that defines a `KIND` is registered
when the package is imported, so a new built-in kind is its module plus its template.

A kind of your own is one module of yours that defines a `JudgeKind` (its template,
request, reader and columns; see `spec.py` and the built-in modules), or, for a rating
against the reference on a scale of its own, one line of the factory
`reference_scale.reference_scale_kind`: register it with `register_kind(KIND)`, or name it
in `evaluate.mode` as `package.module:KIND`, which imports and registers it (`load_kind`)
so that the pipeline judges, tabulates and scores it like a built-in one.
"""

from __future__ import annotations

import importlib
import pkgutil

from llm_feedback.core.errors import ConfigError
from llm_feedback.judges.kinds.spec import (
    PAIRWISE,
    POINTWISE,
    Asking,
    JudgeItem,
    JudgeKind,
    KindOptions,
)

__all__ = [
    "PAIRWISE",
    "POINTWISE",
    "Asking",
    "JudgeItem",
    "JudgeKind",
    "KindOptions",
    "get_kind",
    "kind_names",
    "load_kind",
    "register_kind",
    "unregister_kind",
]

_KINDS: dict[str, JudgeKind] = {}


def register_kind(kind: JudgeKind) -> JudgeKind:
    """Add `kind` under its name; registering the same kind again changes nothing.

    Args:
        kind: the kind.

    Returns:
        The kind, as registered.
    """
    if not isinstance(kind, JudgeKind):
        raise ConfigError(f"a judge kind must be a JudgeKind, got {type(kind).__name__}")
    known = _KINDS.get(kind.name)
    if known is not None and known is not kind:
        raise ConfigError(f"a judge kind named {kind.name!r} is registered already")
    _KINDS[kind.name] = kind
    return kind


def unregister_kind(name: str) -> None:
    """Remove the kind registered as `name` (a test's own kind, afterwards); no-op if none.

    Args:
        name: the kind's name.
    """
    _KINDS.pop(name, None)


def kind_names() -> tuple[str, ...]:
    return tuple(_KINDS)


def get_kind(name: str, where: str = "mode") -> JudgeKind:
    """The registered kind `name`; ConfigError naming `where` and the known kinds else.

    Args:
        name: the kind's name.
        where: the parameter that named it, for the message.

    Returns:
        The kind.
    """
    try:
        return _KINDS[name]
    except (KeyError, TypeError):
        raise ConfigError(
            f"{where} must be one of {list(_KINDS)} or 'package.module:KIND', got {name!r}"
        ) from None


def load_kind(spec: str, where: str = "mode") -> JudgeKind:
    """The kind `spec` names: a registered name, or `package.module:ATTRIBUTE` (a
    `JudgeKind` in an importable module, registered on the way).

    Args:
        spec: a registered name, or `package.module:ATTRIBUTE`.
        where: the parameter that named it, for the message.

    Returns:
        The kind.
    """
    if not isinstance(spec, str) or ":" not in spec:
        return get_kind(spec, where)
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(f"{where}: cannot import module {module_name!r}: {error}") from error
    kind = getattr(module, attribute, None)
    if not isinstance(kind, JudgeKind):
        raise ConfigError(f"{where}: {spec!r} is not a JudgeKind (got {type(kind).__name__})")
    return register_kind(kind)


def _register_built_in_kinds() -> None:
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        kind = getattr(module, "KIND", None)
        if isinstance(kind, JudgeKind):
            register_kind(kind)


_register_built_in_kinds()
