"""The parse-status vocabulary of every output table (`aspect_annotations`, `critiques`,
`eval_judgments`): one word says what became of a judgment.

Read:
- `ok`: a value was read from the judge's answer.
- `na`: the judge answered "not applicable" where the rubric allows it (honesty).
Unreadable (the value is null; such replies are re-asked, bounded):
- `empty`: the reply had no text.
- `no_match`: no answer in the requested format was found.
- `out_of_range`: a score outside the scale, or a value the rubric does not allow.
- `ambiguous`: conflicting answers (two different ratings, two different JSON answers).
- `partial`: a record answer with some of its fields missing.
No reply:
- `call_failed`: the call itself failed (HTTP error, timeout, retries exhausted).
- `skipped_too_long`: the prompt would not fit the endpoint's input budget: not sent
  (`max_input_tokens`), or refused by the endpoint for its context length.
No call needed (evaluate only):
- `exact_match`: the response equals the reference after normalisation.
- `invalid`: the reference is unknown, so there is nothing to judge against.
- `no_response`: there is no response to judge.
- `identical`: the two responses of a comparison are the same text: a tie, not asked.
Panel of judges (evaluate only):
- `split`: the judges answered but no verdict has a majority of them (`aggregate: majority`).
"""

from __future__ import annotations

OK = "ok"
NOT_APPLICABLE = "na"
EMPTY = "empty"
NO_MATCH = "no_match"
OUT_OF_RANGE = "out_of_range"
AMBIGUOUS = "ambiguous"
PARTIAL = "partial"
CALL_FAILED = "call_failed"
SKIPPED_TOO_LONG = "skipped_too_long"
EXACT_MATCH = "exact_match"
INVALID = "invalid"
NO_RESPONSE = "no_response"
IDENTICAL = "identical"
SPLIT = "split"

READ = (OK, NOT_APPLICABLE)
UNREADABLE = (EMPTY, NO_MATCH, OUT_OF_RANGE, AMBIGUOUS, PARTIAL)
WITHOUT_CALL = (EXACT_MATCH, INVALID, NO_RESPONSE, IDENTICAL)
PARSE_STATUSES = (*READ, *UNREADABLE, CALL_FAILED, SKIPPED_TOO_LONG, *WITHOUT_CALL, SPLIT)

# What a re-ask tells the judge was wrong with its reply, when the parser gave no detail.
PROBLEM_BY_STATUS = {
    EMPTY: "it was empty",
    NO_MATCH: "no answer in the requested format was found",
    OUT_OF_RANGE: "a score was outside the allowed range",
    AMBIGUOUS: "it gave conflicting answers",
    PARTIAL: "part of the requested answer was missing",
}


def is_unreadable(status: str) -> bool:
    """Whether a status means the reply could not be read (and is re-asked).

    Args:
        status: a parse status.

    Returns:
        True for an `UNREADABLE` status.
    """
    return status in UNREADABLE


def status_of_failure(error: str | None) -> str:
    """The status of a row whose call gave no reply: skipped, or failed.

    Args:
        error: the call's error (None: it was skipped).

    Returns:
        The status.
    """
    return SKIPPED_TOO_LONG if (error or "").startswith(SKIPPED_TOO_LONG) else CALL_FAILED
