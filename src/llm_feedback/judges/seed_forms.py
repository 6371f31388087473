"""The seed's dict methods of `Judge` (lmms-eval style), a thin adapter over typed judgments.

`evaluate_binary`, `evaluate_single`, `evaluate_multi_turn`, `evaluate_with_rubric` and
`evaluate_comparative` judge one item; their `_async` forms are awaitable, their `_batch`
forms take lists of items (one judgment each, in order, sent as one batch; lists of
different lengths are an `InputError`) and `_batch_async` both. Each returns the seed's
dict: the value under "result" ("scores" for a rubric), "raw_response" (the reply read
last), "model", "prompt", "success", "status", "error", "cached", "reasks" and, for graded
binary judgments, "details". A comparison's "result" holds "winner" ("A": response1, "B",
"tie" or None), "consistent", "verdicts" and "scores", and "scores" is also a top-level
tuple, as the seed returned it; two identical responses are a tie without a call (status
"identical"). The sync forms also work inside a running event loop
(Jupyter): the engine runs on the client's own loop thread.

lmms-eval's calls work as written (`seed_inputs`): the binary forms take `output_format`
and `custom_prompt`, the comparative forms `context` and the rubric forms `custom_prompt`
in lmms-eval's positions; extra keyword arguments are fields of `custom_prompt`;
`system_prompt` replaces the judge's for one call; images may be raw bytes; the batch
forms take `images_list` for `item_images`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from llm_feedback.backends.media import Media
from llm_feedback.core.errors import InputError
from llm_feedback.judges.judgment import JudgeTask, Judgment, combine_orders, one_order
from llm_feedback.judges.kinds import JudgeItem, KindOptions
from llm_feedback.judges.kinds.single_1_10 import MT_BENCH_SCALE
from llm_feedback.judges.requests import check_score_range
from llm_feedback.judges.seed_inputs import (
    pick_item_images,
    with_system_prompt,
    with_template_fields,
)
from llm_feedback.replies.status import IDENTICAL

JudgmentDict = dict[str, Any]
Images = Sequence[str | bytes | Media] | None


def zip_items(**columns: Sequence[Any] | None) -> list[tuple[Any, ...]]:
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


def prompted(tasks: list[JudgeTask], system_prompt: str | None) -> list[JudgeTask]:
    """The tasks with the call's `system_prompt` in place of the judge's (None: as built)."""
    if system_prompt is None:
        return tasks
    return [
        dataclasses.replace(task, request=with_system_prompt(task.request, system_prompt))
        for task in tasks
    ]


def dicts(judgments: list[Judgment], result_key: str = "result") -> list[JudgmentDict]:
    return [judgment.as_dict(result_key) for judgment in judgments]


def pair_dicts(
    judgments: list[Judgment],
    swap: bool,
    identical: Sequence[bool] = (),
    model: str | None = None,
) -> list[JudgmentDict]:
    """The comparative dicts of a batch, in item order.

    Args:
        judgments: the judged orders of the items that needed a call (two per item when
            `swap`, else one).
        swap: whether each item was judged in both orders.
        identical: per item, whether its two responses are the same text: such an item
            had no call and is a tie with status `identical` (as AlpacaEval records it and
            the pipeline's pairwise mode does); empty: no item is.
        model: the judge's model, named in the dicts of the items without a call.

    Returns:
        One dict per item.
    """
    per_item = 2 if swap else 1
    orders = iter(judgments)
    results = []
    for same in identical or [False] * (len(judgments) // per_item):
        if same:
            value = {"verdict": "tie", "scores": [None, None]}
            tie = Judgment.without_call(IDENTICAL, value, model=model)
            results.append((combine_orders(tie, tie) if swap else one_order(tie)).as_dict())
        elif swap:
            results.append(combine_orders(next(orders), next(orders)).as_dict())
        else:
            results.append(one_order(next(orders)).as_dict())
    return results


class SeedForms:
    """The binary, single and multi-turn dict forms; `Judge` provides and runs the tasks."""

    # -- binary: is the prediction correct given the reference answer? result 1/0/None ----
    def _binary_tasks(
        self,
        questions: Sequence[str],
        answers: Sequence[str],
        predictions: Sequence[str],
        *,
        output_format: str,
        custom_prompt: str | None,
        item_images: Sequence[Images] | None,
        system_prompt: str | None,
        fields: Mapping[str, Any],
    ) -> list[JudgeTask]:
        rows = zip_items(
            questions=questions, answers=answers, predictions=predictions, item_images=item_images
        )
        custom_prompt = with_template_fields(custom_prompt, fields)
        tasks = [
            self.binary_task(
                question,
                answer,
                prediction,
                output_format=output_format,
                custom_prompt=custom_prompt,
                images=images,
            )
            for question, answer, prediction, images in rows
        ]
        return prompted(tasks, system_prompt)

    def evaluate_binary_batch(
        self,
        questions: Sequence[str],
        answers: Sequence[str],
        predictions: Sequence[str],
        output_format: str = "0/1",
        custom_prompt: str | None = None,
        *,
        item_images: Sequence[Images] | None = None,
        images_list: Sequence[Images] | None = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> list[JudgmentDict]:
        """Whether each prediction is correct given its reference answer: result 1/0/None
        ("graded" output also gives "details")."""
        tasks = self._binary_tasks(
            questions,
            answers,
            predictions,
            output_format=output_format,
            custom_prompt=custom_prompt,
            item_images=pick_item_images(item_images, images_list),
            system_prompt=system_prompt,
            fields=fields,
        )
        return dicts(self.run(tasks))

    async def evaluate_binary_batch_async(
        self,
        questions: Sequence[str],
        answers: Sequence[str],
        predictions: Sequence[str],
        output_format: str = "0/1",
        custom_prompt: str | None = None,
        *,
        item_images: Sequence[Images] | None = None,
        images_list: Sequence[Images] | None = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> list[JudgmentDict]:
        tasks = self._binary_tasks(
            questions,
            answers,
            predictions,
            output_format=output_format,
            custom_prompt=custom_prompt,
            item_images=pick_item_images(item_images, images_list),
            system_prompt=system_prompt,
            fields=fields,
        )
        return dicts(await self.arun(tasks))

    def evaluate_binary(
        self,
        question: str,
        answer: str,
        prediction: str,
        output_format: str = "0/1",
        custom_prompt: str | None = None,
        *,
        images: Images = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> JudgmentDict:
        """Whether `prediction` is correct given the reference `answer`: result 1/0/None."""
        tasks = self._binary_tasks(
            [question],
            [answer],
            [prediction],
            output_format=output_format,
            custom_prompt=custom_prompt,
            item_images=[images],
            system_prompt=system_prompt,
            fields=fields,
        )
        return dicts(self.run(tasks))[0]

    async def evaluate_binary_async(
        self,
        question: str,
        answer: str,
        prediction: str,
        output_format: str = "0/1",
        custom_prompt: str | None = None,
        *,
        images: Images = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> JudgmentDict:
        tasks = self._binary_tasks(
            [question],
            [answer],
            [prediction],
            output_format=output_format,
            custom_prompt=custom_prompt,
            item_images=[images],
            system_prompt=system_prompt,
            fields=fields,
        )
        return dicts(await self.arun(tasks))[0]

    # -- single: a grade of each answer on score_range (see Judge.single_task) ------------
    def _single_tasks(
        self,
        questions: Sequence[str],
        predictions: Sequence[str],
        *,
        references: Sequence[str | None] | None,
        score_range: Sequence[int],
        custom_prompt: str | None,
        item_images: Sequence[Images] | None,
        system_prompt: str | None,
        fields: Mapping[str, Any],
    ) -> list[JudgeTask]:
        rows = zip_items(
            questions=questions,
            predictions=predictions,
            references=references,
            item_images=item_images,
        )
        custom_prompt = with_template_fields(custom_prompt, fields)
        tasks = [
            self.single_task(
                question,
                prediction,
                reference=reference,
                score_range=score_range,
                custom_prompt=custom_prompt,
                images=images,
            )
            for question, prediction, reference, images in rows
        ]
        return prompted(tasks, system_prompt)

    def evaluate_single_batch(
        self,
        questions: Sequence[str],
        predictions: Sequence[str],
        *,
        references: Sequence[str | None] | None = None,
        score_range: Sequence[int] = MT_BENCH_SCALE,
        custom_prompt: str | None = None,
        item_images: Sequence[Images] | None = None,
        images_list: Sequence[Images] | None = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> list[JudgmentDict]:
        """A grade of each answer on `score_range`: result a number or None."""
        tasks = self._single_tasks(
            questions,
            predictions,
            references=references,
            score_range=score_range,
            custom_prompt=custom_prompt,
            item_images=pick_item_images(item_images, images_list),
            system_prompt=system_prompt,
            fields=fields,
        )
        return dicts(self.run(tasks))

    async def evaluate_single_batch_async(
        self,
        questions: Sequence[str],
        predictions: Sequence[str],
        *,
        references: Sequence[str | None] | None = None,
        score_range: Sequence[int] = MT_BENCH_SCALE,
        custom_prompt: str | None = None,
        item_images: Sequence[Images] | None = None,
        images_list: Sequence[Images] | None = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> list[JudgmentDict]:
        tasks = self._single_tasks(
            questions,
            predictions,
            references=references,
            score_range=score_range,
            custom_prompt=custom_prompt,
            item_images=pick_item_images(item_images, images_list),
            system_prompt=system_prompt,
            fields=fields,
        )
        return dicts(await self.arun(tasks))

    def evaluate_single(
        self,
        question: str,
        prediction: str,
        *,
        reference: str | None = None,
        score_range: Sequence[int] = MT_BENCH_SCALE,
        custom_prompt: str | None = None,
        images: Images = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> JudgmentDict:
        """A grade of one answer on `score_range`: result a number or None."""
        tasks = self._single_tasks(
            [question],
            [prediction],
            references=[reference],
            score_range=score_range,
            custom_prompt=custom_prompt,
            item_images=[images],
            system_prompt=system_prompt,
            fields=fields,
        )
        return dicts(self.run(tasks))[0]

    async def evaluate_single_async(
        self,
        question: str,
        prediction: str,
        *,
        reference: str | None = None,
        score_range: Sequence[int] = MT_BENCH_SCALE,
        custom_prompt: str | None = None,
        images: Images = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> JudgmentDict:
        tasks = self._single_tasks(
            [question],
            [prediction],
            references=[reference],
            score_range=score_range,
            custom_prompt=custom_prompt,
            item_images=[images],
            system_prompt=system_prompt,
            fields=fields,
        )
        return dicts(await self.arun(tasks))[0]

    # -- multi-turn: MT-Bench 1-10 grade of the second answer of a conversation -----------
    def _multi_turn_tasks(
        self,
        conversations_questions: Sequence[Sequence[str]],
        conversations_answers: Sequence[Sequence[str]],
        conversations_references: Sequence[Sequence[str] | None] | None,
        *,
        custom_prompt: str | None,
        system_prompt: str | None,
        fields: Mapping[str, Any],
    ) -> list[JudgeTask]:
        rows = zip_items(
            conversations_questions=conversations_questions,
            conversations_answers=conversations_answers,
            conversations_references=conversations_references,
        )
        custom_prompt = with_template_fields(custom_prompt, fields)
        tasks = [
            self.multi_turn_task(
                questions, answers, references=references, custom_prompt=custom_prompt
            )
            for questions, answers, references in rows
        ]
        return prompted(tasks, system_prompt)

    def evaluate_multi_turn_batch(
        self,
        conversations_questions: Sequence[Sequence[str]],
        conversations_answers: Sequence[Sequence[str]],
        *,
        conversations_references: Sequence[Sequence[str] | None] | None = None,
        custom_prompt: str | None = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> list[JudgmentDict]:
        """One item is a conversation: its two turns' questions, answers, references."""
        tasks = self._multi_turn_tasks(
            conversations_questions,
            conversations_answers,
            conversations_references,
            custom_prompt=custom_prompt,
            system_prompt=system_prompt,
            fields=fields,
        )
        return dicts(self.run(tasks))

    async def evaluate_multi_turn_batch_async(
        self,
        conversations_questions: Sequence[Sequence[str]],
        conversations_answers: Sequence[Sequence[str]],
        *,
        conversations_references: Sequence[Sequence[str] | None] | None = None,
        custom_prompt: str | None = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> list[JudgmentDict]:
        tasks = self._multi_turn_tasks(
            conversations_questions,
            conversations_answers,
            conversations_references,
            custom_prompt=custom_prompt,
            system_prompt=system_prompt,
            fields=fields,
        )
        return dicts(await self.arun(tasks))

    def evaluate_multi_turn(
        self,
        questions: Sequence[str],
        answers: Sequence[str],
        *,
        references: Sequence[str] | None = None,
        custom_prompt: str | None = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> JudgmentDict:
        """The turns' `questions`, `answers` and, optionally, `references`."""
        tasks = self._multi_turn_tasks(
            [questions],
            [answers],
            [references],
            custom_prompt=custom_prompt,
            system_prompt=system_prompt,
            fields=fields,
        )
        return dicts(self.run(tasks))[0]

    async def evaluate_multi_turn_async(
        self,
        questions: Sequence[str],
        answers: Sequence[str],
        *,
        references: Sequence[str] | None = None,
        custom_prompt: str | None = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> JudgmentDict:
        tasks = self._multi_turn_tasks(
            [questions],
            [answers],
            [references],
            custom_prompt=custom_prompt,
            system_prompt=system_prompt,
            fields=fields,
        )
        return dicts(await self.arun(tasks))[0]


class RubricAndComparativeForms:
    """The rubric and comparative dict forms; `Judge` provides and runs the tasks."""

    # -- with rubric: "scores" maps each criterion to an integer or None ------------------
    def _rubric_tasks(
        self,
        questions: Sequence[str],
        predictions: Sequence[str],
        rubric: Mapping[str, str],
        *,
        score_range: Sequence[int],
        references: Sequence[str | None] | None,
        contexts: Sequence[str | None] | None,
        custom_prompt: str | None,
        item_images: Sequence[Images] | None,
        system_prompt: str | None,
        fields: Mapping[str, Any],
    ) -> list[JudgeTask]:
        rows = zip_items(
            questions=questions,
            predictions=predictions,
            references=references,
            contexts=contexts,
            item_images=item_images,
        )
        custom_prompt = with_template_fields(custom_prompt, fields)
        tasks = [
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
            for question, prediction, reference, context, images in rows
        ]
        return prompted(tasks, system_prompt)

    def evaluate_with_rubric_batch(
        self,
        questions: Sequence[str],
        predictions: Sequence[str],
        rubric: Mapping[str, str],
        custom_prompt: str | None = None,
        *,
        score_range: Sequence[int] = (1, 5),
        references: Sequence[str | None] | None = None,
        contexts: Sequence[str | None] | None = None,
        item_images: Sequence[Images] | None = None,
        images_list: Sequence[Images] | None = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> list[JudgmentDict]:
        """Scores per criterion of `rubric` ({name: description}) under "scores"."""
        tasks = self._rubric_tasks(
            questions,
            predictions,
            rubric,
            score_range=score_range,
            references=references,
            contexts=contexts,
            custom_prompt=custom_prompt,
            item_images=pick_item_images(item_images, images_list),
            system_prompt=system_prompt,
            fields=fields,
        )
        return dicts(self.run(tasks), "scores")

    async def evaluate_with_rubric_batch_async(
        self,
        questions: Sequence[str],
        predictions: Sequence[str],
        rubric: Mapping[str, str],
        custom_prompt: str | None = None,
        *,
        score_range: Sequence[int] = (1, 5),
        references: Sequence[str | None] | None = None,
        contexts: Sequence[str | None] | None = None,
        item_images: Sequence[Images] | None = None,
        images_list: Sequence[Images] | None = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> list[JudgmentDict]:
        tasks = self._rubric_tasks(
            questions,
            predictions,
            rubric,
            score_range=score_range,
            references=references,
            contexts=contexts,
            custom_prompt=custom_prompt,
            item_images=pick_item_images(item_images, images_list),
            system_prompt=system_prompt,
            fields=fields,
        )
        return dicts(await self.arun(tasks), "scores")

    def evaluate_with_rubric(
        self,
        question: str,
        prediction: str,
        rubric: Mapping[str, str],
        custom_prompt: str | None = None,
        *,
        score_range: Sequence[int] = (1, 5),
        reference: str | None = None,
        context: str | None = None,
        images: Images = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> JudgmentDict:
        """Scores per criterion of `rubric` ({name: description}) under "scores"."""
        tasks = self._rubric_tasks(
            [question],
            [prediction],
            rubric,
            score_range=score_range,
            references=[reference],
            contexts=[context],
            custom_prompt=custom_prompt,
            item_images=[images],
            system_prompt=system_prompt,
            fields=fields,
        )
        return dicts(self.run(tasks), "scores")[0]

    async def evaluate_with_rubric_async(
        self,
        question: str,
        prediction: str,
        rubric: Mapping[str, str],
        custom_prompt: str | None = None,
        *,
        score_range: Sequence[int] = (1, 5),
        reference: str | None = None,
        context: str | None = None,
        images: Images = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> JudgmentDict:
        tasks = self._rubric_tasks(
            [question],
            [prediction],
            rubric,
            score_range=score_range,
            references=[reference],
            contexts=[context],
            custom_prompt=custom_prompt,
            item_images=[images],
            system_prompt=system_prompt,
            fields=fields,
        )
        return (dicts(await self.arun(tasks), "scores"))[0]

    # -- comparative: which response is better, in both orders unless swap=False ----------
    def _comparative_tasks(
        self,
        questions: Sequence[str],
        responses1: Sequence[str],
        responses2: Sequence[str],
        *,
        contexts: Sequence[str | None] | None,
        score_range: Sequence[int],
        custom_prompt: str | None,
        swap: bool,
        item_images: Sequence[Images] | None,
        system_prompt: str | None,
        fields: Mapping[str, Any],
    ) -> tuple[list[JudgeTask], list[bool]]:
        """The tasks of the pairs to judge, and per pair whether its two responses are the
        same text (a tie without a call, `pair_dicts`)."""
        options = KindOptions(check_score_range(score_range))
        custom_prompt = with_template_fields(custom_prompt, fields)
        rows = zip_items(
            questions=questions,
            responses1=responses1,
            responses2=responses2,
            contexts=contexts,
            item_images=item_images,
        )
        tasks: list[JudgeTask] = []
        identical = [first == second for _, first, second, _, _ in rows]
        for (question, first, second, context, images), same in zip(rows, identical, strict=True):
            if same:
                continue
            item = JudgeItem(
                question,
                first,
                other_response=second,
                context=context,
                custom_prompt=custom_prompt,
            )
            tasks += self.comparison_tasks("pairwise", item, options, images=images, swap=swap)
        return prompted(tasks, system_prompt), identical

    def evaluate_comparative_batch(
        self,
        questions: Sequence[str],
        responses1: Sequence[str],
        responses2: Sequence[str],
        contexts: Sequence[str | None] | None = None,
        *,
        score_range: Sequence[int] = MT_BENCH_SCALE,
        custom_prompt: str | None = None,
        swap: bool = True,
        item_images: Sequence[Images] | None = None,
        images_list: Sequence[Images] | None = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> list[JudgmentDict]:
        """Which response of each pair is better; "raw_response" and "prompt" list the
        orders judged (orders that disagree make a tie)."""
        tasks, identical = self._comparative_tasks(
            questions,
            responses1,
            responses2,
            contexts=contexts,
            score_range=score_range,
            custom_prompt=custom_prompt,
            swap=swap,
            item_images=pick_item_images(item_images, images_list),
            system_prompt=system_prompt,
            fields=fields,
        )
        return pair_dicts(self.run(tasks), swap, identical, self.model)

    async def evaluate_comparative_batch_async(
        self,
        questions: Sequence[str],
        responses1: Sequence[str],
        responses2: Sequence[str],
        contexts: Sequence[str | None] | None = None,
        *,
        score_range: Sequence[int] = MT_BENCH_SCALE,
        custom_prompt: str | None = None,
        swap: bool = True,
        item_images: Sequence[Images] | None = None,
        images_list: Sequence[Images] | None = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> list[JudgmentDict]:
        tasks, identical = self._comparative_tasks(
            questions,
            responses1,
            responses2,
            contexts=contexts,
            score_range=score_range,
            custom_prompt=custom_prompt,
            swap=swap,
            item_images=pick_item_images(item_images, images_list),
            system_prompt=system_prompt,
            fields=fields,
        )
        return pair_dicts(await self.arun(tasks), swap, identical, self.model)

    def evaluate_comparative(
        self,
        question: str,
        response1: str,
        response2: str,
        context: str | None = None,
        *,
        score_range: Sequence[int] = MT_BENCH_SCALE,
        custom_prompt: str | None = None,
        swap: bool = True,
        images: Images = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> JudgmentDict:
        """Which response is better: result "winner" "A" (response1), "B", "tie" or None;
        two identical responses are a tie without a call (status `identical`)."""
        tasks, identical = self._comparative_tasks(
            [question],
            [response1],
            [response2],
            contexts=[context],
            score_range=score_range,
            custom_prompt=custom_prompt,
            swap=swap,
            item_images=[images],
            system_prompt=system_prompt,
            fields=fields,
        )
        return pair_dicts(self.run(tasks), swap, identical, self.model)[0]

    async def evaluate_comparative_async(
        self,
        question: str,
        response1: str,
        response2: str,
        context: str | None = None,
        *,
        score_range: Sequence[int] = MT_BENCH_SCALE,
        custom_prompt: str | None = None,
        swap: bool = True,
        images: Images = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> JudgmentDict:
        tasks, identical = self._comparative_tasks(
            [question],
            [response1],
            [response2],
            contexts=[context],
            score_range=score_range,
            custom_prompt=custom_prompt,
            swap=swap,
            item_images=[images],
            system_prompt=system_prompt,
            fields=fields,
        )
        return pair_dicts(await self.arun(tasks), swap, identical, self.model)[0]
