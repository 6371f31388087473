"""The license the package declares is the LICENSE file at the repository root: pyproject's
SPDX expression names the license whose text the file holds, the file ships with the
package, and the installed metadata says the same."""

from __future__ import annotations

import importlib.metadata
import re

from tests.conftest import PROJECT_ROOT

# SPDX identifier -> the first line of that license's standard text.
LICENSE_TITLES = {"MIT": "MIT License", "Apache-2.0": "Apache License"}


def test_pyproject_license_is_the_license_file() -> None:
    # Read as text: tomllib is Python 3.11+, the package supports 3.10.
    pyproject = (PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    license_id = re.search(r'^license = "([^"]+)"$', pyproject, re.MULTILINE)[1]
    assert re.search(r'^license-files = \["LICENSE"\]$', pyproject, re.MULTILINE)
    text = (PROJECT_ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.splitlines()[0].strip() == LICENSE_TITLES[license_id]
    metadata = importlib.metadata.metadata("llm_feedback")
    assert metadata["License-Expression"] == license_id
    assert "LICENSE" in (metadata.get_all("License-File") or [])
