"""The lmms-eval compatible layer: every call it defines, in its four forms, on the kinds of
the registry.

The forms and kinds come from the registries (`Judge.forms`, the built-in modules of
`judges/kinds/`): a built-in kind no call reaches, a call without a sample here, or a
form whose dicts differ from the others' fails.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import Any

import pytest

from llm_feedback.judges import Judge, JudgeItem, kinds
from llm_feedback.judges.lmms_eval_compat import FORMS
from llm_feedback.judges.lmms_eval_compat.factory import CompatForm, Each, with_forms
from llm_feedback.judges.lmms_eval_compat.forms import PREDICTION, QUESTION, custom_prompt
from tests.conftest import endpoints_via
from tests.media_files import png_bytes

# Per call: samples as (one-item args, one-item kwargs); between them they reach every kind
# the call declares.
Sample = tuple[tuple[Any, ...], dict[str, Any]]
RUN = 6  # lines: the `duplicates` tool's shortest run
FIELDED = "Topic {topic}. {question} / {answer} / {prediction}: 1 if right, else 0."
SAMPLES: dict[str, list[Sample]] = {
    "binary": [
        (("2+2?", "4", "four"), {}),
        (("3+3?", "6", "six"), {"images": [png_bytes()]}),
        (("2+2?", "4", "five", "graded"), {}),
        (("2+2?", "4", "five", "0/1", FIELDED), {"topic": "sums"}),
    ],
    "single": [
        (("Tell a joke.", "Knock knock."), {}),
        (("1+1?", "2"), {"reference": "2", "images": [png_bytes()]}),
        (("2+2?", "4"), {"reference": "4", "score_range": (0, 5)}),
        (("2+2?", "4"), {"score_range": (1, 7), "system_prompt": "Grade strictly."}),
    ],
    "multi_turn": [
        ((["Name a prime.", "And an even one?"], ["3", "2"]), {"references": ["2", "2"]}),
        ((["Say hi.", "Now in French."], ["hi", "salut"]), {}),
    ],
    "with_rubric": [
        (("Explain rain.", "Water falls.", {"accuracy": "Right?"}), {"context": "a quiz"}),
        (("Explain snow.", "Ice falls.", {"accuracy": "Right?"}), {"reference": "Frozen rain."}),
    ],
    "comparative": [
        (("2+2?", "4", "5", "arithmetic"), {}),
        (("2+2?", "same", "same"), {}),
        (("2+2?", "4", "5"), {"swap": False}),
    ],
}


def built_in_kinds() -> set[str]:
    """The kinds the registry finds in `judges/kinds/` (a test's own kinds left out)."""
    modules = [
        importlib.import_module(f"{kinds.__name__}.{info.name}")
        for info in pkgutil.iter_modules(kinds.__path__)
    ]
    found = {module.KIND.name for module in modules if hasattr(module, "KIND")}
    assert found <= set(kinds.kind_names())
    return found


def test_the_layer_is_the_forms_of_its_definitions():
    assert Judge.forms == FORMS
    assert set(SAMPLES) == {form.name for form in FORMS}, "every call needs a sample here"
    for form in FORMS:
        assert set(form.kinds) <= set(kinds.kind_names()), form.name
        for batch in (False, True):
            for awaitable in (False, True):
                method = getattr(Judge, form.method_name(batch, awaitable))
                assert inspect.iscoroutinefunction(method) is awaitable
                assert inspect.signature(method) == form.signature(batch)
                assert "Args:" in method.__doc__ and "Returns:" in method.__doc__


def test_every_built_in_kind_is_reached_by_a_call(fake_llm):
    """The tasks the samples make are of the kinds their call declares, and between them
    of every built-in kind of the registry."""
    reached = set()
    with Judge(endpoints_via(fake_llm)["local"], connect=False) as judge:
        for form in FORMS:
            for args, kwargs in SAMPLES[form.name]:
                _, tasks = form.plan(judge, args, kwargs, batch=False)
                kinds = {task.kind for own in tasks for task in own}
                assert kinds <= set(form.kinds), form.name
                reached |= kinds
    assert reached == built_in_kinds()
    assert fake_llm.request_count == 0


def batch_call(form: CompatForm, samples: list[Sample]) -> list[tuple[dict[str, Any], list]]:
    """The batch calls judging `samples`, in order: one per run of samples with the same
    settings, each with its samples' one-item arguments as its lists."""
    plural = {given.name: given.plural for given in form.inputs if isinstance(given, Each)}
    plural["images"] = "item_images"
    calls: list[tuple[dict[str, Any], list]] = []
    for sample in samples:
        bound = form.signature(False).bind(None, *sample[0], **sample[1])
        bound.apply_defaults()
        given = dict(bound.arguments)
        settings = {
            **given.pop("fields"),
            **{name: value for name, value in given.items() if name not in plural},
        }
        settings.pop("self")
        if not calls or calls[-1][0]["settings"] != settings:
            calls.append(({"settings": settings, "columns": {}}, []))
        for name in plural.keys() & given.keys():
            calls[-1][0]["columns"].setdefault(plural[name], []).append(given[name])
        calls[-1][1].append(sample)
    return [({**call["settings"], **call["columns"]}, run) for call, run in calls]


@pytest.mark.parametrize("form", FORMS, ids=lambda form: form.name)
def test_the_four_forms_return_the_same_dicts(fake_llm, form):
    """The one-item, async, batch and async batch forms judge each sample alike, and a
    batch of several samples returns their dicts in order."""
    one, one_async, batch, batch_async = (
        form.method_name(is_batch, awaitable)
        for is_batch in (False, True)
        for awaitable in (False, True)
    )
    with Judge(endpoints_via(fake_llm)["local"]) as judge:
        expected = {}
        for args, kwargs in SAMPLES[form.name]:
            judged = getattr(judge, one)(*args, **kwargs)
            assert judged["success"], (form.name, judged)
            assert asyncio.run(getattr(judge, one_async)(*args, **kwargs)) == judged
            ((arguments, _),) = batch_call(form, [(args, kwargs)])
            assert getattr(judge, batch)(**arguments) == [judged]
            assert asyncio.run(getattr(judge, batch_async)(**arguments)) == [judged]
            expected[repr((args, kwargs))] = judged
        calls = batch_call(form, SAMPLES[form.name])
        for arguments, samples in calls:
            assert getattr(judge, batch)(**arguments) == [expected[repr(s)] for s in samples]
    assert any(len(samples) > 1 for _, samples in calls), "no batch of several items"


def test_a_call_of_your_own_is_one_definition(fake_llm):
    """A `CompatForm` on a subclass of `Judge` gives it the call's four forms."""

    def graded(judge, *, question, answer, prediction, custom_prompt, images):
        item = JudgeItem(question, prediction, reference=answer, custom_prompt=custom_prompt)
        return [judge.task("score_0_5", item, images=images)]

    out_of_five = CompatForm(
        "out_of_five",
        "A 0-5 rating of a prediction against the reference.",
        '"result" the rating or None.',
        inputs=(QUESTION, Each("answer", "answers", "the reference."), PREDICTION, custom_prompt()),
        ask=graded,
        kinds=("score_0_5",),
    )

    @with_forms(out_of_five)
    class MyJudge(Judge):
        pass

    assert MyJudge.forms == (*FORMS, out_of_five) and Judge.forms == FORMS
    with MyJudge(endpoints_via(fake_llm)["local"]) as judge:
        one = judge.evaluate_out_of_five("2+2?", "4", "four")
        assert 0 <= one["result"] <= 5 and one["success"]
        assert asyncio.run(judge.evaluate_out_of_five_async("2+2?", "4", "four")) == one
        assert judge.evaluate_out_of_five_batch(["2+2?"], ["4"], ["four"]) == [one]
        batch = judge.evaluate_out_of_five_batch_async(["2+2?"], ["4"], ["four"], images_list=None)
        assert asyncio.run(batch) == [one]
    assert not hasattr(Judge, "evaluate_out_of_five")


def code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of the lines that carry code: stripped, without blank lines,
    comments, imports and lone punctuation (as the `duplicates` tool reads them)."""
    kept = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = line.strip()
        if not text.strip("()[]{}:,") or text.startswith(("#", "import ", "from ")):
            continue
        kept.append((number, text))
    return kept


def test_the_layer_repeats_no_six_lines_of_the_judge_layer():
    """No run of six code lines of `lmms_eval_compat/` stands anywhere else in `judges/`
    (the hand-written call forms repeated theirs four times over)."""
    judges = Path(inspect.getfile(Judge)).parent
    layer = judges / "lmms_eval_compat"
    places: dict[tuple[str, ...], list[str]] = {}
    for path in sorted(judges.rglob("*.py")):
        lines = code_lines(path)
        for start in range(len(lines) - RUN + 1):
            run = tuple(text for _, text in lines[start : start + RUN])
            places.setdefault(run, []).append(f"{path.relative_to(judges)}:{lines[start][0]}")
    repeated = [
        where
        for where in places.values()
        if len(where) > 1 and any(place.startswith(f"{layer.name}/") for place in where)
    ]
    assert repeated == []
