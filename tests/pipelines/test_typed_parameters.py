"""Kedro validates the typed parameter blocks (`params.blocks`) itself: every registered
pipeline has a typed `params:` input, so no run logs "No typed parameter requirements
found"; the project's own parameters pass and reach the nodes unchanged; a wrongly typed
value stops `kedro run` before its first node, as one `error:` line in the parser's words,
and no model is called."""

from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from kedro.framework.project import pipelines
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project
from kedro.validation import ParameterValidator

from llm_feedback.params import blocks
from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import KEDRO_CLI_ENV, PROJECT_ROOT, kedro_cli

NO_REQUIREMENTS = "No typed parameter requirements found"
BLOCK_TYPES = tuple(
    value
    for value in vars(blocks).values()
    if isinstance(value, type)
    and issubclass(value, blocks.CheckedBlock)
    and value is not blocks.CheckedBlock
)


@pytest.fixture(scope="module")
def registered() -> dict:
    bootstrap_project(PROJECT_ROOT)
    return dict(pipelines)


def test_every_block_type_is_a_dataclass_kedro_validates(registered: dict) -> None:
    assert BLOCK_TYPES
    required: dict[str, type] = {}
    for name, pipeline in registered.items():
        found = ParameterValidator({name: pipeline}).type_extractor.extract_types_from_pipelines()
        assert found, (
            f"pipeline {name!r}: no typed params: input, Kedro would log {NO_REQUIREMENTS!r}"
        )
        required.update(found)
    used = {getattr(kind, "__args__", (kind,))[0] for kind in required.values()}
    assert set(BLOCK_TYPES) <= used, "a block type no node's annotation names"
    assert all(dataclasses.is_dataclass(kind) for kind in BLOCK_TYPES)


def test_project_parameters_pass_and_stay_the_blocks_written(
    registered: dict, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="kedro.validation"):
        with KedroSession.create(
            project_path=PROJECT_ROOT, runtime_params={"data_root": str(tmp_path)}
        ) as session:
            context = session.load_context()
            params, written = context.params, context.config_loader["parameters"]
    assert NO_REQUIREMENTS not in caplog.text
    for kind in BLOCK_TYPES:
        typed = [key for key, value in params.items() if type(value) is kind]
        assert typed, f"no parameter block became a {kind.__name__}"
        for key in typed:  # a dict equal to the block as written
            assert isinstance(params[key], dict) and dict(params[key]) == written[key]


def test_report_run_log_has_no_untyped_parameter_message(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kedro", "run", "--pipelines", "report"]
        + ["--params", f"data_root={tmp_path}"],
        cwd=PROJECT_ROOT,
        env=KEDRO_CLI_ENV,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # The run stops on its missing input tables; parameters were read and validated first.
    assert result.returncode == 1, result.stderr[-3000:]
    output = " ".join((result.stdout + result.stderr).split())
    assert NO_REQUIREMENTS not in output
    assert "error: " in result.stderr


@pytest.mark.parametrize(
    ("pipeline", "setting", "message"),
    [
        (
            "generate",
            "endpoints.local.max_concurrent=many",
            "error: endpoints.local.max_concurrent must be int or null, got 'many'",
        ),
        (
            "report",
            "report.intervals.n_resamples=many",
            "error: report.intervals.n_resamples must be an integer >= 10, got 'many'",
        ),
        (
            "sample",
            "decontamination.ngram=many",
            "error: decontamination.ngram must be an integer >= 1, got 'many'",
        ),
    ],
)
def test_a_wrongly_typed_block_is_one_error_line_before_any_call(
    tmp_path: Path, pipeline: str, setting: str, message: str
) -> None:
    with FakeLLMServer() as server:
        command = kedro_cli(tmp_path, server.base_url, setting)
        result = subprocess.run(
            [*command, "--pipelines", pipeline],
            cwd=PROJECT_ROOT,
            env=KEDRO_CLI_ENV,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        calls = server.stats()["requests"]
    assert result.returncode == 1, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(message), lines
    assert all(line in errors or "the traceback is in" in line for line in lines), lines
    assert calls == 0
