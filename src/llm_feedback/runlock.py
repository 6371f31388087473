"""One run per data root: an advisory lock beside the request cache.

Two runs on one cache would both pay for the calls neither has cached yet and together
exceed each endpoint's concurrency limit. The lock is an `flock` on a file that records the
holder; the operating system releases it when the holder exits or dies, so a lock left by a
killed run is simply taken over.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import IO

from llm_feedback.backends.secrets import command_line, redact
from llm_feedback.errors import ConfigError
from llm_feedback.remote_root import require_local


class RunLocked(ConfigError):
    """Another run holds the data root."""


class RunLock:
    def __init__(self, path: str | Path) -> None:
        self.path = require_local(path, "run lock")  # a remote root: remote_lock.py
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            # Redacted again: a lock written by an older version may hold the raw argv.
            holder = redact(handle.read().strip()) or "another process"
            handle.close()
            raise RunLocked(
                f"{self.path.parent} is in use by {holder}: wait for that run to finish, or "
                "give this one its own data root (--params data_root=...)"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(
            f"pid {os.getpid()} ({command_line()}) since {time.strftime('%Y-%m-%d %H:%M:%S')}"
        )
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None
