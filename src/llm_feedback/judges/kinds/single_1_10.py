"""The `single_1_10` kind: MT-Bench-style 1-10 grading of one answer, written `[[N]]`,
with the reference answer where there is one; a two-turn row grades the answer to turn 2
given the first exchange.

Templates `templates/single_1_10.txt` (`single_1_10_reference.txt` with a reference) and
`multi_turn.txt` (`multi_turn_reference.txt`). Fields: {question}, {answer} (synonym
{prediction}: the answer being judged), {reference} when given; the two-turn form uses
{question_1}, {answer_1}, {question_2}, {answer_2} and, with references, {reference_1},
{reference_2}. Free-text replies are read by FastChat's rule (the first `[[N]]`, else the
first `[N]`), so that MT-Bench scores are reproduced.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from llm_feedback.backends.contract import ChatRequest
from llm_feedback.core.errors import InputError
from llm_feedback.engine import Reader
from llm_feedback.judges.kinds.spec import (
    Asking,
    JudgeItem,
    JudgeKind,
    KindOptions,
    scale_labels,
)
from llm_feedback.judges.reading import (
    ParseResult,
    check_range,
    is_blank,
    judges_own_text,
    parse_rating,
    rating_result,
    value_reading,
)
from llm_feedback.judges.requests import (
    JUDGE_SYSTEM_PROMPT,
    add_optional_blocks,
    check_text,
    fenced_values,
    judge_request,
    rating_json_reply,
    rating_reply_schema,
    render_prompt,
)
from llm_feedback.replies.status import EMPTY, NO_MATCH, OK
from llm_feedback.templates import load_template, render

MT_BENCH_SCALE = (1, 10)
MAX_TOKENS = 1024

# MT-Bench: the first [[N]], and only when there is none the first [N].
_MT_BENCH_SCORE = re.compile(r"\[\[(\d+\.?\d*)\]\]")
_MT_BENCH_BACKUP = re.compile(r"\[(\d+\.?\d*)\]")


def parse_bracket_rating(
    text: str | None, score_range: tuple[float, float] | None = None
) -> ParseResult[float]:
    """MT-Bench-compatible rating: the first `[[N]]`, else the first `[N]` (N may be decimal).

    Reproduces FastChat's parsed scores; where FastChat records -1 (no rating found, or the
    `$ERROR$` marker of a failed call) this returns None with "no_match". Out-of-scale
    values are only rejected when `score_range` is given, as FastChat does not check them.

    Args:
        text: the judge's reply (None: no reply).
        score_range: (low, high) to reject ratings outside (None: no check).

    Returns:
        The rating and the parse status.
    """
    if is_blank(text):
        return ParseResult(None, EMPTY)
    text = judges_own_text(text)
    match = _MT_BENCH_SCORE.search(text) or _MT_BENCH_BACKUP.search(text)
    if match is None:
        return ParseResult(None, NO_MATCH)
    value = float(match.group(1))
    if score_range is None:
        return ParseResult(value, OK)
    check_range(*score_range)
    return rating_result(value, *score_range)


def rating_reader(structured: bool) -> Reader:
    """FastChat's rule for free text; the JSON rating of a structured reply.

    Args:
        structured: whether replies are JSON by schema.

    Returns:
        The reader.
    """
    if structured:
        return lambda text: value_reading(parse_rating(text, *MT_BENCH_SCALE))
    return lambda text: value_reading(parse_bracket_rating(text, MT_BENCH_SCALE))


def _single_request(
    template: str,
    values: dict[str, str],
    required: tuple[tuple[str, ...], ...],
    *,
    has_reference: bool,
    custom_prompt: str | None,
    structured: bool,
    system: str | None,
    sampling: dict[str, Any],
) -> ChatRequest:
    criteria = "criteria_with_reference" if has_reference else "criteria"
    user = render_prompt(
        custom_prompt,
        load_template(template),
        values,
        required,
        "single 1-10",
        criteria_text=render("single_1_10", criteria),
        reply=rating_json_reply(*MT_BENCH_SCALE) if structured else render("single_1_10", "reply"),
    )
    schema = rating_reply_schema(*MT_BENCH_SCALE) if structured else None
    return judge_request(user, system, MAX_TOKENS, schema, sampling)


def build_single_rating_request(
    question: str,
    answer: str,
    *,
    reference: str | None = None,
    custom_prompt: str | None = None,
    structured: bool = False,
    system: str | None = JUDGE_SYSTEM_PROMPT,
    **sampling: Any,
) -> ChatRequest:
    """MT-Bench-style 1-10 grading of one answer, with or without a reference answer.

    Args:
        question: the question.
        answer: the answer rated.
        reference: a reference answer (None: none).
        custom_prompt: a template in place of the built-in one.
        structured: ask for a JSON reply by schema.
        system: the system prompt (None: none).
        **sampling: decoding settings for the request.

    Returns:
        The request.
    """
    check_text(question=question, answer=answer)
    values = {"question": question, "answer": answer, "prediction": answer}
    labels = {"question": "QUESTION", "answer": "ANSWER", "prediction": "ANSWER"}
    given = add_optional_blocks(values, labels, (("reference", reference, "REFERENCE ANSWER"),))
    required = (("question",), ("answer", "prediction"), *((name,) for name in given))
    return _single_request(
        "single_1_10" if reference is None else "single_1_10_reference",
        fenced_values(values, labels, "single_1_10"),
        required,
        has_reference=reference is not None,
        custom_prompt=custom_prompt,
        structured=structured,
        system=system,
        sampling=sampling,
    )


def two_turns(name: str, turns: Sequence[str]) -> tuple[str, str]:
    """The two turns of `turns`; InputError unless there are exactly two texts.

    Args:
        name: the field's name, for the message.
        turns: the turns.

    Returns:
        (first, second).
    """
    if isinstance(turns, str) or len(turns) != 2:
        raise InputError(f"{name} must hold exactly two turns, got {turns!r}")
    first, second = turns
    check_text(**{f"{name}[0]": first, f"{name}[1]": second})
    return first, second


def build_multi_turn_rating_request(
    questions: Sequence[str],
    answers: Sequence[str],
    *,
    references: Sequence[str] | None = None,
    custom_prompt: str | None = None,
    structured: bool = False,
    system: str | None = JUDGE_SYSTEM_PROMPT,
    **sampling: Any,
) -> ChatRequest:
    """MT-Bench-style 1-10 grading of the answer to turn 2, given the first exchange.

    Args:
        questions: the two turns' questions.
        answers: the two turns' answers.
        references: the two turns' reference answers (None: none).
        custom_prompt: a template in place of the built-in one.
        structured: ask for a JSON reply by schema.
        system: the system prompt (None: none).
        **sampling: decoding settings for the request.

    Returns:
        The request.
    """
    question_1, question_2 = two_turns("questions", questions)
    answer_1, answer_2 = two_turns("answers", answers)
    values = {
        "question_1": question_1,
        "answer_1": answer_1,
        "question_2": question_2,
        "answer_2": answer_2,
    }
    required: tuple[tuple[str, ...], ...] = tuple((name,) for name in values)
    if references is not None:
        values["reference_1"], values["reference_2"] = two_turns("references", references)
        required += (("reference_1",), ("reference_2",))
    # QUESTION 1, ANSWER 1, ..., REFERENCE 2
    labels = {name: name.upper().replace("_", " ") for name in values}
    return _single_request(
        "multi_turn" if references is None else "multi_turn_reference",
        fenced_values(values, labels, "multi_turn"),
        required,
        has_reference=references is not None,
        custom_prompt=custom_prompt,
        structured=structured,
        system=system,
        sampling=sampling,
    )


def ask(item: JudgeItem, options: KindOptions, asking: Asking) -> tuple[ChatRequest, Reader]:
    """The request for one item and the reader of its reply (the kind's `ask`).

    Args:
        item: what the judgment is about.
        options: the kind's settings.
        asking: structured replies and sampling overrides.

    Returns:
        (the request, the reader).
    """
    settings = {"custom_prompt": item.custom_prompt, "structured": asking.structured}
    if item.is_second_turn:
        both_known = item.prior_reference is not None and item.reference is not None
        request = build_multi_turn_rating_request(
            [item.prior_question, item.question],
            [item.prior_response, item.response],
            references=[item.prior_reference, item.reference] if both_known else None,
            **settings,
            **asking.sampling,
        )
    else:
        request = build_single_rating_request(
            item.question, item.response, reference=item.reference, **settings, **asking.sampling
        )
    return request, rating_reader(asking.structured)


KIND = JudgeKind(
    name="single_1_10",
    ask=ask,
    template="single_1_10",
    default_scale=MT_BENCH_SCALE,
    recorded_scores=True,
    two_turn=True,
    logprob_labels=scale_labels,
)
