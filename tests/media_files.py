"""Small image and audio files written with the standard library, for the media tests."""

from __future__ import annotations

import io
import struct
import wave
import zlib
from pathlib import Path


def png_bytes(width: int = 2, height: int = 1, rgb: tuple[int, int, int] = (255, 0, 0)) -> bytes:
    """A valid RGB PNG of one colour."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))  # filter 0 per row
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def wav_bytes(samples: int = 160, rate: int = 16000, level: int = 1000) -> bytes:
    """A mono 16-bit PCM WAV: a square wave of `samples` frames."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as clip:
        clip.setnchannels(1)
        clip.setsampwidth(2)
        clip.setframerate(rate)
        frames = b"".join(
            struct.pack("<h", level if (i // 8) % 2 else -level) for i in range(samples)
        )
        clip.writeframes(frames)
    return buffer.getvalue()


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
