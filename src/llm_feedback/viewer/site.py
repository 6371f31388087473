r"""A static judgment site: its manifest, index rows and per-shard records, written as plain
files that open from disk (`file://`) without a server.

Layout of a written site:

    index.html, page.html, viewer.js, viewer.css   the package's assets, copied as they are
    data/manifest.js                               `LLMF.manifest({...})`: kind, columns,
                                                   filters and their values, counts
                                                   (written last: it counts the rest)
    data/index-0000.js ...                         `LLMF.index(n, [row, ...])`, chunks of
                                                   `INDEX_CHUNK_ROWS` rows (one a record)
    data/shard-00000.js ...                        `LLMF.shard(n, {id: record})`, the full
                                                   records of `shard_size` ids
    data/search-0000-00.js ...                     `LLMF.search(chunk, bucket, {token:
                                                   postings})`: the full-text index of an
                                                   index chunk's records, one file per
                                                   bucket of tokens (`SEARCH_BUCKETS`)

Full-text search: each record's texts (`Search.texts`) are lower-cased and cut into tokens
(runs of letters and digits: `[^\W_]+`, the page's `[\p{L}\p{N}]+`, cut to
`MAX_TOKEN_CHARS`). An index chunk's
tokens are inverted: token -> the rows holding it, each posting `row << len(fields) | the
bits of the fields it occurs in`, written as comma-separated hexadecimal differences from
the previous posting. A token's bucket is its first character's code point modulo
`SEARCH_BUCKETS`, so a query loads one file per chunk and query token, however large the
run; a query token matches the tokens it begins (a one-character one, only itself).

Data travels as JSON inside JavaScript files (JSON is a subset of JavaScript), because a
page opened from `file://` may load scripts but not fetch files. The pages put every value
into the document as text, never as markup, so adversarial completions and judge replies
cannot inject HTML or script.
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

ASSETS = ("index.html", "page.html", "viewer.js", "viewer.css")
# Rows per index file: a 64k-prompt index loads as 8 scripts, fetched in parallel.
INDEX_CHUNK_ROWS = 8192
# Records per shard file: a record page loads one file of this many records.
SHARD_SIZE = 64
# Characters of a record's text kept in the index (the table's preview).
SNIPPET_CHARS = 160
# Full-text search: token files per index chunk; a token's characters kept (longer ones,
# such as encoded blobs, are cut, and so is a query's token: it still finds them).
SEARCH_BUCKETS = 32
MAX_TOKEN_CHARS = 32
# A word's first MAX_TOKEN_CHARS letters and digits (the lookbehind skips the rest of it).
TOKEN = re.compile(rf"(?<![^\W_])[^\W_]{{1,{MAX_TOKEN_CHARS}}}")


@dataclass(frozen=True)
class Filter:
    """An index filter: `values` (a select over the column's distinct values; a list
    column matches when it contains the value) or `flag` (a checkbox: rows where true)."""

    column: str
    label: str
    type: str = "values"


@dataclass(frozen=True)
class Search:
    """A site's full-text index: `texts(record)` gives (field number, text) pairs, the field
    numbering `fields` (their names, offered by the page as where to search)."""

    fields: tuple[str, ...]
    texts: Callable[[dict[str, Any]], Iterable[tuple[int, Any]]]


# The index column the writer adds to every row: the shard file holding the row's record.
SHARD_COLUMN = "shard"
# Index rows whose text names the site (`site_id`): enough to tell two runs' sites apart.
DIGEST_ROWS = 64


@dataclass(frozen=True)
class StaticSite:
    """A site ready to write. `entries()` gives, record by record in the index's order,
    (index row, record): the row holds the values of `columns` (every site has `id` and
    `text`), the record the page's whole content. A callable, not a list, so that a site
    of a million records is written as its entries are made (`files`), never held whole."""

    kind: str  # "feedback" (annotate tables) or "evaluation" (eval_judgments)
    title: str
    unit: str  # what one record is, for the index's count ("prompts", "instances")
    columns: tuple[str, ...]
    display: tuple[str, ...]
    filters: tuple[Filter, ...]
    entries: Callable[[], Iterable[tuple[list[Any], dict[str, Any]]]] = field(repr=False)
    shard_size: int = SHARD_SIZE
    search: Search | None = None
    # A displayed column's heading and its explanation (the heading's tooltip); the name
    # where none is given.
    headings: dict[str, tuple[str, str]] = field(default_factory=dict)
    # Columns whose first click sorts from the largest value (the rest: the smallest).
    descending: tuple[str, ...] = ()
    # Named orders offered beside the table: (label, column, "asc" or "desc").
    presets: tuple[tuple[str, str, str], ...] = ()
    # The column of the judge's uncertainty the review queue may draw by (None: uniform
    # draws only).
    uncertainty: str | None = None

    def files(self) -> Iterator[tuple[str, str]]:
        """(relative path, text) of every data file: a shard once its records are in, an
        index chunk once its rows are, and the manifest, which counts them, last. Writing
        thus holds one shard and one index chunk, however many records the site has."""
        position = {name: i for i, name in enumerate(self.columns)}
        values: dict[str, set[str]] = {
            flt.column: set() for flt in self.filters if flt.type == "values"
        }
        first_rows: list[list[Any]] = []
        rows: list[list[Any]] = []
        shard: list[dict[str, Any]] = []
        count = 0
        search = _SearchChunk(self.search) if self.search else None
        for cells, record in self.entries():
            number = count // self.shard_size
            row = [*cells, number]
            count += 1
            for name, seen in values.items():
                cell = row[position[name]]
                seen.update(
                    str(v) for v in (cell if isinstance(cell, list) else [cell]) if v is not None
                )
            if len(first_rows) < DIGEST_ROWS:
                first_rows.append(row)
            rows.append(row)
            if search:
                search.add(record)
            if len(rows) == INDEX_CHUNK_ROWS:
                yield _index_file(count - 1, rows)
                rows = []
                if search:
                    yield from search.files((count - 1) // INDEX_CHUNK_ROWS)
            shard.append(record)
            if len(shard) == self.shard_size:
                yield _shard_file(number, shard)
                shard = []
        if rows:
            yield _index_file(count - 1, rows)
            if search:
                yield from search.files((count - 1) // INDEX_CHUNK_ROWS)
        if shard:
            yield _shard_file((count - 1) // self.shard_size, shard)
        manifest = self._manifest(count, values, first_rows)
        yield "data/manifest.js", _call("LLMF.manifest", manifest)

    def _manifest(
        self, count: int, values: dict[str, set[str]], first_rows: list[list[Any]]
    ) -> dict[str, Any]:
        digest = hashlib.sha256(
            json.dumps([self.title, first_rows], default=str).encode()
        ).hexdigest()
        return {
            "kind": self.kind,
            "title": self.title,
            "unit": self.unit,
            "summary": f"{count:,} {self.unit}",
            "site_id": digest[:16],  # labels in the browser are kept per site
            "columns": [*self.columns, SHARD_COLUMN],
            "display": list(self.display),
            "headings": {name: list(pair) for name, pair in self.headings.items()},
            "descending": list(self.descending),
            "presets": [list(preset) for preset in self.presets],
            "uncertainty": self.uncertainty,
            "chunk_rows": INDEX_CHUNK_ROWS,
            "search": None
            if self.search is None
            else {
                "fields": list(self.search.fields),
                "buckets": SEARCH_BUCKETS,
                "max_token_chars": MAX_TOKEN_CHARS,
            },
            "filters": [vars(flt) for flt in self.filters],
            "values": {name: sorted(seen) for name, seen in values.items()},
            "n_chunks": -(-count // INDEX_CHUNK_ROWS),
            "n_shards": -(-count // self.shard_size),
        }

    def write(self, directory: Path) -> None:
        """Write the whole site into `directory` (created; must not hold another site).

        Args:
            directory: The site's folder: the assets, then the data files under data/.
        """
        (directory / "data").mkdir(parents=True, exist_ok=True)
        assets = resources.files("llm_feedback.viewer") / "assets"
        for name in ASSETS:
            with resources.as_file(assets / name) as source:
                shutil.copyfile(source, directory / name)
        for relative, text in self.files():
            (directory / relative).write_text(text, encoding="utf-8")


class _SearchChunk:
    """The inverted index of one index chunk's records, gathered record by record."""

    def __init__(self, search: Search) -> None:
        self.search = search
        self.postings: defaultdict[str, list[int]] = defaultdict(list)
        self.rows = 0

    def add(self, record: dict[str, Any]) -> None:
        by_field: defaultdict[int, list[str]] = defaultdict(list)
        for number, text in self.search.texts(record):
            if text is not None:
                by_field[number].append(str(text))
        # Set operations, not a loop over words: a run holds millions of them.
        masks: dict[str, int] = {}
        for number, texts in by_field.items():
            bit = 1 << number
            words = set(TOKEN.findall("\n".join(texts).lower()))
            seen = words & masks.keys()
            masks.update(dict.fromkeys(words - seen, bit))
            for word in seen:
                masks[word] |= bit
        row = self.rows << len(self.search.fields)
        for token, mask in masks.items():
            self.postings[token].append(row | mask)
        self.rows += 1

    def files(self, chunk: int) -> Iterator[tuple[str, str]]:
        """The chunk's bucket files; the index is emptied for the next chunk."""
        buckets: list[list[str]] = [[] for _ in range(SEARCH_BUCKETS)]
        for token, postings in self.postings.items():
            # Tokens are letters and digits only: quoted as they are, they are JSON.
            buckets[ord(token[0]) % SEARCH_BUCKETS].append(f'"{token}":"{_differences(postings)}"')
        for bucket, entries in enumerate(buckets):
            body = "{" + ",".join(entries) + "}"
            yield (
                f"data/search-{chunk:04d}-{bucket:02d}.js",
                f"LLMF.search({chunk},{bucket},{body});\n",
            )
        self.postings = defaultdict(list)
        self.rows = 0


def _differences(postings: list[int]) -> str:
    """Ascending postings as hexadecimal differences from the one before (the first: as is)."""
    steps = tuple(map(operator.sub, postings, [0, *postings]))
    return ("%x," * len(steps) % steps)[:-1]


def _shard_file(number: int, records: list[dict[str, Any]]) -> tuple[str, str]:
    by_id = {record["id"]: record for record in records}
    return f"data/shard-{number:05d}.js", _call("LLMF.shard", number, by_id)


def _index_file(last_position: int, rows: list[list[Any]]) -> tuple[str, str]:
    chunk = last_position // INDEX_CHUNK_ROWS
    return f"data/index-{chunk:04d}.js", _call("LLMF.index", chunk, rows)


def _call(function: str, *arguments: Any) -> str:
    body = ",".join(
        json.dumps(a, ensure_ascii=False, separators=(",", ":"), default=_json_default)
        for a in arguments
    )
    return f"{function}({body});\n"


def snippet(text: Any) -> str:
    """A text's index preview: its first `SNIPPET_CHARS` characters, "…" marking a cut.

    Args:
        text: Any value (None: empty), shown as its string.

    Returns:
        The preview.
    """
    text = "" if text is None else str(text)
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"


def column(frame: Any, name: str, default: Any = None) -> list[Any]:
    """`frame[name]` as a list, None for NA (numpy scalars are turned into Python's when
    written, by `_json_default`); `default` where the column is absent.

    Args:
        frame: The table.
        name: The column's name.
        default: Each row's value when the column is absent.

    Returns:
        One value per row.
    """
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
