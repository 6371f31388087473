"""`StaticSiteDataset`: a folder of static files (the judgment viewer), written atomically.

Saving writes the whole site into a hidden sibling folder and renames it into place, so a
reader (or a browser) never sees half a site, and an interrupted run leaves the previous
site whole. Versioned like the project's Parquet datasets: with `versioned: true` each run's
site is `<filepath>/<version>/<name>/index.html`. Loading gives the path of `index.html`.
On a remote data root (s3://, gs://, ... through fsspec) the site is written to a local
temporary folder and uploaded whole; download the folder to open it in a browser.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

import fsspec
from kedro.io import AbstractVersionedDataset, DatasetError, Version
from kedro.io.core import get_filepath_str, get_protocol_and_path

from llm_feedback.core.errors import output_error
from llm_feedback.pipelines.datasets import TextPreview
from llm_feedback.viewer import StaticSite

INDEX = "index.html"


class StaticSiteDataset(AbstractVersionedDataset[StaticSite, str]):
    def __init__(
        self,
        *,
        filepath: str,
        version: Version | None = None,
        credentials: dict[str, Any] | None = None,
        fs_args: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """A versioned folder for a static site, as the catalog configures it.

        Args:
            filepath: the site's folder.
            version: Kedro's load and save versions.
            credentials: arguments for the fsspec filesystem.
            fs_args: more arguments for the fsspec filesystem.
            metadata: Kedro's free-form dataset metadata.
        """
        protocol, path = get_protocol_and_path(filepath, version)
        self._protocol = protocol
        self._fs = fsspec.filesystem(protocol, **(credentials or {}), **(fs_args or {}))
        super().__init__(
            filepath=PurePosixPath(path),
            version=version,
            exists_function=self._fs.exists,
            glob_function=self._fs.glob,
        )
        self.metadata = metadata

    def _save(self, data: StaticSite) -> None:
        try:
            self._write(data)
        except OSError as error:
            target = get_filepath_str(self._get_save_path(), self._protocol)
            failed = output_error(target, error, "every earlier version")
            if failed is None:
                raise
            raise failed from error

    def _write(self, data: StaticSite) -> None:
        if self._protocol != "file":
            target = get_filepath_str(self._get_save_path(), self._protocol)
            with tempfile.TemporaryDirectory(prefix="site-") as local:
                data.write(Path(local) / "site")
                self._fs.put(f"{local}/site/", target, recursive=True)
            return
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
        index = f"{self._get_load_path()}/{INDEX}"
        return index if self._protocol == "file" else f"{self._protocol}://{index}"

    def _exists(self) -> bool:
        try:
            path = self._get_load_path()
        except DatasetError:
            return False
        return self._fs.isfile(f"{path}/{INDEX}")

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath), "version": self._version}

    def preview(self) -> TextPreview:
        if not self._exists():
            return TextPreview("not written yet")
        return TextPreview(f"open {self._load()} in a browser")
