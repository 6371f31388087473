"""Prompt templates: one text file per judgment kind, shipped with the package.

Every template is a Python `str.format` template (the syntax user-supplied `custom_prompt`
templates use too): `{field}` is filled in, literal braces are doubled (`{{`, `}}`). The text
is sent exactly as written; lines are never re-wrapped, so a paragraph is one long line.

A file may hold named parts besides its main text. A line `--- name ---` starts the part
`name`, which runs to the next such line or to the end of the file; the main text is what
comes before the first part line. Blank lines at the start and end of a part (or of the main
text) are not part of it; spaces are kept as written.

    load_template("binary")               # the main text of binary.txt
    load_template("binary", "reply_0_1")  # its part "reply_0_1"
    render("fencing_notice", nonce="0123456789ab", task="rate")
"""

from __future__ import annotations

import functools
import re
from importlib import resources

__all__ = ["load_template", "render", "template_names"]

_NAME = re.compile(r"[a-z0-9_]+")
_PART_LINE = re.compile(r"--- (?P<name>[a-z0-9_]+) ---")


@functools.cache
def _parts(name: str) -> dict[str, str]:
    if not _NAME.fullmatch(name):
        raise LookupError(f"template names are lower-case words, got {name!r}")
    resource = resources.files(__package__).joinpath(f"{name}.txt")
    if not resource.is_file():
        raise LookupError(f"no prompt template {name!r} in {__package__}")
    parts: dict[str, list[str]] = {"": []}
    current = ""
    for line in resource.read_text(encoding="utf-8").split("\n"):
        match = _PART_LINE.fullmatch(line)
        if match is None:
            parts[current].append(line)
            continue
        current = match["name"]
        if current in parts:
            raise LookupError(f"template {name!r} has two parts named {current!r}")
        parts[current] = []
    return {part: "\n".join(lines).strip("\n") for part, lines in parts.items()}


def load_template(name: str, part: str = "") -> str:
    """The text of `templates/<name>.txt` (its main text, or its part `part`); cached."""
    parts = _parts(name)
    try:
        return parts[part]
    except KeyError:
        raise LookupError(f"template {name!r} has no part {part!r}") from None


def render(name: str, part: str = "", /, **values: object) -> str:
    """`load_template(name, part)` filled in with `values` by `str.format`."""
    return load_template(name, part).format_map(values)


def template_names() -> list[str]:
    """The names of every template file shipped with the package."""
    return sorted(
        entry.name.removesuffix(".txt")
        for entry in resources.files(__package__).iterdir()
        if entry.name.endswith(".txt")
    )
