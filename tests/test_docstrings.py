"""Google-style docstrings on the public API: every public function, method and class
constructor of `llm_feedback` that takes arguments says what each one is in an `Args:`
section, and what it gives back in `Returns:` (or `Yields:`) when it returns a value.

Public: a name without a leading underscore, defined in its module (a method of a public
class counts; `__init__` is documented on the method or the class). Left out, each with
Kedro as its only caller: properties and overloads (no arguments of their own); the node
functions of `pipelines/*/*nodes.py`, whose arguments are the datasets and `params:`
blocks that their `pipeline.py` wires (documented in the catalog and the parameter
files); each `pipeline.py`'s `create_pipeline` (the registry's convention); Kedro hook
implementations (`@hook_impl`), whose arguments Kedro's hook specifications name and
document; and click commands (`@cli.command`), whose arguments are options carrying their
own `help=` (a docstring there is the command's --help text).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import llm_feedback

PACKAGE = Path(llm_feedback.__file__).parent
NODE_MODULES = re.compile(r"pipelines/[a-z_]+/[a-z_]*nodes\.py")
PIPELINE_MODULES = re.compile(r"pipelines/[a-z_]+/pipeline\.py")
SKIPPED_DECORATORS = {
    "property",
    "overload",
    "setter",
    "cached_property",
    "hook_impl",
    "command",
}


def _arguments(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    spec = function.args
    names = [item.arg for item in (*spec.posonlyargs, *spec.args, *spec.kwonlyargs)]
    names += [item.arg for item in (spec.vararg, spec.kwarg) if item is not None]
    return [name for name in names if name not in ("self", "cls")]


def _returns_value(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    if function.returns is not None:
        return not (isinstance(function.returns, ast.Constant) and function.returns.value is None)
    return any(
        isinstance(node, ast.Return) and node.value is not None for node in ast.walk(function)
    )


def _decorators(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    # `@hook_impl(trylast=True)` is a call of the decorator: its name is the call's.
    nodes = [node.func if isinstance(node, ast.Call) else node for node in function.decorator_list]
    return {
        node.id if isinstance(node, ast.Name) else node.attr
        for node in nodes
        if isinstance(node, ast.Name | ast.Attribute)
    }


def public_callables(
    root: Path = PACKAGE,
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    """(`path:qualified name`, the function, its docstring) for every public function and
    method of the package that takes arguments (the rule's scope, above)."""
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if NODE_MODULES.fullmatch(relative):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found = [(node.name, node, ast.get_docstring(node) or "")]
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                class_doc = ast.get_docstring(node) or ""
                found = [
                    (
                        f"{node.name}.{item.name}",
                        item,
                        (ast.get_docstring(item) or "")
                        + ("\n" + class_doc if item.name == "__init__" else ""),
                    )
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                ]
            else:
                continue
            for name, function, doc in found:
                last = name.rsplit(".", 1)[-1]
                if last.startswith("_") and last != "__init__" or name.startswith("_"):
                    continue
                if _decorators(function) & SKIPPED_DECORATORS or not _arguments(function):
                    continue
                if name == "create_pipeline" and PIPELINE_MODULES.fullmatch(relative):
                    continue
                yield f"{relative}:{name}", function, doc


def missing_sections(function: ast.FunctionDef | ast.AsyncFunctionDef, doc: str) -> list[str]:
    """What the docstring lacks: `Args:`, an argument named in it, or `Returns:`."""
    if "Args:" not in doc:
        return ["Args:"]
    args = doc.split("Args:", 1)[1]
    lacking = [
        name
        for name in _arguments(function)
        if not re.search(rf"^\s+\*{{0,2}}{name}( \([^)]*\))?:", args, re.MULTILINE)
    ]
    returns = function.name != "__init__" and _returns_value(function)
    if returns and "Returns:" not in doc and "Yields:" not in doc:
        lacking.append("Returns:")
    return lacking


def undocumented() -> dict[str, list[str]]:
    """Every public callable whose docstring lacks a section, with what it lacks."""
    return {
        name: lacking
        for name, function, doc in public_callables()
        if (lacking := missing_sections(function, doc))
    }


def test_every_public_callable_has_args_and_returns() -> None:
    missing = undocumented()
    assert not missing, "docstrings without their Google-style sections:\n" + "\n".join(
        f"{name}: lacks {', '.join(lacking)}" for name, lacking in sorted(missing.items())
    )


def test_the_checker_reads_google_sections() -> None:
    source = '''
def good(x, *, y=1):
    """Sum.

    Args:
        x: the first.
        y (int): the second.

    Returns:
        The sum.
    """
    return x + y


def unnamed(x, y):
    """Sum.

    Args:
        x: the first.

    Returns:
        The sum.
    """
    return x + y


def silent(x):
    """Nothing said of x."""
    return x
'''
    functions = {node.name: node for node in ast.parse(source).body}
    lacking = {
        name: missing_sections(node, ast.get_docstring(node) or "")
        for name, node in functions.items()
    }
    assert lacking == {"good": [], "unnamed": ["y"], "silent": ["Args:"]}
