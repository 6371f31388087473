"""`built_ahead`: a lazy iterable produced in a thread of its own, taken in order."""

import threading
import time

import pytest

from llm_feedback.engine.prefetch import built_ahead


def wait_for(condition, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_the_items_come_in_order_built_in_another_thread():
    builders = set()

    def numbers():
        for number in range(1000):
            builders.add(threading.get_ident())
            yield number

    assert list(built_ahead(numbers(), depth=3)) == list(range(1000))
    assert builders and threading.get_ident() not in builders


def test_the_builder_stays_within_its_depth_of_the_taker():
    produced = []

    def numbers():
        for number in range(100):
            produced.append(number)
            yield number

    taken = built_ahead(numbers(), depth=4)
    for expected in range(10):
        assert next(taken) == expected
        # Settled: the builder waits once `depth` items wait and it holds one more.
        wait_for(lambda expected=expected: len(produced) >= expected + 5, timeout_s=0.5)
        assert len(produced) <= expected + 1 + 4 + 1
    taken.close()


def test_an_error_while_building_reaches_the_taker_in_its_place():
    def numbers():
        yield 1
        yield 2
        raise KeyError("row 3 has no prompt_id")

    taken = built_ahead(numbers(), depth=8)
    assert [next(taken), next(taken)] == [1, 2]
    with pytest.raises(KeyError, match="row 3 has no prompt_id"):
        next(taken)


def test_closing_the_taker_stops_the_builder_and_closes_its_iterable():
    cleaned = threading.Event()
    produced = []

    def endless():
        try:
            while True:
                produced.append(len(produced))
                yield produced[-1]
        finally:
            cleaned.set()

    taken = built_ahead(endless(), depth=2, name="test-builder")
    assert next(taken) == 0
    taken.close()
    assert cleaned.wait(5), "the builder never closed the generator it was reading"
    assert wait_for(lambda: not any(t.name == "test-builder" for t in threading.enumerate()))
    assert len(produced) <= 1 + 2 + 1  # taken, waiting, and the one it was holding


def test_nothing_is_built_before_the_first_item_is_asked_for():
    started = threading.Event()

    def numbers():
        started.set()
        yield 1

    taken = built_ahead(numbers(), depth=1)
    assert not started.wait(0.1)
    assert list(taken) == [1]


@pytest.mark.parametrize("depth", [0, -1])
def test_a_depth_below_one_is_refused(depth):
    with pytest.raises(ValueError, match="depth must be at least 1"):
        built_ahead(iter([1]), depth=depth)
