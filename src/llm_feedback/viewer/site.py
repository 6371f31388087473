"""A static judgment site: its manifest, index rows and per-shard records, written as plain
files that open from disk (`file://`) without a server.

Layout of a written site:

    index.html, page.html, viewer.js, viewer.css   the package's assets, copied as they are
    data/manifest.js                               `LLMF.manifest({...})`: kind, columns,
                                                   filters and their values, counts
    data/index-0000.js ...                         `LLMF.index(n, [row, ...])`, chunks of
                                                   `INDEX_CHUNK_ROWS` rows (one a record)
    data/shard-00000.js ...                        `LLMF.shard(n, {id: record})`, the full
                                                   records of `shard_size` ids

Data travels as JSON inside JavaScript files (JSON is a subset of JavaScript), because a
page opened from `file://` may load scripts but not fetch files. The pages put every value
into the document as text, never as markup, so adversarial completions and judge replies
cannot inject HTML or script.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

ASSETS = ("index.html", "page.html", "viewer.js", "viewer.css")
# Rows per index file: a 64k-prompt index loads as 8 scripts, fetched in parallel.
INDEX_CHUNK_ROWS = 8192
# Records per shard file: a record page loads one file of this many records.
SHARD_SIZE = 64
# Characters of a record's text kept in the index (search and the table's preview).
SNIPPET_CHARS = 160


@dataclass(frozen=True)
class Filter:
    """An index filter: `values` (a select over the column's distinct values; a list
    column matches when it contains the value) or `flag` (a checkbox: rows where true)."""

    column: str
    label: str
    type: str = "values"


@dataclass(frozen=True)
class StaticSite:
    """A site ready to write. `index_rows[i]` holds the values of `columns` for record i,
    which `records[i]` holds in full; every row has the columns `id`, `text` and `shard`."""

    kind: str  # "feedback" (annotate tables) or "evaluation" (eval_judgments)
    title: str
    unit: str  # what one record is, for the index's count ("prompts", "instances")
    columns: tuple[str, ...]
    display: tuple[str, ...]
    filters: tuple[Filter, ...]
    index_rows: list[list[Any]]
    records: list[dict[str, Any]] = field(repr=False)
    shard_size: int = SHARD_SIZE

    @property
    def n_shards(self) -> int:
        return -(-len(self.records) // self.shard_size)

    def manifest(self) -> dict[str, Any]:
        column = {name: i for i, name in enumerate(self.columns)}
        values: dict[str, list[str]] = {}
        for flt in self.filters:
            if flt.type == "values":
                seen: set[str] = set()
                for row in self.index_rows:
                    cell = row[column[flt.column]]
                    seen.update(cell if isinstance(cell, list) else [cell])
                values[flt.column] = sorted(str(v) for v in seen if v is not None)
        digest = hashlib.sha256(
            json.dumps([self.title, self.index_rows[:64]], default=str).encode()
        ).hexdigest()
        return {
            "kind": self.kind,
            "title": self.title,
            "unit": self.unit,
            "summary": f"{len(self.records):,} {self.unit}",
            "site_id": digest[:16],  # labels in the browser are kept per site
            "columns": list(self.columns),
            "display": list(self.display),
            "filters": [vars(flt) for flt in self.filters],
            "values": values,
            "n_chunks": -(-len(self.index_rows) // INDEX_CHUNK_ROWS),
            "n_shards": self.n_shards,
        }

    def files(self) -> Iterator[tuple[str, str]]:
        """(relative path, text) of every data file."""
        yield "data/manifest.js", _call("LLMF.manifest", self.manifest())
        for start in range(0, len(self.index_rows), INDEX_CHUNK_ROWS):
            chunk = start // INDEX_CHUNK_ROWS
            rows = self.index_rows[start : start + INDEX_CHUNK_ROWS]
            yield f"data/index-{chunk:04d}.js", _call("LLMF.index", chunk, rows)
        for shard in range(self.n_shards):
            records = self.records[shard * self.shard_size : (shard + 1) * self.shard_size]
            by_id = {record["id"]: record for record in records}
            yield f"data/shard-{shard:05d}.js", _call("LLMF.shard", shard, by_id)

    def write(self, directory: Path) -> None:
        """Write the whole site into `directory` (created; must not hold another site)."""
        (directory / "data").mkdir(parents=True, exist_ok=True)
        assets = resources.files("llm_feedback.viewer") / "assets"
        for name in ASSETS:
            with resources.as_file(assets / name) as source:
                shutil.copyfile(source, directory / name)
        for relative, text in self.files():
            (directory / relative).write_text(text, encoding="utf-8")

    def describe(self) -> str:
        return f"{self.kind} viewer: {len(self.records):,} {self.unit}, {self.n_shards:,} pages"


def _call(function: str, *arguments: Any) -> str:
    body = ",".join(
        json.dumps(a, ensure_ascii=False, separators=(",", ":"), default=_json_default)
        for a in arguments
    )
    return f"{function}({body});\n"


def shard_of(position: int, shard_size: int = SHARD_SIZE) -> int:
    return position // shard_size


def snippet(text: Any) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"


def column(frame: Any, name: str, default: Any = None) -> list[Any]:
    """`frame[name]` as a list, None for NA (numpy scalars are turned into Python's when
    written, by `_json_default`); `default` where the column is absent."""
    if name not in frame.columns:
        return [default] * len(frame)
    series = frame[name]
    if not series.hasnans:
        return series.tolist()
    return series.astype(object).where(series.notna(), None).tolist()


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy scalars and arrays (list columns)
        return value.tolist()
    return str(value)
