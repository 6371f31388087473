"""The request cache never hangs, never silently re-pays, and names its file when it fails.

Real SQLite files and real other processes: a lock held by a second process, a cache made
read-only (immutable for root, who ignores file modes), empty, foreign and corrupt files.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_feedback.backends import EndpointConfig, LLMClient
from llm_feedback.backends import cache as cache_module
from llm_feedback.backends.cache import RequestCache, fallback_unsaved_path, unsaved_path
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.core.errors import CacheError
from llm_feedback.testing.server import FakeLLMServer

SHORT_LOCK_TIMEOUT_S = 0.5


def answer(n: int) -> ChatResult:
    return ChatResult(f"answer {n}", finish_reason="stop", prompt_tokens=3, completion_tokens=2)


def filled_cache(path: Path, n: int) -> None:
    cache = RequestCache(path)
    for i in range(n):
        cache.put(f"key-{i}", answer(i))
    cache.close()


@pytest.fixture
def short_lock_timeout(monkeypatch):
    monkeypatch.setattr(cache_module, "LOCK_TIMEOUT_S", SHORT_LOCK_TIMEOUT_S)


@pytest.fixture
def locked(tmp_path) -> Iterator[Path]:
    """A cache whose write lock another process holds until the test ends."""
    path = tmp_path / "cache.sqlite"
    filled_cache(path, 1)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "db.execute('BEGIN IMMEDIATE')\n"
            "print('locked', flush=True)\n"
            "time.sleep(120)\n",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield path
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_held_elsewhere_stops_at_once_and_keeps_every_answer(locked, short_lock_timeout):
    cache = RequestCache(locked)
    cache.put("key-a", answer(1))
    started = time.monotonic()
    with pytest.raises(CacheError) as failure:
        cache.flush()
    assert time.monotonic() - started < 10 * SHORT_LOCK_TIMEOUT_S
    message = str(failure.value)
    assert str(locked) in message and "locked" in message and "held its lock" in message
    with pytest.raises(CacheError):  # every later answer is refused at once too...
        cache.put("key-b", answer(2))
    cache.close()  # ...and nothing waits forever
    assert unsaved_path(locked).is_file()


def test_the_answers_kept_beside_are_read_back_by_the_next_run(tmp_path, short_lock_timeout):
    path = tmp_path / "cache.sqlite"
    filled_cache(path, 1)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    cache = RequestCache(path)
    cache.put("key-a", answer(1))
    with pytest.raises(CacheError):
        cache.flush()
    with pytest.raises(CacheError):
        cache.put("key-b", answer(2))
    cache.close()
    holder.execute("ROLLBACK")
    holder.close()
    reopened = RequestCache(path)
    found = reopened.get_many(["key-0", "key-a", "key-b"])
    assert {key: result.text for key, result in found.items()} == {
        "key-0": "answer 0",
        "key-a": "answer 1",
        "key-b": "answer 2",
    }
    reopened.close()
    assert not unsaved_path(path).exists()


def test_a_run_stops_at_the_first_failed_write(locked, short_lock_timeout):
    requests = [ChatRequest.from_prompt(f"question {i}") for i in range(400)]
    with FakeLLMServer(lambda body, ctx: "ok", latency_s=0.02) as server:
        config = EndpointConfig.from_dict(
            {"backend": "openai", "model": "m", "base_url": server.base_url, "max_concurrent": 2},
            name="judge",
        )
        with pytest.raises(CacheError, match="cannot be written"):
            with LLMClient(config, locked, progress=False) as client:
                client.complete_many(requests)
        sent = server.request_count
    assert sent < len(requests) / 2  # stopped, not ground through
    # Everything answered before the stop is kept for the next run.
    kept = unsaved_path(locked).read_text().count("\n")
    assert kept >= sent - 2 * 2


def test_ctrl_c_interrupts_a_flush_that_waits_on_a_lock(locked, monkeypatch):
    # Long enough that a loaded machine still delivers the signal before the lock times out.
    monkeypatch.setattr(cache_module, "LOCK_TIMEOUT_S", 8.0)
    cache = RequestCache(locked)
    cache.put("key-a", answer(1))
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        cache.flush()
    assert time.monotonic() - started < 4.0  # well before the lock would have timed out
    timer.join()
    cache.close()  # the writer gives up on the lock in its own time, keeping the answer
    assert '"key-a"' in unsaved_path(locked).read_text()


def _make_read_only(path: Path) -> None:
    if os.geteuid() != 0:
        path.chmod(0o444)
        return
    if shutil.which("chattr") is None:
        pytest.skip("root ignores file modes and chattr is not available")
    if subprocess.run(["chattr", "+i", str(path)], check=False, capture_output=True).returncode:
        pytest.skip("this file system cannot make a file immutable")


def _make_writable(path: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)], check=False, capture_output=True)
    else:
        path.chmod(0o644)


def test_a_read_only_cache_file_is_refused_before_any_call(tmp_path):
    path = tmp_path / "cache.sqlite"
    filled_cache(path, 3)
    _make_read_only(path)
    try:
        with pytest.raises(CacheError, match="read-only") as failure:
            RequestCache(path)
        assert str(path) in str(failure.value)
    finally:
        _make_writable(path)


def test_a_cache_file_made_read_only_during_the_run_stops_it(tmp_path):
    path = tmp_path / "cache.sqlite"
    cache = RequestCache(path)
    cache.put("key-0", answer(0))
    cache.flush()
    wal = path.with_name(path.name + "-wal")
    _make_read_only(path)
    _make_read_only(wal)
    try:
        cache.put("key-1", answer(1))
        with pytest.raises(CacheError, match="cannot be written") as failure:
            cache.flush()
        assert str(path) in str(failure.value)
        cache.close()
    finally:
        _make_writable(path)
        _make_writable(wal)
    reopened = RequestCache(path)
    assert set(reopened.get_many(["key-0", "key-1"])) == {"key-0", "key-1"}
    reopened.close()


def test_an_empty_file_is_refused_not_replaced(tmp_path):
    path = tmp_path / "cache.sqlite"
    path.touch()
    with pytest.raises(CacheError, match=r"is empty \(0 bytes\)") as failure:
        RequestCache(path)
    assert str(path) in str(failure.value)
    assert path.stat().st_size == 0


def test_a_foreign_file_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / "cache.sqlite"
    path.write_text("prompt,answer\nhello,world\n")
    with pytest.raises(CacheError, match="not an SQLite database") as failure:
        RequestCache(path)
    assert str(path) in str(failure.value)
    assert path.read_text() == "prompt,answer\nhello,world\n"


def test_another_programs_database_is_refused(tmp_path):
    path = tmp_path / "notes.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (title TEXT)")
    with pytest.raises(CacheError, match=r"other tables \(notes\)") as failure:
        RequestCache(path)
    assert str(path) in str(failure.value)
    with sqlite3.connect(path) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master")]
    assert tables == ["notes"]


def test_a_corrupt_cache_names_its_file(tmp_path):
    path = tmp_path / "cache.sqlite"
    filled_cache(path, 3000)
    page_size = 4096
    data = bytearray(path.read_bytes())
    data[page_size:] = bytes((index * 37) % 256 for index in range(len(data) - page_size))
    path.write_bytes(bytes(data))
    with pytest.raises(CacheError, match="malformed") as failure:
        cache = RequestCache(path)
        cache.get_many([f"key-{i}" for i in range(3000)])
    assert str(path) in str(failure.value)


@pytest.fixture
def held_cache(
    tmp_path, short_lock_timeout, monkeypatch
) -> Iterator[tuple[Path, sqlite3.Connection]]:
    """A cache whose write lock this test holds (released by the test), and a temporary
    folder of the test's own."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    path = tmp_path / "cache.sqlite"
    filled_cache(path, 1)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    yield path, holder
    holder.close()


def _fail_to_store(path: Path, holder: sqlite3.Connection) -> str:
    cache = RequestCache(path)
    cache.put("key-a", answer(1))
    with pytest.raises(CacheError) as failure:
        cache.flush()
    with pytest.raises(CacheError):
        cache.put("key-b", answer(2))
    cache.close()
    holder.execute("ROLLBACK")
    return str(failure.value)


def test_unsaved_answers_go_to_the_temporary_folder_when_beside_is_unwritable(held_cache):
    path, holder = held_cache
    unsaved_path(path).mkdir()  # the side file cannot be written (as a full disk; root too)
    message = _fail_to_store(path, holder)
    fallback = fallback_unsaved_path(path)
    assert fallback.parent == Path(tempfile.gettempdir())
    assert f"in {fallback}, read back by the next run" in message
    assert fallback.read_text().count("\n") == 2
    reopened = RequestCache(path)
    found = reopened.get_many(["key-a", "key-b"])
    assert {key: result.text for key, result in found.items()} == {
        "key-a": "answer 1",
        "key-b": "answer 2",
    }
    reopened.close()
    assert not fallback.exists()


def test_unsaved_answers_go_to_stderr_when_no_file_can_be_written(held_cache, capsys):
    path, holder = held_cache
    unsaved_path(path).mkdir()
    fallback_unsaved_path(path).mkdir()
    message = _fail_to_store(path, holder)
    assert "in stderr, as 'unsaved answer:' lines" in message
    assert str(unsaved_path(path)) in message and str(fallback_unsaved_path(path)) in message
    printed = [
        json.loads(line.removeprefix("unsaved answer: "))
        for line in capsys.readouterr().err.splitlines()
        if line.startswith("unsaved answer: ")
    ]
    assert [record["key"] for record in printed] == ["key-a", "key-b"]
    assert json.loads(printed[0]["result"])["text"] == "answer 1"
