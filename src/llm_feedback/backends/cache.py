"""Persistent request cache: a rerun, or a resume after a crash, pays for nothing twice.

Only successful results are stored. Answers are written by a background thread that
commits whatever has arrived in one transaction (WAL journal), so the event loop never
waits on SQLite and a killed process loses at most the answers of its last few
milliseconds, which a rerun then simply asks for again.
"""

from __future__ import annotations

import json
import queue
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

from llm_feedback.backends.contract import ChatResult
from llm_feedback.remote_root import require_local

_LOOKUP_CHUNK = 500  # stays below SQLite's host-parameter limit
_STOP = object()


class RequestCache:
    def __init__(self, path: str | Path) -> None:
        self.path = require_local(path, "request_cache")  # SQLite needs a local file
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL loses nothing on a process crash under WAL; only an OS crash could.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, result TEXT NOT NULL)"
        )
        self._pending: queue.SimpleQueue = queue.SimpleQueue()
        self._writer = threading.Thread(
            target=self._write_forever, name="request-cache", daemon=True
        )
        self._writer.start()

    def get_many(self, keys: Iterable[str]) -> dict[str, ChatResult]:
        self.flush()  # a lookup must see every answer already handed to put()
        unique = list(dict.fromkeys(keys))
        found: dict[str, ChatResult] = {}
        with self._lock:
            for start in range(0, len(unique), _LOOKUP_CHUNK):
                chunk = unique[start : start + _LOOKUP_CHUNK]
                placeholders = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT key, result FROM responses WHERE key IN ({placeholders})", chunk
                )
                for key, payload in rows:
                    found[key] = _decode(payload)
        return found

    def get(self, key: str) -> ChatResult | None:
        return self.get_many([key]).get(key)

    def put(self, key: str, result: ChatResult) -> None:
        if result.ok:
            self._pending.put((key, result))

    def flush(self) -> None:
        """Return once everything put so far is committed."""
        done = threading.Event()
        self._pending.put(done)
        done.wait()

    def __len__(self) -> int:
        self.flush()
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        self._pending.put(_STOP)
        self._writer.join()
        with self._lock:
            self._db.close()

    def _write_forever(self) -> None:
        while True:
            batch = [self._pending.get()]
            while True:  # take everything that has arrived meanwhile: one commit for all
                try:
                    batch.append(self._pending.get_nowait())
                except queue.Empty:
                    break
            rows = [
                (key, _encode(result))
                for key, result in (item for item in batch if isinstance(item, tuple))
            ]
            if rows:
                with self._lock:
                    self._db.execute("BEGIN")
                    self._db.executemany(
                        "INSERT OR REPLACE INTO responses (key, result) VALUES (?, ?)", rows
                    )
                    self._db.execute("COMMIT")
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()
            if any(item is _STOP for item in batch):
                return


def _encode(result: ChatResult) -> str:
    return json.dumps(
        {
            "text": result.text,
            "finish_reason": result.finish_reason,
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "latency_s": result.latency_s,
            "model": result.model,
            "via_batch": result.via_batch,
        },
        ensure_ascii=False,
    )


def _decode(payload: str) -> ChatResult:
    fields = json.loads(payload)
    return ChatResult(cached=True, **fields)
