"""`params:decontamination`: the evaluation benchmarks the prompt set is checked against."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llm_feedback.core.errors import ConfigError
from llm_feedback.params.reader import Block, defaults_of

ACTIONS = ("drop", "flag")


@dataclass(frozen=True)
class DecontaminationParams:
    # Benchmark name -> its file (contamination.benchmark_files); None: no check.
    benchmarks: Mapping[str, str] | None = None
    # A prompt sharing one word n-gram of this length with a benchmark item matches it
    # (13 as in GPT-3's and open-r1's decontamination).
    ngram: int = 13
    # Items shorter than `ngram` words match when a prompt holds the whole item; items
    # shorter than this match only a prompt equal to them (after normalisation).
    min_words: int = 6
    action: str = "drop"  # drop: the prompt is removed; flag: kept, listed with its match

    def describe(self) -> str:
        """The method in words, as the card and the report state it."""
        return (
            f"word {self.ngram}-gram overlap (Unicode NFKC, case-folded, punctuation "
            f"ignored); an item under {self.ngram} words matches a prompt containing all "
            f"of it, one under {self.min_words} words only an equal prompt"
        )


def parse_decontamination(values: Any) -> DecontaminationParams:
    """Read `params:decontamination`.

    Args:
        values: the parameter block (None: the defaults, no benchmark).

    Returns:
        The checked parameters (benchmark files are checked when read).
    """
    defaults = defaults_of(DecontaminationParams)
    block = Block(values, "decontamination", list(defaults), defaults)
    benchmarks = block.mapping("benchmarks", nullable=True)
    for name, path in (benchmarks or {}).items():
        if not isinstance(path, str) or not path:
            raise ConfigError(
                f"decontamination.benchmarks.{name}: expected a file path, got {path!r}"
            )
    ngram = block.integer("ngram", minimum=1)
    min_words = block.integer("min_words", minimum=1)
    if min_words > ngram:
        raise ConfigError(
            f"decontamination.min_words ({min_words}) must not exceed decontamination.ngram "
            f"({ngram})"
        )
    return DecontaminationParams(
        benchmarks=dict(benchmarks) if benchmarks else None,
        ngram=ngram,
        min_words=min_words,
        action=block.choice("action", ACTIONS),
    )
