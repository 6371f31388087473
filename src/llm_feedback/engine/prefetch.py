"""Items of a lazy iterable built ahead in a thread of their own, handed over in order.

A judge stage builds its calls lazily (a chunk of completions read from disk, each text
read for injections, the templates rendered): about 1 ms a call, on the client's event
loop when built there, where every answer waiting meanwhile waits too. Built ahead in a
thread, the loop only takes finished calls; the GIL is handed back to the loop every
`sys.getswitchinterval()` (5 ms) instead of after a whole chunk. The standard library has
no bounded, ordered background iterator (`concurrent.futures` maps a function, not a
generator), hence this one.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")
# How long a builder blocked on a full queue waits before it looks whether it was stopped.
_STOP_POLL_S = 0.1


class _End:
    """The builder is done: `error` is what ended it, None after the last item."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class _Builder(Generic[T]):
    def __init__(self, items: Iterable[T], depth: int, name: str) -> None:
        self.items = items
        self.handed: queue.Queue[T | _End] = queue.Queue(maxsize=depth)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._build, name=name, daemon=True)

    def _put(self, item: T | _End) -> bool:
        while not self.stopped.is_set():
            try:
                self.handed.put(item, timeout=_STOP_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def _build(self) -> None:
        iterator = iter(self.items)
        try:
            # Stopped is looked at before each item: once the taker went away, not one more
            # item is built (a put that the taker's drain let through included).
            while not self.stopped.is_set():
                try:
                    item = next(iterator)
                except StopIteration:
                    break
                if not self._put(item):
                    return
        except BaseException as error:  # noqa: BLE001 - handed to the taker, raised there
            self._put(_End(error))
            return
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()  # a generator left part-way runs its own clean-up, here
        self._put(_End(None))

    def stop(self) -> None:
        self.stopped.set()
        while True:  # a builder waiting on a full queue gets room, then sees it was stopped
            try:
                self.handed.get_nowait()
            except queue.Empty:
                break


def built_ahead(items: Iterable[T], depth: int, name: str = "build-ahead") -> Iterator[T]:
    """`items`, produced up to `depth` ahead of the taker by a daemon thread.

    The items are produced in the thread, in order, one at a time: `items` must not share
    unguarded state with what the taker does meanwhile. An exception raised while producing
    an item is raised to the taker in that item's place. Closing the returned generator (or
    dropping it) stops the thread after the item it is producing.

    Args:
        items: a lazy iterable, iterated by the thread only.
        depth: how many finished items may wait for the taker (the memory held).
        name: the thread's name.

    Returns:
        A generator of the same items in the same order.

    Raises:
        ValueError: `depth` is below 1.
    """
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    builder = _Builder(items, depth, name)
    return _taken(builder)


def _taken(builder: _Builder[T]) -> Iterator[T]:
    builder.thread.start()
    try:
        while True:
            item = builder.handed.get()
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            yield item
    finally:
        builder.stop()
