"""Data roots on object storage (`data_root=s3://bucket/data`, or any fsspec URL).

Versioned datasets go to the remote root through fsspec. The request cache cannot: it is
SQLite, which needs a local file. So on a remote root it lives in a local mirror folder
(`local_root`) and `CacheSync` keeps the root's copy, `<root>/02_intermediate/
request_cache.sqlite` and its batch ledger, in step: pulled (merged) at the start of a run,
pushed after each node that changed it and at the end, failed or interrupted runs included.
A second machine, or a clean checkout with an empty disk, pulls the answers and pays for
nothing twice. The lock of a remote root is an object beside the remote cache
(`remote_lock.RemoteLock`); `runlock.RootGuard` takes the lock and runs the sync.

A remote path where this project needs a local one (the cache itself, a lock file, a batch
ledger, a JSON Lines input) is refused by `require_local`: fsspec URLs given to `pathlib`
would silently create a local folder named `s3:`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

import fsspec
from fsspec.core import split_protocol

from llm_feedback.core.errors import ConfigError

logger = logging.getLogger(__name__)

# Where a remote root's cache lives under the root, as for a local one (parameters.yml).
REMOTE_CACHE = "02_intermediate/request_cache.sqlite"
# The batch ledger beside the cache (backends/batch_api.py), synced with it.
LEDGER_SUFFIX = ".batches.json"
LOCK_SUFFIX = ".lock"
# The local mirrors' parent folder; default `$XDG_CACHE_HOME/llm_feedback` (~/.cache).
CACHE_DIR_ENV = "LLM_FEEDBACK_CACHE_DIR"
LOCAL_PROTOCOLS = (None, "file", "local")


def is_remote(path: str | os.PathLike[str] | None) -> bool:
    """Whether `path` is an fsspec URL of a non-local filesystem (s3://, gs://, memory://).

    Args:
        path: a path or URL (None: none).

    Returns:
        True for a remote URL.
    """
    if path is None:
        return False
    protocol, _ = split_protocol(str(path))
    return protocol not in LOCAL_PROTOCOLS


def require_local(path: str | os.PathLike[str], what: str) -> Path:
    """`path` as a local Path, or a clear refusal for a remote URL.

    Args:
        path: a path or URL.
        what: what the path is for, named in the refusal.

    Returns:
        The local path.
    """
    if is_remote(path):
        raise ConfigError(
            f"{what}: {path} is a remote URL where a local path is needed; on a remote "
            "data_root the request cache is mirrored locally (leave request_cache at its "
            f"default, or set it or {CACHE_DIR_ENV} to a local folder)"
        )
    protocol, local = split_protocol(str(path))
    return Path(local if protocol else path)


def cache_home() -> Path:
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        return require_local(configured, CACHE_DIR_ENV)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "llm_feedback"


def local_root(root: str) -> str:
    """The local folder that stands for `root` where a local file is needed: `root` itself
    when local, else `<cache home>/<hash of the URL>` (one mirror per remote root).

    Registered as the `local_root` resolver of the configuration (settings.py).

    Args:
        root: the data root, a folder or URL.

    Returns:
        The local folder.
    """
    if not is_remote(root):
        return root
    digest = hashlib.sha256(str(root).rstrip("/").encode()).hexdigest()[:16]
    return str(cache_home() / digest)


def remote_cache_url(root: str) -> str:
    """Where a remote data root keeps its request cache.

    Args:
        root: the remote data root's URL.

    Returns:
        The cache's URL.
    """
    return f"{str(root).rstrip('/')}/{REMOTE_CACHE}"


class CacheSync:
    """The request cache at `local_cache` kept in step with its copy at `remote_cache`."""

    def __init__(self, remote_cache: str, local_cache: str | Path) -> None:
        """Name both copies; nothing is copied until `pull`.

        Args:
            remote_cache: the cache's URL at the remote root.
            local_cache: the local cache file.
        """
        self.remote_cache = remote_cache
        self.fs, self._remote = fsspec.core.url_to_fs(remote_cache)
        self.local = require_local(local_cache, "request_cache")
        self._pushed: Any = None

    def pull(self) -> int:
        """Merge the remote cache into the local one (answers on either side are kept) and
        take the remote batch ledger's batches too; returns the answers the remote held."""
        self.local.parent.mkdir(parents=True, exist_ok=True)
        self.fs.invalidate_cache()
        pulled = held = 0
        if self.fs.exists(self._remote):
            with tempfile.TemporaryDirectory(dir=self.local.parent) as folder:
                copy = Path(folder) / "remote.sqlite"
                self.fs.get_file(self._remote, str(copy))
                pulled, held = _merge_answers(copy, self.local)
        elif self.local.is_file():
            held = _merge_answers(None, self.local)[1]
        ledger = self._remote + LEDGER_SUFFIX
        if self.fs.exists(ledger):
            _merge_ledgers(json.loads(self.fs.cat_file(ledger)), self._local_ledger)
        logger.info("request cache: %d answers pulled from %s", pulled, self.remote_cache)
        # Local answers the remote lacks (a run that could not push) go up at the next push.
        self._pushed = self._state() if held == pulled else None
        return pulled

    def push(self) -> bool:
        """Upload the local cache (a consistent SQLite snapshot, even while a client writes)
        and its ledger when they changed since the last pull or push."""
        state = self._state()
        if state == self._pushed or not self.local.is_file():
            return False
        with tempfile.TemporaryDirectory(dir=self.local.parent) as folder:
            snapshot = Path(folder) / self.local.name
            with (
                closing(sqlite3.connect(self.local)) as source,
                closing(sqlite3.connect(snapshot)) as target,
            ):
                source.backup(target)
            self.fs.put_file(str(snapshot), self._remote)
        if self._local_ledger.is_file():
            self.fs.pipe_file(self._remote + LEDGER_SUFFIX, self._local_ledger.read_bytes())
        self._pushed = state
        logger.info("request cache pushed to %s", self.remote_cache)
        return True

    @property
    def _local_ledger(self) -> Path:
        return self.local.with_name(self.local.name + LEDGER_SUFFIX)

    def _state(self) -> tuple:
        files = (self.local, self.local.with_name(self.local.name + "-wal"), self._local_ledger)
        return tuple(
            (stat.st_mtime_ns, stat.st_size) if (stat := _stat(path)) else None for path in files
        )


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def _merge_answers(source: Path | None, target: Path) -> tuple[int, int]:
    """Copy the answers of the cache file `source` (if any) into `target` (created if
    absent); returns how many `source` holds and how many `target` holds then."""
    with closing(sqlite3.connect(target)) as db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, result TEXT NOT NULL)"
        )
        count = 0
        if source is not None:
            db.execute("ATTACH DATABASE ? AS remote", (str(source),))
            count = db.execute("SELECT COUNT(*) FROM remote.responses").fetchone()[0]
            db.execute(
                "INSERT OR IGNORE INTO main.responses SELECT key, result FROM remote.responses"
            )
            db.commit()
            db.execute("DETACH DATABASE remote")
        held = db.execute("SELECT COUNT(*) FROM main.responses").fetchone()[0]
    return count, held


def _merge_ledgers(remote: dict, local_path: Path) -> None:
    local = json.loads(local_path.read_text()) if local_path.is_file() else {"batches": []}
    known = {batch["id"] for batch in local["batches"]}
    local["batches"] += [batch for batch in remote["batches"] if batch["id"] not in known]
    local_path.write_text(json.dumps(local, indent=1))
