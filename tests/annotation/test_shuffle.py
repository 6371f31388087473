import subprocess
import sys

import pytest

from llm_feedback.annotation import positions_by_completion, shuffle_orders
from llm_feedback.core.errors import ConfigError


def test_orders_are_permutations_and_reproducible() -> None:
    orders = shuffle_orders("prompt-1", 4, 3, seed=7)
    assert len(orders) == 3
    assert all(sorted(order) == [0, 1, 2, 3] for order in orders)
    assert orders == shuffle_orders("prompt-1", 4, 3, seed=7)
    # A shuffle does not depend on how many shuffles were asked for.
    assert shuffle_orders("prompt-1", 4, 1, seed=7) == orders[:1]


def test_orders_vary_with_prompt_seed_and_shuffle_index() -> None:
    many = {tuple(shuffle_orders(f"p{i}", 4, 1, seed=0)[0]) for i in range(200)}
    assert len(many) > 15  # most of the 24 permutations turn up
    assert len({tuple(shuffle_orders("p", 5, 1, seed=seed)[0]) for seed in range(10)}) > 1
    first, second = shuffle_orders("p", 6, 2, seed=0)
    assert first != second


def test_positions_are_roughly_balanced() -> None:
    counts = [0, 0, 0, 0]
    for i in range(400):
        counts[shuffle_orders(f"p{i}", 4, 1, seed=3)[0][0]] += 1
    assert all(60 < count < 140 for count in counts)


def test_stable_across_processes() -> None:
    # Python's str hash is salted per process; ours must not be.
    code = (
        "from llm_feedback.annotation import shuffle_orders;"
        "print(shuffle_orders('prompt-9', 4, 2, seed=11))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": salt},
        ).stdout
        for salt in ("1", "2")
    }
    assert outputs == {f"{shuffle_orders('prompt-9', 4, 2, seed=11)}\n"}


def test_positions_map_back_to_completions() -> None:
    order = [2, 0, 3, 1]
    positions = positions_by_completion(order)
    assert positions == {2: 0, 0: 1, 3: 2, 1: 3}
    assert all(order[positions[completion]] == completion for completion in range(4))


def test_single_completion_and_bad_counts() -> None:
    assert shuffle_orders("p", 1, 2, seed=0) == [[0], [0]]
    with pytest.raises(ConfigError):
        shuffle_orders("p", 0, 1, seed=0)
    with pytest.raises(ConfigError):
        shuffle_orders("p", 3, 0, seed=0)


def test_each_aspect_has_its_own_orders_and_no_aspect_keeps_the_shared_ones():
    shared = shuffle_orders("prompt-1", 4, 2, seed=7)
    assert shuffle_orders("prompt-1", 4, 2, seed=7, aspect=None) == shared
    per_aspect = {
        aspect: shuffle_orders("prompt-1", 4, 2, seed=7, aspect=aspect)
        for aspect in ("instruction_following", "honesty", "truthfulness", "helpfulness")
    }
    assert per_aspect["honesty"] == shuffle_orders("prompt-1", 4, 2, seed=7, aspect="honesty")
    assert len({tuple(map(tuple, orders)) for orders in per_aspect.values()}) > 1


def test_shuffles_of_one_prompt_and_aspect_are_distinct_permutations():
    # Before the fix about 4% of (prompt, aspect) pairs drew the same order twice, so the
    # second shuffle re-sent the first request and was answered from the cache.
    for aspect in (None, "honesty"):
        for i in range(2000):
            orders = shuffle_orders(f"p{i}", 4, 2, seed=0, aspect=aspect)
            assert orders[0] != orders[1], (i, aspect, orders)
    # All 24 orders of four completions before any repeats; then the cycle starts again.
    orders = [tuple(order) for order in shuffle_orders("p", 4, 30, seed=5)]
    assert len(set(orders[:24])) == 24
    assert all(sorted(order) == [0, 1, 2, 3] for order in orders)
    assert sorted(map(tuple, shuffle_orders("p", 2, 2, seed=1))) == [(0, 1), (1, 0)]
