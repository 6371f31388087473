"""The evaluate pipeline's samples file, apart from `datasets.py`: its readers (the public
gold-label formats) import scikit-learn, which only evaluate runs need."""

from __future__ import annotations

import pandas as pd

from llm_feedback.evaluation.sample_files import read_samples_file
from llm_feedback.pipelines.datasets import JSONLinesDataset


class SamplesFileDataset(JSONLinesDataset):
    """Read-only: `type: llm_feedback.pipelines.samples_dataset.SamplesFileDataset`,
    `filepath`."""

    def load(self) -> pd.DataFrame:
        return read_samples_file(self._filepath)
