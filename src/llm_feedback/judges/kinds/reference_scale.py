"""Reference-scale judge kinds from one factory: a whole-number rating of a prediction
against the reference answer, on a scale of the kind's own.

`reference_scale_kind(name, scale, template)` is the whole of such a kind: the request
(its template with the fenced question, reference and prediction, and the reply format),
the reader ("Rating: N", "[[N]]" or the JSON {"rating", "explanation"}, checked against
the scale) and the `JudgeKind` the registry and the evaluate pipeline read. `score_0_5` is
one; a 1-7 Likert against a reference is

    KIND = reference_scale_kind("likert_1_7", (1, 7), TEMPLATE)

The template is a `templates/<name>.txt` name or the text itself, with the fields
{question}, {reference} (synonym {answer}), {prediction}, {reply} (the reply format: the
template's `reply` part if it has one, else `templates/rating_reply.txt` for the scale; JSON
under structured output) and {fencing_notice}. A row without a usable reference is
invalid, with no call. `to_0_100=True` reports each rating as 100 * (rating - low) /
(high - low), so the kind's scale is 0-100 (a kind that reports on its own scale also reads
its rating tokens' probabilities, `logprob_labels`; a mapped one does not).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from llm_feedback.backends.contract import ChatRequest
from llm_feedback.engine import Reader, Reading
from llm_feedback.judges.kinds.spec import Asking, JudgeItem, JudgeKind, KindOptions, scale_labels
from llm_feedback.judges.reading import parse_rating, value_reading
from llm_feedback.judges.requests import (
    JUDGE_SYSTEM_PROMPT,
    REFERENCE_REQUIRED,
    check_score_range,
    judge_request,
    rating_json_reply,
    rating_reply_schema,
    reference_values,
    render_prompt,
)
from llm_feedback.templates import has_template, load_template, read_parts, render


def is_template_text(template: str) -> bool:
    """Whether `template` is a template's text rather than the name of a package one.

    Args:
        template: a template's name or text.

    Returns:
        True for text.
    """
    return "{" in template or "\n" in template


@dataclass(frozen=True)
class ReferenceScale:
    """A rating of a prediction against the reference on `scale` (see the module
    docstring); `kind` is its `JudgeKind`, `request` and `read` its builder and reader."""

    name: str
    scale: tuple[int, int]
    template: str
    to_0_100: bool = False
    max_tokens: int = 256
    prediction_label: str = "CANDIDATE ANSWER"  # the prediction's block marker

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", check_score_range(self.scale))

    @functools.cached_property
    def _parts(self) -> dict[str, str]:
        if is_template_text(self.template):
            return read_parts(self.template, f"of judge kind {self.name}")
        return {"": load_template(self.template), **self._package_reply()}

    def _package_reply(self) -> dict[str, str]:
        try:
            return {"reply": load_template(self.template, "reply")}
        except LookupError:
            return {}

    def _reply(self, structured: bool) -> str:
        low, high = self.scale
        if structured:
            return rating_json_reply(low, high)
        own = self._parts.get("reply")
        return own if own is not None else render("rating_reply", low=low, high=high)

    def request(
        self,
        question: str,
        reference: str,
        prediction: str,
        *,
        custom_prompt: str | None = None,
        structured: bool = False,
        system: str | None = JUDGE_SYSTEM_PROMPT,
        **sampling: Any,
    ) -> ChatRequest:
        """Ask for a rating of `prediction` against `reference` on the kind's scale.

        Args:
            question: the question.
            reference: the reference answer.
            prediction: the response rated.
            custom_prompt: a template in place of the built-in one.
            structured: ask for a JSON reply by schema.
            system: the system prompt (None: none).
            **sampling: decoding settings for the request.

        Returns:
            The request.
        """
        low, high = self.scale
        values = reference_values(question, reference, prediction, self.name, self.prediction_label)
        user = render_prompt(
            custom_prompt,
            self._parts[""],
            values,
            REFERENCE_REQUIRED,
            f"{low}-{high} rating",
            reply=self._reply(structured),
        )
        schema = rating_reply_schema(low, high) if structured else None
        return judge_request(user, system, self.max_tokens, schema, sampling)

    def read(self, text: str | None) -> Reading:
        """The rating on the scale (mapped to 0-100 with `to_0_100`), None when unreadable.

        Args:
            text: the judge's reply (None: no reply).

        Returns:
            The reading.
        """
        low, high = self.scale
        reading = value_reading(parse_rating(text, low, high))
        if not self.to_0_100 or reading.value is None:
            return reading
        return dataclasses.replace(reading, value=100.0 * (reading.value - low) / (high - low))

    def ask(
        self, item: JudgeItem, options: KindOptions, asking: Asking
    ) -> tuple[ChatRequest, Reader]:
        """The request for one item and the reader of its reply (the kind's `ask`).

        Args:
            item: what the judgment is about.
            options: the kind's settings.
            asking: structured replies and sampling overrides.

        Returns:
            (the request, the reader).
        """
        request = self.request(
            item.question,
            item.reference,
            item.response,
            custom_prompt=item.custom_prompt,
            structured=asking.structured,
            **asking.sampling,
        )
        return request, self.read

    @functools.cached_property
    def kind(self) -> JudgeKind:
        return JudgeKind(
            name=self.name,
            ask=self.ask,
            template=self.template,
            default_scale=(0, 100) if self.to_0_100 else self.scale,
            needs_reference=True,
            recorded_scores=True,
            logprob_labels=None if self.to_0_100 else scale_labels,
        )


def reference_scale_kind(
    name: str,
    scale: tuple[int, int],
    template: str,
    *,
    to_0_100: bool = False,
    max_tokens: int = 256,
) -> JudgeKind:
    """The `JudgeKind` rating a prediction against the reference on `scale` (low, high:
    whole numbers) with `template` (a package template's name or the text); see the module
    docstring. Register it (`register_kind`) or name it in `evaluate.mode` as
    `package.module:KIND`.

    Args:
        name: the kind's name.
        scale: (low, high), whole numbers.
        template: a package template's name, or the template's text.
        to_0_100: report ratings mapped to 0-100.
        max_tokens: the reply's token limit.

    Returns:
        The kind.
    """
    if not is_template_text(template) and not has_template(template):
        raise LookupError(f"judge kind {name}: no prompt template {template!r} in the package")
    return ReferenceScale(name, scale, template, to_0_100, max_tokens).kind
