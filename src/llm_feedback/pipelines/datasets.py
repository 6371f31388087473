"""The project's own Kedro dataset: JSON Lines read by `llm_feedback.jsonl`, so that a bad
line in an input file is reported with its file and line number."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from kedro.io import AbstractDataset, DatasetError

from llm_feedback.jsonl import read_jsonl


class JSONLinesDataset(AbstractDataset[pd.DataFrame, pd.DataFrame]):
    """Read-only: `type: llm_feedback.pipelines.datasets.JSONLinesDataset`, `filepath`."""

    def __init__(self, filepath: str, metadata: dict[str, Any] | None = None) -> None:
        self._filepath = Path(filepath)
        self.metadata = metadata

    def load(self) -> pd.DataFrame:
        return read_jsonl(self._filepath)

    def save(self, data: pd.DataFrame) -> None:
        raise DatasetError(f"{self._filepath} is input data; this dataset does not write it")

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}

    def _exists(self) -> bool:
        return self._filepath.is_file()
