"""LLM-as-judge on any endpoint: a `Judge` asks judgments of any registered kind.

A `Judge` joins the kinds of `judges/kinds/` (template, reply schema, reader) to an
`LLMClient`, so every judgment works with the embedded model, OpenAI, Azure, `vllm serve`
and in-process vLLM, with the client's request cache, retries, timeouts and bounded
concurrency (the client's semaphore holds at most `max_concurrent` calls in flight, the
endpoint's setting unless the judge overrides it).

`task(kind, item, options)` builds the engine task of one judgment; `binary_task`,
`single_task`, `multi_turn_task`, `rubric_task` and `pairwise_task` are its forms for the
built-in kinds, `comparison_tasks` both orders of a comparison. `run` / `arun` judge tasks
(of any kinds mixed) in one batch and return typed `Judgment`s. A reply that cannot be
parsed is never an exception: the judge is re-asked (at most `max_reasks` times, all such
tasks of a batch together), and a reply still unreadable after that leaves the value None
and `success` False; a failed call is never re-asked. lmms-eval's dict methods
(`evaluate_binary`, ..., their async and batch forms) come from `lmms_eval_compat/`, made
from one definition per call over the typed judgments.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llm_feedback.backends import ChatRequest, ClientStats, EndpointConfig, LLMClient
from llm_feedback.backends.contract import check_sampling
from llm_feedback.backends.endpoints import resolve_endpoint
from llm_feedback.backends.media import Media, MediaError, load_media
from llm_feedback.core.errors import InputError
from llm_feedback.engine import Outcome, Reader, TaskEngine
from llm_feedback.judges.config import JUDGE_PRESETS
from llm_feedback.judges.judgment import JudgeTask, Judgment
from llm_feedback.judges.kinds import Asking, JudgeItem, JudgeKind, KindOptions, get_kind
from llm_feedback.judges.kinds.rubric import overall_ask
from llm_feedback.judges.kinds.score_0_5 import SCALE as REFERENCE_SCALE
from llm_feedback.judges.kinds.single_1_10 import MT_BENCH_SCALE, two_turns
from llm_feedback.judges.lmms_eval_compat import LmmsEvalCompatible
from llm_feedback.judges.lmms_eval_compat.inputs import image_source, with_system_prompt
from llm_feedback.judges.requests import attach_images, check_score_range

logger = logging.getLogger(__name__)

# The seed evaluator's own judge settings (the `lmms_eval` preset), which ours differ from.
SEED_000 = JUDGE_PRESETS["lmms_eval"]


class Judge(LmmsEvalCompatible):
    """An LLM judge on one endpoint; use as a context manager or call `close()`.

    Replies are constrained by a JSON schema when the endpoint supports structured output.

    Args:
        endpoint: The judge's endpoint (a config or its mapping); None reads lmms-eval's
            environment variables (MODEL_VERSION, API_TYPE, OPENAI_API_URL /
            OPENAI_BASE_URL, OPENAI_API_KEY, the AZURE_* ones: see
            `backends.endpoint_from_env`).
        cache_path: The request cache (None: no cache).
        max_concurrent: The most calls in flight (None: the endpoint's setting).
        refresh: Ask again and replace cached answers.
        progress: Show a progress bar per batch.
        sampling: Overrides the kinds' settings (temperature 0, a max_tokens per judgment
            kind) for every call.
        max_reasks: How often a reply that cannot be read is re-asked (0: never).
        fail_loud: Raise `EndpointError` after a batch in which more calls failed than the
            endpoint's `max_failure_share`.
        connect: False makes a judge that only builds tasks (to check prompts before any
            call) and cannot run them.
        system_prompt: Replaces every kind's system message (lmms-eval's judge-level
            prompt).
        top_logprobs: When > 0, every call of a kind with `logprob_labels` asks for that
            many top log-probabilities per token (the endpoint's backend must return them:
            see `BackendTraits.returns_logprobs`); each `Judgment` keeps those at the label
            tokens.
        seed_defaults: Take the seed's own judge settings (`SEED_000_SAMPLING`,
            `SEED_000_TIMEOUT_S`) where `sampling` does not set them; a judge made from the
            seed's environment variables without it logs how ours differ.
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
        system_prompt: str | None = None,
        top_logprobs: int = 0,
        seed_defaults: bool = False,
    ) -> None:
        self.system_prompt = system_prompt
        self.top_logprobs = top_logprobs
        config = resolve_endpoint(endpoint, None)
        if max_concurrent is not None:
            config = dataclasses.replace(config, max_concurrent=max_concurrent)
        self.sampling = check_sampling(sampling, "judge sampling")
        if seed_defaults:
            self.sampling = {**SEED_000.sampling, **self.sampling}
            config = dataclasses.replace(config, timeout_s=SEED_000.timeout_s)
        elif endpoint is None:
            logger.info(
                "judge %s: our defaults differ from the seed's (temperature %s, top_p %s, "
                "%g s timeout): temperature 0 and top_p 1 unless `sampling` says otherwise, "
                "a %g s timeout; Judge(seed_defaults=True) takes the seed's",
                config.model,
                SEED_000.sampling["temperature"],
                SEED_000.sampling["top_p"],
                SEED_000.timeout_s,
                config.timeout_s,
            )
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
    def asking(self) -> Asking:
        return Asking(structured=self.structured, sampling=self.sampling)

    @property
    def stats(self) -> ClientStats:
        return self._client.stats

    def is_available(self, timeout_s: float = 10.0) -> bool:
        """A cheap health check: does the endpoint answer at all?

        Args:
            timeout_s: How long to wait for the answer, in seconds.

        Returns:
            Whether the endpoint answered.
        """
        return self._client.is_available(timeout_s)

    # -- running tasks -------------------------------------------------------------------
    def run(self, tasks: Sequence[JudgeTask], desc: str | None = None) -> list[Judgment]:
        """Judge every task, in order; `desc` names the progress bar (None: no bar).

        Each round re-asks, in one batch, only the tasks whose reply could not be read.

        Args:
            tasks: The tasks to judge, of any kinds.
            desc: The progress bar's label (None: no bar).

        Returns:
            One judgment per task, in the tasks' order.
        """
        return self._judgments(tasks, self._engine.run(tasks, desc=desc))

    async def arun(self, tasks: Sequence[JudgeTask], desc: str | None = None) -> list[Judgment]:
        """Judge every task, in order, in the running event loop (`run`'s async form).

        Args:
            tasks: The tasks to judge, of any kinds.
            desc: The progress bar's label (None: no bar).

        Returns:
            One judgment per task, in the tasks' order.
        """
        return self._judgments(tasks, await self._engine.arun(tasks, desc=desc))

    def _judgments(self, tasks: Sequence[JudgeTask], outcomes: list[Outcome]) -> list[Judgment]:
        return [
            Judgment.of(task, outcome, self.model)
            for task, outcome in zip(tasks, outcomes, strict=True)
        ]

    # -- tasks of any kind ---------------------------------------------------------------
    def task(
        self,
        kind: JudgeKind | str,
        item: JudgeItem,
        options: KindOptions | None = None,
        *,
        attempt: int = 0,
        images: Sequence[str | bytes | Media] | None = None,
    ) -> JudgeTask:
        """The task of one judgment of `kind` (a kind or its registered name) about `item`.

        Args:
            kind: The judge kind, or its registered name.
            item: What is judged (question, response, reference, ...).
            options: The kind's options (None: its default scale).
            attempt: The replicate number; a distinct one makes a separate call.
            images: Images shown to the judge with the question (paths, URLs, data: URIs,
                raw bytes or checked `Media`).

        Returns:
            The engine task of the judgment.

        Raises:
            InputError: An image cannot be read, or the endpoint reads text only.
        """
        kind = get_kind(kind) if isinstance(kind, str) else kind
        options = options or KindOptions(kind.default_scale)
        request, read = kind.ask(item, options, self.asking)
        if self.top_logprobs and kind.logprob_labels is not None:
            request = dataclasses.replace(
                request,
                top_logprobs=self.top_logprobs,
                logprob_labels=tuple(kind.logprob_labels(options)),
            )
        return self._task(request, read, kind.name, attempt, images)

    def comparison_tasks(
        self,
        kind: JudgeKind | str,
        item: JudgeItem,
        options: KindOptions | None = None,
        *,
        attempt: int = 0,
        images: Sequence[str | bytes | Media] | None = None,
        swap: bool = True,
    ) -> list[JudgeTask]:
        """A comparison of `item.response` with `item.other_response`.

        Args:
            kind: The comparison's judge kind, or its registered name.
            item: The pair to compare (`response` and `other_response`).
            options: The kind's options (None: its default scale).
            attempt: The replicate number; a distinct one makes separate calls.
            images: Images shown to the judge with the question (paths, URLs, data: URIs,
                raw bytes or checked `Media`).
            swap: Ask both orders (A first, then B first; join them with
                `combine_orders`); False asks the given order only.

        Returns:
            The tasks, one per order asked.
        """
        orders = item.both_orders() if swap else (item,)
        return [self.task(kind, order, options, attempt=attempt, images=images) for order in orders]

    def _task(
        self,
        request: ChatRequest,
        read: Reader,
        kind: str,
        attempt: int,
        images: Sequence[str | bytes | Media] | None,
    ) -> JudgeTask:
        if attempt:
            request = dataclasses.replace(request, attempt=attempt)
        request = with_system_prompt(request, self.system_prompt)
        if images:
            request = attach_images(request, self._checked_images(images))
        return JudgeTask(request, read, kind=kind)

    def _checked_images(self, images: Sequence[str | bytes | Media]) -> list[Media]:
        """Images for the judge: checked `Media`, or paths / URLs / data: URIs / raw bytes
        to check."""
        config = self._client.config
        if isinstance(images, str | bytes | bytearray | Media):
            images = [images]
        if not config.accepts_media:
            raise InputError(f"{config.describe()} reads text only: it cannot judge images")
        checked = []
        for item, image in enumerate(images):
            try:
                source = image_source(image)
                checked.append(load_media(source, "image", Path.cwd(), config.max_media_bytes))
            except MediaError as error:
                raise InputError(f"judge image {item}: {error}") from None
        return checked

    # -- tasks of the built-in kinds -----------------------------------------------------
    def binary_task(
        self,
        question: str,
        answer: str,
        prediction: str,
        *,
        output_format: str = "0/1",
        custom_prompt: str | None = None,
        attempt: int = 0,
        images: Sequence[str | bytes | Media] | None = None,
    ) -> JudgeTask:
        """Is `prediction` correct, given the reference `answer`? Value 1, 0 or None.

        `output_format` "0/1" or "yes/no" asks for one token; "graded" asks for
        extracted_final_answer / reasoning / correct / confidence, given in `details`.

        Args:
            question: The question asked.
            answer: The reference answer.
            prediction: The answer judged.
            output_format: "0/1", "yes/no" or "graded".
            custom_prompt: A prompt replacing the kind's template.
            attempt: The replicate number; a distinct one makes a separate call.
            images: Images shown to the judge with the question (paths, URLs, data: URIs,
                raw bytes or checked `Media`).

        Returns:
            The engine task of the judgment.
        """
        item = JudgeItem(question, prediction, reference=answer, custom_prompt=custom_prompt)
        kind = get_kind("binary")
        options = KindOptions(kind.default_scale, reply_format=output_format)
        return self.task(kind, item, options, attempt=attempt, images=images)

    def single_task(
        self,
        question: str,
        prediction: str,
        *,
        reference: str | None = None,
        score_range: Sequence[int] = MT_BENCH_SCALE,
        custom_prompt: str | None = None,
        attempt: int = 0,
        images: Sequence[str | bytes | Media] | None = None,
    ) -> JudgeTask:
        """A grade of one answer on `score_range`, with a reference answer when given.

        1-10 is MT-Bench's `[[N]]` grading (`single_1_10`); 0-5 with a reference the
        `score_0_5` kind; any other scale is asked as a one-criterion rubric ("overall").

        Args:
            question: The question asked.
            prediction: The answer graded.
            reference: A reference answer, if any.
            score_range: The scale's lowest and highest grade.
            custom_prompt: A prompt replacing the kind's template.
            attempt: The replicate number; a distinct one makes a separate call.
            images: Images shown to the judge with the question (paths, URLs, data: URIs,
                raw bytes or checked `Media`).

        Returns:
            The engine task of the judgment.

        Raises:
            ConfigError: `score_range` is not two integers (low, high).
        """
        scale = check_score_range(score_range)
        item = JudgeItem(question, prediction, reference=reference, custom_prompt=custom_prompt)
        if scale == MT_BENCH_SCALE:
            return self.task("single_1_10", item, attempt=attempt, images=images)
        if scale == REFERENCE_SCALE and reference is not None:
            return self.task("score_0_5", item, attempt=attempt, images=images)
        request, read = overall_ask(item, KindOptions(scale), self.asking)
        return self._task(request, read, "rubric", attempt, images)

    def multi_turn_task(
        self,
        questions: Sequence[str],
        answers: Sequence[str],
        *,
        references: Sequence[str] | None = None,
        custom_prompt: str | None = None,
        attempt: int = 0,
    ) -> JudgeTask:
        """MT-Bench 1-10 grade of the second answer of a two-turn conversation.

        Args:
            questions: The conversation's two questions.
            answers: The two answers; the second is graded.
            references: The two reference answers, if any.
            custom_prompt: A prompt replacing the kind's template.
            attempt: The replicate number; a distinct one makes a separate call.

        Returns:
            The engine task of the judgment.

        Raises:
            InputError: `questions`, `answers` or `references` do not hold two turns.
        """
        first_question, question = two_turns("questions", questions)
        first_answer, answer = two_turns("answers", answers)
        first_reference, reference = (
            (None, None) if references is None else two_turns("references", references)
        )
        item = JudgeItem(
            question,
            answer,
            reference=reference,
            prior_question=first_question,
            prior_response=first_answer,
            prior_reference=first_reference,
            custom_prompt=custom_prompt,
        )
        return self.task("single_1_10", item, attempt=attempt)

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
        images: Sequence[str | bytes | Media] | None = None,
    ) -> JudgeTask:
        """An integer score per criterion of `rubric` ({name: description}), as JSON.

        Args:
            question: The question asked.
            prediction: The answer scored.
            rubric: The criteria, {name: description}.
            score_range: The scale's lowest and highest score.
            reference: A reference answer, if any.
            context: Context shown with the question, if any.
            custom_prompt: A prompt replacing the kind's template.
            attempt: The replicate number; a distinct one makes a separate call.
            images: Images shown to the judge with the question (paths, URLs, data: URIs,
                raw bytes or checked `Media`).

        Returns:
            The engine task of the judgment.

        Raises:
            ConfigError: `score_range` is not two integers (low, high).
        """
        item = JudgeItem(
            question, prediction, reference=reference, context=context, custom_prompt=custom_prompt
        )
        options = KindOptions(check_score_range(score_range), criteria=rubric)
        return self.task("rubric", item, options, attempt=attempt, images=images)

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
        images: Sequence[str | bytes | Media] | None = None,
    ) -> JudgeTask:
        """One order of a comparison: {"verdict": "A"|"B"|"tie"|None, "scores": [a, b]}.

        `comparison_tasks` gives both orders, to cancel position bias.

        Args:
            question: The question asked.
            response_a: The response shown first.
            response_b: The response shown second.
            context: Context shown with the question, if any.
            score_range: The scale each response is scored on.
            custom_prompt: A prompt replacing the kind's template.
            attempt: The replicate number; a distinct one makes a separate call.
            images: Images shown to the judge with the question (paths, URLs, data: URIs,
                raw bytes or checked `Media`).

        Returns:
            The engine task of the judgment.

        Raises:
            ConfigError: `score_range` is not two integers (low, high).
        """
        item = JudgeItem(
            question,
            response_a,
            other_response=response_b,
            context=context,
            custom_prompt=custom_prompt,
        )
        options = KindOptions(check_score_range(score_range))
        return self.task("pairwise", item, options, attempt=attempt, images=images)
