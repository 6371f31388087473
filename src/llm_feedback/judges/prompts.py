"""Judge prompt builders: each returns a ready `ChatRequest` for one judgment.

Every builder renders a `str.format` template. The built-in templates are ours; a caller
may pass `custom_prompt` instead, which is checked against the fields that builder
supplies before anything is rendered, so a typo in a template fails at build time (before
any paid call) with a `ConfigError` naming the field. A custom template replaces the user
message only: it must itself ask for a reply format that the matching parser reads.

Field names per builder (a template must use every content field it is given):
- binary, reference grading, 0-5: {question}, {reference} (synonym {answer}: the gold
  answer), {prediction} (the answer being judged).
- single 1-10: {question}, {answer} (synonym {prediction}: the answer being judged),
  {reference} when a reference is given; the two-turn form uses {question_1},
  {answer_1}, {question_2}, {answer_2} and, with references, {reference_1}, {reference_2}.
- rubric: {question}, {response} (synonym {prediction}), {criteria} (rendered as
  "- name: description" lines), {reference} and {context} when given; {low}, {high}.
- pairwise: {question}, {response1}, {response2}, {context} when given; {low}, {high}.

`structured=True` adds a JSON schema to the request (servers such as llama.cpp and vLLM
then constrain the reply to it, which a small local judge needs to answer parseably) and
asks for that JSON object; the parsers read both the JSON and the free-text replies.
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping, Sequence
from typing import Any

from llm_feedback.backends.contract import ChatRequest
from llm_feedback.errors import ConfigError, InputError
from llm_feedback.judges.parsing import BINARY_OUTPUT_FORMATS

JUDGE_SYSTEM_PROMPT = (
    "You are a careful and impartial evaluator of answers written by AI assistants. "
    "You follow the requested reply format exactly."
)

PAIRWISE_OUTPUTS = ("both", "scores", "verdict")

# Judges grade deterministically; the token budget fits the reply each builder asks for.
_JUDGE_SAMPLING: dict[str, Any] = {"temperature": 0.0, "top_p": 1.0}
_MAX_TOKENS = {
    "binary": 32,
    "reference_grading": 512,
    "score_0_5": 256,
    "single_1_10": 1024,
    "rubric": 512,
    "pairwise": 1024,
}

_FORMATTER = string.Formatter()


def template_fields(template: str) -> set[str]:
    """The named fields a `str.format` template uses; ConfigError if it is not one."""
    try:
        parts = list(_FORMATTER.parse(template))
    except ValueError as error:
        raise ConfigError(f"custom_prompt is not a valid str.format template: {error}") from error
    fields: set[str] = set()
    for _, field_name, format_spec, _ in parts:
        if field_name is None:
            continue
        # '' and '0' are positional, 'a.b' / 'a[0]' reach into objects: none can be supplied.
        if not field_name.isidentifier():
            raise ConfigError(
                f"custom_prompt field {{{field_name}}} is not a plain name such as {{question}}"
            )
        if format_spec and "{" in format_spec:
            raise ConfigError(
                f"custom_prompt field {{{field_name}}} has a nested field in its format"
            )
        fields.add(field_name)
    return fields


def render_template(
    template: str,
    values: Mapping[str, str],
    required: Sequence[tuple[str, ...]],
    judge: str,
) -> str:
    """Render `template` after checking its fields against what this judge supplies.

    `required` lists groups of synonyms; the template must use at least one field of
    each group, so that no input the judge is given is silently left out of the prompt.
    """
    fields = template_fields(template)
    unknown = sorted(fields - values.keys())
    if unknown:
        raise ConfigError(
            f"custom_prompt for the {judge} judge uses the unknown field {{{unknown[0]}}}; "
            f"fields available here: {', '.join('{' + name + '}' for name in sorted(values))}"
        )
    for group in required:
        if not fields.intersection(group):
            synonyms = "".join(f" (or its synonym {{{name}}})" for name in group[1:])
            raise ConfigError(
                f"custom_prompt for the {judge} judge lacks the field {{{group[0]}}}{synonyms}"
            )
    return template.format_map(values)


def _check_text(**values: Any) -> None:
    for name, value in values.items():
        if not isinstance(value, str):
            raise InputError(f"judge input {name!r} must be a string, got {type(value).__name__}")


def _check_score_range(score_range: tuple[int, int]) -> tuple[int, int]:
    try:
        low, high = (int(bound) for bound in score_range)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"score_range must be two integers, got {score_range!r}") from error
    if (low, high) != tuple(score_range) or low >= high:
        raise ConfigError(f"score_range must be two integers low < high, got {score_range!r}")
    return low, high


def _request(
    user: str,
    system: str | None,
    judge: str,
    json_schema: dict[str, Any] | None,
    sampling: dict[str, Any],
) -> ChatRequest:
    settings = {**_JUDGE_SAMPLING, "max_tokens": _MAX_TOKENS[judge], **sampling}
    if json_schema is not None:
        settings["json_schema"] = json_schema
    return ChatRequest.from_prompt(user, system=system, **settings)


def _json_reply_instruction(example: Mapping[str, str]) -> str:
    """An instruction to reply with a JSON object; `example` maps keys to placeholders."""
    body = ", ".join(f"{json.dumps(key)}: {placeholder}" for key, placeholder in example.items())
    return f"Reply with only a JSON object of this shape, without code fences:\n{{{body}}}"


def _object_schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


# --- binary and reference grading -------------------------------------------------------

_BINARY_TEMPLATE = """\
Decide whether a candidate answer to a question is correct, taking the reference answer \
as the truth.

Question:
{question}

Reference answer:
{reference}

Candidate answer:
{prediction}

The candidate is correct when its final answer means the same as the reference, even if \
the wording, the formatting or the amount of detail differ (numbers must have the same \
value, in any notation). It is incorrect when it contradicts the reference, gives another \
final answer, hedges between several answers or gives no answer at all."""

_BINARY_REPLY = {
    "0/1": "Reply with a single character: 1 if the candidate answer is correct, 0 if it is "
    "not. Write nothing else.",
    "yes/no": "Reply with a single word: yes if the candidate answer is correct, no if it is "
    "not. Write nothing else.",
}

_BINARY_SCHEMA = {
    "0/1": _object_schema({"correct": {"type": "integer", "enum": [0, 1]}}),
    "yes/no": _object_schema({"correct": {"type": "string", "enum": ["yes", "no"]}}),
}
_BINARY_JSON_REPLY = {
    "0/1": _json_reply_instruction({"correct": "1 if the candidate answer is correct, else 0"}),
    "yes/no": _json_reply_instruction({"correct": '"yes" if the candidate is correct, else "no"'}),
}

_REFERENCE_GRADING_TEMPLATE = """\
Check whether the response below answers the question correctly, measured against the \
reference answer.

[Question]
{question}

[Response]
{prediction}

[Reference answer]
{reference}"""

_REFERENCE_GRADING_FIELDS = """\
extracted_final_answer: the final answer as the response states it, copied word for word, \
or None if the response gives no final answer
reasoning: a short explanation of whether the extracted answer agrees with the reference \
answer; name any difference, and do not try to solve the question yourself
correct: yes if the extracted answer agrees with the reference answer (small rounding \
differences in numbers are acceptable), otherwise no
confidence: the confidence the response expresses in its own answer, as a percentage from \
0% to 100%; write 100% if it expresses none"""


def _reference_values(question: str, reference: str, prediction: str) -> dict[str, str]:
    _check_text(question=question, reference=reference, prediction=prediction)
    return {
        "question": question,
        "reference": reference,
        "answer": reference,
        "prediction": prediction,
    }


_REFERENCE_REQUIRED = (("question",), ("reference", "answer"), ("prediction",))


def build_binary_request(
    question: str,
    reference: str,
    prediction: str,
    *,
    output_format: str = "0/1",
    custom_prompt: str | None = None,
    structured: bool = False,
    system: str | None = JUDGE_SYSTEM_PROMPT,
    **sampling: Any,
) -> ChatRequest:
    """Ask whether `prediction` is correct given `reference`: "0/1" or "yes/no" reply."""
    if output_format not in BINARY_OUTPUT_FORMATS:
        raise ConfigError(
            f"output_format must be one of {BINARY_OUTPUT_FORMATS}, got {output_format!r}"
        )
    values = _reference_values(question, reference, prediction)
    if custom_prompt is not None:
        user = render_template(custom_prompt, values, _REFERENCE_REQUIRED, "binary")
    else:
        reply = (_BINARY_JSON_REPLY if structured else _BINARY_REPLY)[output_format]
        body = render_template(_BINARY_TEMPLATE, values, _REFERENCE_REQUIRED, "binary")
        user = f"{body}\n\n{reply}"
    schema = _BINARY_SCHEMA[output_format] if structured else None
    return _request(user, system, "binary", schema, sampling)


REFERENCE_GRADING_SCHEMA = _object_schema(
    {
        "extracted_final_answer": {"type": "string"},
        "reasoning": {"type": "string"},
        "correct": {"type": "string", "enum": ["yes", "no"]},
        "confidence": {"type": "integer", "minimum": 0, "maximum": 100},
    }
)


def build_reference_grading_request(
    question: str,
    reference: str,
    prediction: str,
    *,
    custom_prompt: str | None = None,
    structured: bool = False,
    system: str | None = JUDGE_SYSTEM_PROMPT,
    **sampling: Any,
) -> ChatRequest:
    """Ask for `extracted_final_answer`, `reasoning`, `correct: yes|no`, `confidence: N%`.

    `confidence` is the confidence the judged response states in its own answer (100%
    when it states none), which is what calibration metrics need.
    """
    values = _reference_values(question, reference, prediction)
    if custom_prompt is not None:
        user = render_template(custom_prompt, values, _REFERENCE_REQUIRED, "reference grading")
    else:
        body = render_template(
            _REFERENCE_GRADING_TEMPLATE, values, _REFERENCE_REQUIRED, "reference grading"
        )
        lead = (
            "Reply with only a JSON object with these four keys, without code fences:"
            if structured
            else "Write exactly these four lines and nothing else:"
        )
        user = f"{body}\n\n{lead}\n{_REFERENCE_GRADING_FIELDS}"
    schema = REFERENCE_GRADING_SCHEMA if structured else None
    return _request(user, system, "reference_grading", schema, sampling)


# --- 0-5 rating against a reference ---------------------------------------------------

_SCORE_0_5_TEMPLATE = """\
Rate how well a candidate answer agrees with the reference answer to a question, on a \
scale from 0 to 5.

Question:
{question}

Reference answer:
{reference}

Candidate answer:
{prediction}

Scale:
5 - correct and complete: agrees with the reference on every essential point
4 - correct in substance, with a small omission or imprecision
3 - partly correct: the main point is right, but notable parts are missing or wrong
2 - mostly wrong, though some relevant parts are right
1 - wrong, although it does address the question
0 - wrong and off the point, or no answer at all"""

_SCORE_0_5_REPLY = (
    "Explain your judgement in one or two sentences, then end with a line of the form "
    '"Rating: N", where N is a whole number from 0 to 5.'
)


def _rating_schema(low: int, high: int) -> dict[str, Any]:
    # The rating comes first so that a reply cut short by max_tokens still carries it.
    return _object_schema(
        {
            "rating": {"type": "integer", "minimum": low, "maximum": high},
            "explanation": {"type": "string"},
        }
    )


def _rating_json_reply(low: int, high: int) -> str:
    return _json_reply_instruction(
        {
            "rating": f"<whole number from {low} to {high}>",
            "explanation": '"<one or two sentences>"',
        }
    )


def build_score_0_5_request(
    question: str,
    reference: str,
    prediction: str,
    *,
    custom_prompt: str | None = None,
    structured: bool = False,
    system: str | None = JUDGE_SYSTEM_PROMPT,
    **sampling: Any,
) -> ChatRequest:
    """Ask for a 0-5 rating of `prediction` against `reference` ("Rating: N")."""
    values = _reference_values(question, reference, prediction)
    if custom_prompt is not None:
        user = render_template(custom_prompt, values, _REFERENCE_REQUIRED, "0-5 rating")
    else:
        body = render_template(_SCORE_0_5_TEMPLATE, values, _REFERENCE_REQUIRED, "0-5 rating")
        user = f"{body}\n\n{_rating_json_reply(0, 5) if structured else _SCORE_0_5_REPLY}"
    schema = _rating_schema(0, 5) if structured else None
    return _request(user, system, "score_0_5", schema, sampling)


# --- MT-Bench-style single-answer grading, 1-10 written as [[N]] ----------------------

_SINGLE_CRITERIA = (
    "Weigh how helpful, relevant, accurate, deep, creative and detailed the reply is."
)
_SINGLE_CRITERIA_WITH_REFERENCE = (
    "Weigh above all whether the reply is correct, then how helpful it is. Compare the "
    "reply with the reference given and point out any mistakes the reply makes."
)
_SINGLE_REPLY = (
    "Start with a short explanation and be as objective as you can. Then rate the reply on a "
    'scale from 1 to 10, written in double square brackets exactly like this: "Rating: [[6]]".'
)

_SINGLE_TEMPLATE = """\
[Task]
Act as an impartial judge of the reply an AI assistant gave to the user question below. \
{criteria_text}

[User question]
{question}

[Assistant's reply - start]
{answer}
[Assistant's reply - end]"""

_SINGLE_REFERENCE_TEMPLATE = """\
[Task]
Act as an impartial judge of the reply an AI assistant gave to the user question below. \
{criteria_text}

[User question]
{question}

[Reference answer - start]
{reference}
[Reference answer - end]

[Assistant's reply - start]
{answer}
[Assistant's reply - end]"""

_MULTI_TURN_TEMPLATE = """\
[Task]
Act as an impartial judge of an AI assistant in the two-turn conversation below. Grade \
only the assistant's reply to the second user message; the first exchange is there for \
context. {criteria_text}

[Conversation - start]
### User
{question_1}

### Assistant
{answer_1}

### User
{question_2}

### Assistant
{answer_2}
[Conversation - end]"""

_MULTI_TURN_REFERENCE_TEMPLATE = """\
[Task]
Act as an impartial judge of an AI assistant in the two-turn conversation below. Grade \
only the assistant's reply to the second user message; the first exchange is there for \
context. {criteria_text}

[Reference answers - start]
### Reference answer to the first message
{reference_1}

### Reference answer to the second message
{reference_2}
[Reference answers - end]

[Conversation - start]
### User
{question_1}

### Assistant
{answer_1}

### User
{question_2}

### Assistant
{answer_2}
[Conversation - end]"""


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
    if custom_prompt is not None:
        user = render_template(custom_prompt, values, required, "single 1-10")
    else:
        criteria = _SINGLE_CRITERIA_WITH_REFERENCE if has_reference else _SINGLE_CRITERIA
        body = render_template(
            template, {**values, "criteria_text": criteria}, required, "single 1-10"
        )
        user = f"{body}\n\n{_rating_json_reply(1, 10) if structured else _SINGLE_REPLY}"
    schema = _rating_schema(1, 10) if structured else None
    return _request(user, system, "single_1_10", schema, sampling)


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
    """MT-Bench-style 1-10 grading of one answer, with or without a reference answer."""
    _check_text(question=question, answer=answer)
    values = {"question": question, "answer": answer, "prediction": answer}
    required: tuple[tuple[str, ...], ...] = (("question",), ("answer", "prediction"))
    if reference is not None:
        _check_text(reference=reference)
        values["reference"] = reference
        required += (("reference",),)
    template = _SINGLE_TEMPLATE if reference is None else _SINGLE_REFERENCE_TEMPLATE
    return _single_request(
        template,
        values,
        required,
        has_reference=reference is not None,
        custom_prompt=custom_prompt,
        structured=structured,
        system=system,
        sampling=sampling,
    )


def _two_turns(name: str, turns: Sequence[str]) -> tuple[str, str]:
    if isinstance(turns, str) or len(turns) != 2:
        raise InputError(f"{name} must hold exactly two turns, got {turns!r}")
    first, second = turns
    _check_text(**{f"{name}[0]": first, f"{name}[1]": second})
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
    """MT-Bench-style 1-10 grading of the answer to turn 2, given the first exchange."""
    question_1, question_2 = _two_turns("questions", questions)
    answer_1, answer_2 = _two_turns("answers", answers)
    values = {
        "question_1": question_1,
        "answer_1": answer_1,
        "question_2": question_2,
        "answer_2": answer_2,
    }
    required: tuple[tuple[str, ...], ...] = tuple((name,) for name in values)
    if references is not None:
        values["reference_1"], values["reference_2"] = _two_turns("references", references)
        required += (("reference_1",), ("reference_2",))
    template = _MULTI_TURN_TEMPLATE if references is None else _MULTI_TURN_REFERENCE_TEMPLATE
    return _single_request(
        template,
        values,
        required,
        has_reference=references is not None,
        custom_prompt=custom_prompt,
        structured=structured,
        system=system,
        sampling=sampling,
    )


# --- rubric: several criteria, JSON scores ---------------------------------------------

_RUBRIC_TEMPLATE = """\
Evaluate the response below against each of the listed criteria. Give every criterion a \
whole-number score from {low} (worst) to {high} (best), judging each criterion on its own.

[Question]
{question}
{optional_sections}
[Response]
{response}

[Criteria]
{criteria}"""


def _check_criteria(criteria: Mapping[str, str]) -> None:
    if not isinstance(criteria, Mapping) or not criteria:
        raise ConfigError("criteria must be a non-empty mapping {name: description}")
    for name, description in criteria.items():
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"criterion names must be non-empty strings, got {name!r}")
        if not isinstance(description, str):
            raise ConfigError(f"criterion {name!r} needs a string description")


def rubric_json_schema(criteria: Mapping[str, str], score_range: tuple[int, int]) -> dict:
    """JSON schema for a rubric reply: {"scores": {criterion: int}, "justification": str}.

    Scores come before the justification so that a reply cut short still has them.
    """
    _check_criteria(criteria)
    low, high = _check_score_range(score_range)
    score = {"type": "integer", "minimum": low, "maximum": high}
    return _object_schema(
        {
            "scores": _object_schema({name: dict(score) for name in criteria}),
            "justification": {"type": "string"},
        }
    )


def build_rubric_request(
    question: str,
    response: str,
    criteria: Mapping[str, str],
    *,
    score_range: tuple[int, int] = (1, 5),
    reference: str | None = None,
    context: str | None = None,
    custom_prompt: str | None = None,
    structured: bool = False,
    system: str | None = JUDGE_SYSTEM_PROMPT,
    **sampling: Any,
) -> ChatRequest:
    """Ask for an integer score per criterion as JSON, plus a short justification."""
    _check_criteria(criteria)
    low, high = _check_score_range(score_range)
    _check_text(question=question, response=response)
    criteria_text = "\n".join(f"- {name}: {description}" for name, description in criteria.items())
    values = {
        "question": question,
        "response": response,
        "prediction": response,
        "criteria": criteria_text,
        "low": str(low),
        "high": str(high),
    }
    required: tuple[tuple[str, ...], ...] = (
        ("question",),
        ("response", "prediction"),
        ("criteria",),
    )
    sections = ""
    for name, label, text in (
        ("context", "Context", context),
        ("reference", "Reference answer", reference),
    ):
        if text is not None:
            _check_text(**{name: text})
            values[name] = text
            required += ((name,),)
            sections += f"\n[{label}]\n{{{name}}}\n"
    if custom_prompt is not None:
        user = render_template(custom_prompt, values, required, "rubric")
    else:
        # The optional sections go into the template first, so their text is rendered
        # by str.format like every other value and never parsed as a template.
        template = _RUBRIC_TEMPLATE.replace("{optional_sections}", sections)
        body = render_template(template, values, required, "rubric")
        example = {
            "scores": "{" + ", ".join(f"{json.dumps(name)}: <score>" for name in criteria) + "}",
            "justification": '"<one or two sentences>"',
        }
        user = f"{body}\n\n{_json_reply_instruction(example)}"
    schema = rubric_json_schema(criteria, (low, high)) if structured else None
    return _request(user, system, "rubric", schema, sampling)


# --- pairwise comparison ---------------------------------------------------------------

_PAIRWISE_TEMPLATE = """\
Compare two responses to the same question and decide which one is better.

[Question]
{question}
{optional_sections}
[Response A - start]
{response1}
[Response A - end]

[Response B - start]
{response2}
[Response B - end]

Judge helpfulness, relevance, accuracy and level of detail. Do not let the order in which \
the responses are shown, their length or any names sway your judgement."""

_PAIRWISE_REPLY = {
    "both": "Explain your comparison briefly, then end with exactly these three lines:\n"
    "Score A: <whole number from {low} to {high}>\n"
    "Score B: <whole number from {low} to {high}>\n"
    "Verdict: [[A]] if Response A is better, [[B]] if Response B is better, [[C]] for a tie",
    "scores": "Explain your comparison briefly, then end with exactly these two lines:\n"
    "Score A: <whole number from {low} to {high}>\n"
    "Score B: <whole number from {low} to {high}>",
    "verdict": "Explain your comparison briefly, then end with your verdict: [[A]] if "
    "Response A is better, [[B]] if Response B is better, [[C]] for a tie.",
}


def pairwise_json_schema(score_range: tuple[int, int], output: str = "both") -> dict:
    """JSON schema for a pairwise reply; the verdict is "A", "B" or "C" (tie)."""
    if output not in PAIRWISE_OUTPUTS:
        raise ConfigError(f"output must be one of {PAIRWISE_OUTPUTS}, got {output!r}")
    low, high = _check_score_range(score_range)
    score = {"type": "integer", "minimum": low, "maximum": high}
    properties: dict[str, Any] = {}
    if output in ("both", "scores"):
        properties |= {"score_a": dict(score), "score_b": dict(score)}
    if output in ("both", "verdict"):
        properties["verdict"] = {"type": "string", "enum": ["A", "B", "C"]}
    properties["explanation"] = {"type": "string"}
    return _object_schema(properties)


def build_pairwise_request(
    question: str,
    response_a: str,
    response_b: str,
    *,
    context: str | None = None,
    score_range: tuple[int, int] = (1, 10),
    output: str = "both",
    custom_prompt: str | None = None,
    structured: bool = False,
    system: str | None = JUDGE_SYSTEM_PROMPT,
    **sampling: Any,
) -> ChatRequest:
    """Ask which of two responses is better: scores "Score A/B: N" and/or `[[A|B|C]]`."""
    schema = pairwise_json_schema(score_range, output)  # validates output and score_range
    low, high = _check_score_range(score_range)
    _check_text(question=question, response_a=response_a, response_b=response_b)
    values = {
        "question": question,
        "response1": response_a,
        "response2": response_b,
        "low": str(low),
        "high": str(high),
    }
    required: tuple[tuple[str, ...], ...] = (("question",), ("response1",), ("response2",))
    sections = ""
    if context is not None:
        _check_text(context=context)
        values["context"] = context
        required += (("context",),)
        sections = "\n[Context]\n{context}\n"
    if custom_prompt is not None:
        user = render_template(custom_prompt, values, required, "pairwise")
    else:
        template = _PAIRWISE_TEMPLATE.replace("{optional_sections}", sections)
        body = render_template(template, values, required, "pairwise")
        if structured:
            example = {
                "score_a": f"<{low}-{high}>",
                "score_b": f"<{low}-{high}>",
                "verdict": '<"A", "B", or "C" for a tie>',
                "explanation": '"<one or two sentences>"',
            }
            reply = _json_reply_instruction(
                {key: text for key, text in example.items() if key in schema["properties"]}
            )
        else:
            reply = _PAIRWISE_REPLY[output].format(low=low, high=high)
        user = f"{body}\n\n{reply}"
    return _request(user, system, "pairwise", schema if structured else None, sampling)


def build_pairwise_requests_both_orders(
    question: str, response_a: str, response_b: str, **options: Any
) -> tuple[ChatRequest, ChatRequest]:
    """The comparison in both positions (A first, then B first), to cancel position bias.

    Combine the two parsed verdicts with `metrics.pairwise_outcome`.
    """
    return (
        build_pairwise_request(question, response_a, response_b, **options),
        build_pairwise_request(question, response_b, response_a, **options),
    )
