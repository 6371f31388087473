"""Shared helpers for the benchmark scripts (run them from the repository root)."""

from __future__ import annotations

import json
import os
import platform
import resource
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# `bench.py` points each script it runs at a folder of its own sitting (and then writes the
# whole of RESULTS.md itself); run alone, a script writes results/<name>.json.
BENCH_RESULTS_DIR = os.environ.get("BENCH_RESULTS_DIR")
RESULTS_DIR = Path(BENCH_RESULTS_DIR or Path(__file__).parent / "results")


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def machine() -> str:
    """The CPU model and core count: absolute figures are facts about one machine."""
    return f"{cpu_model()}, {os.cpu_count()} cores"


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mib() -> float:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@contextmanager
def measured(label: str, store: dict[str, Any]):
    wall, cpu = time.perf_counter(), cpu_seconds()
    yield
    store[label] = {"wall_s": time.perf_counter() - wall, "cpu_s": cpu_seconds() - cpu}


def save(name: str, payload: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": name,
        "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%d %H:%M"),
        **payload,
    }
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2))
    print(json.dumps(payload, indent=2))
    return path


def best_of(runs: int, trial: Callable[[], dict[str, float]], key: str) -> dict[str, float]:
    """Repeat a trial and keep the best one by `key` (noise on a shared 2-core box is one-sided)."""
    return max((trial() for _ in range(runs)), key=lambda result: result[key])


RESULTS_MD = Path(__file__).parent / "RESULTS.md"


def write_section(name: str, markdown: str) -> None:
    """Put `markdown` between the `<!-- name:start -->` / `<!-- name:end -->` markers of
    RESULTS.md (appended with the markers when they are absent). Under `bench.py` it leaves
    RESULTS.md alone: the sitting renders the whole file from its JSON."""
    if BENCH_RESULTS_DIR:
        return
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = RESULTS_MD.read_text()
    section = f"{start}\n{markdown.strip()}\n{end}"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + section + rest.split(end, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    RESULTS_MD.write_text(text)


def save_table(table: Any, path: Path) -> dict:
    """`table` (a DataFrame or a streamed table) written as the catalog's `ParquetDataset`
    writes it: row groups of `ROW_GROUP_ROWS`, a folder of parts past `PART_BYTES`.
    Returns what landed on disk (`on_disk`)."""
    import fsspec

    from llm_feedback.storage.parquet_parts import save_parquet
    from llm_feedback.storage.parquet_source import ROW_GROUP_ROWS

    local = fsspec.filesystem("file")
    save_parquet(local, "file", str(path), table, {"row_group_size": ROW_GROUP_ROWS})
    return on_disk(path)


def on_disk(path: Path) -> dict:
    """The table at `path`: how many files hold it (one, or its parts) and their MiB."""
    from llm_feedback.storage.parquet_parts import part_paths

    parts = part_paths(str(path))
    return {"files": len(parts), "mib": sum(Path(part).stat().st_size for part in parts) / 2**20}
