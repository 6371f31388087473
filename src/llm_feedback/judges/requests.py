"""What every judge kind's request builder shares: template fields and their checks, fenced
inputs, the judge's sampling, images, and JSON reply schemas.

A caller may pass `custom_prompt` instead of a kind's built-in template; it is checked
against the fields that kind supplies before anything is rendered, so a typo in a template
fails at build time (before any paid call) with a `ConfigError` naming the field. A custom
template replaces the user message only: it must itself ask for a reply format that the
kind's reader reads.

Untrusted text is fenced. Every question, answer, reference, response and context is shown
as a block between marker lines carrying a nonce derived from the whole request
(`llm_feedback.replies.fencing`), exactly as written except that any line that imitates a
reply format or a marker is quoted "> ", so that a judged answer can neither close its own
block nor pass for the judge's reply. The built-in templates explain the marker lines to
the judge (the shared templates/fencing_notice.txt). A `custom_prompt` gets the same
defence: each content field is filled in with its fenced block, never with the raw text
(so "{question}" renders as `<<<QUESTION BEGIN nonce>>>`, the question, `<<<QUESTION END
nonce>>>`), and the optional field {fencing_notice} renders the explanation of the marker
lines. Configuration values (rubric {criteria}, the {low}/{high} bounds) are shown as they
are.

Images for the judge (`attach_images`) follow the user message as content parts, which
starts with a short section (templates/attached_images.txt) saying that they are there.
`structured=True` adds a JSON schema to the request (servers such as llama.cpp and vLLM
then constrain the reply to it) and asks for that JSON object.
"""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Mapping, Sequence
from typing import Any

from llm_feedback.backends.contract import ChatRequest
from llm_feedback.backends.media import Media, content_text, with_media
from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.replies.fencing import fenced_block, request_nonce
from llm_feedback.replies.sampling import JUDGE_SAMPLING
from llm_feedback.templates import load_template, render

JUDGE_SYSTEM_PROMPT = render("system_judge")

# What the fencing notice says the material in the blocks is there for.
_FENCING_TASK = "evaluate"

_FORMATTER = string.Formatter()


def template_fields(template: str) -> set[str]:
    """The named fields a `str.format` template uses; ConfigError if it is not one.

    Args:
        template: the template's text.

    Returns:
        The field names.
    """
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

    Args:
        template: the template's text.
        values: the fields this judge supplies.
        required: groups of synonymous fields, one of each to be used.
        judge: the judge kind, named in errors.

    Returns:
        The rendered text.
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


def fenced_values(
    values: Mapping[str, str], labels: Mapping[str, str], kind: str
) -> dict[str, str]:
    """`values` with each untrusted one (those `labels` names) as a fenced block.

    Synonyms share a label and so show the same block. The nonce hashes every untrusted
    value of the request and its kind; {fencing_notice} explains the marker lines.

    Args:
        values: the fields' texts.
        labels: field -> the label of its fenced block (untrusted fields only).
        kind: the judge kind, hashed into the nonce.

    Returns:
        The fields, untrusted ones fenced, plus `fencing_notice`.
    """
    untrusted = {labels[name]: text for name, text in values.items() if name in labels}
    nonce = request_nonce(untrusted, kind)
    fenced = {
        name: fenced_block(labels[name], text, nonce) if name in labels else text
        for name, text in values.items()
    }
    fenced["fencing_notice"] = render("fencing_notice", nonce=nonce, task=_FENCING_TASK)
    return fenced


def render_prompt(
    custom_prompt: str | None,
    template: str,
    values: Mapping[str, str],
    required: Sequence[tuple[str, ...]],
    judge: str,
    **ours: str,
) -> str:
    """The user message: `custom_prompt` if given, else our `template` with `ours` added.

    Args:
        custom_prompt: the user's template (None: ours).
        template: our template's text.
        values: the fields this judge supplies.
        required: groups of synonymous fields, one of each to be used.
        judge: the judge kind, named in errors.
        **ours: fields only our template gets.

    Returns:
        The user message.
    """
    if custom_prompt is not None:
        return render_template(custom_prompt, values, required, judge)
    return render_template(template, {**values, **ours}, required, judge)


def check_text(**values: Any) -> None:
    """Raise InputError naming the first judge input that is not a string.

    Args:
        **values: the inputs, by name.
    """
    for name, value in values.items():
        if not isinstance(value, str):
            raise InputError(f"judge input {name!r} must be a string, got {type(value).__name__}")


def check_score_range(score_range: Sequence[int]) -> tuple[int, int]:
    """(low, high) integers with low < high; ConfigError naming `score_range` else.

    Args:
        score_range: the (low, high) given.

    Returns:
        (low, high).
    """
    if isinstance(score_range, str) or not isinstance(score_range, Sequence):
        raise ConfigError(f"score_range must be two integers (low, high), got {score_range!r}")
    if len(score_range) != 2 or not all(
        isinstance(bound, int) and not isinstance(bound, bool) for bound in score_range
    ):
        raise ConfigError(f"score_range must be two integers (low, high), got {score_range!r}")
    low, high = score_range
    if low >= high:
        raise ConfigError(f"score_range needs low < high, got {score_range!r}")
    return low, high


def judge_request(
    user: str,
    system: str | None,
    max_tokens: int,
    json_schema: dict[str, Any] | None,
    sampling: Mapping[str, Any],
) -> ChatRequest:
    """The request of one judgment: deterministic sampling and the kind's token budget
    unless `sampling` says otherwise, the JSON schema when the reply is structured.

    Args:
        user: the user message.
        system: the system prompt (None: none).
        max_tokens: the kind's token budget.
        json_schema: the reply's schema (None: free text).
        sampling: the caller's sampling overrides.

    Returns:
        The request.
    """
    settings = {**JUDGE_SAMPLING, "max_tokens": max_tokens, **sampling}
    if json_schema is not None:
        settings["json_schema"] = json_schema
    return ChatRequest.from_prompt(user, system=system, **settings)


def attach_images(request: ChatRequest, images: Sequence[Media]) -> ChatRequest:
    """`request` with `images` after its user message, which first says they are there.

    Args:
        request: the request.
        images: the images (none: the request as it is).

    Returns:
        The request with the images.
    """
    if not images:
        return request
    *earlier, last = request.messages
    text = f"{render('attached_images', count=len(images))}\n\n{content_text(last['content'])}"
    return dataclasses.replace(
        request, messages=(*earlier, {**last, "content": with_media(text, images)})
    )


def json_reply_instruction(fields: str) -> str:
    """An instruction to reply with a JSON object whose keys and placeholders are `fields`.

    Args:
        fields: the JSON keys and placeholders, as text.

    Returns:
        The instruction.
    """
    return render("json_reply", fields=fields)


def object_reply_schema(properties: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema of an object with exactly `properties`, all required.

    Args:
        properties: property name -> its schema.

    Returns:
        The schema.
    """
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def rating_reply_schema(low: int, high: int) -> dict[str, Any]:
    """{"rating": int, "explanation": str}; the rating first, so that a reply cut short by
    max_tokens still carries it.

    Args:
        low: the scale's minimum.
        high: the scale's maximum.

    Returns:
        The schema.
    """
    return object_reply_schema(
        {
            "rating": {"type": "integer", "minimum": low, "maximum": high},
            "explanation": {"type": "string"},
        }
    )


def rating_json_reply(low: int, high: int) -> str:
    """The instruction to reply with a JSON rating on the scale and an explanation.

    Args:
        low: the scale's minimum.
        high: the scale's maximum.

    Returns:
        The instruction.
    """
    return json_reply_instruction(render("json_reply", "rating_fields", low=low, high=high))


def with_optional_sections(kind: str, names: Sequence[str]) -> str:
    """The `kind` template with the sections for the optional inputs given put in.

    The sections go into the template before rendering, so that their fields are checked
    and rendered like every other one.

    Args:
        kind: the template's name.
        names: the optional inputs given.

    Returns:
        The template's text.
    """
    sections = "".join(f"\n{load_template(kind, name)}\n" for name in names)
    return load_template(kind).replace("{optional_sections}", sections)


def add_optional_blocks(
    values: dict[str, str],
    labels: dict[str, str],
    blocks: Sequence[tuple[str, str | None, str]],
) -> list[str]:
    """Put each optional input that is given into `values` as a block of its own.

    Each one is labelled, so that it is fenced and the judge sees it as written.

    Args:
        values: The request's fields; the given inputs are added to it.
        labels: The labels of its untrusted fields; the given inputs' labels are added.
        blocks: (name, text or None when not given, label) of each optional input, in the
            order of its template's sections.

    Returns:
        The names of the inputs given, in order: the sections to put in
        (`with_optional_sections`) and the fields the prompt must then hold.
    """
    given = []
    for name, text, label in blocks:
        if text is not None:
            check_text(**{name: text})
            values[name] = text
            labels[name] = label
            given.append(name)
    return given


# The fields of a judgment against a reference answer; {answer} is {reference}'s synonym.
REFERENCE_REQUIRED = (("question",), ("reference", "answer"), ("prediction",))


def reference_values(
    question: str, reference: str, prediction: str, kind: str, prediction_label: str
) -> dict[str, str]:
    """The fenced fields of a judgment against a reference answer.

    Args:
        question: the question.
        reference: the reference answer.
        prediction: the response judged.
        kind: the judge kind, hashed into the nonce.
        prediction_label: the label of the response's fenced block.

    Returns:
        The fenced fields.
    """
    check_text(question=question, reference=reference, prediction=prediction)
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
    return fenced_values(values, labels, kind)
