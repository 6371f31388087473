"""The report's figures dataset, apart from `datasets.py`: kedro-datasets' Matplotlib module
imports matplotlib's pyplot (seconds), which only the runs that draw figures need."""

from __future__ import annotations

import io
from typing import Any

from kedro_datasets.matplotlib import MatplotlibDataset as _KedroMatplotlibDataset

from llm_feedback.pipelines.datasets import replace_atomically


class MatplotlibDataset(_KedroMatplotlibDataset):
    """`kedro_datasets.matplotlib.MatplotlibDataset` (the same arguments) whose figures are
    each written atomically. `type: llm_feedback.pipelines.figure_dataset.MatplotlibDataset`."""

    def _save_to_fs(self, full_key_path: str, plot: Any) -> None:
        image = io.BytesIO()
        plot.savefig(image, **self._save_args)
        replace_atomically(
            self._fs, self._protocol, full_key_path, lambda handle: handle.write(image.getvalue())
        )
