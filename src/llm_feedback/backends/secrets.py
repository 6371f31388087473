"""Masking secrets in every text that may reach a log, a message or a dataset.

A key is masked by its value, whatever its shape: every credential this process was
given (credentials.yml entries, the keys endpoints read from the environment) is
registered here, and `redact` replaces each occurrence. Shapes that are secret anywhere
(`sk-...`, `Bearer ...`, a URL's `user:password@`) are masked as well, for keys this
process never saw.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable

MASK = "***"
# Shorter values would mask ordinary words; no provider issues keys this short.
_MIN_SECRET_CHARS = 8
_SHAPED = re.compile(r"(sk-|key-|Bearer\s+)[A-Za-z0-9_\-*]{6,}")
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:)[^@\s/]+@")

_lock = threading.Lock()
_secrets: list[str] = []


def register_secrets(values: Iterable[object]) -> None:
    """Mask these values from now on (strings shorter than 8 characters are ignored)."""
    fresh = {value for value in values if isinstance(value, str)}
    fresh = {value for value in fresh if len(value.strip()) >= _MIN_SECRET_CHARS}
    if not fresh - set(_secrets):
        return
    with _lock:
        # Longest first: a key that contains another is masked whole. One slice
        # assignment, so that a reader on another thread sees the old list or the new.
        _secrets[:] = sorted(set(_secrets) | fresh, key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with every registered secret, key-shaped token and URL password masked."""
    for secret in tuple(_secrets):
        if secret in text:
            text = text.replace(secret, MASK)
    text = _URL_PASSWORD.sub(rf"\g<1>{MASK}@", text)
    return _SHAPED.sub(rf"\g<1>{MASK}", text)


def mask_url(url: str | None) -> str | None:
    """A URL as it may be shown: its password (`https://user:pw@host`) masked."""
    return _URL_PASSWORD.sub(rf"\g<1>{MASK}@", url) if url else url


class MaskSecrets(logging.Filter):
    """A logging filter: each record's text, from any library, is masked as `redact`
    masks, before the handler writes it (see `mask_secrets_in_logs`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def mask_secrets_in_logs() -> None:
    """Put `MaskSecrets` on every handler of the root logger (the project's hook does, once
    Kedro has configured logging: its logging.yml may not name filter classes)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(existing, MaskSecrets) for existing in handler.filters):
            handler.addFilter(MaskSecrets())
