"""N-gram overlap of prompts with evaluation benchmark items, and the prompt set without
the prompts that overlap (or with them flagged).

Texts are compared as words: Unicode NFKC, case-folded, runs of word characters (so
punctuation, case and spacing never hide a copy). A prompt matches an item when

- its words equal the item's ("exact"), or
- it shares a run of `ngram` words with the item ("ngram"); an item shorter than `ngram`
  words (most TruthfulQA questions are) matches a prompt holding all of its words in a row,
  and one shorter than `min_words` only an equal prompt, since a few common words in a row
  say nothing.

The matches are a table (each prompt with the benchmark item it matched: the removed
prompts kept beside their evidence) and counted per benchmark.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from llm_feedback.contamination.benchmark_files import read_benchmark
from llm_feedback.params.decontamination import DecontaminationParams

logger = logging.getLogger(__name__)

_WORD = re.compile(r"\w+")
MATCH_COLUMNS = {
    "prompt_id": "string",
    "source": "string",
    "instruction": "string",
    "benchmark": "string",
    "item_id": "string",
    "item_text": "string",
    "match": "string",  # exact | ngram
    "ngram": "int64",  # the run length that matched (the item's length when shorter)
    "shared_ngrams": "int64",  # how many distinct such runs the two share
    "action": "string",  # removed | flagged
}
COUNT_COLUMNS = {
    "benchmark": "string",
    "file": "string",
    "items": "int64",
    "method": "string",
    "ngram": "int64",
    "prompts_checked": "int64",
    "matched": "int64",  # prompts matching at least one item of this benchmark
    "exact": "int64",  # of those, prompts equal to an item
    "removed": "int64",
    "flagged": "int64",
}


def words(text: str) -> tuple[str, ...]:
    """A text's words as compared: NFKC, case-folded, word characters only.

    Args:
        text: any text.

    Returns:
        The words in order.
    """
    return tuple(_WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


def _runs(sequence: Sequence[str], length: int) -> Iterator[tuple[str, ...]]:
    return (tuple(sequence[i : i + length]) for i in range(len(sequence) - length + 1))


@dataclass(frozen=True)
class Match:
    item: int  # the item's position in the index
    match: str
    ngram: int
    shared: int


class OverlapIndex:
    """Every benchmark item's word runs, looked up per prompt."""

    def __init__(self, items: pd.DataFrame, ngram: int, min_words: int) -> None:
        """Index the benchmark items' word runs.

        Args:
            items: `benchmark`, `item_id`, `text` rows.
            ngram: the run length.
            min_words: items shorter than this match equal prompts only.
        """
        self.items = items.reset_index(drop=True)
        self.exact: dict[tuple[str, ...], list[int]] = defaultdict(list)
        # run length -> run -> the items holding it (shorter items use their own length)
        self.runs: dict[int, dict[tuple[str, ...], set[int]]] = defaultdict(
            lambda: defaultdict(set)
        )
        for position, text in enumerate(self.items["text"]):
            item_words = words(text)
            if not item_words:
                continue
            self.exact[item_words].append(position)
            if len(item_words) >= min_words:
                length = min(ngram, len(item_words))
                for run in _runs(item_words, length):
                    self.runs[length][run].add(position)

    def matches(self, text: str) -> list[Match]:
        """The items one prompt matches.

        Args:
            text: the prompt's instruction.

        Returns:
            One `Match` per item matched, exact matches first.
        """
        prompt_words = words(text)
        found = {
            item: Match(item, "exact", len(prompt_words), 1)
            for item in self.exact.get(prompt_words, ())
        }
        for length, table in self.runs.items():
            shared: Counter[int] = Counter()
            for run in set(_runs(prompt_words, length)):
                shared.update(table.get(run, ()))
            for item, count in shared.items():
                found.setdefault(item, Match(item, "ngram", length, count))
        return list(found.values())


def _empty(columns: Mapping[str, str]) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=kind) for name, kind in columns.items()})


def benchmark_items(params: DecontaminationParams) -> pd.DataFrame:
    """Every configured benchmark's items, read from their files.

    Args:
        params: the decontamination parameters.

    Returns:
        `benchmark`, `item_id`, `text` rows.
    """
    frames = [
        read_benchmark(path, name).assign(benchmark=name)
        for name, path in (params.benchmarks or {}).items()
    ]
    if not frames:
        return pd.DataFrame(columns=["benchmark", "item_id", "text"])
    return pd.concat(frames, ignore_index=True)[["benchmark", "item_id", "text"]]


def decontaminate(
    prompts: pd.DataFrame, params: DecontaminationParams
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The prompt set checked against the configured benchmarks.

    Args:
        prompts: raw prompts (`prompt_id`, `source`, `instruction`).
        params: the benchmarks, the run length and what to do with a match.

    Returns:
        (the prompts kept: all of them with `action: flag`, else those matching nothing;
        the matches, `MATCH_COLUMNS`; the counts per benchmark, `COUNT_COLUMNS`, one row
        per configured benchmark, none when no benchmark is configured).
    """
    if not params.benchmarks:
        return prompts, _empty(MATCH_COLUMNS), _empty(COUNT_COLUMNS)
    items = benchmark_items(params)
    index = OverlapIndex(items, params.ngram, params.min_words)
    action = "removed" if params.action == "drop" else "flagged"
    rows = []
    instructions = prompts["instruction"].astype(str)
    for position, text in enumerate(instructions):
        for match in index.matches(text):
            item = index.items.iloc[match.item]
            rows.append(
                {
                    "prompt_id": str(prompts["prompt_id"].iat[position]),
                    "source": str(prompts["source"].iat[position]),
                    "instruction": text,
                    "benchmark": item["benchmark"],
                    "item_id": str(item["item_id"]),
                    "item_text": item["text"],
                    "match": match.match,
                    "ngram": match.ngram,
                    "shared_ngrams": match.shared,
                    "action": action,
                }
            )
    matches = pd.DataFrame(rows, columns=list(MATCH_COLUMNS)).astype(MATCH_COLUMNS)
    counts = _counts(matches, items, params, len(prompts))
    for row in counts.itertuples():
        logger.info(
            "decontamination: %s (%d items): %d of %d prompts match (%d exact), %s by %s",
            row.benchmark,
            row.items,
            row.matched,
            row.prompts_checked,
            row.exact,
            action,
            row.method,
        )
    kept = prompts
    if params.action == "drop" and len(matches):
        kept = prompts[~prompts["prompt_id"].astype(str).isin(set(matches["prompt_id"]))]
        logger.info(
            "decontamination: %d of %d prompts removed; see prompt_contamination",
            len(prompts) - len(kept),
            len(prompts),
        )
    return kept.reset_index(drop=True), matches, counts


def _counts(
    matches: pd.DataFrame, items: pd.DataFrame, params: DecontaminationParams, checked: int
) -> pd.DataFrame:
    rows = []
    for name, path in (params.benchmarks or {}).items():
        mine = matches[matches["benchmark"] == name]
        prompts = mine.drop_duplicates("prompt_id")
        exact = mine.loc[mine["match"] == "exact", "prompt_id"].nunique()
        rows.append(
            {
                "benchmark": name,
                "file": str(path),
                "items": int((items["benchmark"] == name).sum()),
                "method": params.describe(),
                "ngram": params.ngram,
                "prompts_checked": checked,
                "matched": len(prompts),
                "exact": exact,
                "removed": len(prompts) if params.action == "drop" else 0,
                "flagged": len(prompts) if params.action == "flag" else 0,
            }
        )
    return pd.DataFrame(rows, columns=list(COUNT_COLUMNS)).astype(COUNT_COLUMNS)
