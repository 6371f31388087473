"""The inputs lmms-eval's judge calls pass that our own task builders spell differently.

A call's inputs are lists zipped item by item (`zip_items`: lists of different lengths are
an `InputError`, before any call). Extra keyword arguments are fields of the caller's
`custom_prompt` (`with_template_fields` fills them in before the judge fills its own, so
both are checked); a system prompt on the judge or the call replaces the kind's
(`with_system_prompt`, `prompted`); images may be raw bytes (`image_source` makes them a
data: URI, whose content is then checked like a file's); the batch forms take
`images_list` as well as `item_images` (`pick_item_images`).
"""

from __future__ import annotations

import base64
import dataclasses
import string
from collections.abc import Mapping, Sequence
from typing import Any

from llm_feedback.backends.contract import ChatRequest
from llm_feedback.backends.media import Media, sniff_format
from llm_feedback.core.errors import InputError
from llm_feedback.judges.judgment import JudgeTask
from llm_feedback.judges.requests import template_fields

_FORMATTER = string.Formatter()
_IMAGE_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}


def _escaped(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def zip_items(**columns: Sequence[Any] | None) -> list[tuple[Any, ...]]:
    """Zip a call's inputs item by item.

    Args:
        **columns: each input's list, one value per item; None stands for None in every item.

    Returns:
        One tuple per item, its values in the order of `columns`.
    """
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


def with_template_fields(custom_prompt: str | None, fields: Mapping[str, Any]) -> str | None:
    """`custom_prompt` with the caller's extra `fields` filled in and every other field left
    for the judge; each field given must be one the template uses (a misspelt keyword
    argument fails here, before any call). The values are the caller's own and are shown
    as given, not fenced.

    Args:
        custom_prompt: the caller's template (None: the kind's own).
        fields: the caller's extra template fields.

    Returns:
        The template with those fields filled in.

    Raises:
        InputError: a field the template does not use, or fields without a template.
    """
    if not fields:
        return custom_prompt
    names = ", ".join(sorted(fields))
    if custom_prompt is None:
        raise InputError(
            f"judge keyword arguments {names} are template fields: pass a "
            "custom_prompt that uses them"
        )
    unused = sorted(set(fields) - template_fields(custom_prompt))
    if unused:
        raise InputError(
            f"custom_prompt does not use the field {{{unused[0]}}} given as a keyword argument"
        )
    pieces = []
    for literal, name, spec, conversion in _FORMATTER.parse(custom_prompt):
        pieces.append(_escaped(literal))
        if name is None:
            continue
        field = "{" + ("!" + conversion if conversion else "") + (":" + spec if spec else "") + "}"
        if name in fields:
            pieces.append(_escaped(field.replace("{", "{0", 1).format(fields[name])))
        else:
            pieces.append(field.replace("{", "{" + name, 1))
    return "".join(pieces)


def with_system_prompt(request: ChatRequest, system_prompt: str | None) -> ChatRequest:
    """`request` with `system_prompt` in place of its system message.

    Args:
        request: the judge's request.
        system_prompt: the caller's system prompt (None: the request unchanged).

    Returns:
        The request.
    """
    if system_prompt is None:
        return request
    if not isinstance(system_prompt, str) or not system_prompt.strip():
        raise InputError(f"system_prompt must be a non-empty string, got {system_prompt!r}")
    messages = list(request.messages)
    if messages and messages[0]["role"] == "system":
        messages = messages[1:]
    return dataclasses.replace(
        request, messages=({"role": "system", "content": system_prompt}, *messages)
    )


def prompted(tasks: list[JudgeTask], system_prompt: str | None) -> list[JudgeTask]:
    """The tasks with the call's `system_prompt` in place of the judge's.

    Args:
        tasks: the judge's tasks.
        system_prompt: the call's system prompt (None: the tasks as built).

    Returns:
        The tasks.
    """
    if system_prompt is None:
        return tasks
    return [
        dataclasses.replace(task, request=with_system_prompt(task.request, system_prompt))
        for task in tasks
    ]


def image_source(image: str | bytes | Media) -> str | Media:
    """A path, URL, data: URI or `Media` as given; raw bytes as a data: URI (their format is
    then checked by content, like a file's).

    Args:
        image: the image as the caller gave it.

    Returns:
        What the judge's request takes.
    """
    if not isinstance(image, bytes | bytearray):
        return image
    mime = _IMAGE_TYPES.get(sniff_format(bytes(image)) or "", "application/octet-stream")
    return f"data:{mime};base64,{base64.b64encode(bytes(image)).decode('ascii')}"


def pick_item_images(item_images: Sequence[Any] | None, images_list: Sequence[Any] | None):
    """The batch's images per item, under either name (lmms-eval's `images_list`).

    Args:
        item_images: the images per item, by our name.
        images_list: the images per item, by lmms-eval's.

    Returns:
        Whichever was given (None: neither).

    Raises:
        InputError: both were given.
    """
    if item_images is not None and images_list is not None:
        raise InputError("pass the images per item as item_images or images_list, not both")
    return images_list if item_images is None else item_images
