"""Reproducible presentation orders for the completions of a prompt.

Judges favour some positions, so each aspect call shows the completions shuffled. The order
depends only on (seed, prompt_id, shuffle index and, for independent orders, the aspect)
through SHA-256, never on Python's salted `hash` or on a random generator's version, so
reruns and other machines agree.

UltraFeedback drew a fresh order for every aspect call (`INDEPENDENT`); `SHARED` shows all
aspects of a prompt in one order per shuffle, which keeps the requests, and so the cache
keys, that this project sent before independent orders became the default.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from llm_feedback.core.errors import ConfigError


def _stable_draw(key: str, step: int, bound: int) -> int:
    """A uniform-enough integer in [0, bound) from a 256-bit digest (bias below 2**-250)."""
    digest = hashlib.sha256(f"{key}\x1f{step}".encode()).digest()
    return int.from_bytes(digest, "big") % bound


INDEPENDENT = "independent"
SHARED = "shared"
ASPECT_ORDERS = (INDEPENDENT, SHARED)


def shuffle_orders(
    prompt_id: str, n_completions: int, n_shuffles: int, seed: int, aspect: str | None = None
) -> list[list[int]]:
    """`n_shuffles` orders; `orders[s][i]` is the completion index shown at position i.

    With an `aspect` the orders are that aspect's own; without, every aspect shares them.
    The orders of one call are distinct until all `n_completions!` have been drawn (then the
    cycle repeats), so a second shuffle is never the first one's cached answer.

    Args:
        prompt_id: the prompt (seeds its orders).
        n_completions: how many completions it has.
        n_shuffles: how many orders.
        seed: the run's shuffle seed.
        aspect: the aspect whose own orders these are (None: shared).

    Returns:
        The orders.
    """
    if n_completions < 1:
        raise ConfigError(f"n_completions must be >= 1, got {n_completions}")
    if n_shuffles < 1:
        raise ConfigError(f"n_shuffles must be >= 1, got {n_shuffles}")
    n_permutations = math.factorial(n_completions)
    orders: list[list[int]] = []
    drawn: set[tuple[int, ...]] = set()
    for shuffle_idx in range(n_shuffles):
        if len(drawn) == n_permutations:
            drawn.clear()  # every order has been shown: the next cycle starts
        key = f"{seed}\x1f{prompt_id}\x1f{shuffle_idx}"
        if aspect is not None:
            key += f"\x1f{aspect}"
        order = _draw_order(key, n_completions)
        redraw = 0
        # A repeated order would re-send the same request and be answered from the cache;
        # redrawing only on a repeat keeps every order (and cache key) that was distinct.
        while tuple(order) in drawn:
            redraw += 1
            order = _draw_order(f"{key}\x1fredraw{redraw}", n_completions)
        drawn.add(tuple(order))
        orders.append(order)
    return orders


def _draw_order(key: str, n_completions: int) -> list[int]:
    """Fisher-Yates with hash-derived draws."""
    order = list(range(n_completions))
    for last in range(n_completions - 1, 0, -1):
        swap = _stable_draw(key, last, last + 1)
        order[last], order[swap] = order[swap], order[last]
    return order


def positions_by_completion(order: Sequence[int]) -> dict[int, int]:
    """The inverse of an order: completion index -> position it was shown at.

    Args:
        order: an order (position -> completion index).

    Returns:
        Completion index -> position.
    """
    return {completion: position for position, completion in enumerate(order)}
