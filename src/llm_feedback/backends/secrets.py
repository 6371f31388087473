"""Masking secrets in every text that may reach a log, a message or a dataset.

A key is masked by its value, whatever its shape: every credential this process was
given (credentials.yml entries, the keys endpoints read from the environment) is
registered here, and `redact` replaces each occurrence. Shapes that are secret anywhere
(`sk-...`, `Bearer ...`, Google's `AIza...`, a URL's `user:password@` or `?key=...`, an
`x-api-key:` / `x-goog-api-key:` header) are masked as well, for keys this process never saw.

A URL's password given in parameters (`base_url: https://user:pw@host/v1`) never stays
there: the config loader calls `hide_url_passwords` on the parameters, so that everything
that shows them (`kedro viz build`'s JSON, logs, reports) sees `user:***@host`; the real
URL is kept here and `reveal_url` gives it back to the endpoint that opens a connection.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Iterable
from urllib.parse import unquote

from llm_feedback.core.errors import ConfigError

MASK = "***"
# Shorter values would mask ordinary words; no provider issues keys this short.
_MIN_SECRET_CHARS = 8
_SHAPED = re.compile(r"(sk-|key-|Bearer\s+)[A-Za-z0-9_\-*]{6,}")
# Google API keys (`AIza` and 35 more), and keys in a URL's query or a key header
# (`?key=...`: Gemini's REST form; `x-api-key: ...`, `x-goog-api-key: ...`).
_GOOGLE_KEY = re.compile(r"AIza[0-9A-Za-z_\-]{35}")
_KEY_FIELD = re.compile(
    r"([?&](?:key|api_key|api-key)=|\b(?:x-api-key|x-goog-api-key|api-key)[\"']?\s*[:=]\s*[\"']?)"
    r"[^\s&\"',}]+",
    re.IGNORECASE,
)
# `api_key=...`, `--token=...`, `password: ...` inside a command line's words.
_NAMED_SECRET = re.compile(
    r"((?:api_?key|key|token|password|passwd|secret)[\"']?\s*[=:]\s*[\"']?)[^\s,\"'}]+",
    re.IGNORECASE,
)
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:)[^@\s/]+@")

_lock = threading.Lock()
_secrets: list[str] = []
# masked URL -> the URL as configured, for URLs whose password the parameters no longer hold
_hidden_urls: dict[str, str] = {}


def register_secrets(values: Iterable[object]) -> None:
    """Mask these values from now on (strings shorter than 8 characters are ignored).

    Args:
        values: The secret values; those not strings are ignored.
    """
    fresh = {value for value in values if isinstance(value, str)}
    fresh = {value for value in fresh if len(value.strip()) >= _MIN_SECRET_CHARS}
    if not fresh - set(_secrets):
        return
    with _lock:
        # Longest first: a key that contains another is masked whole. One slice
        # assignment, so that a reader on another thread sees the old list or the new.
        _secrets[:] = sorted(set(_secrets) | fresh, key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with every registered secret, key-shaped token and URL password masked.

    Args:
        text: The text to show or log.

    Returns:
        The masked text.
    """
    for secret in tuple(_secrets):
        if secret in text:
            text = text.replace(secret, MASK)
    text = _URL_PASSWORD.sub(rf"\g<1>{MASK}@", text)
    text = _KEY_FIELD.sub(rf"\g<1>{MASK}", _GOOGLE_KEY.sub(MASK, text))
    return _SHAPED.sub(rf"\g<1>{MASK}", text)


def command_line(argv: Iterable[str] | None = None, words: int = 4) -> str:
    """The first `words` words of a command line (this process's by default) as it may be
    shown or stored (a run lock, a refusal): every secret `redact` knows masked, and the
    value of any `key=`, `token=`, `password=` or `secret=` word.

    Args:
        argv: The words of the command line; `sys.argv` when None.
        words: How many of the first words to keep.

    Returns:
        The masked words joined by spaces.
    """
    kept = list(sys.argv if argv is None else argv)[:words]
    return redact(_NAMED_SECRET.sub(rf"\g<1>{MASK}", " ".join(kept)))


def mask_url(url: str | None) -> str | None:
    """A URL as it may be shown: its password (`https://user:pw@host`) masked.

    Args:
        url: The URL; None or empty for none.

    Returns:
        The masked URL (`url` itself when empty).
    """
    return _URL_PASSWORD.sub(rf"\g<1>{MASK}@", url) if url else url


def hide_url_passwords(value: object) -> object:
    """`value` (parameters: mappings, lists, strings) with every URL password masked; each
    password is registered as a secret and its URL kept for `reveal_url`.

    Args:
        value: The parameters, or one of their values.

    Returns:
        The same structure, URL passwords masked.

    Raises:
        ConfigError: Two URLs differ only by their password (one masked form cannot reveal
            both).
    """
    if isinstance(value, dict):
        return {key: hide_url_passwords(item) for key, item in value.items()}
    if isinstance(value, list):
        return [hide_url_passwords(item) for item in value]
    if not isinstance(value, str) or not _URL_PASSWORD.search(value):
        return value
    masked = mask_url(value)
    if masked == value:  # already a placeholder
        return value
    known = _hidden_urls.get(masked)
    if known is not None and known != value:
        raise ConfigError(
            f"parameters: two URLs differ only by their password ({masked}); give one of "
            "the keys through conf/local/credentials.yml instead"
        )
    passwords = [match[0][len(match[1]) : -1] for match in _URL_PASSWORD.finditer(value)]
    register_secrets([*passwords, *map(unquote, passwords)])  # as written and decoded
    with _lock:
        _hidden_urls[masked] = value
    return masked


def reveal_url(value: object) -> object:
    """The URL as configured for a URL whose password `hide_url_passwords` masked; any
    other value as it is.

    Args:
        value: A masked URL, or any value.

    Returns:
        The URL with its password, or `value` unchanged.
    """
    return _hidden_urls.get(value, value) if isinstance(value, str) else value


class MaskSecrets(logging.Filter):
    """A logging filter: each record's text, from any library, is masked as `redact`
    masks, before the handler writes it (see `mask_secrets_in_logs`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Mask the record's message (its arguments merged in) when it holds a secret.

        Args:
            record: The log record.

        Returns:
            Always True: every record is kept.
        """
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
