"""A writer killed or failing mid-write leaves the old file or none, never a partial one.

The report (TextDataset), the figures (MatplotlibDataset) and every Parquet table are
written to a temporary file beside the target and moved over it (the figures to a staging
folder, moved into place together at the end of the run).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from llm_feedback.pipelines.datasets import ParquetDataset, TextDataset  # noqa: E402
from llm_feedback.pipelines.figure_dataset import MatplotlibDataset  # noqa: E402

REPORT_CHARS = 20_000_000
# The child saves whole reports of one repeated letter, one after another, until killed.
WRITER = """
import sys
from llm_feedback.pipelines.datasets import TextDataset
dataset = TextDataset(filepath=sys.argv[1])
print("ready", flush=True)
for version in range(1000):
    dataset.save("abcdefghij"[version % 10] * int(sys.argv[2]))
"""


def _whole_or_old(text: str, old: str) -> bool:
    return text == old or (len(text) == REPORT_CHARS and len(set(text)) == 1)


def test_a_report_writer_killed_mid_write_leaves_a_whole_file(tmp_path):
    report = tmp_path / "report.md"
    report.write_text("old report")
    for delay in (0.05, 0.2, 0.5, 0.9):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(report), str(REPORT_CHARS)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout.readline().strip() == "ready"
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait()
        text = report.read_text()
        assert _whole_or_old(text, "old report"), (delay, len(text))


class _FailingFigure:
    """A figure whose rendering breaks half-way through writing its bytes."""

    def savefig(self, handle, **kwargs):
        handle.write(b"\x89PNG half an image")
        raise RuntimeError("renderer crashed")


def test_a_failed_save_leaves_the_old_file_and_no_temporary(tmp_path):
    figure_path = tmp_path / "figure.png"
    figures = MatplotlibDataset(filepath=str(figure_path))
    figure, axes = plt.subplots()
    axes.plot([1, 2], [3, 4])
    figures.save(figure)
    plt.close(figure)
    assert not figure_path.exists()  # staged until the run ends (FigureSetHooks)
    figures.promote_staged()
    good = figure_path.read_bytes()
    assert good.startswith(b"\x89PNG")

    with pytest.raises(Exception, match="renderer crashed"):
        figures.save(_FailingFigure())
    figures.discard_staged()  # what the run's hook does when it fails
    assert figure_path.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure.png"]

    report = TextDataset(filepath=str(tmp_path / "report.md"))
    report.save("# Report\n")

    class Exploding(str):
        def encode(self, *args, **kwargs):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        report.save(Exploding("x"))
    assert (tmp_path / "report.md").read_text() == "# Report\n"


def test_a_parquet_table_failing_mid_write_leaves_no_version_file(tmp_path):
    class BreaksWhileWriting(pd.DataFrame):
        def to_parquet(self, handle, **kwargs):
            handle.write(b"PAR1 partial")
            raise OSError("disk full")

    table = ParquetDataset(filepath=str(tmp_path / "t.parquet"))
    table.save(pd.DataFrame({"a": [1, 2]}))
    with pytest.raises(Exception, match="disk full"):
        table.save(BreaksWhileWriting({"a": [3]}))
    assert table.load()["a"].tolist() == [1, 2]
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]


def test_the_report_catalog_uses_the_atomic_datasets():
    catalog = (Path(__file__).resolve().parents[2] / "conf/base/catalog_report.yml").read_text()
    assert "type: matplotlib.MatplotlibDataset" not in catalog
    assert "type: llm_feedback.pipelines.figure_dataset.MatplotlibDataset" in catalog
