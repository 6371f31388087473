"""One run per remote data root: a lock object created with an exclusive put.

The lock is a small JSON object (owner, token, start, heartbeat) written with fsspec's
exclusive-create mode `xb`; s3fs sends it as a conditional PUT (`If-None-Match: *`), so of
two runs that race for a free root exactly one creates it, the other is refused naming the
holder. A remote lock outlives a killed holder (nothing like the OS releasing an `flock`),
so the holder rewrites its heartbeat every `heartbeat_s` from a background thread, and a
lock whose heartbeat is older than `stale_after_s` is taken over (deleted, then created
anew with the same exclusive put: a race for a stale lock still has one winner).

Filesystems whose fsspec driver has no exclusive create are refused with a message: a lock
that does not exclude would be worse than none.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid

import fsspec

from llm_feedback.backends.secrets import command_line, redact
from llm_feedback.core.errors import ConfigError, RunLocked

logger = logging.getLogger(__name__)

HEARTBEAT_S = 30.0
STALE_AFTER_S = 300.0  # ten missed heartbeats: the holder is gone


class RemoteLock:
    def __init__(
        self, url: str, heartbeat_s: float = HEARTBEAT_S, stale_after_s: float = STALE_AFTER_S
    ) -> None:
        """Name the lock object; nothing is locked until `acquire`.

        Args:
            url: the lock object's URL.
            heartbeat_s: how often the holder renews it.
            stale_after_s: how old a lock may be before another run takes it over.
        """
        self.url = url
        self.fs, self.path = fsspec.core.url_to_fs(url)
        self.heartbeat_s = heartbeat_s
        self.stale_after_s = stale_after_s
        self._token = uuid.uuid4().hex
        self._started = 0.0
        self._stop = threading.Event()
        self._beater: threading.Thread | None = None

    def acquire(self) -> None:
        self._started = time.time()
        if not self._create():
            holder = self._read()
            age = time.time() - float(holder.get("heartbeat", 0)) if holder else None
            if holder and age is not None and age < self.stale_after_s:
                owner = redact(holder.get("owner", "another run"))
                raise RunLocked(
                    f"{self.url} is held by {owner} (heartbeat "
                    f"{age:.0f} s ago): wait for that run to finish, or give this one its "
                    "own data root (--params data_root=...)"
                )
            logger.warning(
                "taking over the stale lock %s of %s (no heartbeat for %s s)",
                self.url,
                redact((holder or {}).get("owner", "an unknown run")),
                "?" if age is None else f"{age:.0f}",
            )
            self.fs.rm_file(self.path)
            if not self._create():
                raise RunLocked(f"{self.url} was taken by another run while this one waited")
        self._stop.clear()
        self._beater = threading.Thread(target=self._beat, name="remote-lock", daemon=True)
        self._beater.start()

    def release(self) -> None:
        if self._beater is None:
            return
        self._stop.set()
        self._beater.join()
        self._beater = None
        holder = self._read()
        if holder and holder.get("token") == self._token:
            self.fs.rm_file(self.path)

    def _record(self) -> bytes:
        return json.dumps(
            {
                "owner": f"pid {os.getpid()} on {socket.gethostname()} ({command_line()})",
                "token": self._token,
                "started": self._started,
                "heartbeat": time.time(),
            }
        ).encode()

    def _create(self) -> bool:
        """Create the lock object if absent; False when it exists."""
        try:
            with self.fs.open(self.path, "xb") as handle:
                handle.write(self._record())
        except FileExistsError:
            return False
        except (NotImplementedError, ValueError) as error:
            raise ConfigError(
                f"cannot lock {self.url}: its filesystem ({type(self.fs).__name__}) has no "
                f"exclusive create ({error}); use a data root on S3 or a local one"
            ) from None
        return True

    def _read(self) -> dict | None:
        self.fs.invalidate_cache(self.path)
        try:
            return json.loads(self.fs.cat_file(self.path))
        except FileNotFoundError:
            return None
        except ValueError:  # not ours, or half written by hand: treated as stale
            return {}

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                holder = self._read()
                if not holder or holder.get("token") != self._token:
                    logger.error("lost the lock %s to %s", self.url, (holder or {}).get("owner"))
                    return
                self.fs.pipe_file(self.path, self._record())
            except Exception as error:  # a network blip: the next beat tries again
                logger.warning("heartbeat of the lock %s failed: %r", self.url, error)
