"""docs/extending.md against the code: every test it cites exists, and every list of
names it gives (a backend's members, an aspect's fields, a judge kind's fields, the
factory's options) is the code's own list; and its pipeline steps hold for every
pipeline of the project."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import pkgutil
import re
from pathlib import Path

import yaml
from kedro.framework.startup import bootstrap_project

from llm_feedback import pipelines as pipelines_package
from llm_feedback.annotation import AspectSpec
from llm_feedback.backends.base import (
    Backend,
    BackendTraits,
    BatchBackend,
    RequestBackend,
    StreamingBatchBackend,
)
from llm_feedback.judges import JudgeKind, reference_scale_kind
from tests.conftest import PROJECT_ROOT

DOC = PROJECT_ROOT / "docs" / "extending.md"
TEXT = DOC.read_text(encoding="utf-8")


def section(title: str) -> str:
    """The text under the `## title` heading, up to the next `## ` heading."""
    return TEXT.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def names(text: str) -> set[str]:
    """The identifiers written in backticks: `send(sdk, request)` and `async close()`
    give `send` and `close`."""
    found = set()
    for code in re.findall(r"`([^`]+)`", text):
        match = re.match(r"(?:async\s+)?([A-Za-z_][A-Za-z0-9_]*)", code)
        if match:
            found.add(match.group(1))
    return found


def protocol_members(protocol: type, *bases: type) -> set[str]:
    """What `protocol` adds to `bases`: its annotated attributes and its methods."""
    members = set(getattr(protocol, "__annotations__", {}))
    members |= {
        name
        for name, value in vars(protocol).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }
    for base in bases:
        members -= protocol_members(base)
    return members


def test_every_test_the_page_cites_exists():
    cited = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", TEXT)
    assert len(cited) >= 10
    for path, function in cited:
        source = PROJECT_ROOT / path
        assert source.is_file(), path
        if function:
            tree = ast.parse(source.read_text(encoding="utf-8"))
            defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
            assert function in defined, f"{path}::{function}"


def test_the_backend_members_listed_are_the_protocols():
    text = section("A backend")
    every = between(text, "Every backend has", "A request backend")
    request = between(text, "A request backend", "A batch backend")
    batch = between(text, "A batch backend", "That is all a backend must have")
    overrides = between(text, "may override its defaults:", "A class that does not derive it")
    assert protocol_members(Backend) <= names(every)
    assert protocol_members(RequestBackend, Backend) <= names(request)
    assert protocol_members(BatchBackend, Backend) | protocol_members(
        StreamingBatchBackend, BatchBackend
    ) <= names(batch)
    # BackendTraits' defaults, every one named (the two required attributes are above; the
    # client sets `on_headers`, a backend does not override it).
    traits = {
        name
        for name, value in vars(BackendTraits).items()
        if not name.startswith("_") and name != "on_headers"
    } | (set(BackendTraits.__annotations__) - {"is_batch", "default_concurrency", "on_headers"})
    assert traits == names(overrides) - {"BackendOptions", "backends"}


def test_the_aspect_fields_listed_are_the_specs():
    fields = between(section("An aspect"), "`AspectSpec` fields:", "What follows from the spec")
    assert {field.name for field in dataclasses.fields(AspectSpec)} <= names(fields)


def test_the_judge_kind_fields_and_factory_options_listed_are_the_codes():
    text = section("A judge kind")
    other = between(text, "### Any other kind", "### A built-in kind")
    assert {field.name for field in dataclasses.fields(JudgeKind)} <= names(other)
    factory = between(text, "with keyword options", "2. Use it")
    parameters = inspect.signature(reference_scale_kind).parameters
    keywords = {name for name, p in parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert keywords <= names(factory)
    assert list(parameters)[:3] == ["name", "scale", "template"]


def test_every_pipeline_package_is_registered_and_reads_its_parameter_blocks():
    """Step 1: every package of `pipelines/` is registered (and nothing else); step 2:
    every `params:<block>` a node reads is a top-level block of conf/base/parameters*.yml."""
    from llm_feedback.pipeline_registry import register_pipelines

    bootstrap_project(PROJECT_ROOT)
    registered = register_pipelines()
    packages = {
        module.name for module in pkgutil.iter_modules(pipelines_package.__path__) if module.ispkg
    }
    assert packages and set(registered) - {"__default__"} == packages
    blocks: set[str] = set()
    for path in Path(PROJECT_ROOT / "conf" / "base").glob("parameters*.yml"):
        blocks |= set(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    for name in packages:
        for node in registered[name].nodes:
            for dataset in node.inputs:
                if dataset.startswith("params:"):
                    block = dataset.removeprefix("params:").split(".", 1)[0]
                    assert block in blocks, f"{name}: {node.name} reads {dataset}"
