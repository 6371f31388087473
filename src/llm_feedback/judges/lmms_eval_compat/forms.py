"""lmms-eval's judge calls, one definition each; `LmmsEvalCompatible` carries their methods.

`evaluate_binary`, `evaluate_single`, `evaluate_multi_turn`, `evaluate_with_rubric` and
`evaluate_comparative` judge one item; their `_async` forms are awaitable, their `_batch`
forms take lists of items (one judgment each, in order, sent as one batch; lists of
different lengths are an `InputError`) and `_batch_async` both: the four are made from
the one definition (`factory.CompatForm`). Each returns lmms-eval's dict: the value under
"result" ("scores" for a rubric), "raw_response" (the reply read last), "model", "prompt",
"success", "status", "error", "cached", "reasks" and, for graded binary judgments,
"details". A comparison's "result" holds "winner" ("A": response1, "B", "tie" or None),
"consistent", "verdicts" and "scores", and "scores" is also a top-level tuple, as
lmms-eval returns it; two identical responses are a tie without a call (status
"identical"). The sync forms also work inside a running event loop (Jupyter): the engine
runs on the client's own loop thread.

lmms-eval's calls work as written: the binary forms take `output_format` and
`custom_prompt`, the comparative forms `context` and the rubric forms `custom_prompt` in
lmms-eval's positions; extra keyword arguments are fields of `custom_prompt`;
`system_prompt` replaces the judge's for one call; images may be raw bytes; the batch
forms take `images_list` for `item_images` (`inputs.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llm_feedback.judges.judgment import JudgeTask, Judgment, combine_orders, one_order
from llm_feedback.judges.kinds import JudgeItem, KindOptions
from llm_feedback.judges.kinds.single_1_10 import MT_BENCH_SCALE
from llm_feedback.judges.lmms_eval_compat.factory import CompatForm, Each, Shared, with_forms
from llm_feedback.judges.requests import check_score_range
from llm_feedback.replies.status import IDENTICAL

_CALL_KEYS = '"raw_response", "model", "prompt", "success", "status", "error", "cached", "reasks"'
QUESTION = Each("question", "questions", "the question asked.")
PREDICTION = Each("prediction", "predictions", "the answer judged.")


def custom_prompt(positional: bool = False) -> Shared:
    """The `custom_prompt` setting.

    Args:
        positional: whether lmms-eval's call takes it by position.

    Returns:
        The setting.
    """
    doc = "the user message's template in place of the kind's (fields in braces)."
    return Shared("custom_prompt", doc, None, positional)


def score_range(default: tuple[int, int]) -> Shared:
    """The `score_range` setting.

    Args:
        default: the call's scale, (low, high), whole numbers.

    Returns:
        The setting.
    """
    return Shared("score_range", "the scale (low, high) of the scores.", default)


BINARY = CompatForm(
    "binary",
    "Whether a prediction is correct given the reference answer.",
    f'"result" 1, 0 or None, with {_CALL_KEYS} ("details" too for a graded reply).',
    inputs=(
        QUESTION,
        Each("answer", "answers", "the reference answer."),
        PREDICTION,
        Shared(
            "output_format",
            '"0/1" or "yes/no" (one token), or "graded" (the extracted final answer, '
            'reasoning, verdict and confidence, under "details").',
            "0/1",
            positional=True,
        ),
        custom_prompt(positional=True),
    ),
    ask=lambda judge, **item: [judge.binary_task(**item)],
    kinds=("binary",),
)

SINGLE = CompatForm(
    "single",
    "A grade of an answer on `score_range`: 1-10 is MT-Bench's `single_1_10`, 0-5 with a "
    "reference `score_0_5`, any other scale a one-criterion rubric.",
    f'"result" the grade or None, with {_CALL_KEYS}.',
    inputs=(
        QUESTION,
        PREDICTION,
        Each("reference", "references", "the reference answer, or None.", None, False),
        score_range(MT_BENCH_SCALE),
        custom_prompt(),
    ),
    ask=lambda judge, **item: [judge.single_task(**item)],
    kinds=("single_1_10", "score_0_5", "rubric"),
)

MULTI_TURN = CompatForm(
    "multi_turn",
    "MT-Bench's 1-10 grade of the second answer of a two-turn conversation.",
    f'"result" the grade or None, with {_CALL_KEYS}.',
    inputs=(
        Each("questions", "conversations_questions", "the two turns' questions."),
        Each("answers", "conversations_answers", "the two turns' answers."),
        Each(
            "references", "conversations_references", "the turns' references, or None.", None, False
        ),
        custom_prompt(),
    ),
    ask=lambda judge, **item: [judge.multi_turn_task(**item)],
    kinds=("single_1_10",),
    images=False,
)

RUBRIC = CompatForm(
    "with_rubric",
    "An integer score per criterion of `rubric`, asked as JSON.",
    f'"scores" {{criterion: score or None}}, with {_CALL_KEYS}.',
    inputs=(
        QUESTION,
        PREDICTION,
        Shared("rubric", "the criteria, {name: description}.", positional=True),
        custom_prompt(positional=True),
        score_range((1, 5)),
        Each("reference", "references", "the reference answer, or None.", None, False),
        Each("context", "contexts", "context the judge is shown, or None.", None, False),
    ),
    ask=lambda judge, **item: [judge.rubric_task(**item)],
    kinds=("rubric",),
    result_key="scores",
)


def _compare(
    judge: Any,
    *,
    question: str,
    response1: str,
    response2: str,
    context: str | None,
    score_range: Sequence[int],
    custom_prompt: str | None,
    swap: bool,
    images: Any,
) -> list[JudgeTask]:
    options = KindOptions(check_score_range(score_range))
    if response1 == response2:
        return []  # a tie without a call (`_comparison`)
    item = JudgeItem(
        question, response1, other_response=response2, context=context, custom_prompt=custom_prompt
    )
    return judge.comparison_tasks("pairwise", item, options, images=images, swap=swap)


def _comparison(item: Mapping[str, Any], judgments: list[Judgment], model: str) -> dict[str, Any]:
    """The pair's dict; two identical responses had no call and are a tie with status
    `identical` (as AlpacaEval records it and the pipeline's pairwise mode does)."""
    if not judgments:
        tie = Judgment.without_call(
            IDENTICAL, {"verdict": "tie", "scores": [None, None]}, model=model
        )
        judgments = [tie, tie] if item["swap"] else [tie]
    return (combine_orders(*judgments) if len(judgments) == 2 else one_order(*judgments)).as_dict()


COMPARATIVE = CompatForm(
    "comparative",
    "Which of two responses is better, judged in both orders unless `swap` is False "
    "(orders that disagree make a tie); two identical responses are a tie without a call.",
    '"result" {"winner": "A" (response1), "B", "tie" or None, "consistent", "verdicts", '
    '"scores"}, "scores" (a tuple), and "raw_response" and "prompt" listing the orders '
    'judged, with "model", "success", "status", "error", "cached", "reasks".',
    inputs=(
        QUESTION,
        Each("response1", "responses1", "the first response (A)."),
        Each("response2", "responses2", "the second response (B)."),
        Each("context", "contexts", "context the judge is shown, or None.", None),
        score_range(MT_BENCH_SCALE),
        custom_prompt(),
        Shared("swap", "whether to judge both orders, to cancel position bias.", True),
    ),
    ask=_compare,
    answer=_comparison,
    kinds=("pairwise",),
)

FORMS = (BINARY, SINGLE, MULTI_TURN, RUBRIC, COMPARATIVE)


@with_forms(*FORMS)
class LmmsEvalCompatible:
    """lmms-eval's judge calls as methods (four per form of `FORMS`; see the module
    docstring); the class using it provides `run`, `arun`, `model` and the task builders
    (`binary_task`, `single_task`, `multi_turn_task`, `rubric_task`, `comparison_tasks`)."""
