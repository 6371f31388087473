"""Pairwise battles as the model comparison reads them: a batch at a time.

`Battles` wraps a table of battles (instance, model_a, model_b, outcome and per-side
covariates, `stats.ranking`'s layout) that may be larger than memory: `batches()` gives it
as DataFrames, each call from the start, so a fit can pass over it as often as it needs;
a DataFrame is one batch. Every statistic over battles is a sum over them, so a batch at a
time gives what the whole table gives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import pandas as pd


class Battles:
    """A battles table read a batch at a time (from a spool on disk), for the fits."""

    def __init__(self, batches: Callable[[], Iterator[pd.DataFrame]], columns: Sequence[str]):
        """Keep how to read the batches.

        Args:
            batches: returns a new iterator over the table's batches on each call.
            columns: the table's columns.
        """
        self._batches = batches
        self.columns = list(columns)

    @classmethod
    def of(cls, battles: pd.DataFrame | Battles) -> Battles:
        """`battles` as a `Battles` (a DataFrame as its only batch).

        Args:
            battles: a battles table, or a `Battles` (returned as it is).

        Returns:
            The `Battles`.
        """
        if isinstance(battles, Battles):
            return battles
        return cls(lambda: iter([battles]), battles.columns)

    def batches(self) -> Iterator[pd.DataFrame]:
        yield from self._batches()

    def models(self) -> list[str]:
        """Every model of a battle, sorted."""
        found: set[str] = set()
        for batch in self.batches():
            found.update(batch["model_a"].unique())
            found.update(batch["model_b"].unique())
        return sorted(found)
