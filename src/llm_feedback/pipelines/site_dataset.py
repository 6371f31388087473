"""`StaticSiteDataset`: a folder of static files (the judgment viewer), written atomically.

Saving writes the whole site into a hidden sibling folder and renames it into place, so a
reader (or a browser) never sees half a site, and an interrupted run leaves the previous
site whole. Versioned like the project's Parquet datasets: with `versioned: true` each run's
site is `<filepath>/<version>/<name>/index.html`. Loading gives the path of `index.html`.
The folder must be on the local disk (a browser opens it from there).
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

from kedro.io import AbstractVersionedDataset, DatasetError, Version
from kedro.io.core import get_protocol_and_path

from llm_feedback.pipelines.datasets import TextPreview
from llm_feedback.viewer import StaticSite

INDEX = "index.html"


class StaticSiteDataset(AbstractVersionedDataset[StaticSite, str]):
    def __init__(
        self,
        *,
        filepath: str,
        version: Version | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        protocol, path = get_protocol_and_path(filepath, version)
        if protocol != "file":
            raise DatasetError(
                f"StaticSiteDataset {filepath}: the viewer is written to a local folder "
                f"(got protocol {protocol!r}); point its filepath at the local disk"
            )
        super().__init__(filepath=PurePosixPath(path), version=version)
        self.metadata = metadata

    def _save(self, data: StaticSite) -> None:
        target = Path(self._get_save_path())
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial-{uuid.uuid4().hex[:8]}")
        try:
            data.write(partial)
            if target.exists():  # unversioned: the old site goes only once the new is whole
                old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}")
                os.replace(target, old)
                os.replace(partial, target)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(partial, target)
        finally:
            shutil.rmtree(partial, ignore_errors=True)

    def _load(self) -> str:
        return str(Path(self._get_load_path()) / INDEX)

    def _exists(self) -> bool:
        try:
            path = self._get_load_path()
        except DatasetError:
            return False
        return (Path(path) / INDEX).is_file()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath), "version": self._version}

    def preview(self) -> TextPreview:
        if not self._exists():
            return TextPreview("not written yet")
        return TextPreview(f"open {self._load()} in a browser")
