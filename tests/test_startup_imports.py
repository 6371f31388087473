"""`kedro run --pipelines annotate` imports only what annotate uses.

Start-up is part of every run's wall time (issue 26: the whole process against the bound):
the project's settings, hooks and CLI, the annotate pipeline and the datasets of its catalog
entries must not pull in the libraries of other pipelines (scipy, statsmodels,
scikit-learn, matplotlib for evaluate and report; `datasets` for the Hub push; the openai
SDK, which only `transport: sdk` uses). Checked in a fresh interpreter, whose modules are
those imports alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import PROJECT_ROOT

HEAVY = ("scipy", "statsmodels", "sklearn", "matplotlib", "datasets", "openai")
ANNOTATE_RUN_MODULES = (
    "llm_feedback.settings",
    "llm_feedback.cli",
    "llm_feedback.pipelines.annotate.pipeline",
    "llm_feedback.pipelines.datasets",
)


def imported_after(modules: tuple[str, ...]) -> set[str]:
    """The top-level packages a fresh interpreter holds after importing `modules`."""
    program = (
        "import importlib, json, sys\n"
        f"for name in {list(modules)!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "PYTHONPATH": str(PROJECT_ROOT / "src")}
    finished = subprocess.run(
        [sys.executable, "-c", program],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(finished.stdout.strip().splitlines()[-1]))


def test_an_annotate_run_imports_no_library_of_the_other_pipelines():
    loaded = imported_after(ANNOTATE_RUN_MODULES)
    assert {"kedro", "pandas", "pyarrow", "aiohttp"} <= loaded  # what annotate does need
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_the_lazy_packages_still_give_every_name():
    """`from llm_feedback.params import ...` (and evaluation's, reporting's) still works, and
    the first use imports the module behind the name."""
    loaded = imported_after(("llm_feedback.params",))
    assert not loaded & set(HEAVY)
    from llm_feedback import evaluation, params, reporting

    for package in (params, evaluation, reporting):
        for name in package.__all__:
            assert getattr(package, name) is not None, f"{package.__name__}.{name}"
        assert set(package.__all__) <= set(dir(package))
