"""One run per data root: an advisory lock beside the request cache, and the run's guard.

Two runs on one cache would both pay for the calls neither has cached yet and together
exceed each endpoint's concurrency limit. The lock of a local root is an `flock` on a file
that records the holder; the operating system releases it when the holder exits or dies, so
a lock left by a killed run is simply taken over. A remote root is locked by an object
(`remote_lock.RemoteLock`). `RootGuard` holds either lock for a run, with the cache sync of
a remote root (`remote_root.CacheSync`).
"""

from __future__ import annotations

import atexit
import fcntl
import os
import time
from pathlib import Path
from typing import IO, Any, Protocol

from llm_feedback.backends.secrets import command_line, redact
from llm_feedback.core.errors import CacheError, ConfigError, RunLocked
from llm_feedback.runs.remote_lock import RemoteLock
from llm_feedback.storage.remote_root import (
    LOCK_SUFFIX,
    CacheSync,
    is_remote,
    remote_cache_url,
    require_local,
)


class RunLock:
    def __init__(self, path: str | Path) -> None:
        """Name the lock file; nothing is locked until `acquire`.

        Args:
            path: the lock file, local.
        """
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


class _Lock(Protocol):
    def acquire(self) -> None: ...
    def release(self) -> None: ...


class RootGuard:
    """One run's hold on its data root: the lock, and for a remote root the cache sync.

    `acquire` locks and pulls; `checkpoint` pushes (after each node); `release` pushes and
    unlocks, also at interpreter exit when a run was interrupted (Ctrl-C skips Kedro's
    error hooks)."""

    def __init__(self, lock: _Lock, sync: CacheSync | None, root: str | None = None) -> None:
        """Hold the lock and, for a remote root, the cache sync.

        Args:
            lock: the local or remote lock.
            sync: the request cache's sync with a remote root (None: local).
            root: the remote root's URL, for messages (None: local).
        """
        self.lock = lock
        self.sync = sync
        self.root = root
        self._held = False

    def acquire(self) -> None:
        try:
            self.lock.acquire()
        except Exception as error:
            raise self._unreachable(error) from error
        self._held = True
        atexit.register(self.release)
        try:
            if self.sync is not None:
                self.sync.pull()
        except BaseException as error:
            self.release()
            if isinstance(error, Exception):
                raise self._unreachable(error) from error
            raise

    def _unreachable(self, error: Exception) -> Exception:
        """A remote root that cannot be used (no bucket, no credentials, no network), or a
        local lock file that cannot be written (a read-only or full disk), is a clear
        one-line error naming it; a held lock or a bad setting passes as it is."""
        if isinstance(error, ConfigError):
            return error
        if self.root is None:
            if not isinstance(error, OSError):
                return error
            path = getattr(self.lock, "path", None) or error.filename
            return CacheError(
                f"request cache lock {path}: cannot be written ({error.strerror or error}); "
                "the request cache's folder must be writable: point data_root (or "
                "request_cache) at a writable folder, or set request_cache=null to run "
                "without the cache"
            )
        return ConfigError(
            f"data_root {self.root}: cannot lock and sync the request cache there "
            f"({type(error).__name__}: {error}); check the bucket, its credentials "
            "(AWS_* variables or ~/.aws) and AWS_ENDPOINT_URL"
        )

    def checkpoint(self) -> None:
        if self._held and self.sync is not None:
            self.sync.push()

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        atexit.unregister(self.release)
        try:
            if self.sync is not None:
                self.sync.push()
        finally:
            self.lock.release()


def root_guard(parameters: dict[str, Any], cache: str) -> RootGuard:
    """The guard of a run whose request cache is `cache` (the `request_cache` parameter):
    a local `flock` beside it for a local data root, the remote lock and cache sync for a
    remote one.

    Args:
        parameters: the run's parameters.
        cache: the request cache's path.

    Returns:
        The guard, not acquired yet.
    """
    local_cache = require_local(cache, "request_cache")
    root = parameters.get("data_root")
    if not is_remote(root):
        return RootGuard(RunLock(Path(f"{local_cache}{LOCK_SUFFIX}")), None)
    remote = remote_cache_url(root)
    return RootGuard(RemoteLock(remote + LOCK_SUFFIX), CacheSync(remote, local_cache), root)
