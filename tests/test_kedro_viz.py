"""`kedro viz build` works offline on this project: every registered pipeline, previews of
every dataset a run has written (list and struct columns included), and the built site
renders in a real (headless) Chromium."""

from __future__ import annotations

import functools
import html
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project
from PIL import Image

from llm_feedback.pipeline_registry import register_pipelines
from llm_feedback.pipelines.datasets import preview_cell
from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import PROJECT_ROOT, endpoints_via
from tests.reporting.builders import build_frames, typical_specs

KEDRO = Path(sys.executable).with_name("kedro")
PNG_BASE64_MAGIC = "iVBORw0KGgo"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LAYERS = ("01_raw", "02_intermediate", "03_primary", "07_model_output", "08_reporting")
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Fields of an `ultrafeedback.completions` item; a preview cell shows one at least.
COMPLETION_FIELDS = ("model", "annotations", "response", "principle")
# Virtual time Chromium gives the app to fetch api/* and lay out the graph before the dump.
VIRTUAL_TIME_MS = 20_000


@pytest.fixture
def project_copy(tmp_path: Path) -> Path:
    """The project without its data and local config, in a tmp dir: `kedro viz build`
    writes build/ into the current directory, and the catalog's relative paths resolve
    against the project root, so nothing of the checkout is read or written."""
    copy = tmp_path / "project"
    copy.mkdir()
    shutil.copy(PROJECT_ROOT / "pyproject.toml", copy)
    shutil.copytree(
        PROJECT_ROOT / "src",
        copy / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    shutil.copytree(PROJECT_ROOT / "conf", copy / "conf", ignore=shutil.ignore_patterns("local"))
    (copy / "conf" / "local").mkdir()
    shutil.copytree(PROJECT_ROOT / "data" / "01_raw", copy / "data" / "01_raw")
    return copy


def viz_build(project: Path, *options: str) -> dict[str, Any]:
    """Run `kedro viz build` in `project`; return the built main API document."""
    completed = subprocess.run(
        [str(KEDRO), "viz", "build", *options],
        cwd=project,
        env={**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    output = completed.stdout + completed.stderr
    # kedro-viz exits 0 when it fails to write the site: the files are the proof.
    assert completed.returncode == 0 and "Failed to build" not in output, output[-3000:]
    # Each catalog layer is a data folder: a node writing to an earlier folder than it reads
    # makes kedro-viz warn of a cycle among the layers and draw them out of order.
    assert "circular dependency" not in " ".join(output.split()).lower(), output[-3000:]
    for built in ("index.html", "api/main", "api/version"):
        assert (project / "build" / built).is_file(), f"no build/{built}\n{output[-3000:]}"
    return json.loads((project / "build" / "api" / "main").read_text())


def node_id(main: dict[str, Any], name: str) -> str:
    return next(
        node["id"] for node in main["nodes"] if node["name"] == name and node["type"] == "data"
    )


def built_node(project: Path, main: dict[str, Any], name: str) -> dict[str, Any]:
    return json.loads((project / "build" / "api" / "nodes" / node_id(main, name)).read_text())


def test_viz_build_lists_every_registered_pipeline(project_copy: Path):
    bootstrap_project(PROJECT_ROOT)
    registered = set(register_pipelines())

    main = viz_build(project_copy)

    assert {pipeline["id"] for pipeline in main["pipelines"]} == registered
    for name in registered:
        assert (project_copy / "build" / "api" / "pipelines" / name).is_file(), name
    names = {node["name"] for node in main["nodes"]}
    assert {"report", "preference_pairs", "model_aspect_metrics", "aspect_heatmap_figure"} <= names


def test_viz_build_previews_tables_and_figures_of_a_report_run(project_copy: Path):
    bootstrap_project(PROJECT_ROOT)
    # Write the report's inputs and outputs where the copy's catalog reads them.
    frames = build_frames(typical_specs())
    runtime_params = {"data_root": str(project_copy / "data")}
    with KedroSession.create(project_path=PROJECT_ROOT, runtime_params=runtime_params) as session:
        catalog = session.load_context().catalog
        for name in ("completions", "aspect_annotations", "critiques", "overall_scores"):
            catalog.save(name, getattr(frames, name))
        session.run(pipeline_names=["report"])

    main = viz_build(project_copy, "--include-previews")

    table = built_node(project_copy, main, "model_aspect_metrics")
    assert table["preview_type"] == "TablePreview"
    assert "mean_rating_0_100" in table["preview"]["columns"]
    figure = built_node(project_copy, main, "aspect_heatmap_figure")
    assert figure["preview_type"] == "ImagePreview"
    assert figure["preview"].startswith(PNG_BASE64_MAGIC)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (np.array(["Paris", "paris"], dtype=object), '["Paris", "paris"]'),
        (np.array([], dtype=object), "[]"),
        ([{"role": "user", "content": "hi"}], '[{"role": "user", "content": "hi"}]'),
        (
            [{"model": "m", "annotations": {"honesty": {"Rating": "4"}}}],
            '[{"model": "m", "annotations": "{…1 fields}"}]',
        ),
        ({"a": np.int64(3), "b": np.float64("nan")}, '{"a": 3, "b": null}'),
        (np.int64(7), 7),
        (np.bool_(True), True),
        (float("nan"), None),
        (None, None),
        ("x" * 500, "x" * 199 + "…"),
    ],
)
def test_preview_cells_are_json_safe_scalars(value: Any, shown: Any):
    assert preview_cell(value) == shown
    json.dumps(preview_cell(value), allow_nan=False)


def test_preview_cell_cuts_long_strings_inside_lists():
    cell = preview_cell(np.array(["y" * 100]))
    assert cell.startswith('["' + "y" * 59 + "…") and len(cell) <= 200


# --- the built site in a real browser ------------------------------------------------------


def find_chromium() -> str | None:
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


@pytest.fixture(scope="module")
def chromium() -> str:
    """Chromium's binary. Where it is missing, Debian's `chromium` package is installed if
    this process may (root with apt-get: CI); the browser test skips only if that fails."""
    found = find_chromium()
    may_install = shutil.which("apt-get") and getattr(os, "geteuid", lambda: -1)() == 0
    if found is None and may_install:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (
            "apt-get install -y -qq chromium",
            "apt-get update -qq && apt-get install -y -qq chromium",
        ):
            subprocess.run(
                ["sh", "-c", command], env=env, capture_output=True, timeout=900, check=False
            )
            if (found := find_chromium()) is not None:
                break
    if found is None:
        pytest.skip("chromium is not installed and could not be installed (apt-get, as root)")
    return found


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@contextmanager
def serve(directory: Path) -> Iterator[str]:
    """Serve `directory` on 127.0.0.1 (the app's ES modules and api/* fetches do not load
    from file://); yield its base URL."""
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(directory))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def browse(chromium: str, profile: Path) -> Callable[..., subprocess.CompletedProcess[bytes]]:
    """A headless Chromium run: `browse(url, "--dump-dom")` or `--screenshot=PATH`."""

    def run(url: str, *mode: str) -> subprocess.CompletedProcess[bytes]:
        completed = subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
                "--window-size=1400,900",
                f"--user-data-dir={profile}",
                f"--virtual-time-budget={VIRTUAL_TIME_MS}",
                *mode,
                url,
            ],
            capture_output=True,
            timeout=180,
            check=False,
        )
        assert completed.returncode == 0, completed.stderr.decode(errors="replace")[-3000:]
        return completed

    return run


def rendered_names(dom: str) -> set[str]:
    """Names of the nodes drawn in the flowchart's SVG."""
    return set(re.findall(r'data-node-fullname="([^"]+)"', dom))


def preview_table(dom: str) -> tuple[list[str], list[str]]:
    """Header and data cells of the preview table the side panel shows."""
    header = re.findall(r'<th class="preview-table__header"[^>]*>(.*?)</th>', dom, re.S)
    cells = re.findall(r'<td class="preview-table__data[^"]*"[^>]*>(.*?)</td>', dom, re.S)
    return [html.unescape(text) for text in header], [html.unescape(text) for text in cells]


def is_struct_list(cell: str, *fields: str) -> bool:
    """A list-of-structs cell shown as JSON text naming one of `fields` at least (field
    order is the schema's, and a long cell is cut)."""
    return cell.startswith('[{"') and any(f'"{field}": ' in cell for field in fields)


def assert_json_safe_table(node: dict[str, Any], columns: set[str]) -> list[list[Any]]:
    assert node["preview_type"] == "TablePreview", node
    preview = node["preview"]
    assert columns <= set(preview["columns"]), preview["columns"]
    assert preview["data"], "an empty preview of a dataset the run wrote"
    for row in preview["data"]:
        assert len(row) == len(preview["columns"])
        assert all(cell is None or isinstance(cell, str | int | float | bool) for cell in row)
    return [dict(zip(preview["columns"], row, strict=True)) for row in preview["data"]]


def test_viz_build_after_a_real_run_renders_in_a_browser(
    project_copy: Path, run_kedro, fake_llm: FakeLLMServer, chromium: str, tmp_path: Path
):
    # A real default run (sample -> generate -> annotate -> report) against the fake server,
    # written where the copy's catalog reads.
    run_kedro(
        "__default__",
        {
            "endpoints": endpoints_via(fake_llm),
            "sample": {"max_prompts": 4},
            "data_root": str(project_copy / "data"),
        },
    )

    main = viz_build(project_copy, "--include-previews")
    build = project_copy / "build"

    # Layers and tags reach the site.
    assert main["layers"] == list(LAYERS)
    assert {tag["id"] for tag in main["tags"]} >= {
        "sample",
        "generate",
        "annotate",
        "report",
        "evaluate",
    }
    # Every dataset the run wrote has a preview (in-memory ones and parameters have none).
    for node in main["nodes"]:
        if node["type"] == "data" and not node["dataset_type"].endswith("MemoryDataset"):
            assert built_node(project_copy, main, node["name"])["preview"], node["name"]
    # The list and struct columns that used to fail the build are JSON text now.
    raw_prompts = assert_json_safe_table(
        built_node(project_copy, main, "raw_prompts"), {"correct_answers", "incorrect_answers"}
    )
    assert all(row["correct_answers"].startswith("[") for row in raw_prompts)
    annotations = assert_json_safe_table(
        built_node(project_copy, main, "aspect_annotations"), {"aspect", "rating", "types"}
    )
    assert all(row["types"].startswith("[") for row in annotations)
    ultrafeedback = assert_json_safe_table(
        built_node(project_copy, main, "ultrafeedback"), {"instruction", "models", "completions"}
    )
    assert all(is_struct_list(row["completions"], *COMPLETION_FIELDS) for row in ultrafeedback)
    pairs = assert_json_safe_table(
        built_node(project_copy, main, "preference_pairs"), {"prompt", "chosen", "rejected"}
    )
    assert all(is_struct_list(row["chosen"], "role", "content") for row in pairs)

    browser = browse(chromium, tmp_path / "chromium-profile")
    with serve(build) as site:
        default_dom = browser(f"{site}/index.html?pid=__default__", "--dump-dom").stdout.decode()
        evaluate_dom = browser(f"{site}/index.html?pid=evaluate", "--dump-dom").stdout.decode()
        selected = f"{site}/index.html?pid=__default__&sid={node_id(main, 'ultrafeedback')}"
        panel_dom = browser(selected, "--dump-dom").stdout.decode()
        screenshot = tmp_path / "viz.png"
        browser(selected, f"--screenshot={screenshot}")

    # The flowchart of each pipeline draws every node of it (the default pipeline holds
    # sample, generate, annotate and report), and the layer bands.
    for pipeline_id, dom in (("__default__", default_dom), ("evaluate", evaluate_dom)):
        api = json.loads((build / "api" / "pipelines" / pipeline_id).read_text())
        expected = {node["name"] for node in api["nodes"] if node["type"] == "task"}
        assert expected and expected <= rendered_names(dom), expected - rendered_names(dom)
    assert {"sample_prompts", "generate_completions", "judge_completions", "render_report"} <= (
        rendered_names(default_dom)
    )
    assert "judge_eval_samples" in rendered_names(evaluate_dom)
    for layer in LAYERS:
        assert f'data-id="layer-label--{layer}"' in default_dom, layer

    # Selecting `ultrafeedback` shows its preview table, nested completions as JSON text.
    header, cells = preview_table(panel_dom)
    assert {"instruction", "models", "completions"} <= set(header), header
    assert any(is_struct_list(cell, *COMPLETION_FIELDS) for cell in cells), cells[:10]

    data = screenshot.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 20_000, len(data)
    with Image.open(screenshot) as image:
        assert image.size == (1400, 900)
        colours = image.convert("RGB").getcolors(maxcolors=image.width * image.height)
        assert len(colours) > 50, "a blank or near-blank page"


def test_a_failed_save_leaves_no_half_written_version(tmp_path):
    """The project's ParquetDataset writes a partial file and renames it when complete."""
    from kedro.io import Version

    from llm_feedback.pipelines.datasets import ParquetDataset

    def dataset() -> ParquetDataset:  # each instance saves a new timestamped version
        time.sleep(0.01)
        return ParquetDataset(filepath=str(tmp_path / "t.parquet"), version=Version(None, None))

    class Exploding(pd.DataFrame):
        def to_parquet(self, handle, **kwargs):
            handle.write(b"PAR1 half a file")
            raise OSError("disk full")

    first = dataset()
    first.save(pd.DataFrame({"a": [1]}))
    good = first.load()
    with pytest.raises(Exception, match="disk full"):
        dataset().save(Exploding({"a": [2]}))
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert len(written) == 1 and written[0].name == "t.parquet"  # only the good version
    latest = dataset().load()
    pd.testing.assert_frame_equal(latest, good)
