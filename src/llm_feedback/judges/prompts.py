"""Judge prompt builders: each returns a ready `ChatRequest` for one judgment.

The built-in prompts are the `str.format` templates in `llm_feedback/templates/` (one file
per judgment kind: binary.txt, reference_grading.txt, score_0_5.txt, single_1_10.txt,
single_1_10_reference.txt, multi_turn.txt, multi_turn_reference.txt, rubric.txt,
pairwise.txt). A caller may pass `custom_prompt` instead, which is checked against the
fields that builder supplies before anything is rendered, so a typo in a template fails at
build time (before any paid call) with a `ConfigError` naming the field. A custom template
replaces the user message only: it must itself ask for a reply format that the matching
parser reads.

Untrusted text is fenced. Every question, answer, reference, response and context is shown
as a block between marker lines carrying a nonce derived from the whole request
(`llm_feedback.replies.fencing`), with any line that imitates a reply format or a marker
quoted "> ", so that a judged answer can neither close its own block nor pass for the
judge's reply. The built-in templates explain the marker lines to the judge (the shared
templates/fencing_notice.txt). A `custom_prompt` gets the same defence: each content field
below is filled in with its fenced block, never with the raw text (so "{question}" renders
as `<<<QUESTION BEGIN nonce>>>`, the question, `<<<QUESTION END nonce>>>`), and the optional
field {fencing_notice} renders the explanation of the marker lines. Rubric {criteria} and
the {low}/{high} bounds come from the caller's configuration and are shown as they are.

Field names per builder (a template must use every content field it is given):
- binary, reference grading, 0-5: {question}, {reference} (synonym {answer}: the gold
  answer), {prediction} (the answer being judged).
- single 1-10: {question}, {answer} (synonym {prediction}: the answer being judged),
  {reference} when a reference is given; the two-turn form uses {question_1},
  {answer_1}, {question_2}, {answer_2} and, with references, {reference_1}, {reference_2}.
- rubric: {question}, {response} (synonym {prediction}), {criteria} (rendered as
  "- name: description" lines), {reference} and {context} when given; {low}, {high}.
- pairwise: {question}, {response1}, {response2}, {context} when given; {low}, {high}.

Images for the judge (`attach_images`) follow the user message as content parts, which
starts with a short section (templates/attached_images.txt) saying that they are there.

`structured=True` adds a JSON schema to the request (servers such as llama.cpp and vLLM
then constrain the reply to it, which a small local judge needs to answer parseably) and
asks for that JSON object; the parsers read both the JSON and the free-text replies.
"""

from __future__ import annotations

import dataclasses
import json
import string
from collections.abc import Mapping, Sequence
from typing import Any

from llm_feedback.backends.contract import ChatRequest
from llm_feedback.backends.media import Media, content_text, with_media
from llm_feedback.errors import ConfigError, InputError
from llm_feedback.judges.parsing import BINARY_OUTPUT_FORMATS
from llm_feedback.replies.fencing import fenced_block, request_nonce
from llm_feedback.templates import load_template, render

JUDGE_SYSTEM_PROMPT = render("system_judge")

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

# What the fencing notice says the material in the blocks is there for.
_FENCING_TASK = "evaluate"

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


def _fenced_values(
    values: Mapping[str, str], labels: Mapping[str, str], kind: str
) -> dict[str, str]:
    """`values` with each untrusted one (those `labels` names) as a fenced block.

    Synonyms share a label and so show the same block. The nonce hashes every untrusted
    value of the request and its kind; {fencing_notice} explains the marker lines.
    """
    untrusted = {labels[name]: text for name, text in values.items() if name in labels}
    nonce = request_nonce(untrusted, kind)
    fenced = {
        name: fenced_block(labels[name], text, nonce) if name in labels else text
        for name, text in values.items()
    }
    fenced["fencing_notice"] = render("fencing_notice", nonce=nonce, task=_FENCING_TASK)
    return fenced


def _render_prompt(
    custom_prompt: str | None,
    template: str,
    values: Mapping[str, str],
    required: Sequence[tuple[str, ...]],
    judge: str,
    **ours: str,
) -> str:
    """The user message: `custom_prompt` if given, else our `template` with `ours` added."""
    if custom_prompt is not None:
        return render_template(custom_prompt, values, required, judge)
    return render_template(template, {**values, **ours}, required, judge)


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


def attach_images(request: ChatRequest, images: Sequence[Media]) -> ChatRequest:
    """`request` with `images` after its user message, which first says they are there."""
    if not images:
        return request
    *earlier, last = request.messages
    text = f"{render('attached_images', count=len(images))}\n\n{content_text(last['content'])}"
    return dataclasses.replace(
        request, messages=(*earlier, {**last, "content": with_media(text, images)})
    )


def _json_reply_instruction(fields: str) -> str:
    """An instruction to reply with a JSON object whose keys and placeholders are `fields`."""
    return render("json_reply", fields=fields)


def _object_reply_schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


# --- binary and reference grading -------------------------------------------------------

_BINARY_REPLY_PARTS = {"0/1": "0_1", "yes/no": "yes_no"}

_BINARY_REPLY_SCHEMAS = {
    "0/1": _object_reply_schema({"correct": {"type": "integer", "enum": [0, 1]}}),
    "yes/no": _object_reply_schema({"correct": {"type": "string", "enum": ["yes", "no"]}}),
}


def _reference_values(
    question: str, reference: str, prediction: str, kind: str, prediction_label: str
) -> dict[str, str]:
    _check_text(question=question, reference=reference, prediction=prediction)
    values = {
        "question": question,
        "reference": reference,
        "answer": reference,
        "prediction": prediction,
    }
    labels = {
        "question": "QUESTION",
        "reference": "REFERENCE ANSWER",
        "answer": "REFERENCE ANSWER",
        "prediction": prediction_label,
    }
    return _fenced_values(values, labels, kind)


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
    values = _reference_values(question, reference, prediction, "binary", "CANDIDATE ANSWER")
    part = _BINARY_REPLY_PARTS[output_format]
    reply = (
        _json_reply_instruction(render("binary", f"json_fields_{part}"))
        if structured
        else render("binary", f"reply_{part}")
    )
    user = _render_prompt(
        custom_prompt,
        load_template("binary"),
        values,
        _REFERENCE_REQUIRED,
        "binary",
        reply=reply,
    )
    schema = _BINARY_REPLY_SCHEMAS[output_format] if structured else None
    return _request(user, system, "binary", schema, sampling)


REFERENCE_GRADING_REPLY_SCHEMA = _object_reply_schema(
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
    values = _reference_values(question, reference, prediction, "reference_grading", "RESPONSE")
    user = _render_prompt(
        custom_prompt,
        load_template("reference_grading"),
        values,
        _REFERENCE_REQUIRED,
        "reference grading",
        reply_lead=render("reference_grading", "json_reply_lead" if structured else "reply_lead"),
    )
    schema = REFERENCE_GRADING_REPLY_SCHEMA if structured else None
    return _request(user, system, "reference_grading", schema, sampling)


# --- 0-5 rating against a reference ---------------------------------------------------


def _rating_reply_schema(low: int, high: int) -> dict[str, Any]:
    # The rating comes first so that a reply cut short by max_tokens still carries it.
    return _object_reply_schema(
        {
            "rating": {"type": "integer", "minimum": low, "maximum": high},
            "explanation": {"type": "string"},
        }
    )


def _rating_json_reply(low: int, high: int) -> str:
    return _json_reply_instruction(render("json_reply", "rating_fields", low=low, high=high))


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
    values = _reference_values(question, reference, prediction, "score_0_5", "CANDIDATE ANSWER")
    user = _render_prompt(
        custom_prompt,
        load_template("score_0_5"),
        values,
        _REFERENCE_REQUIRED,
        "0-5 rating",
        reply=_rating_json_reply(0, 5) if structured else render("score_0_5", "reply"),
    )
    schema = _rating_reply_schema(0, 5) if structured else None
    return _request(user, system, "score_0_5", schema, sampling)


# --- MT-Bench-style single-answer grading, 1-10 written as [[N]] ----------------------


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
    user = _render_prompt(
        custom_prompt,
        load_template(template),
        values,
        required,
        "single 1-10",
        criteria_text=render("single_1_10", criteria),
        reply=_rating_json_reply(1, 10) if structured else render("single_1_10", "reply"),
    )
    schema = _rating_reply_schema(1, 10) if structured else None
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
    labels = {"question": "QUESTION", "answer": "ANSWER", "prediction": "ANSWER"}
    required: tuple[tuple[str, ...], ...] = (("question",), ("answer", "prediction"))
    if reference is not None:
        _check_text(reference=reference)
        values["reference"] = reference
        labels["reference"] = "REFERENCE ANSWER"
        required += (("reference",),)
    return _single_request(
        "single_1_10" if reference is None else "single_1_10_reference",
        _fenced_values(values, labels, "single_1_10"),
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
    # QUESTION 1, ANSWER 1, ..., REFERENCE 2
    labels = {name: name.upper().replace("_", " ") for name in values}
    return _single_request(
        "multi_turn" if references is None else "multi_turn_reference",
        _fenced_values(values, labels, "multi_turn"),
        required,
        has_reference=references is not None,
        custom_prompt=custom_prompt,
        structured=structured,
        system=system,
        sampling=sampling,
    )


# --- rubric: several criteria, JSON scores ---------------------------------------------


def _check_criteria(criteria: Mapping[str, str]) -> None:
    if not isinstance(criteria, Mapping) or not criteria:
        raise ConfigError("criteria must be a non-empty mapping {name: description}")
    for name, description in criteria.items():
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"criterion names must be non-empty strings, got {name!r}")
        if not isinstance(description, str):
            raise ConfigError(f"criterion {name!r} needs a string description")


def rubric_reply_schema(criteria: Mapping[str, str], score_range: tuple[int, int]) -> dict:
    """JSON schema for a rubric reply: {"scores": {criterion: int}, "justification": str}.

    Scores come before the justification so that a reply cut short still has them.
    """
    _check_criteria(criteria)
    low, high = _check_score_range(score_range)
    score = {"type": "integer", "minimum": low, "maximum": high}
    return _object_reply_schema(
        {
            "scores": _object_reply_schema({name: dict(score) for name in criteria}),
            "justification": {"type": "string"},
        }
    )


def _with_optional_sections(kind: str, names: Sequence[str]) -> str:
    """The `kind` template with the sections for the optional inputs given put in.

    The sections go into the template before rendering, so that their fields are checked
    and rendered like every other one.
    """
    sections = "".join(f"\n{load_template(kind, name)}\n" for name in names)
    return load_template(kind).replace("{optional_sections}", sections)


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
    values = {"question": question, "response": response, "prediction": response}
    labels = {"question": "QUESTION", "response": "RESPONSE", "prediction": "RESPONSE"}
    required: tuple[tuple[str, ...], ...] = (
        ("question",),
        ("response", "prediction"),
        ("criteria",),
    )
    given = []
    for name, label, text in (
        ("context", "CONTEXT", context),
        ("reference", "REFERENCE ANSWER", reference),
    ):
        if text is not None:
            _check_text(**{name: text})
            values[name] = text
            labels[name] = label
            required += ((name,),)
            given.append(name)
    criteria_text = "\n".join(
        render("rubric", "criterion", name=name, description=description)
        for name, description in criteria.items()
    )
    fenced = {
        **_fenced_values(values, labels, "rubric"),
        "criteria": criteria_text,
        "low": str(low),
        "high": str(high),
    }
    scores = ", ".join(render("rubric", "json_score", name=json.dumps(name)) for name in criteria)
    user = _render_prompt(
        custom_prompt,
        _with_optional_sections("rubric", given),
        fenced,
        required,
        "rubric",
        reply=_json_reply_instruction(render("rubric", "json_fields", scores=scores)),
    )
    schema = rubric_reply_schema(criteria, (low, high)) if structured else None
    return _request(user, system, "rubric", schema, sampling)


# --- pairwise comparison ---------------------------------------------------------------


def pairwise_reply_schema(score_range: tuple[int, int], output: str = "both") -> dict:
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
    return _object_reply_schema(properties)


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
    schema = pairwise_reply_schema(score_range, output)  # validates output and score_range
    low, high = _check_score_range(score_range)
    _check_text(question=question, response_a=response_a, response_b=response_b)
    values = {"question": question, "response1": response_a, "response2": response_b}
    labels = {"question": "QUESTION", "response1": "RESPONSE A", "response2": "RESPONSE B"}
    required: tuple[tuple[str, ...], ...] = (("question",), ("response1",), ("response2",))
    given = []
    if context is not None:
        _check_text(context=context)
        values["context"] = context
        labels["context"] = "CONTEXT"
        required += (("context",),)
        given.append("context")
    fenced = {**_fenced_values(values, labels, "pairwise"), "low": str(low), "high": str(high)}
    if structured:
        reply = _json_reply_instruction(
            render("pairwise", f"json_fields_{output}", low=low, high=high)
        )
    else:
        reply = render("pairwise", f"reply_{output}", low=low, high=high)
    user = _render_prompt(
        custom_prompt,
        _with_optional_sections("pairwise", given),
        fenced,
        required,
        "pairwise",
        reply=reply,
    )
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
