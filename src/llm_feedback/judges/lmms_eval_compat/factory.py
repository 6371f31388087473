"""One definition per lmms-eval judge call, and the four call forms made from it.

A `CompatForm` says what a call takes, in lmms-eval's positions: the inputs given per item
(`Each`: `question` in the one-item forms, `questions` in the batch forms) and the
settings shared by a call's items (`Shared`); how one item becomes the judge's tasks
(`ask`, the item's inputs and settings as keyword arguments); and what dict its judgments
make (`answer`; by default the one judgment's dict with the value under `result_key`).
`methods()` makes the four call forms `evaluate_<name>`, `evaluate_<name>_async`,
`evaluate_<name>_batch` and `evaluate_<name>_batch_async`, each with its own signature
and docstring; `with_forms` puts them on a class.

Every form also takes the judged item's images (`images`; in the batch forms
`item_images` or lmms-eval's `images_list`, unless the form says `images=False`),
`system_prompt` (in place of the judge's, for this call) and extra keyword arguments,
which fill the fields of `custom_prompt` (every form has that setting). The batch forms
judge their items as one batch, in order; every input is checked before any call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_feedback.judges.judgment import JudgeTask, Judgment
from llm_feedback.judges.lmms_eval_compat.inputs import (
    pick_item_images,
    prompted,
    with_template_fields,
    zip_items,
)

REQUIRED = inspect.Parameter.empty
_IMAGES = "the images shown to the judge with the question (paths, URLs, data: URIs or bytes)"
_ARGS = {
    "system_prompt": "replaces the judge's system prompt for this call (None: the judge's).",
    "**fields": "values of fields of `custom_prompt`, filled in before the judge's own.",
    "images": f"{_IMAGES}.",
    "item_images": f"per item, {_IMAGES}.",
    "images_list": "lmms-eval's name for `item_images` (give one of them).",
}


@dataclass(frozen=True)
class Each:
    """An input given per item: `name` in the one-item forms, `plural` (a list with one
    entry per item) in the batch forms; `default` REQUIRED or the value (None) of both."""

    name: str
    plural: str
    doc: str
    default: Any = REQUIRED
    positional: bool = True


@dataclass(frozen=True)
class Shared:
    """A setting shared by every item of a call, the same in the four forms."""

    name: str
    doc: str
    default: Any = REQUIRED
    positional: bool = False


# (judge, **item) -> the tasks of one item (none: it is settled without a call).
Ask = Callable[..., list[JudgeTask]]
# (item, its judgments, the judge's model) -> the item's dict.
Answer = Callable[[Mapping[str, Any], list[Judgment], str], dict[str, Any]]


@dataclass(frozen=True)
class CompatForm:
    """One lmms-eval judge call (see the module docstring).

    `summary` and `returns` document the one-item form; `kinds` names the judge kinds its
    tasks may be of.
    """

    name: str
    summary: str
    returns: str
    inputs: tuple[Each | Shared, ...]
    ask: Ask
    kinds: tuple[str, ...]
    images: bool = True
    result_key: str = "result"
    answer: Answer | None = None
    _signatures: dict[bool, inspect.Signature] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if "custom_prompt" not in {given.name for given in self.inputs}:
            raise ValueError(f"lmms-eval form {self.name}: every form takes custom_prompt")
        # Made once (a form whose inputs make no valid signature fails here), bound per call.
        signatures = {batch: self._make_signature(batch) for batch in (False, True)}
        object.__setattr__(self, "_signatures", signatures)

    @property
    def _each(self) -> list[Each]:
        return [given for given in self.inputs if isinstance(given, Each)]

    def method_name(self, batch: bool, awaitable: bool) -> str:
        """The name of a call form: `evaluate_<name>`, then `_batch`, then `_async`.

        Args:
            batch: the batch form.
            awaitable: the async form.

        Returns:
            The method's name.
        """
        return f"evaluate_{self.name}{'_batch' if batch else ''}{'_async' if awaitable else ''}"

    def _images(self, batch: bool) -> list[str]:
        return (["item_images", "images_list"] if batch else ["images"]) if self.images else []

    def signature(self, batch: bool) -> inspect.Signature:
        """The signature of a call form, `self` first.

        Args:
            batch: the batch form (False: the one-item form).

        Returns:
            Its signature.
        """
        return self._signatures[batch]

    def _make_signature(self, batch: bool) -> inspect.Signature:
        kind = inspect.Parameter
        parameters = [kind("self", kind.POSITIONAL_OR_KEYWORD)]
        for given in self.inputs:
            name = given.plural if batch and isinstance(given, Each) else given.name
            style = kind.POSITIONAL_OR_KEYWORD if given.positional else kind.KEYWORD_ONLY
            parameters.append(kind(name, style, default=given.default))
        for name in [*self._images(batch), "system_prompt"]:
            parameters.append(kind(name, kind.KEYWORD_ONLY, default=None))
        parameters.append(kind("fields", kind.VAR_KEYWORD))
        return inspect.Signature(parameters)

    def plan(
        self, judge: Any, args: Sequence[Any], kwargs: Mapping[str, Any], batch: bool
    ) -> tuple[list[dict[str, Any]], list[list[JudgeTask]]]:
        """A call's items and their tasks; every input is checked here, before any call.

        Args:
            judge: the judge whose task builders `ask` calls.
            args: the call's positional arguments, `self` left out.
            kwargs: the call's keyword arguments.
            batch: whether the call is of a batch form.

        Returns:
            The items (each its inputs and the call's settings, by name) and each item's
            tasks (none for an item settled without a call).
        """
        bound = self.signature(batch).bind(judge, *args, **kwargs)
        bound.apply_defaults()
        given = dict(bound.arguments)
        del given["self"]
        fields, system_prompt = given.pop("fields"), given.pop("system_prompt")
        columns = {
            each.plural: given.pop(each.plural) if batch else [given.pop(each.name)]
            for each in self._each
        }
        names = [each.name for each in self._each]
        if self.images:
            names.append("images")
            columns["item_images"] = (
                pick_item_images(given.pop("item_images"), given.pop("images_list"))
                if batch
                else [given.pop("images")]
            )
        rows = zip_items(**columns)
        given["custom_prompt"] = with_template_fields(given["custom_prompt"], fields)
        items = [dict(zip(names, row, strict=True), **given) for row in rows]
        tasks = [prompted(self.ask(judge, **item), system_prompt) for item in items]
        return items, tasks

    def dicts(
        self,
        items: list[dict[str, Any]],
        tasks: list[list[JudgeTask]],
        judgments: list[Judgment],
        model: str,
    ) -> list[dict[str, Any]]:
        """The dicts a call returns.

        Args:
            items: the call's items, as `plan` made them.
            tasks: each item's tasks, as `plan` made them.
            judgments: the judgments of all the tasks, in order.
            model: the judge's model, for the dicts of items without a call.

        Returns:
            One dict per item, in order.
        """
        flat: Iterator[Judgment] = iter(judgments)
        answered = []
        for item, own in zip(items, tasks, strict=True):
            mine = [next(flat) for _ in own]
            if self.answer is not None:
                answered.append(self.answer(item, mine, model))
            else:
                answered.append(mine[0].as_dict(self.result_key))
        return answered

    def _doc(self, batch: bool, awaitable: bool) -> str:
        summary = self.summary
        if batch:
            summary += (
                " Batch form: each input given per item is a list, one entry per item, and "
                "the items are judged as one batch."
            )
        if awaitable:
            summary += " Awaitable."
        args = [
            f"    {name}: {doc}"
            for name, doc in [
                *(
                    (given.plural, f"per item, {given.doc}")
                    if batch and isinstance(given, Each)
                    else (given.name, given.doc)
                    for given in self.inputs
                ),
                *((name, _ARGS[name]) for name in self._images(batch)),
                ("system_prompt", _ARGS["system_prompt"]),
                ("**fields", _ARGS["**fields"]),
            ]
        ]
        returns = f"One such dict per item, in order: {self.returns}" if batch else self.returns
        return "\n".join([summary, "", "Args:", *args, "", "Returns:", f"    {returns}"])

    def _method(self, batch: bool, awaitable: bool) -> Callable[..., Any]:
        def shaped(answered: list[dict[str, Any]]) -> Any:
            return answered if batch else answered[0]

        if awaitable:

            async def method(judge: Any, *args: Any, **kwargs: Any) -> Any:
                items, tasks = self.plan(judge, args, kwargs, batch)
                judgments = await judge.arun([task for own in tasks for task in own])
                return shaped(self.dicts(items, tasks, judgments, judge.model))

        else:

            def method(judge: Any, *args: Any, **kwargs: Any) -> Any:
                items, tasks = self.plan(judge, args, kwargs, batch)
                judgments = judge.run([task for own in tasks for task in own])
                return shaped(self.dicts(items, tasks, judgments, judge.model))

        method.__name__ = self.method_name(batch, awaitable)
        method.__doc__ = self._doc(batch, awaitable)
        method.__signature__ = self.signature(batch)  # type: ignore[attr-defined]
        return method

    def methods(self) -> dict[str, Callable[..., Any]]:
        """The four call forms, by method name."""
        return {
            self.method_name(batch, awaitable): self._method(batch, awaitable)
            for batch in (False, True)
            for awaitable in (False, True)
        }


def with_forms(*forms: CompatForm) -> Callable[[type], type]:
    """A class decorator putting the four call forms of each of `forms` on the class.

    Args:
        *forms: the calls; the class (a `Judge`, or a subclass adding calls of its own)
            provides `run`, `arun`, `model` and what their `ask` call.

    Returns:
        The decorator; the class's `forms` lists its base's calls, then these.
    """

    def install(cls: type) -> type:
        for form in forms:
            for name, method in form.methods().items():
                method.__qualname__ = f"{cls.__qualname__}.{name}"
                method.__module__ = cls.__module__
                setattr(cls, name, method)
        cls.forms = (*getattr(cls, "forms", ()), *forms)  # type: ignore[attr-defined]
        return cls

    return install
