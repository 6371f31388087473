"""Parsers on varied and malformed replies, and the exact-match short-cut."""

import math

import pandas as pd
import pytest

from llm_feedback.core.errors import ConfigError
from llm_feedback.judges import (
    PairwiseReply,
    exact_match,
    is_unknown_reference,
    normalize_answer,
    parse_binary,
    parse_bracket_rating,
    parse_pairwise,
    parse_rating,
    parse_reference_grading,
    parse_rubric_scores,
)

JUNK = [None, "", "   \n", "***", "¯\\_(ツ)_/¯", "{not json", "[[", "\x00\x01", "9" * 5000]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("1", 1),
        ("0", 0),
        ("1\n", 1),
        ("Yes.", 1),
        ("**No**", 0),
        ("Answer: yes", 1),
        ("answer: NO", 0),
        ("Verdict = 1", 1),
        ("Correct!", 1),
        ("Incorrect.", 0),
        ("The prediction is correct.", 1),
        ("The prediction is incorrect: it says 12, the reference 13.", 0),
        ("This is not correct.", 0),
        ("The answer isn't quite right.", 0),
        ("Both say 1912, so the candidate is correct.\n\n1", 1),
        ("Judgment: 0\nThe candidate names the wrong city.", 0),
        ("1. Compare numbers.\n2. They differ.\nFinal answer: 0", 0),
        ("Yes, the candidate matches the reference.", 1),
        ('```json\n{"correct": 1}\n```', 1),
        ('{"correct": "no"}', 0),
    ],
)
def test_parse_binary_reads_verdicts(reply: str, expected: int) -> None:
    result = parse_binary(reply, "0/1")
    assert (result.value, result.status) == (expected, "ok")


def test_parse_binary_format_specific_fallbacks() -> None:
    # A lone digit counts in the 0/1 format, a lone yes/no word in the yes/no format.
    assert parse_binary("After checking, I give it 1", "0/1").value == 1
    assert parse_binary("After checking, I give it 1", "yes/no").status == "no_match"
    assert parse_binary("It matches, so my verdict is clear: yes", "yes/no").value == 1
    assert parse_binary("Scores 10 and 0.5 appear", "0/1").status == "no_match"


@pytest.mark.parametrize(
    ("reply", "status"),
    [
        ("maybe", "no_match"),
        ("The first part is correct but the second is wrong.", "ambiguous"),
        ("Options are 0 and 1", "ambiguous"),
        ("", "empty"),
    ],
)
def test_parse_binary_refuses_to_guess(reply: str, status: str) -> None:
    result = parse_binary(reply)
    assert (result.value, result.status) == (None, status)


@pytest.mark.parametrize("reply", JUNK)
def test_parsers_never_raise_on_junk(reply: object) -> None:
    assert parse_binary(reply, "yes/no").value is None  # type: ignore[arg-type]
    assert parse_reference_grading(reply).value["correct"] is None  # type: ignore[arg-type]
    assert parse_rating(reply, 0, 5).value is None  # type: ignore[arg-type]
    assert parse_bracket_rating(reply).value is None  # type: ignore[arg-type]
    assert parse_rubric_scores(reply, {"a": ""}, (1, 5)).value == {"a": None}  # type: ignore[arg-type]
    assert parse_pairwise(reply).value.verdict is None  # type: ignore[arg-type]


def test_parse_binary_rejects_unknown_format() -> None:
    with pytest.raises(ConfigError):
        parse_binary("1", "1/0")


def test_reference_grading_full_reply() -> None:
    reply = (
        "extracted_final_answer: 3/4\n"
        "reasoning: The response gives 3/4, the reference 0.75;\nthese are equal.\n"
        "correct: yes\n"
        "confidence: 80%"
    )
    result = parse_reference_grading(reply)
    assert result.status == "ok"
    assert result.value == {
        "extracted_final_answer": "3/4",
        "reasoning": "The response gives 3/4, the reference 0.75;\nthese are equal.",
        "correct": True,
        "confidence": 80.0,
    }


def test_reference_grading_tolerates_markdown_case_and_missing_fields() -> None:
    reply = "**Extracted Final Answer:** Ottawa\n**Correct:** NO\n**Confidence:** 85"
    result = parse_reference_grading(reply)
    assert result.status == "partial"
    assert result.value == {
        "extracted_final_answer": "Ottawa",
        "reasoning": None,
        "correct": False,
        "confidence": 85.0,
    }
    assert parse_reference_grading("Correct: Yes\nconfidence: 0.9").value["confidence"] == 90.0
    assert parse_reference_grading("correct: yes\nconfidence: 250%").value["confidence"] is None


def test_reference_grading_without_a_verdict() -> None:
    result = parse_reference_grading("extracted_final_answer: None\ncorrect: perhaps")
    assert result.status == "no_match"
    assert result.value["extracted_final_answer"] is None
    assert result.value["correct"] is None


def test_reference_grading_reads_json() -> None:
    reply = (
        '{"extracted_final_answer": "7", "reasoning": "same", "correct": "no", "confidence": 60}'
    )
    result = parse_reference_grading(reply)
    assert (result.status, result.value["correct"], result.value["confidence"]) == ("ok", False, 60)


@pytest.mark.parametrize(
    ("reply", "low", "high", "expected"),
    [
        ("Rating: 4", 0, 5, 4.0),
        ("**Rating:** 2", 0, 5, 2.0),
        ("It covers most points. 4/5", 0, 5, 4.0),
        ("Score: 3 out of 5", 0, 5, 3.0),
        ("Some prose.\n[[4]]", 0, 5, 4.0),
        ("On a scale from 0 to 5 I would rate it 1.", 0, 5, 1.0),
        ("The rating scale runs 0-5; overall score is 3", 0, 5, 3.0),
        ("Rating: 0", 0, 5, 0.0),
        ("5", 0, 5, 5.0),
        ("Rating: 7.5", 1, 10, 7.5),
        ('{"rating": 9, "explanation": "thorough"}', 1, 10, 9.0),
        ("A score of 2 seemed fair at first, but final score: 3", 0, 5, 3.0),
    ],
)
def test_parse_rating(reply: str, low: int, high: int, expected: float) -> None:
    result = parse_rating(reply, low, high)
    assert (result.value, result.status) == (expected, "ok")


@pytest.mark.parametrize(
    ("reply", "status"),
    [
        ("Rating: 6", "out_of_range"),
        ("Score: 8/10", "out_of_range"),
        ("Rating: -1", "out_of_range"),
        ("A decent answer overall.", "no_match"),
        ("It has 3 sections and 2 images.", "no_match"),
    ],
)
def test_parse_rating_failures(reply: str, status: str) -> None:
    result = parse_rating(reply, 0, 5)
    assert (result.value, result.status) == (None, status)


def test_parse_rating_rejects_a_bad_scale() -> None:
    with pytest.raises(ConfigError):
        parse_rating("Rating: 3", 5, 5)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Good answer. Rating: [[8]]", 8.0),
        ("Rating: [[8.5]]", 8.5),
        ("Rating: [7]", 7.0),  # single brackets only when there is no [[N]]
        ("See [3] above. Rating: [[6]]", 6.0),
        ("[[2]] at first, then [[9]]", 2.0),  # MT-Bench takes the first
    ],
)
def test_parse_bracket_rating(reply: str, expected: float) -> None:
    assert parse_bracket_rating(reply).value == expected


def test_parse_bracket_rating_optional_range_and_errors() -> None:
    assert parse_bracket_rating("$ERROR$").status == "no_match"
    assert parse_bracket_rating("Rating: [[11]]").value == 11.0
    assert parse_bracket_rating("Rating: [[11]]", (1, 10)).status == "out_of_range"


CRITERIA = {"clarity": "easy to follow", "factual accuracy": "facts are right"}


@pytest.mark.parametrize(
    "reply",
    [
        '{"scores": {"clarity": 4, "factual accuracy": 2}, "justification": "fine"}',
        'Here you go:\n```json\n{"Clarity": "4", "Factual_Accuracy": 2.0}\n```\nHope it helps',
        '{"scores": {"clarity": 4, "factual accuracy": 2}, "justification": "cut sho',
        "Clarity: 4\nFactual accuracy: 2",
        '{"clarity": {"score": 4, "why": "ok"}, "factual accuracy": {"score": 2}}',
    ],
)
def test_parse_rubric_scores(reply: str) -> None:
    result = parse_rubric_scores(reply, CRITERIA, (1, 5))
    assert (result.value, result.status) == ({"clarity": 4, "factual accuracy": 2}, "ok")


def test_parse_rubric_scores_partial_and_invalid() -> None:
    missing = parse_rubric_scores('{"scores": {"clarity": 3}}', CRITERIA, (1, 5))
    assert (missing.value, missing.status) == ({"clarity": 3, "factual accuracy": None}, "partial")
    off_scale = parse_rubric_scores('{"clarity": 9, "factual accuracy": 3.5}', CRITERIA, (1, 5))
    assert off_scale.value == {"clarity": None, "factual accuracy": None}
    assert off_scale.status == "out_of_range"
    booleans = parse_rubric_scores(
        '{"clarity": true, "factual accuracy": "high"}', CRITERIA, (1, 5)
    )
    assert booleans.status == "no_match"
    assert parse_rubric_scores('{"clarity": 1}', ["clarity"], (1, 5)).value == {"clarity": 1}


@pytest.mark.parametrize(
    ("reply", "verdict", "scores"),
    [
        ("A is more precise.\nScore A: 8\nScore B: 5\nVerdict: [[A]]", "A", (8.0, 5.0)),
        ("B covers more. **Verdict: [[B]]**", "B", (None, None)),
        ("They are equally good. [[C]]", "tie", (None, None)),
        ("Score A: 6\nScore B: 6", "tie", (6.0, 6.0)),
        ("Assistant A's score: 3/10\nAssistant B's score: 7/10", "B", (3.0, 7.0)),
        ("Rating for Response A = 9, rating for Response B = 4", "A", (9.0, 4.0)),
        ("[[7, 9]]", "B", (7.0, 9.0)),
        ('{"score_a": 2, "score_b": 5, "verdict": "C"}', "tie", (2.0, 5.0)),
    ],
)
def test_parse_pairwise(reply: str, verdict: str, scores: tuple) -> None:
    result = parse_pairwise(reply, (1, 10))
    assert result.value == PairwiseReply(verdict, scores)
    assert result.status == "ok"


def test_parse_pairwise_failures() -> None:
    ambiguous = parse_pairwise("Either [[A]] or [[B]], hard to say")
    assert (ambiguous.value.verdict, ambiguous.status) == (None, "ambiguous")
    off_scale = parse_pairwise("Score A: 12\nScore B: 4", (1, 10))
    assert off_scale.value == PairwiseReply(None, (None, 4.0))
    assert off_scale.status == "out_of_range"
    one_score = parse_pairwise("Score A: 5")
    assert (one_score.value.verdict, one_score.status) == (None, "partial")
    assert parse_pairwise("No opinion.").status == "no_match"


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("The Eiffel Tower.", "eiffel tower"),
        ("1,000", "1000"),
        ("1000.0", "1000"),
        ("$1,250,000.50", "1250000.5"),
        ("-3.10", "-3.1"),
        ("0.00", "0"),
        ("  New   York!! ", "new york"),
        ("A", "a"),  # a lone option letter is not an article
        ("vitamin A", "vitamin a"),
        ("1,2,3", "1 2 3"),
        (None, ""),
        (float("nan"), ""),
        (42, "42"),
    ],
)
def test_normalize_answer(text: object, normalized: str) -> None:
    assert normalize_answer(text) == normalized


def test_exact_match() -> None:
    assert exact_match("1,000", "1000.0")
    assert exact_match("the Nile", "Nile.")
    assert exact_match("Paris", ["London", "paris!"])
    assert not exact_match("3", "3.5")
    assert not exact_match("", "")
    assert not exact_match("unknown", "Unknown")
    assert not exact_match("Paris", None)


@pytest.mark.parametrize(
    "reference",
    [
        None,
        float("nan"),
        pd.NA,
        pd.NaT,
        "",
        "  ",
        "Unknown",
        "N/A",
        "none",
        "NaN",
        [],
        ["n/a", None],
    ],
)
def test_unknown_references(reference: object) -> None:
    assert is_unknown_reference(reference)


@pytest.mark.parametrize("reference", ["Paris", 0, 3.5, "No", ["n/a", "Lima"], math.pi])
def test_known_references(reference: object) -> None:
    assert not is_unknown_reference(reference)
