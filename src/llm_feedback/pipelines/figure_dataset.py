"""The report's figures dataset, apart from `datasets.py`: kedro-datasets' Matplotlib module
imports matplotlib's pyplot (seconds), which only the runs that draw figures need.

Figures are not versioned (report.md links them by name), so a run replaces them in place.
To replace them as a set, each figure is first written, atomically, to a staging folder
beside them (`STAGING`); `FigureSetHooks` (llm_feedback.hooks) moves the staged figures
over the old ones once the run has succeeded, and removes them when it failed: a disk that
fills during the report leaves every old figure, not some new and some old.
"""

from __future__ import annotations

import io
import os
import posixpath
from typing import Any

from kedro.io.core import get_filepath_str
from kedro_datasets.matplotlib import MatplotlibDataset as _KedroMatplotlibDataset

from llm_feedback.pipelines.datasets import replace_atomically

# The staging folder, beside the figures (the same file system: moving out is a rename).
STAGING = ".staging"


class MatplotlibDataset(_KedroMatplotlibDataset):
    """`kedro_datasets.matplotlib.MatplotlibDataset` (the same arguments) whose figures are
    written atomically to a staging folder, and put in place, all together, by
    `promote_staged` at the end of a successful run.
    `type: llm_feedback.pipelines.figure_dataset.MatplotlibDataset`."""

    def _target(self) -> str:
        return get_filepath_str(self._get_save_path(), self._protocol)

    def _staged(self, path: str) -> str:
        folder, name = posixpath.split(self._target())
        relative = posixpath.relpath(path, folder)
        return posixpath.join(folder, STAGING, relative)

    def _save_to_fs(self, full_key_path: str, plot: Any) -> None:
        image = io.BytesIO()
        plot.savefig(image, **self._save_args)
        replace_atomically(
            self._fs,
            self._protocol,
            self._staged(full_key_path),
            lambda handle: handle.write(image.getvalue()),
            named=full_key_path,
            kept="every figure of the previous run",
        )

    def _staged_files(self) -> list[tuple[str, str]]:
        """(staged file, its place) for what this dataset staged: a figure, or a folder."""
        target = self._target()
        staged = self._staged(target)
        if self._fs.isfile(staged):
            return [(staged, target)]
        if not self._fs.isdir(staged):
            return []
        return [
            (path, posixpath.join(target, posixpath.relpath(path, staged)))
            for path in sorted(self._fs.find(staged))
        ]

    def promote_staged(self) -> None:
        """Move the staged figure(s) over the current ones (renames: no room needed)."""
        for staged, target in self._staged_files():
            if self._protocol == "file":
                os.makedirs(posixpath.dirname(target), exist_ok=True)
                os.replace(staged, target)
            else:
                self._fs.mv(staged, target)
        self._remove_empty_staging()

    def discard_staged(self) -> None:
        """Remove the staged figure(s): the current ones stay."""
        for staged, _ in self._staged_files():
            self._fs.rm(staged)
        self._remove_empty_staging()

    def _remove_empty_staging(self) -> None:
        folder = posixpath.join(posixpath.dirname(self._target()), STAGING)
        if self._fs.isdir(folder) and not self._fs.find(folder):
            self._fs.rm(folder, recursive=True)
