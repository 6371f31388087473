"""The `images` and `audio` columns of `eval_samples`, checked before any call.

A cell is null, one source or a list of sources: a file path (relative to the samples
file's folder), a `data:` URI or, for images, an http(s) URL (see `backends.media`). A file
must lie inside the samples file's folder, or `evaluate.media_root` when set (an absolute
path, `..` or a symbolic link out of it is refused by name before any call), unless
`evaluate.allow_media_outside: true`.
Images go to the model under test and to the judge; audio to the model under test only
(lmms-eval's audio tasks grade the text answer). Each file is checked against the size cap
of every endpoint that will receive it, and a row whose attachments would reach a
text-only endpoint (the embedded `local` model) is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from llm_feedback.backends import EndpointConfig
from llm_feedback.backends.media import Media, MediaError, load_media
from llm_feedback.core.errors import InputError
from llm_feedback.evaluation.config import EvaluateParams

MEDIA_COLUMNS = {"images": "image", "audio": "audio"}
# Set by the JSON Lines dataset: the folder relative media paths resolve against.
SOURCE_DIR_ATTR = "source_dir"

Fail = Callable[[int, str, str], InputError]


def samples_dir(frame: Any) -> Path:
    """The samples file's folder, or the working directory for a frame made in memory.

    Args:
        frame: the samples (with the file they were read from, if any).

    Returns:
        The folder relative media paths resolve against.
    """
    return Path(getattr(frame, "attrs", {}).get(SOURCE_DIR_ATTR) or Path.cwd())


def media_root(config: EvaluateParams, base_dir: Path) -> Path | None:
    """The folder every media file of the samples must be inside: `evaluate.media_root`,
    else the samples file's folder; None when `evaluate.allow_media_outside` is true.

    Args:
        config: The evaluate parameters.
        base_dir: The samples file's folder (`samples_dir`).

    Returns:
        The folder, or None for no confinement.
    """
    if config.allow_media_outside:
        return None
    return Path(config.media_root) if config.media_root else base_dir


def _sources(value: Any) -> list[Any] | None:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple | np.ndarray):
        return list(value)
    return None


def _receivers(
    column: str, needs_generation: bool, model: str, config: EvaluateParams
) -> list[EndpointConfig]:
    endpoints = [config.generator_for(model)] if needs_generation else []
    if column == "images":
        endpoints.append(config.judge.endpoint)
    return [endpoint for endpoint in endpoints if endpoint is not None]


def check_attachments(
    values: dict[str, list[Any]],
    samples: pd.DataFrame,
    config: EvaluateParams,
    base_dir: Path,
    fail: Fail,
) -> dict[str, list[tuple[Media, ...]]]:
    """Each media column of `values` as one tuple of checked `Media` per row of `samples`
    (empty without any).

    Args:
        values: each media column's value per row.
        samples: the samples.
        config: the evaluate parameters.
        base_dir: the folder relative paths resolve against.
        fail: makes the InputError of a bad row.

    Returns:
        The checked media per column and row.
    """
    responses, models, turns = (samples[c].tolist() for c in ("response", "model", "turn"))
    checked: dict[str, list[tuple[Media, ...]]] = {}
    default_cap = EndpointConfig.max_media_bytes
    inside = media_root(config, base_dir)
    # Rows often share a file (one image, several models): read and hash it once.
    loaded: dict[tuple[str, str, int], Media] = {}
    for column, kind in MEDIA_COLUMNS.items():
        rows: list[tuple[Media, ...]] = []
        for row, value in enumerate(values[column]):
            sources = _sources(value)
            if sources is None:
                raise fail(row, column, f"must be a path, a list of paths or null, got {value!r}")
            if not sources:
                rows.append(())
                continue
            if turns[row] == 2:
                raise fail(row, column, "attachments go with one-turn rows only")
            receivers = _receivers(column, pd.isna(responses[row]), models[row], config)
            for endpoint in receivers:
                if not endpoint.accepts_media:
                    raise fail(
                        row,
                        column,
                        f"{endpoint.describe()} reads text only and cannot take {column}; "
                        "use an endpoint of a model that does",
                    )
            cap = min((endpoint.max_media_bytes for endpoint in receivers), default=default_cap)
            media = []
            for item, source in enumerate(sources):
                key = (str(source), kind, cap)
                try:
                    if key not in loaded:
                        loaded[key] = load_media(source, kind, base_dir, cap, inside)
                except MediaError as error:
                    where = f"item {item}: " if len(sources) > 1 else ""
                    raise fail(row, column, f"{where}{error}") from None
                media.append(loaded[key])
            rows.append(tuple(media))
        checked[column] = rows
    return checked


def media_record(images: tuple[Media, ...], audio: tuple[Media, ...]) -> dict[str, list[str]]:
    """What an output table keeps of a row's attachments: sources and hashes, no bytes.

    Args:
        images: a row's images.
        audio: a row's audio.

    Returns:
        {"images": [...], "audio": [...]} of sources and hashes.
    """
    return {
        "images": [item.source for item in images],
        "image_sha256": [item.sha256 or "" for item in images],
        "audio": [item.source for item in audio],
        "audio_sha256": [item.sha256 or "" for item in audio],
    }
