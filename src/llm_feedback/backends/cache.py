"""Persistent request cache: a rerun, or a resume after a crash, pays for nothing twice.

Only successful results are stored. Every write is committed at once (WAL journal), so a
process killed half-way keeps every answer it had received.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

from llm_feedback.backends.contract import ChatResult

_LOOKUP_CHUNK = 500  # stays below SQLite's host-parameter limit


class RequestCache:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL loses nothing on a process crash under WAL; only an OS crash could.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, result TEXT NOT NULL)"
        )

    def get_many(self, keys: Iterable[str]) -> dict[str, ChatResult]:
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
        if not result.ok:
            return
        payload = json.dumps(
            {
                "text": result.text,
                "finish_reason": result.finish_reason,
                "prompt_tokens": result.prompt_tokens,
                "completion_tokens": result.completion_tokens,
                "latency_s": result.latency_s,
                "model": result.model,
            },
            ensure_ascii=False,
        )
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, result) VALUES (?, ?)", (key, payload)
            )

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _decode(payload: str) -> ChatResult:
    fields = json.loads(payload)
    return ChatResult(cached=True, **fields)
