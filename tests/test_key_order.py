"""Spooled batches merged back into key order, holding only the batches that overlap."""

from __future__ import annotations

import numpy as np
import pytest

from llm_feedback.storage.key_order import positions_in_key_order


def _spool(keys: np.ndarray, batch_rows: int) -> list[np.ndarray]:
    return [keys[start : start + batch_rows] for start in range(0, len(keys), batch_rows)]


def _merged(batches: list[np.ndarray], group_rows: int, reads: list[int] | None = None):
    least = np.array([batch.min() for batch in batches], dtype=np.int64)

    def read_keys(batch: int) -> np.ndarray:
        if reads is not None:
            reads.append(batch)
        return batches[batch]

    return positions_in_key_order(read_keys, least, group_rows)


@pytest.mark.parametrize("arrival", ["in order", "nearly in order", "any order", "duplicates"])
def test_rows_come_back_as_a_stable_sort_of_all_keys_would_give_them(arrival):
    rng = np.random.default_rng(7)
    n = 5_000
    keys = np.arange(n, dtype=np.int64) * 3
    if arrival == "nearly in order":  # calls finishing within a window, a few re-asks late
        keys = keys[np.argsort(np.arange(n) + rng.integers(0, 64, n), kind="stable")]
        late = rng.choice(n, 40, replace=False)
        keys = np.concatenate([np.delete(keys, late), keys[late]])
    elif arrival == "any order":
        keys = rng.permutation(keys)
    elif arrival == "duplicates":
        keys = rng.integers(0, 300, n).astype(np.int64)
    batches = _spool(keys, 97)
    groups = list(_merged(batches, group_rows=250))
    arrival_positions = np.concatenate(
        [np.asarray(batch) * 97 + np.asarray(within) for batch, within in groups]
    )
    np.testing.assert_array_equal(arrival_positions, np.argsort(keys, kind="stable"))
    assert [len(batch) for batch, _ in groups[:-1]] == [250] * (len(groups) - 1)
    assert sum(len(batch) for batch, _ in groups) == n


def test_a_group_goes_out_once_the_batches_before_it_are_read_not_all_of_them():
    n, batch_rows = 100_000, 1000
    rng = np.random.default_rng(3)
    keys = np.arange(n, dtype=np.int64)
    keys = keys[np.argsort(keys + rng.integers(0, 200, n), kind="stable")]
    reads: list[int] = []
    groups = _merged(_spool(keys, batch_rows), group_rows=2000, reads=reads)
    first_batch, _ = next(groups)
    assert len(first_batch) == 2000
    # Two batches' worth of rows plus the one that overlaps them: 100 batches in all.
    assert len(reads) <= 4
    assert sum(len(batch) for batch, _ in groups) == n - 2000
    assert sorted(reads) == list(range(100))


def test_no_batches_give_no_groups():
    assert list(positions_in_key_order(lambda batch: np.empty(0), np.empty(0), 10)) == []
