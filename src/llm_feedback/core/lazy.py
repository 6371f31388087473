"""A package's public names, each imported from its submodule when first used (PEP 562).

Packages whose submodules pull in scipy, statsmodels or matplotlib (`evaluation`,
`reporting`) or whose parsers do (`params`) export their names this way: importing one
light submodule, or the package for one name, then costs that name's imports only. Every
`kedro run` starts faster by the libraries its pipelines do not use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, module_of: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose name `n` lives in the submodule
    `module_of[n]` (relative to the package).

    Args:
        package: the package's name.
        module_of: exported name -> submodule.

    Returns:
        (`__getattr__`, `__dir__`).
    """
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value  # later lookups find it without this function
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *module_of})

    return __getattr__, __dir__
