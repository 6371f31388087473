"""LLM-as-judge on any endpoint: binary, single-answer, rubric and pairwise judgments.

A `Judge` joins the prompt builders and parsers of this package to an `LLMClient`, so every
judgment works with the embedded model, OpenAI, Azure, `vllm serve` and in-process vLLM,
with the client's request cache, retries, timeouts and bounded concurrency (the client's
semaphore holds at most `max_concurrent` calls in flight, the endpoint's setting unless
the judge overrides it).

Each judgment comes back as a dict: the parsed value under "result" ("scores" for a
rubric), and "raw_response", "model", "prompt" (the user message sent), "success",
"status" (a parser status, or "call_failed"), "error", "cached" and "reasks". A reply
that cannot be parsed is never an exception: the judge is re-asked (at most `max_reasks`
times, all such tasks of a batch together), and a reply still unreadable after that
leaves the value None and "success" False. "raw_response" is the reply that was read
last; a failed call is never re-asked.

Every judgment kind is written once, as a batch builder (`_binary_batch`, ...) that
turns lists of inputs into `JudgeTask`s; its four forms `evaluate_x` (sync),
`evaluate_x_async`, `evaluate_x_batch` and `evaluate_x_batch_async` are derived from it
(`_derive_forms`): they keep the input order, send all items as one batch through the
`TaskEngine` and reject inputs of different lengths. The sync forms also work inside a
running event loop (Jupyter): the engine runs on the client's own loop thread.
`JudgeTask`s (from `binary_task`, `single_task`, ...) let a caller mix judgments of
several kinds in one batch with `run` / `arun`.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_feedback.backends import ChatRequest, ClientStats, EndpointConfig, LLMClient
from llm_feedback.backends.contract import check_sampling
from llm_feedback.backends.media import Media, MediaError, content_text, load_media
from llm_feedback.endpoints import resolve_endpoint
from llm_feedback.engine import Outcome, Reader, Reading, Task, TaskEngine
from llm_feedback.errors import ConfigError, InputError
from llm_feedback.judges.metrics import is_position_consistent, pairwise_outcome
from llm_feedback.judges.parsing import (
    OK,
    ParseResult,
    parse_binary,
    parse_bracket_rating,
    parse_pairwise,
    parse_rating,
    parse_reference_grading,
    parse_rubric_scores,
)
from llm_feedback.judges.prompts import (
    attach_images,
    build_binary_request,
    build_multi_turn_rating_request,
    build_pairwise_request,
    build_reference_grading_request,
    build_rubric_request,
    build_score_0_5_request,
    build_single_rating_request,
)

# "graded" asks for extracted answer / reasoning / correct yes|no / confidence lines.
BINARY_FORMATS = ("0/1", "yes/no", "graded")
MT_BENCH_SCALE = (1, 10)
REFERENCE_SCALE = (0, 5)

# Any other scale is graded as a one-criterion rubric, whose prompt takes any range.
OVERALL_CRITERION = "overall"
_OVERALL = "how well the response answers the question: correct, helpful, relevant, complete"
_OVERALL_WITH_REFERENCE = (
    "how well the response answers the question, judged above all by its agreement with the "
    "reference answer"
)
_SWAPPED_LABEL = {"A": "B", "B": "A", "tie": "tie"}


@dataclass(frozen=True, slots=True)
class JudgeTask(Task):
    """An engine task that knows under which key its judgment's value is returned."""

    result_key: str = "result"

    @property
    def prompt(self) -> str:
        return content_text(self.request.messages[-1]["content"])


@dataclass(frozen=True, slots=True)
class _Batch:
    """A batch builder's tasks and how their judgments become the caller's results."""

    tasks: list[JudgeTask]
    finish: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = list


def _value_reading(parsed: ParseResult[Any]) -> Reading:
    return Reading(parsed.value, parsed.status, parsed.value is not None)


def _read_graded(text: str | None) -> Reading:
    parsed = parse_reference_grading(text)
    record = parsed.value
    correct = None if record["correct"] is None else int(record["correct"])
    details = {name: record[name] for name in ("extracted_final_answer", "reasoning", "confidence")}
    return Reading(correct, parsed.status, correct is not None, details=details)


def _rating_reader(scale: tuple[int, int], structured: bool) -> Reader:
    if scale == MT_BENCH_SCALE and not structured:
        # FastChat's rule (first [[N]], else first [N]), so MT-Bench scores are reproduced.
        return lambda text: _value_reading(parse_bracket_rating(text, scale))
    return lambda text: _value_reading(parse_rating(text, *scale))


def _overall_reader(scale: tuple[int, int]) -> Reader:
    def read(text: str | None) -> Reading:
        parsed = parse_rubric_scores(text, [OVERALL_CRITERION], scale)
        return Reading(parsed.value[OVERALL_CRITERION], parsed.status, parsed.status == OK)

    return read


def _rubric_reader(criteria: Mapping[str, str], scale: tuple[int, int]) -> Reader:
    def read(text: str | None) -> Reading:
        parsed = parse_rubric_scores(text, criteria, scale)
        return Reading(parsed.value, parsed.status, parsed.status == OK)

    return read


def _pairwise_reader(scale: tuple[int, int]) -> Reader:
    def read(text: str | None) -> Reading:
        parsed = parse_pairwise(text, scale)
        reply = parsed.value
        value = {"verdict": reply.verdict, "scores": list(reply.scores)}
        return Reading(value, parsed.status, reply.verdict is not None)

    return read


def _scale(score_range: Sequence[int]) -> tuple[int, int]:
    if isinstance(score_range, str) or len(score_range) != 2:
        raise ConfigError(f"score_range must be two integers (low, high), got {score_range!r}")
    low, high = score_range
    if not all(isinstance(bound, int) and not isinstance(bound, bool) for bound in (low, high)):
        raise ConfigError(f"score_range must be two integers (low, high), got {score_range!r}")
    if low >= high:
        raise ConfigError(f"score_range needs low < high, got {score_range!r}")
    return low, high


def _rows(**columns: Sequence[Any] | None) -> list[tuple[Any, ...]]:
    """Zip batch inputs item by item; a None column stands for None in every item."""
    given: dict[str, list[Any]] = {}
    for name, values in columns.items():
        if values is None:
            continue
        if isinstance(values, str | bytes) or not isinstance(values, Sequence):
            raise InputError(f"batch input {name!r} must be a list, got {type(values).__name__}")
        given[name] = list(values)
    lengths = {name: len(values) for name, values in given.items()}
    if len(set(lengths.values())) > 1:
        raise InputError(f"batch inputs differ in length: {lengths}")
    size = next(iter(lengths.values()), 0)
    return list(zip(*(given.get(name, [None] * size) for name in columns), strict=True))


def _mean_of_known(*values: float | None) -> float | None:
    known = [value for value in values if value is not None]
    return math.fsum(known) / len(known) if known else None


def combine_orders(a_first: Mapping[str, Any], b_first: Mapping[str, Any]) -> dict[str, Any]:
    """One comparative judgment from the two orders of the same pair.

    `a_first` showed (response1, response2), `b_first` the swapped (response2, response1).
    The result's labels refer to the original order: "A" is response1, "B" response2.
    Orders that disagree (position bias) make a "tie"; a missing verdict makes None. The
    scores of each response are averaged over the two orders.
    """
    verdict_ab = a_first["result"]["verdict"]
    verdict_ba = b_first["result"]["verdict"]
    scores_ab, scores_ba = a_first["result"]["scores"], b_first["result"]["scores"]
    winner = pairwise_outcome(verdict_ab, verdict_ba)
    status = next((s for s in (a_first["status"], b_first["status"]) if s != OK), OK)
    return {
        "result": {
            "winner": winner,
            "consistent": is_position_consistent(verdict_ab, verdict_ba),
            "verdicts": [verdict_ab, _SWAPPED_LABEL.get(verdict_ba)],
            "scores": [
                _mean_of_known(scores_ab[0], scores_ba[1]),
                _mean_of_known(scores_ab[1], scores_ba[0]),
            ],
        },
        "raw_response": [a_first["raw_response"], b_first["raw_response"]],
        "model": a_first["model"],
        "prompt": [a_first["prompt"], b_first["prompt"]],
        "success": winner is not None,
        "status": status,
        "error": a_first["error"] or b_first["error"],
        "cached": a_first["cached"] and b_first["cached"],
        "reasks": a_first["reasks"] + b_first["reasks"],
    }


def _one_order(outcome: Mapping[str, Any]) -> dict[str, Any]:
    """A comparative judgment shown in one order only, shaped like `combine_orders`."""
    verdict = outcome["result"]["verdict"]
    return {
        **outcome,
        "result": {
            "winner": verdict,
            "consistent": None,
            "verdicts": [verdict],
            "scores": outcome["result"]["scores"],
        },
        "raw_response": [outcome["raw_response"]],
        "prompt": [outcome["prompt"]],
    }


class Judge:
    """An LLM judge on one endpoint; use as a context manager or call `close()`.

    `endpoint` None reads the seed evaluators' environment variables (MODEL_VERSION,
    API_TYPE, OPENAI_API_URL / OPENAI_BASE_URL, OPENAI_API_KEY, the AZURE_* ones: see
    `backends.endpoint_from_env`). `cache_path` is the
    request cache (None: no cache); `refresh=True` asks again and replaces cached
    answers. `sampling` overrides the builders' settings (temperature 0, a max_tokens
    per judgment kind) for every call. Replies are constrained by a JSON schema when the
    endpoint supports structured output. A reply that cannot be read is re-asked up to
    `max_reasks` times (0: never). `fail_loud` raises `EndpointError` after a batch in which
    more calls failed than the endpoint's `max_failure_share`. `connect=False` makes a judge
    that only builds tasks (to check prompts before any call) and cannot run them.
    """

    def __init__(
        self,
        endpoint: EndpointConfig | Mapping[str, Any] | None = None,
        cache_path: str | Path | None = None,
        *,
        max_concurrent: int | None = None,
        refresh: bool = False,
        progress: bool = False,
        sampling: Mapping[str, Any] | None = None,
        max_reasks: int = 1,
        fail_loud: bool = False,
        connect: bool = True,
    ) -> None:
        config = resolve_endpoint(endpoint, None)
        if max_concurrent is not None:
            config = dataclasses.replace(config, max_concurrent=max_concurrent)
        self.sampling = check_sampling(sampling, "judge sampling")
        self._client = LLMClient(config, cache_path, progress=progress, refresh=refresh)
        self._engine = TaskEngine(self._client, max_reasks=max_reasks, fail_loud=fail_loud)
        if connect:
            self._client.open()

    # -- lifecycle and facts -------------------------------------------------------------
    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    @property
    def model(self) -> str:
        return self._client.model

    @property
    def max_reasks(self) -> int:
        return self._engine.max_reasks

    @property
    def max_concurrent(self) -> int:
        return self._client.config.concurrency

    @property
    def structured(self) -> bool:
        """Whether requests carry a JSON schema for the server to enforce."""
        return self._client.supports_json_schema

    @property
    def stats(self) -> ClientStats:
        return self._client.stats

    def is_available(self, timeout_s: float = 10.0) -> bool:
        """A cheap health check: does the endpoint answer at all?"""
        return self._client.is_available(timeout_s)

    # -- running tasks -------------------------------------------------------------------
    def run(self, tasks: Sequence[JudgeTask], desc: str | None = None) -> list[dict[str, Any]]:
        """Judge every task, in order; `desc` names the progress bar (None: no bar).

        Each round re-asks, in one batch, only the tasks whose reply could not be read.
        """
        return self._judgments(tasks, self._engine.run(tasks, desc=desc))

    async def arun(
        self, tasks: Sequence[JudgeTask], desc: str | None = None
    ) -> list[dict[str, Any]]:
        return self._judgments(tasks, await self._engine.arun(tasks, desc=desc))

    def _judgments(
        self, tasks: Sequence[JudgeTask], outcomes: list[Outcome]
    ) -> list[dict[str, Any]]:
        return [
            self._judgment(task, outcome) for task, outcome in zip(tasks, outcomes, strict=True)
        ]

    def _judgment(self, task: JudgeTask, outcome: Outcome) -> dict[str, Any]:
        reading = outcome.reading
        judgment = {
            task.result_key: reading.value,
            "raw_response": outcome.text,
            "model": self.model,
            "prompt": task.prompt,
            "success": reading.ok,
            "status": reading.status,
            "error": outcome.error,
            "cached": outcome.cached,
            "reasks": outcome.reasks,
        }
        if reading.details is not None:
            judgment["details"] = dict(reading.details)
        return judgment

    def _task(
        self,
        request: ChatRequest,
        read: Reader,
        attempt: int,
        result_key: str = "result",
        images: Sequence[str | Media] | None = None,
    ) -> JudgeTask:
        # A distinct attempt makes an identical judgment a separate call (one per replicate).
        if attempt:
            request = dataclasses.replace(request, attempt=attempt)
        if images:
            request = attach_images(request, self._checked_images(images))
        return JudgeTask(request, read, result_key=result_key)

    def _checked_images(self, images: Sequence[str | Media]) -> list[Media]:
        """Images for the judge: checked `Media`, or paths / URLs / data: URIs to check."""
        config = self._client.config
        if isinstance(images, str | Media):
            images = [images]
        if not config.accepts_media:
            raise InputError(f"{config.describe()} reads text only: it cannot judge images")
        checked = []
        for item, image in enumerate(images):
            try:
                checked.append(load_media(image, "image", Path.cwd(), config.max_media_bytes))
            except MediaError as error:
                raise InputError(f"judge image {item}: {error}") from None
        return checked

    # -- tasks ---------------------------------------------------------------------------
    def binary_task(
        self,
        question: str,
        answer: str,
        prediction: str,
        *,
        output_format: str = "0/1",
        custom_prompt: str | None = None,
        attempt: int = 0,
        images: Sequence[str | Media] | None = None,
    ) -> JudgeTask:
        """Is `prediction` correct, given the reference `answer`? Result 1, 0 or None.

        `output_format` "0/1" or "yes/no" asks for one token; "graded" asks for
        extracted_final_answer / reasoning / correct / confidence, given in "details".
        `images` (paths, URLs, data: URIs or checked `Media`) go with the question, as in
        every task.
        """
        options = {"custom_prompt": custom_prompt, "structured": self.structured, **self.sampling}
        if output_format == "graded":
            request = build_reference_grading_request(question, answer, prediction, **options)
            return self._task(request, _read_graded, attempt, images=images)
        if output_format not in BINARY_FORMATS:
            raise ConfigError(
                f"output_format must be one of {BINARY_FORMATS}, got {output_format!r}"
            )
        request = build_binary_request(
            question, answer, prediction, output_format=output_format, **options
        )
        return self._task(
            request,
            lambda text: _value_reading(parse_binary(text, output_format)),
            attempt,
            images=images,
        )

    def single_task(
        self,
        question: str,
        prediction: str,
        *,
        reference: str | None = None,
        score_range: Sequence[int] = MT_BENCH_SCALE,
        custom_prompt: str | None = None,
        attempt: int = 0,
        images: Sequence[str | Media] | None = None,
    ) -> JudgeTask:
        """A grade of one answer on `score_range`, with a reference answer when given.

        1-10 is MT-Bench's `[[N]]` grading; 0-5 with a reference is the reference-rating
        scale; any other scale is asked as a one-criterion rubric ("overall").
        """
        scale = _scale(score_range)
        options = {"custom_prompt": custom_prompt, "structured": self.structured, **self.sampling}
        if scale == MT_BENCH_SCALE:
            request = build_single_rating_request(
                question, prediction, reference=reference, **options
            )
            return self._task(
                request, _rating_reader(scale, self.structured), attempt, images=images
            )
        if scale == REFERENCE_SCALE and reference is not None:
            request = build_score_0_5_request(question, reference, prediction, **options)
            return self._task(
                request, _rating_reader(scale, self.structured), attempt, images=images
            )
        criteria = {OVERALL_CRITERION: _OVERALL if reference is None else _OVERALL_WITH_REFERENCE}
        request = build_rubric_request(
            question, prediction, criteria, score_range=scale, reference=reference, **options
        )
        return self._task(request, _overall_reader(scale), attempt, images=images)

    def multi_turn_task(
        self,
        questions: Sequence[str],
        answers: Sequence[str],
        *,
        references: Sequence[str] | None = None,
        custom_prompt: str | None = None,
        attempt: int = 0,
    ) -> JudgeTask:
        """MT-Bench 1-10 grade of the second answer of a two-turn conversation."""
        request = build_multi_turn_rating_request(
            questions,
            answers,
            references=references,
            custom_prompt=custom_prompt,
            structured=self.structured,
            **self.sampling,
        )
        return self._task(request, _rating_reader(MT_BENCH_SCALE, self.structured), attempt)

    def rubric_task(
        self,
        question: str,
        prediction: str,
        rubric: Mapping[str, str],
        *,
        score_range: Sequence[int] = (1, 5),
        reference: str | None = None,
        context: str | None = None,
        custom_prompt: str | None = None,
        attempt: int = 0,
        images: Sequence[str | Media] | None = None,
    ) -> JudgeTask:
        """An integer score per criterion of `rubric` ({name: description}), as JSON."""
        scale = _scale(score_range)
        request = build_rubric_request(
            question,
            prediction,
            rubric,
            score_range=scale,
            reference=reference,
            context=context,
            custom_prompt=custom_prompt,
            structured=self.structured,
            **self.sampling,
        )
        return self._task(
            request, _rubric_reader(rubric, scale), attempt, result_key="scores", images=images
        )

    def pairwise_task(
        self,
        question: str,
        response_a: str,
        response_b: str,
        *,
        context: str | None = None,
        score_range: Sequence[int] = MT_BENCH_SCALE,
        custom_prompt: str | None = None,
        attempt: int = 0,
        images: Sequence[str | Media] | None = None,
    ) -> JudgeTask:
        """One order of a comparison: {"verdict": "A"|"B"|"tie"|None, "scores": [a, b]}.

        Judge both orders and join them with `combine_orders` to cancel position bias.
        """
        scale = _scale(score_range)
        request = build_pairwise_request(
            question,
            response_a,
            response_b,
            context=context,
            score_range=scale,
            custom_prompt=custom_prompt,
            structured=self.structured,
            **self.sampling,
        )
        return self._task(request, _pairwise_reader(scale), attempt, images=images)

    # -- judgments, each written once as a batch builder ---------------------------------
    def _binary_batch(
        self,
        questions: Sequence[str],
        answers: Sequence[str],
        predictions: Sequence[str],
        *,
        output_format: str = "0/1",
        custom_prompt: str | None = None,
        item_images: Sequence[Sequence[str | Media] | None] | None = None,
    ) -> _Batch:
        """Whether each prediction is correct given the reference answer: result 1/0/None."""
        return _Batch(
            [
                self.binary_task(
                    question,
                    answer,
                    prediction,
                    output_format=output_format,
                    custom_prompt=custom_prompt,
                    images=images,
                )
                for question, answer, prediction, images in _rows(
                    questions=questions,
                    answers=answers,
                    predictions=predictions,
                    item_images=item_images,
                )
            ]
        )

    def _single_batch(
        self,
        questions: Sequence[str],
        predictions: Sequence[str],
        *,
        references: Sequence[str | None] | None = None,
        score_range: Sequence[int] = MT_BENCH_SCALE,
        custom_prompt: str | None = None,
        item_images: Sequence[Sequence[str | Media] | None] | None = None,
    ) -> _Batch:
        """A grade of each answer on `score_range` (see `single_task`): result a number.
        `images` are shown to the judge with the question."""
        return _Batch(
            [
                self.single_task(
                    question,
                    prediction,
                    reference=reference,
                    score_range=score_range,
                    custom_prompt=custom_prompt,
                    images=images,
                )
                for question, prediction, reference, images in _rows(
                    questions=questions,
                    predictions=predictions,
                    references=references,
                    item_images=item_images,
                )
            ]
        )

    def _with_rubric_batch(
        self,
        questions: Sequence[str],
        predictions: Sequence[str],
        rubric: Mapping[str, str],
        *,
        score_range: Sequence[int] = (1, 5),
        references: Sequence[str | None] | None = None,
        contexts: Sequence[str | None] | None = None,
        custom_prompt: str | None = None,
        item_images: Sequence[Sequence[str | Media] | None] | None = None,
    ) -> _Batch:
        """Scores per criterion: "scores" maps each criterion to an integer or None.
        `images` are shown to the judge with the question."""
        return _Batch(
            [
                self.rubric_task(
                    question,
                    prediction,
                    rubric,
                    score_range=score_range,
                    reference=reference,
                    context=context,
                    custom_prompt=custom_prompt,
                    images=images,
                )
                for question, prediction, reference, context, images in _rows(
                    questions=questions,
                    predictions=predictions,
                    references=references,
                    contexts=contexts,
                    item_images=item_images,
                )
            ]
        )

    def _comparative_batch(
        self,
        questions: Sequence[str],
        responses1: Sequence[str],
        responses2: Sequence[str],
        *,
        contexts: Sequence[str | None] | None = None,
        score_range: Sequence[int] = MT_BENCH_SCALE,
        custom_prompt: str | None = None,
        swap: bool = True,
        item_images: Sequence[Sequence[str | Media] | None] | None = None,
    ) -> _Batch:
        """Which response is better: result {"winner": "A" (response1) | "B" | "tie" | None,
        "consistent", "verdicts", "scores"}, and "scores" (response1's, response2's) also
        as a top-level tuple, as the seed returned it.

        With `swap` (the default) each pair is judged in both orders and orders that
        disagree make a tie; "raw_response" and "prompt" list the orders judged. `images`
        are shown to the judge with the question.
        """
        tasks: list[JudgeTask] = []
        for question, first, second, context, images in _rows(
            questions=questions,
            responses1=responses1,
            responses2=responses2,
            contexts=contexts,
            item_images=item_images,
        ):
            orders = [(first, second), (second, first)] if swap else [(first, second)]
            tasks += [
                self.pairwise_task(
                    question,
                    a,
                    b,
                    context=context,
                    score_range=score_range,
                    custom_prompt=custom_prompt,
                    images=images,
                )
                for a, b in orders
            ]
        return _Batch(tasks, lambda judgments: _join_orders(judgments, swap))

    def _multi_turn_batch(
        self,
        conversations_questions: Sequence[Sequence[str]],
        conversations_answers: Sequence[Sequence[str]],
        *,
        conversations_references: Sequence[Sequence[str] | None] | None = None,
        custom_prompt: str | None = None,
    ) -> _Batch:
        """MT-Bench 1-10 grade of the second answer of each two-turn conversation; one item
        is the turns' `questions`, `answers` and, optionally, `references`."""
        return _Batch(
            [
                self.multi_turn_task(
                    questions, answers, references=references, custom_prompt=custom_prompt
                )
                for questions, answers, references in _rows(
                    conversations_questions=conversations_questions,
                    conversations_answers=conversations_answers,
                    conversations_references=conversations_references,
                )
            ]
        )


def _join_orders(outcomes: list[dict[str, Any]], swap: bool) -> list[dict[str, Any]]:
    if swap:
        joined = [combine_orders(outcomes[i], outcomes[i + 1]) for i in range(0, len(outcomes), 2)]
    else:
        joined = [_one_order(outcome) for outcome in outcomes]
    # The seed's callers read the two responses' scores from a top-level tuple.
    return [{**judgment, "scores": tuple(judgment["result"]["scores"])} for judgment in joined]


# Per-item batch inputs and their names in the one-item forms.
_SINGULAR = {
    "questions": "question",
    "answers": "answer",
    "predictions": "prediction",
    "references": "reference",
    "contexts": "context",
    "responses1": "response1",
    "responses2": "response2",
    "item_images": "images",
    # One item of a multi-turn batch is a whole conversation: its turns' lists.
    "conversations_questions": "questions",
    "conversations_answers": "answers",
    "conversations_references": "references",
}


def _item_annotation(annotation: Any) -> Any:
    """`Sequence[str | None] | None` -> `str | None`: one item of a batch input."""
    if isinstance(annotation, str) and annotation.startswith("Sequence["):
        return annotation[len("Sequence[") : annotation.rindex("]")]
    return annotation


def _derive_forms(kind: str) -> None:
    """Add evaluate_<kind>, _async, _batch and _batch_async to `Judge` from `_<kind>_batch`.

    The one-item forms take each per-item input in the singular (`question`, `reference`,
    ...) and return one judgment; the batch forms take lists and return one per item.
    """
    builder = getattr(Judge, f"_{kind}_batch")
    batch_signature = inspect.signature(builder)
    per_item = [name for name in batch_signature.parameters if name in _SINGULAR]

    def batch(self: Judge, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        built = builder(self, *args, **kwargs)
        return built.finish(self.run(built.tasks))

    async def batch_async(self: Judge, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        built = builder(self, *args, **kwargs)
        return built.finish(await self.arun(built.tasks))

    def as_batch(args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.BoundArguments:
        bound = single_signature.bind(None, *args, **kwargs)
        batch_args = {}
        for name, value in bound.arguments.items():
            plural = next((p for p in per_item if _SINGULAR[p] == name), None)
            batch_args[plural or name] = [value] if plural else value
        return batch_signature.bind(**batch_args)

    def single(self: Judge, *args: Any, **kwargs: Any) -> dict[str, Any]:
        bound = as_batch(args, kwargs)
        bound.arguments["self"] = self
        return batch(*bound.args, **bound.kwargs)[0]

    async def single_async(self: Judge, *args: Any, **kwargs: Any) -> dict[str, Any]:
        bound = as_batch(args, kwargs)
        bound.arguments["self"] = self
        return (await batch_async(*bound.args, **bound.kwargs))[0]

    single_signature = batch_signature.replace(
        parameters=[
            parameter.replace(
                name=_SINGULAR[name],
                annotation=_item_annotation(parameter.annotation),
                default=parameter.default,
            )
            if name in per_item
            else parameter
            for name, parameter in batch_signature.parameters.items()
        ],
        return_annotation=dict[str, Any],
    )
    batch_signature_out = batch_signature.replace(return_annotation=list[dict[str, Any]])
    doc = (builder.__doc__ or "").strip()
    for name, function, signature, text in (
        (f"evaluate_{kind}", single, single_signature, f"One item. {doc}"),
        (
            f"evaluate_{kind}_async",
            single_async,
            single_signature,
            "`evaluate_" + kind + "`, awaitable.",
        ),
        (
            f"evaluate_{kind}_batch",
            batch,
            batch_signature_out,
            f"Lists of items, one judgment each, in order. {doc}",
        ),
        (
            f"evaluate_{kind}_batch_async",
            batch_async,
            batch_signature_out,
            f"`evaluate_{kind}_batch`, awaitable.",
        ),
    ):
        function.__name__ = function.__qualname__ = name
        function.__signature__ = signature
        function.__doc__ = text
        setattr(Judge, name, function)


for _kind in ("binary", "single", "multi_turn", "with_rubric", "comparative"):
    _derive_forms(_kind)
