"""Error bodies read by the openai SDK, capped.

On a non-2xx status the SDK reads the whole body to build its error message, past any cap
the backend puts on replies. An httpx response hook (it runs for every transport, proxies
included) replaces such a body by its first `ERROR_BODY_BYTES`, decompressed here as it
arrives, so a hostile or broken server cannot fill memory through an error.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

import httpx2

# Enough for any provider's error JSON and a page of HTML; the message is cut after this.
ERROR_BODY_BYTES = 64 * 1024

# zlib's automatic header detection: gzip and zlib-wrapped deflate alike.
_GZIP_OR_ZLIB = 32 + zlib.MAX_WBITS


class _CappedBody(httpx2.AsyncByteStream):
    """At most `limit` bytes of `raw` (inflated first when it is gzip or deflate); the rest of
    the body is never read."""

    def __init__(self, raw: httpx2.AsyncByteStream, limit: int, inflate: bool) -> None:
        self._raw = raw
        self._limit = limit
        self._inflater = zlib.decompressobj(_GZIP_OR_ZLIB) if inflate else None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        left = self._limit
        async for received in self._raw:
            piece = received
            if self._inflater is not None:
                try:
                    piece = self._inflater.decompress(received, left)
                except zlib.error:
                    return  # a corrupt body: the status line alone tells the error
            piece = piece[:left]
            left -= len(piece)
            if piece:
                yield piece
            if left <= 0:
                return

    async def aclose(self) -> None:
        await self._raw.aclose()


async def cap_error_body(response: httpx2.Response) -> None:
    """httpx response hook: an error body is cut to `ERROR_BODY_BYTES` (decompressed).

    Args:
        response: The response (changed in place: its stream capped, its encoding header
            dropped).
    """
    if response.status_code < 400:
        return
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("identity", "gzip", "deflate", "x-gzip"):
        # brotli or zstd: not inflated here, so not read at all; the status tells the error.
        response.stream = _CappedBody(response.stream, 0, inflate=False)
    else:
        response.stream = _CappedBody(response.stream, ERROR_BODY_BYTES, encoding != "identity")
    # The body is decoded here now: the SDK must not decode it again.
    response.headers.pop("content-encoding", None)
