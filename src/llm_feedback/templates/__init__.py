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

The functions above read the package's templates only. A folder of replacements (the
`prompt_templates` parameter) is read through a `Templates` object made for it and passed
to whatever renders the prompts it may replace (the annotate stages' request builders):

    templates = Templates("conf/base/templates/ultrafeedback_layout")
    templates.render("aspect", "level", level=5, meaning="...")

A file there named as a package template replaces the parts it holds (the main text and/or
named parts; parts it leaves out keep the package's text). A file `<family>_<key>.txt`
(e.g. `aspect_honesty.txt`) replaces `<family>.txt` for one key only.
`check_template_folder` reads every file before any call: a part the package template does
not have, a placeholder the code does not fill in, or a required one that is missing
fails, naming the file, the part and the placeholder.
"""

from __future__ import annotations

import re
import string
from collections.abc import Collection, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from llm_feedback.core.errors import ConfigError

__all__ = [
    "PACKAGE_TEMPLATES",
    "Templates",
    "check_template_folder",
    "has_template",
    "load_template",
    "read_parts",
    "render",
    "template_fields",
    "template_names",
]

_NAME = re.compile(r"[a-z0-9_]+")
_PART_LINE = re.compile(r"--- (?P<name>[a-z0-9_]+) ---")


def read_parts(text: str, where: str) -> dict[str, str]:
    """The main text ("") and the named parts of a template file's text.

    Args:
        text: the file's text.
        where: the file, named in errors.

    Returns:
        Part name -> text.
    """
    parts: dict[str, list[str]] = {"": []}
    current = ""
    for line in text.split("\n"):
        match = _PART_LINE.fullmatch(line)
        if match is None:
            parts[current].append(line)
            continue
        current = match["name"]
        if current in parts:
            raise LookupError(f"template {where} has two parts named {current!r}")
        parts[current] = []
    return {part: "\n".join(lines).strip("\n") for part, lines in parts.items()}


def _package_file(name: str) -> Any:
    return resources.files(__package__).joinpath(f"{name}.txt")


def _family(name: str) -> str:
    """The package template that `name` is (`aspect`) or is a per-key variant of
    (`aspect_honesty`); LookupError when there is none."""
    if not _NAME.fullmatch(name):
        raise LookupError(f"template names are lower-case words, got {name!r}")
    if _package_file(name).is_file():
        return name
    family = name.split("_", 1)[0]
    if family != name and _package_file(family).is_file():
        return family
    raise LookupError(f"no prompt template {name!r} in {__package__}")


class Templates:
    """The package's prompt templates, with the replacements of `folder` over them (None:
    the package's only). Each object reads a file once: make one per folder and pass it to
    what renders prompts (its parts and lookups are cached with it)."""

    def __init__(self, folder: str | Path | None = None) -> None:
        """Read nothing yet: each file is read when first asked for.

        Args:
            folder: the folder of replacements (None: the package's templates only).
        """
        self.folder = None if folder is None else Path(folder)
        self._parts: dict[str, dict[str, str]] = {}
        # Lookups that failed too: a missing variant (`aspect_honesty`) is asked for by
        # every aspect call, and would otherwise stat the files each time.
        self._has: dict[str, bool] = {}

    def __repr__(self) -> str:
        return f"Templates({None if self.folder is None else str(self.folder)!r})"

    def parts(self, name: str) -> dict[str, str]:
        """The main text ("") and named parts of template `name`, replacements applied;
        LookupError when there is no such template.

        Args:
            name: the template's name.

        Returns:
            Part name -> text.
        """
        if name not in self._parts:
            self._parts[name] = self._read(name)
        return self._parts[name]

    def _read(self, name: str) -> dict[str, str]:
        family = _family(name)
        folder = self.folder
        if family == name or folder is not None and (folder / f"{name}.txt").is_file():
            parts = read_parts(_package_file(family).read_text(encoding="utf-8"), repr(family))
        else:
            raise LookupError(f"no prompt template {name!r} in {__package__}")
        if folder is not None:
            for candidate in dict.fromkeys((family, name)):
                replacement = folder / f"{candidate}.txt"
                if replacement.is_file():
                    replaced = read_parts(replacement.read_text(encoding="utf-8"), str(replacement))
                    # A file of named parts only leaves the main text as it was.
                    parts.update({part: text for part, text in replaced.items() if part or text})
        return parts

    def has(self, name: str) -> bool:
        """Whether `name` (a package template or, in the folder, a variant) exists.

        Args:
            name: the template's name.

        Returns:
            True when it exists.
        """
        if name not in self._has:
            try:
                self.parts(name)
            except LookupError:
                self._has[name] = False
            else:
                self._has[name] = True
        return self._has[name]

    def load(self, name: str, part: str = "") -> str:
        """The text of template `name` (its main text, or its part `part`).

        Args:
            name: the template's name.
            part: the part ("": the main text).

        Returns:
            The text; LookupError when there is no such part.
        """
        parts = self.parts(name)
        try:
            return parts[part]
        except KeyError:
            raise LookupError(f"template {name!r} has no part {part!r}") from None

    def render(self, name: str, part: str = "", /, **values: object) -> str:
        """`load(name, part)` filled in with `values` by `str.format`.

        Args:
            name: the template's name.
            part: the part ("": the main text).
            **values: the placeholders' values.

        Returns:
            The rendered text.
        """
        return self.load(name, part).format_map(values)


# The package's templates, without replacements: what the module functions read.
PACKAGE_TEMPLATES = Templates()


def has_template(name: str) -> bool:
    """Whether the package has template `name`.

    Args:
        name: the template's name.

    Returns:
        True when it exists.
    """
    return PACKAGE_TEMPLATES.has(name)


def template_fields(text: str) -> set[str]:
    """The placeholder names of a `str.format` template; ValueError when it is malformed.

    Args:
        text: the template's text.

    Returns:
        The names.
    """
    return {
        re.split(r"[.\[]", field, maxsplit=1)[0]
        for _, field, _, _ in string.Formatter().parse(text)
        if field is not None
    }


def check_template_folder(
    folder: str | Path,
    replaceable: Collection[str],
    required: Mapping[tuple[str, str], Collection[str]],
    keys: Mapping[str, Collection[str]],
    owned_elsewhere: Collection[str] = (),
) -> list[str]:
    """Check every `*.txt` file of `folder` against the package template it replaces.

    `replaceable`: the families that may be replaced; `required`: per (family, part) the
    placeholders a replacement must keep; `keys`: per family the allowed variant keys
    (`aspect_<key>`); `owned_elsewhere`: file names another module checks. Returns the
    names of the files found; ConfigError naming file, part and placeholder otherwise.

    Args:
        folder: the folder of replacements.
        replaceable: the families that may be replaced.
        required: per (family, part) the placeholders a replacement must keep.
        keys: per family the allowed variant keys.
        owned_elsewhere: file names another module checks.

    Returns:
        The names of the files found.
    """
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(f"prompt_templates: {root} is not a folder")
    found = []
    for path in sorted(root.glob("*.txt")):
        name = path.stem
        found.append(name)
        if name in owned_elsewhere:
            continue
        try:
            family = _family(name)
        except LookupError:
            family = None
        key = name[len(family) + 1 :] if family and family != name else None
        if family not in replaceable or (key is not None and key not in keys.get(family, ())):
            variants = [f"{f}_<{'|'.join(keys[f])}>" for f in replaceable if keys.get(f)]
            names = sorted([*replaceable, *variants, *owned_elsewhere])
            raise ConfigError(
                f"{path}: not a template that can be replaced; file names: {', '.join(names)}"
            )
        package = read_parts(_package_file(family).read_text(encoding="utf-8"), repr(family))
        try:
            parts = read_parts(path.read_text(encoding="utf-8"), str(path))
        except LookupError as error:
            raise ConfigError(str(error)) from None
        for part, text in parts.items():
            where = f"{path}" + (f" (part '{part}')" if part else " (main text)")
            if part not in package:
                raise ConfigError(
                    f"{where}: {family}.txt has no such part; parts: "
                    + ", ".join(sorted(p for p in package if p))
                )
            if part == "" and not text.strip():
                continue  # only named parts replaced: the main text stays the package's
            try:
                fields = template_fields(text)
            except ValueError as error:
                raise ConfigError(f"{where}: malformed placeholder ({error})") from None
            allowed = template_fields(package[part])
            for field in sorted(fields - allowed):
                takes = ", ".join(f"{{{f}}}" for f in sorted(allowed)) or "no placeholders"
                raise ConfigError(f"{where}: unknown placeholder {{{field}}}; it takes {takes}")
            for field in sorted(set(required.get((family, part), ())) - fields):
                raise ConfigError(f"{where}: missing placeholder {{{field}}}")
    return found


def load_template(name: str, part: str = "") -> str:
    """The text of the package's `templates/<name>.txt` (its main text, or its part
    `part`); cached.

    Args:
        name: the template's name.
        part: the part ("": the main text).

    Returns:
        The text.
    """
    return PACKAGE_TEMPLATES.load(name, part)


def render(name: str, part: str = "", /, **values: object) -> str:
    """`load_template(name, part)` filled in with `values` by `str.format`.

    Args:
        name: the template's name.
        part: the part ("": the main text).
        **values: the placeholders' values.

    Returns:
        The rendered text.
    """
    return PACKAGE_TEMPLATES.render(name, part, **values)


def template_names() -> list[str]:
    """The names of every template file shipped with the package."""
    return sorted(
        entry.name.removesuffix(".txt")
        for entry in resources.files(__package__).iterdir()
        if entry.name.endswith(".txt")
    )
