"""A YAML alias bomb in the configuration is refused at once, naming its file."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

from llm_feedback.config_loader import check_alias_expansion
from llm_feedback.core.errors import ConfigError
from tests.conftest import KEDRO_CLI_ENV, PROJECT_ROOT


def billion_laughs(levels: int = 9) -> str:
    lines = ['lol0: &lol0 "lol"']
    for level in range(1, levels + 1):
        aliases = ", ".join([f"*lol{level - 1}"] * 10)
        lines.append(f"lol{level}: &lol{level} [{aliases}]")
    return "\n".join(lines) + "\n"


def test_the_expansion_is_counted_without_expanding():
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"bomb.yml: .* expand to [\d,]+ values"):
        check_alias_expansion(billion_laughs(30), "bomb.yml")
    assert time.monotonic() - started < 1


def test_ordinary_anchors_and_the_projects_own_files_pass():
    check_alias_expansion("base: &base {a: 1, b: 2}\nx: *base\ny: *base\n", "small.yml")
    for path in (PROJECT_ROOT / "conf").rglob("*.yml"):
        check_alias_expansion(path.read_text(), str(path))


def test_a_bomb_in_conf_local_stops_kedro_run_at_once(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(PROJECT_ROOT / "conf", conf)
    (conf / "local").mkdir(exist_ok=True)
    bomb = conf / "local" / "parameters_bomb.yml"
    bomb.write_text(billion_laughs())
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kedro",
            "run",
            "--pipelines",
            "sample",
            "--conf-source",
            str(conf),
            "--params",
            f"data_root={tmp_path / 'data'}",
        ],
        cwd=PROJECT_ROOT,
        env=KEDRO_CLI_ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert time.monotonic() - started < 60
    assert result.returncode == 1, result.stderr[-2000:]
    first = result.stderr.splitlines()[0]
    assert first.startswith("error: ") and str(bomb) in first and "alias" in first
    assert "Traceback" not in result.stderr
