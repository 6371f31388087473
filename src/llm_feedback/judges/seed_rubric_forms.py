"""The seed's rubric and comparative dict methods of `Judge` (see `seed_forms`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llm_feedback.judges.judgment import JudgeTask
from llm_feedback.judges.kinds import JudgeItem, KindOptions
from llm_feedback.judges.kinds.single_1_10 import MT_BENCH_SCALE
from llm_feedback.judges.requests import check_score_range
from llm_feedback.judges.seed_forms import (
    Images,
    JudgmentDict,
    dicts,
    pair_dicts,
    prompted,
    zip_items,
)
from llm_feedback.judges.seed_inputs import pick_item_images, with_template_fields


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
