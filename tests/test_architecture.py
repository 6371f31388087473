"""The package's import graph: no circles, and no import up the layers.

Every module of `llm_feedback` (found by walking its folder) is parsed with `ast`; every
import it holds counts, at module level, inside a function or under `TYPE_CHECKING` alike,
since a circle that only a lazy import keeps from failing is still a circle. Kedro glue sits
at the top: only `pipelines/` and the glue modules below may import Kedro, nothing else
imports them, and `pipelines/` imports none of the top-level glue.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

import llm_feedback

PACKAGE = "llm_feedback"
# The Kedro glue at the top of the package: project settings, the pipeline registry, the
# entry points, the project's hooks, and the config loader that settings.py names.
GLUE = frozenset(
    f"{PACKAGE}.{name}"
    for name in ("settings", "pipeline_registry", "__main__", "cli", "hooks", "config_loader")
)
PIPELINES = f"{PACKAGE}.pipelines"
KEDRO = ("kedro", "kedro_datasets", "kedro_viz")


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package whose folder is `root`, by dotted name (a package by its
    own name, for its `__init__.py`)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported_names(path: Path, module: str, is_package: bool) -> set[str]:
    """The absolute dotted names `module` imports anywhere in its file: a module, or a
    module followed by a name imported from it."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            names.add(source)
            names.update(f"{source}.{alias.name}" for alias in node.names)
    return names


def import_graph(root: Path, package: str) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> the package's modules it imports, module -> the other top-level packages
    it imports). `from pkg import name` counts as importing `pkg.name` when that is a
    module, else as importing `pkg`."""
    modules = module_files(root, package)
    internal: dict[str, set[str]] = {}
    external: dict[str, set[str]] = {}
    for module, path in modules.items():
        names = imported_names(path, module, path.name == "__init__.py")
        targets = set()
        for name in names:
            if name.split(".")[0] != package:
                continue
            target = name
            while target and target not in modules:  # an imported attribute: its module
                target = target.rpartition(".")[0]
            if target and target != module:
                targets.add(target)
        internal[module] = targets
        external[module] = {name.split(".")[0] for name in names} - {package, ""}
    return internal, external


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (scipy's csgraph)."""
    order = sorted(graph)
    index = {module: i for i, module in enumerate(order)}
    edges = [(index[a], index[b]) for a in order for b in graph[a]]
    rows, columns = (np.array(side, dtype=int) for side in zip(*edges, strict=True))
    matrix = csr_matrix((np.ones(len(edges)), (rows, columns)), shape=(len(order),) * 2)
    _, labels = connected_components(matrix, directed=True, connection="strong")
    components: dict[int, list[str]] = {}
    for module, label in zip(order, labels, strict=True):
        components.setdefault(int(label), []).append(module)
    return [members for members in components.values() if len(members) > 1]


def is_under(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def layer_violations(internal: dict[str, set[str]], external: dict[str, set[str]]) -> list[str]:
    """Imports that run up the layers: Kedro, `pipelines/` or the glue imported from below
    them, and the top-level glue imported from `pipelines/`."""
    found = []
    for module in sorted(internal):
        if module in GLUE:
            continue
        in_pipelines = is_under(module, PIPELINES)
        if not in_pipelines:
            found += [f"{module} imports {name}" for name in sorted(external[module] & set(KEDRO))]
        for target in sorted(internal[module]):
            if target in GLUE or (not in_pipelines and is_under(target, PIPELINES)):
                found.append(f"{module} imports {target}")
    return found


def project_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    return import_graph(Path(llm_feedback.__file__).parent, PACKAGE)


def test_the_package_has_no_import_circle():
    internal, _ = project_graph()
    circles = import_circles(internal)
    described = [
        ", ".join(f"{a} -> {b}" for a in members for b in sorted(internal[a]) if b in members)
        for members in circles
    ]
    assert not circles, "import circles:\n" + "\n".join(described)


def test_no_import_runs_up_the_layers():
    internal, external = project_graph()
    assert GLUE <= set(internal), f"glue modules gone: {sorted(GLUE - set(internal))}"
    violations = layer_violations(internal, external)
    assert not violations, "imports up the layers:\n" + "\n".join(violations)


def test_the_checks_find_a_circle_and_an_upward_import(tmp_path: Path):
    """The graph is built from what a file imports (a lazy import or a TYPE_CHECKING one
    included) and its circles and upward imports are found, on a made-up package."""
    root = tmp_path / PACKAGE
    files = {
        "__init__.py": "",
        "settings.py": "import kedro\n",
        "hooks.py": "",
        "pipelines/__init__.py": "",
        "pipelines/nodes.py": "from llm_feedback import hooks\n",
        "store/__init__.py": "",
        "store/a.py": "from . import b\n",
        "store/b.py": "def f():\n    from llm_feedback.store.c import thing\n",
        "store/c.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from llm_feedback.store.a import x\nthing = 1\n"
        ),
        "library.py": "import kedro.io\nfrom llm_feedback.pipelines import nodes\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    internal, external = import_graph(root, PACKAGE)
    assert [sorted(members) for members in import_circles(internal)] == [
        [f"{PACKAGE}.store.a", f"{PACKAGE}.store.b", f"{PACKAGE}.store.c"]
    ]
    assert layer_violations(internal, external) == [
        f"{PACKAGE}.library imports kedro",
        f"{PACKAGE}.library imports {PACKAGE}.pipelines",
        f"{PACKAGE}.library imports {PACKAGE}.pipelines.nodes",
        f"{PACKAGE}.pipelines.nodes imports {PACKAGE}.hooks",
    ]


def test_only_the_kedro_glue_sits_at_the_top_of_the_package():
    """Every other module lives in a folder named for its concern."""
    root = Path(llm_feedback.__file__).parent
    top_level = {f"{PACKAGE}.{path.stem}" for path in root.glob("*.py")} - {f"{PACKAGE}.__init__"}
    assert top_level <= GLUE, f"loose modules at the top: {sorted(top_level - GLUE)}"


def test_no_module_below_a_package_init_only_passes_names_on():
    """Re-exports belong in a package's `__init__.py`: a module importing names only to hand
    them on (`noqa: F401`) is a module cut in two."""
    root = Path(llm_feedback.__file__).parent
    passing_on = [
        str(path.relative_to(root))
        for path in sorted(root.rglob("*.py"))
        if path.name != "__init__.py"
        and any(
            "noqa: F401" in line and "re-export" in line
            for line in path.read_text(encoding="utf-8").splitlines()
        )
    ]
    assert not passing_on, f"modules re-exporting names: {passing_on}"
