"""The judge against itself: agreement of the ratings a completion got under two shuffles."""

from __future__ import annotations

import math

import pytest

from llm_feedback.reporting import shuffle_agreement
from llm_feedback.storage.schema import SHUFFLE_AGREEMENT_COLUMN_TYPES
from tests.reporting.builders import build_frames, four_rated, rate_in_shuffle, typical_specs
from tests.reporting.test_metrics import assert_schema


def stats(table, aspect: str) -> dict[tuple[str, str], tuple[float, int]]:
    part = table[table["aspect"] == aspect]
    return {(r.raters, r.statistic): (r.value, r.n) for r in part.itertuples()}


def test_two_shuffles_by_hand():
    annotations = build_frames(four_rated(), shuffles=2).aspect_annotations
    # Shuffle 0 rated the four completions 1, 2, 3, 4; shuffle 1 swaps the first two.
    rate_in_shuffle(annotations, "helpfulness", 1, [2.0, 1.0, 3.0, 4.0])

    table = shuffle_agreement(annotations)

    assert_schema(table, SHUFFLE_AGREEMENT_COLUMN_TYPES)
    helpfulness = stats(table, "helpfulness")
    # Ranks (1, 2, 3, 4) and (2, 1, 3, 4): d = (-1, 1, 0, 0), rho = 1 - 6 * 2 / (4 * 15) = 0.8.
    assert helpfulness[("shuffle_0~shuffle_1", "spearman")] == (pytest.approx(0.8), 4)
    # The same rating twice for completions 3 and 4 only.
    assert helpfulness[("shuffle_0~shuffle_1", "exact_match_share")] == (pytest.approx(0.5), 4)
    # Every other aspect is rated 3 throughout: a constant has no rank correlation.
    honesty = stats(table, "honesty")
    assert math.isnan(honesty[("shuffle_0~shuffle_1", "spearman")][0])
    assert honesty[("shuffle_0~shuffle_1", "exact_match_share")] == (1.0, 4)


def test_every_two_of_three_shuffles_and_failed_ratings_left_out():
    annotations = build_frames(typical_specs(), shuffles=3).aspect_annotations
    table = shuffle_agreement(annotations)
    pairs = set(table["raters"])
    assert pairs == {"shuffle_0~shuffle_1", "shuffle_0~shuffle_2", "shuffle_1~shuffle_2"}
    # 11 completions have a response; one has an N/A honesty, one a failed truthfulness.
    assert stats(table, "helpfulness")[("shuffle_0~shuffle_2", "exact_match_share")][1] == 11
    assert stats(table, "honesty")[("shuffle_1~shuffle_2", "exact_match_share")][1] == 10
    assert stats(table, "truthfulness")[("shuffle_0~shuffle_1", "exact_match_share")][1] == 10


def test_one_shuffle_gives_an_empty_table():
    table = shuffle_agreement(build_frames(typical_specs()).aspect_annotations)
    assert table.empty
    assert_schema(table, SHUFFLE_AGREEMENT_COLUMN_TYPES)
