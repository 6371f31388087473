"""The viewer tests' shared fixtures: the known tables, their site written once a module,
and a headless Chromium (with a downloads folder) per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_feedback.viewer import feedback_site
from tests.test_kedro_viz import chromium  # noqa: F401 - the fixture (installs where it may)
from tests.viewer.cdp import Chromium
from tests.viewer.frames import feedback_frames


@pytest.fixture(scope="module")
def frames():
    return feedback_frames(120)


@pytest.fixture(scope="module")
def feedback_dir(tmp_path_factory, frames) -> Path:
    directory = tmp_path_factory.mktemp("viewer") / "site"
    feedback_site(*frames, shard_size=16).write(directory)
    return directory


@pytest.fixture
def browser(chromium, tmp_path) -> Iterator[Chromium]:  # noqa: F811
    browser = Chromium(chromium, tmp_path / "profile", downloads=tmp_path / "downloads")
    try:
        yield browser
    finally:
        browser.close()
