"""Teacher-style critique of one completion with an overall 1-10 score, and the score-only
re-ask used by the score fix.

`parse_overall_score` reads the number with regular expressions only (no `eval`) and returns
None rather than a guess: a missing or out-of-range score must never become a 0 or a 10.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llm_feedback.backends.contract import ChatRequest
from llm_feedback.core.errors import InputError
from llm_feedback.replies.extract import json_objects_in
from llm_feedback.replies.fencing import (
    ANNOTATION_NONCE_DIGITS,
    LINE_DECORATION,
    fenced_block,
    request_nonce,
    unquoted_lines,
)
from llm_feedback.replies.sampling import JUDGE_SAMPLING
from llm_feedback.replies.status import AMBIGUOUS, EMPTY, NO_MATCH, OK, OUT_OF_RANGE
from llm_feedback.templates import PACKAGE_TEMPLATES, Templates

OVERALL_SCALE = (1, 10)

# What each generation principle asked the model to emphasise, in our words.
PRINCIPLE_FOCUS: Mapping[str, str] = {
    "helpfulness": "being useful: accurate, engaging, complete information for the user's need",
    "honesty": "honesty about what it knows: saying when it is unsure instead of guessing",
    "truthfulness": "facts only: nothing invented or in conflict with the question or reliable "
    "knowledge",
    "verbalized_calibration": "stating how confident it is, in line with how likely it is right",
    "harmlessness": "avoiding anything that could cause harm, and staying respectful and safe",
}

CRITIQUE_REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "feedback": {"type": "string"},
        "overall_score": {"type": "integer", "enum": list(range(1, 11))},
    },
    "required": ["feedback", "overall_score"],
    "additionalProperties": False,
}
RESCORE_REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"overall_score": CRITIQUE_REPLY_SCHEMA["properties"]["overall_score"]},
    "required": ["overall_score"],
    "additionalProperties": False,
}

# A score fits in a handful of tokens; the JSON wrapper needs a few more.
RESCORE_MAX_TOKENS = 8
RESCORE_MAX_TOKENS_STRUCTURED = 16


_NUMBER = (
    r"(?P<number>\d+(?:\.\d+)?)(?P<range>\s*[-–]\s*\d)?"
    r"(?:\s*(?:/|out\s+of)\s*(?P<scale>\d+(?:\.0+)?)\b)?"
)
# A labelled score counts only at the start of one of the judge's own lines: "Overall score:
# 7", "**Final grade** - 8/10", "Score: 6". A bare "Rating:" is the aspect rubric's 1-5
# label, never a 1-10 overall score.
_LABELLED_SCORE = re.compile(
    LINE_DECORATION + r"(?:(?P<overall>(?:overall|final)\s+)(?:score|rating|grade)|score|grade)\b"
    r"\s*[*_]*\s*(?:\([^)\n]*\))?\s*[*_]*\s*(?:[:：=\-–—]|\bis\b|\bof\b)?\s*[*_\[(]*\s*" + _NUMBER,
    re.IGNORECASE,
)
# A reply that is just a score, possibly followed by prose ("8/10. Solid answer").
_LEADING_SCORE = re.compile(r"^[\s*_\[(]*" + _NUMBER + r"[\s*_\])]*(?P<after>.*)$", re.DOTALL)
_FEEDBACK_LABEL = re.compile(
    LINE_DECORATION + r"feedback\s*[*_]*\s*[:：]\s*[*_]*\s*", re.IGNORECASE
)


@dataclass
class CritiqueParse:
    """A critique reply read back: the feedback prose and its 1-10 score (None if unusable)."""

    feedback: str
    overall_score: float | None
    status: str  # a word of `llm_feedback.replies.status`
    error: str | None = None


# (score, why it is None, parse status)
_ScoreReading = tuple[float | None, str | None, str]


def _score_from_match(match: re.Match[str]) -> _ScoreReading:
    written = match.group(0).strip()[:40]
    if match["range"]:
        return None, f"score {written!r} is a range, not one value", AMBIGUOUS
    if match["scale"] and float(match["scale"]) != OVERALL_SCALE[1]:
        return None, f"score {written!r} is not on the 1-10 scale", OUT_OF_RANGE
    score = float(match["number"])
    if not OVERALL_SCALE[0] <= score <= OVERALL_SCALE[1]:
        return None, f"score {match['number']} is outside 1-10", OUT_OF_RANGE
    return score, None, OK


def _leading_score(text: str) -> re.Match[str] | None:
    """A score at the very start, unless it reads as a list number ("1. The answer ...")."""
    match = _LEADING_SCORE.match(text.strip())
    if match is None:
        return None
    after = match["after"].split("\n", 1)[0].strip()
    if not after.rstrip(".!"):
        return match
    if match["scale"]:
        return match
    # Without "/10", only a clear separator marks the number as a score.
    return match if re.match(r"^[,;:\-–—!]", after) else None


def _find_score(text: str) -> tuple[_ScoreReading, int | None]:
    """(score reading, index of the line that carries a labelled score).

    The first labelled line is the judge's answer ("Overall ..." lines before plain "Score"
    ones); a later labelled line with another value makes the reply ambiguous rather than
    overriding it, so text the judge quotes or echoes cannot replace its score.
    """
    lines = unquoted_lines(text)
    labelled = [
        (index, match)
        for index, line in enumerate(lines)
        if (match := _LABELLED_SCORE.match(line)) is not None
    ]
    overall = [(index, match) for index, match in labelled if match["overall"]]
    candidates = overall or labelled
    if candidates:
        index, match = candidates[0]
        reading = _score_from_match(match)
        others = {_score_from_match(later)[0] for _, later in candidates[1:]}
        if others - {reading[0]}:
            values = [reading[0], *sorted(v for v in others if v is not None)]
            return (None, f"conflicting scores {values}", AMBIGUOUS), index
        return reading, index
    body = "\n".join(lines).strip()
    bare = _leading_score(body) if body else None
    if bare is None and body:
        # A score alone on the last line, after the prose.
        last = _LEADING_SCORE.match(body.rsplit("\n", 1)[-1])
        bare = last if last and not last["after"].strip(" .!") else None
    if bare is None:
        return (None, "no overall score found", NO_MATCH), None
    return _score_from_match(bare), None


def parse_overall_score(text: str | None) -> float | None:
    """The 1-10 score in a critique or a score-only reply, or None if absent or out of range.

    Args:
        text: the reply (None: no reply).

    Returns:
        The score, or None.
    """
    if not text:
        return None
    return _find_score(text)[0][0]


def _principle_focus(principle: str) -> str:
    return PRINCIPLE_FOCUS.get(principle, principle.replace("_", " "))


def build_critique_request(
    instruction: str,
    completion: str,
    principle: str,
    system_prompt: str = "",
    *,
    structured: bool = False,
    sampling: Mapping[str, Any] | None = None,
    templates: Templates = PACKAGE_TEMPLATES,
) -> ChatRequest:
    """The teacher-style critique of one completion, ending with an overall 1-10 score.

    The principle (and the system prompt that carried it, when given) tells the teacher what
    the model had been asked to emphasise, so the feedback can hold it to that. `templates`:
    the prompt templates (the package's, or a `prompt_templates` folder's over them).

    Args:
        instruction: the prompt's instruction.
        completion: the completion critiqued.
        principle: the principle it was generated under.
        system_prompt: the system prompt that carried the principle ("": none).
        structured: ask for JSON by schema.
        sampling: the judge's sampling settings.
        templates: the prompt templates.

    Returns:
        The request.
    """
    render = templates.render
    if not isinstance(instruction, str) or not instruction.strip():
        raise InputError("a critique request needs a non-empty instruction")
    if not isinstance(completion, str):
        raise InputError(f"the completion to critique is {type(completion).__name__}, not text")
    nonce = request_nonce(
        "critique",
        instruction,
        completion,
        principle,
        system_prompt,
        hex_digits=ANNOTATION_NONCE_DIGITS,
    )
    optional_system_prompt = ""
    if system_prompt.strip():
        block = fenced_block("SYSTEM PROMPT", system_prompt, nonce)
        optional_system_prompt = render("critique", "system_prompt", system_prompt=block) + "\n\n"
    user = render(
        "critique",
        focus=_principle_focus(principle),
        fencing_notice=render("material_notice", nonce=nonce, task="review"),
        optional_system_prompt=optional_system_prompt,
        instruction=fenced_block("INSTRUCTION", instruction, nonce),
        completion=fenced_block("ANSWER", completion, nonce),
        reply=render("critique", "json_reply" if structured else "reply"),
    )
    request_sampling = {**JUDGE_SAMPLING, **(sampling or {})}
    if structured:
        request_sampling["json_schema"] = CRITIQUE_REPLY_SCHEMA
    return ChatRequest.from_prompt(user, system=render("system_teacher"), **request_sampling)


def critique_request(
    row: Any,
    structured: bool,
    sampling: Mapping[str, Any],
    templates: Templates = PACKAGE_TEMPLATES,
) -> ChatRequest:
    """The critique request of one completion row.

    Args:
        row: One completion row (a named tuple or a Series).
        structured: Ask for JSON by schema.
        sampling: The judge's sampling settings.
        templates: The prompt templates.

    Returns:
        The request.
    """
    return build_critique_request(
        str(row.instruction),
        str(row.response),
        str(row.principle or "helpfulness"),
        str(getattr(row, "system_prompt", "") or ""),
        structured=structured,
        sampling=sampling,
        templates=templates,
    )


def _json_score(value: Any) -> _ScoreReading:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None, f"overall_score {value!r} is not a number", NO_MATCH
    return _find_score(str(value))[0]


class _ConflictingAnswers(ValueError):
    """The reply holds several different JSON answers: one may be echoed, trust none."""


def _json_answer(reply: str, key: str) -> dict[str, Any] | None:
    """The JSON object in `reply` carrying `key`; None when there is none; raises
    `_ConflictingAnswers` when there are several that differ."""
    answers = [obj for obj in json_objects_in("\n".join(unquoted_lines(reply))) if key in obj]
    if len({json.dumps(answer, sort_keys=True) for answer in answers}) > 1:
        raise _ConflictingAnswers(f"the reply holds {len(answers)} different JSON answers")
    return answers[0] if answers else None


def parse_critique_reply(reply_text: str | None, structured: bool) -> CritiqueParse:
    """Feedback text and overall score; never raises, never invents a score.

    Args:
        reply_text: the reply (None: no reply).
        structured: whether JSON was asked for.

    Returns:
        The feedback and score (None where unread).
    """
    if not reply_text or not reply_text.strip():
        return CritiqueParse("", None, EMPTY, "empty reply")
    try:
        answer = _json_answer(reply_text, "overall_score") if structured else None
    except _ConflictingAnswers as conflict:
        return CritiqueParse("", None, AMBIGUOUS, str(conflict))
    if answer is not None:
        feedback = str(answer.get("feedback") or "").strip()
        score, error, status = _json_score(answer["overall_score"])
    else:
        (score, error, status), score_line = _find_score(reply_text)
        lines = unquoted_lines(reply_text)
        if score_line is not None and _LABELLED_SCORE.match(
            re.sub(LINE_DECORATION, "", lines[score_line])
        ):
            del lines[score_line]  # the score has its own field; keep the critique prose only
        feedback = _FEEDBACK_LABEL.sub("", "\n".join(lines).strip(), count=1).strip()
    return CritiqueParse(feedback, score, status, error)


def build_rescore_request(
    critique_request: ChatRequest,
    critique: str,
    *,
    structured: bool = False,
    sampling: Mapping[str, Any] | None = None,
    templates: Templates = PACKAGE_TEMPLATES,
) -> ChatRequest:
    """Ask the judge for only a 1-10 score, continuing the conversation of its critique.

    As in UltraFeedback's score fix, the judge sees its critique request again, its stored
    critique as its own earlier turn, and then a request for the score alone. `sampling`
    is the critique's (temperature, top_p, seed, ...); the score has its own small budget.

    Args:
        critique_request: the critique's request.
        critique: the stored critique.
        structured: ask for JSON by schema.
        sampling: the critique's sampling settings.
        templates: the prompt templates.

    Returns:
        The request.
    """
    if not isinstance(critique, str):
        raise InputError(f"the critique to continue is {type(critique).__name__}, not text")
    request_sampling: dict[str, Any] = {
        **JUDGE_SAMPLING,
        **(sampling or {}),
        "max_tokens": RESCORE_MAX_TOKENS_STRUCTURED if structured else RESCORE_MAX_TOKENS,
    }
    if structured:
        request_sampling["json_schema"] = RESCORE_REPLY_SCHEMA
    render = templates.render
    follow_up = render("rescore", reply=render("rescore", "json_reply" if structured else "reply"))
    return ChatRequest.from_messages(
        [
            *critique_request.messages,
            {"role": "assistant", "content": critique},
            {"role": "user", "content": follow_up},
        ],
        **request_sampling,
    )


def parse_rescore_reply(reply_text: str | None) -> float | None:
    """The new 1-10 score, or None; a JSON reply is read whichever format was asked for.

    Args:
        reply_text: the reply (None: no reply).

    Returns:
        The score, or None.
    """
    if not reply_text:
        return None
    try:
        answer = _json_answer(reply_text, "overall_score")
    except _ConflictingAnswers:
        return None
    if answer is not None:
        return _json_score(answer["overall_score"])[0]
    return parse_overall_score(reply_text)
