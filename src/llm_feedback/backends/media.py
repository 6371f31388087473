"""Images and audio clips in chat messages: checked once, sent as content parts.

A message's `content` is either text or a tuple of parts, each a `str` (text) or a `Media`.
A `Media` is checked before any call (the file exists and is readable, its type read from
its first bytes, not its name, and it fits the endpoint's `max_media_bytes`) and is known
by the SHA-256 of its bytes: the request cache keys on that hash, so an edited file is a new
request and a renamed one is not. The bytes themselves are read again when the request is
sent (and must still have the same hash), so that a run over many files keeps none of them
in memory; only inline (`data:` URI) media carry their bytes.

Sources: a file path (relative ones resolve against a base folder: the samples file's), a
`data:<type>;base64,<data>` URI, or, for images only, an http(s) URL, which the model's
server fetches itself: its bytes are never seen here, so it is checked and cached by URL.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = ("image", "audio")
# Formats by their leading bytes; `format` is what OpenAI's `input_audio` calls it.
_IMAGE_MIME = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}
_AUDIO_MIME = {"wav": "audio/wav", "mp3": "audio/mpeg"}
# A rough prompt-token count per attachment, for the over-long-prompt check only.
MEDIA_TOKEN_ESTIMATE = 1000


class MediaError(ValueError):
    """A media source that cannot be sent; callers add the row and column."""


def sniff_format(data: bytes) -> str | None:
    """The format whose magic bytes `data` starts with: png, jpeg, webp, wav, mp3 or None.

    Args:
        data: The file's bytes (its first few suffice).

    Returns:
        The format's name, or None when none matches.
    """
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "wav"
    # An ID3 tag, or an MPEG audio frame header (11 sync bits, layer III).
    if data.startswith(b"ID3") or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE6 == 0xE2):
        return "mp3"
    return None


def _mime_table(kind: str) -> dict[str, str]:
    return _IMAGE_MIME if kind == "image" else _AUDIO_MIME


@dataclass(frozen=True, slots=True)
class Media:
    """One checked image or audio clip. `source` is the absolute path, the URL, or
    "inline" for a data URI; `sha256` is None for a URL only."""

    kind: str
    format: str | None
    source: str
    sha256: str | None
    inline: bytes | None = field(default=None, repr=False, compare=False)

    @property
    def mime(self) -> str | None:
        return _mime_table(self.kind).get(self.format or "")

    @property
    def is_url(self) -> bool:
        return self.sha256 is None

    def identity(self) -> dict[str, str | None]:
        """What the request cache keys on: the content hash, never the path."""
        if self.is_url:
            return {"kind": self.kind, "url": self.source}
        return {"kind": self.kind, "format": self.format, "sha256": self.sha256}

    def read(self) -> bytes:
        """The bytes to send; MediaError if the file changed since it was checked."""
        if self.inline is not None:
            return self.inline
        try:
            data = Path(self.source).read_bytes()
        except OSError as error:
            raise MediaError(f"{self.source}: cannot be read any more ({error.strerror})") from None
        if hashlib.sha256(data).hexdigest() != self.sha256:
            raise MediaError(f"{self.source}: changed after it was checked; run again")
        return data

    def base64(self) -> str:
        return base64.b64encode(self.read()).decode("ascii")

    def openai_part(self) -> dict[str, Any]:
        """The chat completions content part: `image_url` or `input_audio`."""
        if self.kind == "audio":
            return {
                "type": "input_audio",
                "input_audio": {"data": self.base64(), "format": self.format},
            }
        url = self.source if self.is_url else f"data:{self.mime};base64,{self.base64()}"
        return {"type": "image_url", "image_url": {"url": url}}


def load_media(
    reference: Any, kind: str, base_dir: Path, max_bytes: int, inside: Path | None = None
) -> Media:
    """Check one source of `kind` ("image" or "audio"); MediaError saying what is wrong.

    Args:
        reference: A file path (relative to `base_dir`), a data: URI, an http(s) URL (images
            only), or a `Media` already checked.
        kind: "image" or "audio".
        base_dir: The folder relative paths start from.
        max_bytes: The largest file accepted.
        inside: A file must resolve (symbolic links followed) into this folder, or it is
            refused before it is read: a shared samples file cannot send the reader's other
            files. None: any path (the caller's own code gave it).

    Returns:
        The media (a file or data: URI known by its content hash; a URL as given).

    Raises:
        ValueError: `kind` is not a media kind.
        MediaError: The source is of the wrong kind or format, too large, outside `inside`,
            missing or unreadable.
    """
    if kind not in KINDS:
        raise ValueError(f"media kind must be one of {KINDS}, got {kind!r}")
    if isinstance(reference, Media):
        if reference.kind != kind:
            raise MediaError(f"is {reference.kind}, not {kind}")
        return reference
    if not isinstance(reference, str) or not reference.strip():
        raise MediaError(f"must be a file path or a data: URI, got {reference!r}")
    if reference.startswith(("http://", "https://")):
        if kind == "audio":
            raise MediaError("audio must be a file or a data: URI; a URL cannot be sent")
        return Media(kind, None, reference, None)
    if reference.startswith("data:"):
        data, source = _decode_data_uri(reference), "inline"
    else:
        path = (base_dir / reference).resolve()
        source = str(path)
        if inside is not None and not path.is_relative_to(inside.resolve()):
            raise MediaError(
                f"{reference}: resolves to {path}, outside {inside.resolve()}; media files "
                "must be inside the samples file's folder (or evaluate.media_root), or set "
                "evaluate.allow_media_outside: true"
            )
        data = _read_file(path, max_bytes)
    if len(data) > max_bytes:
        raise MediaError(
            f"{source}: {len(data):,} bytes, over the endpoint's max_media_bytes {max_bytes:,}"
        )
    found = sniff_format(data)
    allowed = _mime_table(kind)
    if found not in allowed:
        what = f"{found} data" if found else "not a known image or audio format"
        raise MediaError(
            f"{source}: {what} (by its content); {kind} must be {'/'.join(allowed).upper()}"
        )
    return Media(
        kind,
        found,
        source,
        hashlib.sha256(data).hexdigest(),
        inline=data if source == "inline" else None,
    )


def _read_file(path: Path, max_bytes: int) -> bytes:
    if not path.is_file():
        if path.is_dir():
            raise MediaError(f"{path}: a directory, not a file; give the path of the file")
        if path.exists():  # a FIFO, socket or device: reading it could block forever
            raise MediaError(f"{path}: not a regular file (a pipe, socket or device)")
        raise MediaError(f"{path}: no such file")
    size = path.stat().st_size
    if size > max_bytes:
        raise MediaError(
            f"{path}: {size:,} bytes, over the endpoint's max_media_bytes {max_bytes:,}"
        )
    if not os.access(path, os.R_OK):
        raise MediaError(f"{path}: not readable")
    try:
        return path.read_bytes()
    except OSError as error:
        raise MediaError(f"{path}: cannot be read ({error.strerror})") from None


def _decode_data_uri(uri: str) -> bytes:
    header, _, payload = uri.partition(",")
    if not header.endswith(";base64") or not payload:
        raise MediaError("a data: URI must be data:<type>;base64,<data>")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise MediaError("the data: URI's payload is not valid base64") from None


def with_media(text: str, media: Sequence[Media]) -> str | tuple[str | Media, ...]:
    """A message content: `text` alone, or text followed by the attachments.

    Args:
        text: The message's text.
        media: Its attachments.

    Returns:
        `text`, or a tuple of the text and the attachments.
    """
    return (text, *media) if media else text


def content_text(content: str | Sequence[Any]) -> str:
    """The text of a message content, attachments left out.

    Args:
        content: A message content: text, or text and `Media` parts.

    Returns:
        Its text parts, joined by newlines.
    """
    if isinstance(content, str):
        return content
    return "\n".join(part for part in content if isinstance(part, str))


def content_media(content: str | Sequence[Any]) -> list[Media]:
    """The attachments of a message content.

    Args:
        content: A message content: text, or text and `Media` parts.

    Returns:
        Its `Media` parts, in order.
    """
    return [] if isinstance(content, str) else [p for p in content if isinstance(p, Media)]


def openai_content(content: str | Sequence[Any]) -> str | list[dict[str, Any]]:
    """A message content as the chat completions API takes it.

    Args:
        content: A message content: text, or text and `Media` parts.

    Returns:
        The text itself, or a list of content parts.

    Raises:
        MediaError: An attached file changed since it was checked.
    """
    if isinstance(content, str):
        return content
    return [
        {"type": "text", "text": part} if isinstance(part, str) else part.openai_part()
        for part in content
    ]
