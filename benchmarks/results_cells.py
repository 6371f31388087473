"""Cell formatting shared by the RESULTS.md renderers: min | median | max and tables."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence

import pandas as pd


def spread(values: Iterable[float]) -> tuple[float, float, float]:
    """(min, median, max): with few repetitions on a shared machine, all three matter."""
    ordered = sorted(values)
    return ordered[0], statistics.median(ordered), ordered[-1]


def cells(values: Iterable[float], form: str) -> list[str]:
    """Three table cells: min, median, max."""
    return [format(value, form) for value in spread(values)]


def inline(values: Iterable[float], form: str) -> str:
    """min | median | max, in a sentence."""
    return " | ".join(cells(values, form))


NO_CELLS = ["", "", ""]  # where min, median and max would be


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def paired(
    runs: Sequence[dict], figure: Callable[[dict], float], base: Callable[[dict], float]
) -> float:
    """Median over repetitions of figure / base, both measured in the same repetition."""
    return median(figure(run) / base(run) for run in runs)


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A Markdown table of cells already formatted (tabulate must not re-read them)."""
    table = pd.DataFrame(list(rows), columns=list(header))
    return table.to_markdown(index=False, disable_numparse=True).splitlines()


def on_disk(written: dict | None) -> str:
    """A saved table's cell: its MiB and how many files hold it (a table past `PART_BYTES`
    is a folder of parts); blank for a sitting that did not record it."""
    if not written:
        return ""
    files = written["files"]
    return f"{written['mib']:,.0f} MiB in {files} file{'s' if files > 1 else ''}"
