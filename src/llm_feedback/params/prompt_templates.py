"""Which prompts a user may replace from `conf/` (the `prompt_templates` folder), and the
placeholders each must keep.

A folder of `.txt` files, each named as the package template it replaces
(`src/llm_feedback/templates/`), holds the main text and/or any named parts (`--- name ---`
lines); parts left out keep the package's text. Placeholders are `str.format` fields
(`{instruction}`; literal braces doubled). Replaceable files and what they take:

- `aspect.txt` (every aspect) or `aspect_<aspect>.txt` (one aspect, e.g.
  `aspect_honesty.txt`, where a rubric can be written out in full): main text takes
  {instruction} and {texts} (required), {texts_to_rate}, {title}, {focus}, {levels},
  {rubric_extras}, {reply_format}, {fencing_notice}, {optional_world_knowledge}; part
  `text` takes {text} (required) and {position}; `level` {level}, {meaning}; `type_codes`
  {type_question}, {codes}; `world_knowledge` {world_knowledge} (required); the reply
  layout parts `free_text_reply` {headers}, {type_lines}, {rating_hint}, `free_text_header`
  {k}, and the JSON ones as in the package file.
- `critique.txt`: main text takes {instruction} and {completion} (required), {focus},
  {reply}, {fencing_notice}, {optional_system_prompt}; part `system_prompt` takes
  {system_prompt} (required); parts `reply` / `json_reply` none.
- `rescore.txt` (the score fix's follow-up turn): main text takes {reply}.
- `system_aspect.txt`, `system_teacher.txt`: the judge's system prompts, no placeholders.
- `principles.txt`: the generation system prompts, one part per principle
  (`--- honesty ---`), phrasings separated by blank lines, sent as written (no
  placeholders); a principle left out keeps the package's phrasings.

The replies are read by the same parsers whatever the template asks for: ours ("### Text
k") and UltraFeedback's layout ("#### Output for Text k" with Rating / Rationale / Type
lines, N/A for honesty), or JSON under structured output.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from llm_feedback.annotation.aspects import ASPECTS
from llm_feedback.completions.principles import PRINCIPLES, SYSTEM_PROMPTS
from llm_feedback.core.errors import ConfigError
from llm_feedback.templates import check_template_folder, read_parts

PRINCIPLES_FILE = "principles"
REPLACEABLE = ("aspect", "critique", "rescore", "system_aspect", "system_teacher")
REQUIRED: Mapping[tuple[str, str], tuple[str, ...]] = MappingProxyType(
    {
        ("aspect", ""): ("instruction", "texts"),
        ("aspect", "text"): ("text",),
        ("aspect", "world_knowledge"): ("world_knowledge",),
        ("critique", ""): ("instruction", "completion"),
        ("critique", "system_prompt"): ("system_prompt",),
    }
)


def check_prompt_templates(folder: str | Path | None, parameter: str) -> str | None:
    """The folder as a string once every file in it has been checked (None: none given);
    ConfigError naming the parameter, the file, the part and the placeholder.

    Args:
        folder: the templates folder (None: none).
        parameter: the parameter that names it, for messages.

    Returns:
        The folder as a string, or None.
    """
    if folder is None:
        return None
    if not isinstance(folder, str | Path) or not str(folder).strip():
        raise ConfigError(f"{parameter} must be a folder path or null, got {folder!r}")
    try:
        # `aspect_<key>` for every aspect registered now (one added at run time included).
        variants = {"aspect": tuple(ASPECTS)}
        check_template_folder(folder, REPLACEABLE, REQUIRED, variants, (PRINCIPLES_FILE,))
        system_prompts(folder)
    except ConfigError as error:
        raise ConfigError(f"{parameter}: {error}") from None
    return str(folder)


def system_prompts(folder: str | Path | None) -> dict[str, tuple[str, ...]]:
    """The principles' generation system prompts: `principles.txt` of `folder` over ours
    (a plain dict: Kedro's MemoryDataset copies it).

    Args:
        folder: the templates folder (None: ours only).

    Returns:
        Principle -> its system prompts.
    """
    path = None if folder is None else Path(folder) / f"{PRINCIPLES_FILE}.txt"
    if path is None or not path.is_file():
        return dict(SYSTEM_PROMPTS)
    try:
        parts = read_parts(path.read_text(encoding="utf-8"), str(path))
    except LookupError as error:
        raise ConfigError(str(error)) from None
    if parts.pop("").strip():
        raise ConfigError(f"{path}: write each principle's prompts under '--- <principle> ---'")
    chosen = dict(SYSTEM_PROMPTS)
    for principle, text in parts.items():
        if principle not in PRINCIPLES:
            raise ConfigError(
                f"{path}: unknown principle {principle!r}; expected one of {', '.join(PRINCIPLES)}"
            )
        phrasings = tuple(p.strip() for p in text.split("\n\n") if p.strip())
        if not phrasings:
            raise ConfigError(f"{path} (part '{principle}'): no system prompt written")
        chosen[principle] = phrasings
    return chosen
