"""Persistent request cache: a rerun, or a resume after a crash, pays for nothing twice.

Only successful results are stored. Answers are written by a background thread that
commits whatever has arrived in one transaction (WAL journal), so the event loop never
waits on SQLite and a killed process loses at most the answers of its last few
milliseconds, which a rerun then simply asks for again.

A cache that cannot do its job stops the run instead of silently re-paying: a file that
is empty, not SQLite, another program's database, read-only or corrupt is refused with a
`CacheError` naming it, before any call. A write that fails during the run (a full disk, a
lock held by another process for more than `LOCK_TIMEOUT_S`) makes the next `put`, `flush`
or lookup raise at once; the answers that could not be committed, and any that arrive
while the run winds down, are appended to a file beside it (`<cache>.unsaved.jsonl`),
from where the next run reads them back into the cache. When that file cannot be written
either (the cache's disk is full), they go to a file named after the cache in the system's
temporary folder, which the next run reads back too, and as a last resort to stderr as
JSON lines; the error names where they are.

Calls in flight are noted too (table `in_flight`: the endpoint, model, estimated prompt
tokens and `max_tokens` of each call sent and not yet answered; a call answered before the
writer's next commit is never written). A run killed with calls in flight leaves them
there; the next process that opens the cache moves them to `unseen_calls`: calls that may
have been billed, whose reply nobody received (`unseen_calls` reads them for the report's
cost table).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import sqlite3
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from llm_feedback.backends.contract import ChatResult
from llm_feedback.core.errors import CacheError
from llm_feedback.storage.remote_root import require_local

if TYPE_CHECKING:
    import pandas as pd

_LOOKUP_CHUNK = 500  # stays below SQLite's host-parameter limit
PAGE_CACHE_KIB = 65_536
_STOP = object()
_SQLITE_HEADER = b"SQLite format 3\x00"
_COLUMNS = ["key", "result"]
# How long a write waits for a lock another process holds before the run stops.
LOCK_TIMEOUT_S = 5.0
# How often a waiting flush() wakes up: to see a failure, and to let Ctrl-C through.
_WAIT_SLICE_S = 0.1


# Who wrote an `in_flight` row: this process's rows are calls still out; another's, calls
# of a run that ended without their reply (a pid may be reused, a random token is not).
_PROCESS = uuid.uuid4().hex
UNSEEN_COLUMNS = ["endpoint", "backend", "model", "prompt_tokens", "max_tokens"]
_CALL_TABLE = (
    "(key TEXT, endpoint TEXT, backend TEXT, model TEXT, prompt_tokens INTEGER, "
    "max_tokens INTEGER, process TEXT)"
)


@dataclass(frozen=True, slots=True)
class _Sent:
    key: str
    fields: tuple[str, str, str, int, int]  # endpoint, backend, model, prompt est., max_tokens


@dataclass(frozen=True, slots=True)
class _Answered:
    key: str


def unseen_calls(path: str | Path | None) -> pd.DataFrame:
    """The calls sent through the request cache at `path` whose reply was never received
    (a run killed or interrupted while they were out), from every earlier run on it.

    Args:
        path: The request cache's file; None, or a file that does not exist, has none.

    Returns:
        One row per call: `UNSEEN_COLUMNS` (prompt_tokens estimated, max_tokens the
        bound of the reply).
    """
    import pandas as pd  # the report's reader only: the client never needs pandas

    empty = pd.DataFrame({column: pd.Series(dtype="object") for column in UNSEEN_COLUMNS})
    if path is None or not Path(path).is_file():
        return empty
    columns = ", ".join(UNSEEN_COLUMNS)
    try:
        with contextlib.closing(sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
            rows = []
            if "unseen_calls" in tables:
                rows += db.execute(f"SELECT {columns} FROM unseen_calls").fetchall()
            if "in_flight" in tables:  # a killed run's, not yet moved by a later open
                rows += db.execute(
                    f"SELECT {columns} FROM in_flight WHERE process != ?", (_PROCESS,)
                ).fetchall()
    except sqlite3.Error as error:
        raise CacheError(f"request cache {path} cannot be read: {error}") from None
    return pd.DataFrame(rows, columns=UNSEEN_COLUMNS) if rows else empty


def unsaved_path(path: Path) -> Path:
    """Where answers that the cache refused are kept until the next run reads them back.

    Args:
        path: The request cache's file.

    Returns:
        The path of the unsaved answers' JSONL file beside it.
    """
    return path.with_name(path.name + ".unsaved.jsonl")


def fallback_unsaved_path(path: Path) -> Path:
    """Where they are kept when `unsaved_path` cannot be written (its disk is full): a file
    in the system's temporary folder named after the cache's absolute path.

    Args:
        path: The request cache's file.

    Returns:
        The fallback file's path (the same for the same cache in every run).
    """
    digest = hashlib.sha256(str(Path(path).absolute()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"llm_feedback-{path.name}-{digest}.unsaved.jsonl"


class RequestCache:
    def __init__(self, path: str | Path) -> None:
        """Open (or create) the cache, read back answers left unsaved, and start its writer.

        Args:
            path: The cache's SQLite file (local).

        Raises:
            ConfigError: The path is a remote URL.
            CacheError: The file is not a usable cache or cannot be opened.
        """
        self.path = require_local(path, "request_cache")  # SQLite needs a local file
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._refuse_unusable_file()
        self._lock = threading.Lock()
        self._failure: CacheError | None = None
        try:
            self._db = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=LOCK_TIMEOUT_S
            )
            self._check_schema()
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL loses nothing on a process crash under WAL; only an OS crash could.
            self._db.execute("PRAGMA synchronous=NORMAL")
            # A page cache of 64 MiB (SQLite's default is 2): the key index of a cache of
            # millions of answers stays in memory, so a lookup costs about what it costs in
            # a small one (benchmarks/cache_scale.py), for memory that is bounded.
            self._db.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, result TEXT NOT NULL)"
            )
            self._db.execute(f"CREATE TABLE IF NOT EXISTS in_flight {_CALL_TABLE}")
            self._db.execute(f"CREATE TABLE IF NOT EXISTS unseen_calls {_CALL_TABLE}")
            self._retire_calls_in_flight()
            self._read_back_unsaved()
        except sqlite3.Error as error:
            raise self._error("cannot be opened", error) from None
        self._pending: queue.SimpleQueue = queue.SimpleQueue()
        self._writer = threading.Thread(
            target=self._write_forever, name="request-cache", daemon=True
        )
        self._writer.start()

    # -- opening ---------------------------------------------------------------------
    def _error(self, what: str, cause: BaseException | str) -> CacheError:
        return CacheError(
            f"request cache {self.path} {what}: {cause}; fix or move the file, or set "
            "`cache_path` to another file (a new one starts empty)"
        )

    def _refuse_unusable_file(self) -> None:
        if not self.path.exists():
            return
        if not self.path.is_file():
            raise self._error("is not a file", "it is a directory or a special file")
        if self.path.stat().st_size == 0:
            raise self._error(
                "is empty (0 bytes)",
                "not a cache this project wrote, and reusing it would "
                "silently pay for every call again",
            )
        with self.path.open("rb") as file:
            if file.read(len(_SQLITE_HEADER)) != _SQLITE_HEADER:
                raise self._error("is not a request cache", "the file is not an SQLite database")
        if not os.access(self.path, os.W_OK):
            raise self._error("is read-only", "answers could not be stored")

    def _check_schema(self) -> None:
        tables = [row[0] for row in self._db.execute("SELECT name FROM sqlite_master")]
        if not tables:
            return  # a database nobody has written to yet: ours from now on
        if "responses" not in tables:
            raise self._error(
                "is not a request cache", f"it holds other tables ({', '.join(sorted(tables))})"
            )
        columns = [row[1] for row in self._db.execute("PRAGMA table_info(responses)")]
        if columns != _COLUMNS:
            raise self._error(
                "is not a request cache", f"its responses table has columns {columns}"
            )

    def _retire_calls_in_flight(self) -> None:
        """Calls another process left in flight were never answered: keep them as unseen."""
        left = "SELECT 1 FROM in_flight WHERE process != ? LIMIT 1"
        if self._db.execute(left, (_PROCESS,)).fetchone() is None:
            return  # nothing to write: a cache another process holds still opens
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "INSERT INTO unseen_calls SELECT * FROM in_flight WHERE process != ?", (_PROCESS,)
            )
            self._db.execute("DELETE FROM in_flight WHERE process != ?", (_PROCESS,))
            self._db.execute("COMMIT")

    def _read_back_unsaved(self) -> None:
        """Commit the answers an earlier run could not store, then forget the side files."""
        for side in (unsaved_path(self.path), fallback_unsaved_path(self.path)):
            if not side.is_file():
                continue
            rows = []
            # "\n" alone ends a line: an answer may hold a raw U+2028 (ensure_ascii=False).
            for line in side.read_text(encoding="utf-8").split("\n"):
                if line.strip():
                    record = json.loads(line)
                    rows.append((record["key"], record["result"]))
            self._commit(rows)
            side.unlink()

    # -- reading and writing ---------------------------------------------------------
    def get_many(self, keys: Iterable[str]) -> dict[str, ChatResult]:
        """The cached answers among `keys`, after every answer already put is written.

        Args:
            keys: The cache keys to look up.

        Returns:
            Key -> answer for the keys the cache holds.

        Raises:
            CacheError: The cache cannot be read, or the writer failed.
        """
        self.flush()  # a lookup must see every answer already handed to put()
        unique = list(dict.fromkeys(keys))
        found: dict[str, ChatResult] = {}
        try:
            with self._lock:
                for start in range(0, len(unique), _LOOKUP_CHUNK):
                    chunk = unique[start : start + _LOOKUP_CHUNK]
                    placeholders = ",".join("?" * len(chunk))
                    rows = self._db.execute(
                        f"SELECT key, result FROM responses WHERE key IN ({placeholders})", chunk
                    )
                    for key, payload in rows:
                        found[key] = _decode(payload)
        except sqlite3.Error as error:
            raise self._error("cannot be read", error) from None
        return found

    def get(self, key: str) -> ChatResult | None:
        """The cached answer of one key.

        Args:
            key: The cache key.

        Returns:
            The answer, or None when the cache does not hold it.

        Raises:
            CacheError: The cache cannot be read, or the writer failed.
        """
        return self.get_many([key]).get(key)

    def put(self, key: str, result: ChatResult) -> None:
        """Queue an answer for the writer; raises the writer's failure, if any, at once.

        Failed results are not cached.

        Args:
            key: The request's cache key.
            result: Its answer.

        Raises:
            CacheError: The writer failed earlier.
        """
        if result.ok:
            self._pending.put((key, result))
        self._raise_failure()

    def mark_sent(
        self,
        key: str,
        *,
        endpoint: str,
        backend: str,
        model: str,
        prompt_tokens: int,
        max_tokens: int,
    ) -> None:
        """Note a call as sent (in flight) until `mark_answered(key)`.

        Args:
            key: The request's cache key.
            endpoint: The endpoint's name.
            backend: Its backend.
            model: Its model.
            prompt_tokens: The request's estimated input tokens.
            max_tokens: The request's reply budget (the bound of what a reply may cost).
        """
        self._pending.put(_Sent(key, (endpoint, backend, model, prompt_tokens, max_tokens)))

    def mark_answered(self, key: str) -> None:
        """The call of `key` got its reply (an answer or an error): no longer in flight.

        Args:
            key: The request's cache key.
        """
        self._pending.put(_Answered(key))

    def flush(self) -> None:
        """Return once everything put so far is committed; raise if it could not be."""
        done = threading.Event()
        self._pending.put(done)
        # Waiting in slices: Ctrl-C gets through, and a dead writer does not hang us.
        while not done.wait(_WAIT_SLICE_S):
            self._raise_failure()
            if not self._writer.is_alive():
                raise self._error("stopped writing", "its writer thread has ended")
        self._raise_failure()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def __len__(self) -> int:
        self.flush()
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        self._pending.put(_STOP)
        while self._writer.is_alive():  # in slices, so that Ctrl-C gets through
            self._writer.join(_WAIT_SLICE_S)
        with self._lock:
            self._db.close()

    def _keep_beside(self, rows: list[tuple[str, str]]) -> str:
        """Append `rows` to the first side file that takes them (beside the cache, then in
        the temporary folder), or print them to stderr; return where they went."""
        lines = "".join(
            json.dumps({"key": key, "result": payload}, ensure_ascii=False) + "\n"
            for key, payload in rows
        )
        problems = []
        for side in (unsaved_path(self.path), fallback_unsaved_path(self.path)):
            size = side.stat().st_size if side.is_file() else 0
            try:
                with side.open("a", encoding="utf-8") as file:
                    file.write(lines)
                    file.flush()
                    os.fsync(file.fileno())
                return str(side)
            except OSError as error:
                problems.append(f"{side}: {error.strerror or error}")
                with contextlib.suppress(OSError):  # no torn line left for the next run
                    os.truncate(side, size)
        # Nowhere on disk: stderr still reaches the terminal (or whatever the caller kept).
        sys.stderr.write("".join(f"unsaved answer: {line}" for line in lines.splitlines(True)))
        sys.stderr.flush()
        return f"stderr, as 'unsaved answer:' lines ({'; '.join(problems)})"

    def _commit(
        self,
        rows: list[tuple[str, str]],
        sent: Iterable[tuple] = (),
        answered: Iterable[tuple[str]] = (),
    ) -> None:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany(
                    "INSERT OR REPLACE INTO responses (key, result) VALUES (?, ?)", rows
                )
                self._db.executemany("INSERT INTO in_flight VALUES (?, ?, ?, ?, ?, ?, ?)", sent)
                self._db.executemany("DELETE FROM in_flight WHERE key = ?", answered)
                self._db.execute("COMMIT")
            except sqlite3.Error:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

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
            sent, answered = _calls_in_flight(batch)
            if rows or sent or answered:
                self._store(rows, sent, answered)
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()
            if any(item is _STOP for item in batch):
                return

    def _store(
        self, rows: list[tuple[str, str]], sent: list[tuple] = (), answered: list[tuple] = ()
    ) -> None:
        """Commit `rows`; after a failed commit, keep them (and all later ones) beside."""
        cause = None
        if self._failure is None:
            try:
                self._commit(rows, sent, answered)
                return
            except sqlite3.Error as error:
                cause = str(error)
                if "locked" in cause or "busy" in cause:
                    cause += f" (another process held its lock for more than {LOCK_TIMEOUT_S:g} s)"
        if not rows:
            return
        kept = self._keep_beside(rows)
        if cause is not None:
            read_back = "" if kept.startswith("stderr") else ", read back by the next run"
            self._failure = CacheError(
                f"request cache {self.path} cannot be written: {cause}; the run stops "
                f"here, the answers received so far are kept (in the cache, and in "
                f"{kept}{read_back}): fix the cause and run the same command to resume"
            )
        elif kept not in str(self._failure):  # a later batch went elsewhere: say so
            self._failure = CacheError(f"{self._failure}; later answers are kept in {kept}")


def _calls_in_flight(batch: list) -> tuple[list[tuple], list[tuple[str]]]:
    """The `in_flight` rows to insert and the keys to delete for one writer batch: a call
    sent and answered within the batch is neither."""
    sent: dict[str, tuple] = {}
    answered: list[tuple[str]] = []
    for item in batch:
        if isinstance(item, _Sent):
            sent[item.key] = (item.key, *item.fields, _PROCESS)
        elif isinstance(item, _Answered) and sent.pop(item.key, None) is None:
            answered.append((item.key,))
    return list(sent.values()), answered


def _encode(result: ChatResult) -> str:
    fields = {
        "text": result.text,
        "finish_reason": result.finish_reason,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "latency_s": result.latency_s,
        "model": result.model,
        "via_batch": result.via_batch,
    }
    if result.label_logprobs is not None:  # a cached rerun reads the same probabilities
        fields["label_logprobs"] = result.label_logprobs
    if result.reasoning_tokens:  # absent otherwise, as in answers cached before them
        fields["reasoning_tokens"] = result.reasoning_tokens
    for name in ("cached_prompt_tokens", "cache_write_tokens"):
        if getattr(result, name) is not None:  # absent where the reply did not say
            fields[name] = getattr(result, name)
    return json.dumps(fields, ensure_ascii=False)


def _decode(payload: str) -> ChatResult:
    fields = json.loads(payload)
    return ChatResult(cached=True, **fields)
