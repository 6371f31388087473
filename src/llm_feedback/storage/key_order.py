"""Rows spooled in arrival order, read back in key order without holding every key.

A stage's rows arrive nearly in key order (calls finish within the client's concurrency
window; a re-ask comes a little later), spooled a batch at a time with each batch's keys
and its least key. `positions_in_key_order` merges the batches' keys a
batch at a time: rows whose key is below the least key of every batch not read yet can go
out, so memory holds the keys of the batches that overlap in key, not the table's. Equal
keys keep their arrival order, as a stable sort of all keys would.

numpy sorts arrays, not a stream of runs whose order is only nearly kept: hence this merge.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np


def positions_in_key_order(
    read_keys: Callable[[int], np.ndarray],
    least: np.ndarray,
    group_rows: int,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(batch, position within the batch) of every spooled row, in key order, `group_rows`
    rows at a time (the last group may be smaller). `read_keys(batch)` gives a batch's keys;
    `least` holds each batch's least key.

    Args:
        read_keys: gives a batch's keys.
        least: each batch's least key.
        group_rows: rows per group.

    Returns:
        (batch numbers, positions) a group at a time.
    """
    by_least = np.argsort(least, kind="stable")
    keys = np.empty(0, dtype=np.int64)
    batches = np.empty(0, dtype=np.int64)
    within = np.empty(0, dtype=np.int64)
    read = 0
    while True:
        if read < len(by_least):
            ready = keys < least[by_least[read]]
        else:
            ready = np.ones(len(keys), dtype=bool)
        n_ready = int(np.count_nonzero(ready))
        if n_ready >= group_rows or read == len(by_least):
            if n_ready == 0:
                return
            candidates = np.flatnonzero(ready)
            # Key first, then arrival (batch, then position): a stable sort's order.
            ranked = np.lexsort((within[candidates], batches[candidates], keys[candidates]))
            out = candidates[ranked[:group_rows]]
            yield batches[out], within[out]
            keep = np.ones(len(keys), dtype=bool)
            keep[out] = False
            keys, batches, within = keys[keep], batches[keep], within[keep]
            continue
        batch = int(by_least[read])
        read += 1
        new = np.asarray(read_keys(batch), dtype=np.int64)
        keys = np.concatenate([keys, new])
        batches = np.concatenate([batches, np.full(len(new), batch, dtype=np.int64)])
        within = np.concatenate([within, np.arange(len(new), dtype=np.int64)])
