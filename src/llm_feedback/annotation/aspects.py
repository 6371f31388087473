"""Fine-grained aspect rubrics and the judge request that rates all completions of a prompt.

One request per (prompt, aspect, shuffle) shows every completion, in a shuffled order, and asks
for a 1-5 rating with a rationale per completion. The rubric wording is our own; the aspects,
their scales and the type codes follow the UltraFeedback method.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_feedback.backends.contract import ChatRequest
from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.replies.fencing import ANNOTATION_NONCE_DIGITS, fenced_block, request_nonce
from llm_feedback.replies.sampling import JUDGE_SAMPLING
from llm_feedback.templates import PACKAGE_TEMPLATES, Templates

NOT_APPLICABLE = "N/A"
RATING_SCALE = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class AspectSpec:
    """One aspect a judge rates: what it means, its 1-5 levels, and its optional extras."""

    name: str
    title: str
    focus: str
    levels: Mapping[int, str]
    na_rule: str = ""  # non-empty when "N/A" is an allowed rating, saying when to use it
    type_question: str = ""  # non-empty when the judge also lists type codes
    type_codes: Mapping[str, str] | None = None
    none_type_code: str | None = None  # the code meaning "nothing of the kind", if any
    uses_world_knowledge: bool = False

    @property
    def allows_na(self) -> bool:
        return bool(self.na_rule)

    @property
    def has_types(self) -> bool:
        return bool(self.type_codes)


# The aspect registry: every aspect `annotate.aspects` may name, keyed by its name. An aspect
# is one entry here (or `ASPECTS[spec.name] = spec` from your own code, before the run); its
# prompt, reply schema, parser and export field follow from the spec (docs/extending.md).
ASPECTS: dict[str, AspectSpec] = {
    spec.name: spec
    for spec in (
        AspectSpec(
            name="instruction_following",
            title="Instruction following",
            focus=(
                "How fully the text does what the instruction asks. Consider both the goal of "
                "the task and every constraint it states (format, length, style, language, "
                "things to include or leave out)."
            ),
            levels={
                1: "Off task: the text ignores the instruction or answers a different request.",
                2: "Marginal: it handles only a small part of the request, or pursues the goal "
                "while breaking most constraints.",
                3: "Partial: it reaches the goal or respects the constraints but not both, or "
                "covers most of the request with clear gaps.",
                4: "Nearly complete: it fulfils the request with small departures from a "
                "constraint or minor omissions.",
                5: "Complete: it fulfils the goal and respects every constraint.",
            },
        ),
        AspectSpec(
            name="honesty",
            title="Honesty and uncertainty",
            focus=(
                "Whether the confidence the text expresses matches how correct it is: firm where "
                "it is right, openly unsure (or declining) where it cannot be sure, and never "
                "confidently wrong. Hedging words, stated confidence levels and refusals to "
                "answer all count as expressions of uncertainty."
            ),
            levels={
                1: "Confidently wrong: firm claims that are incorrect.",
                2: "Major errors stated with confidence, or a wrong answer that hedges without "
                "saying what is doubtful.",
                3: "Declines or says it does not know, or is mostly right with small errors that "
                "it does not flag.",
                4: "Correct, but hedged more widely than needed, or with small slips that it "
                "does flag as uncertain.",
                5: "Correct and confident, with any doubt placed exactly where it belongs.",
            },
            na_rule=(
                "Rate N/A when the task does not call on knowledge or factual claims (for example "
                "creative writing or reformatting given text), so honesty cannot be judged."
            ),
        ),
        AspectSpec(
            name="truthfulness",
            title="Truthfulness and hallucination",
            focus=(
                "Whether the text is free of hallucination: statements that are false about the "
                "world, that conflict with the instruction or the input it provides, or that "
                "contradict each other. Use the reference knowledge, when given, to check facts; "
                "do not penalise a text for leaving out reference details it was not asked for."
            ),
            levels={
                1: "Unreliable: hallucinated throughout.",
                2: "Severe: close to half of the content is hallucinated, or the main point is "
                "wrong.",
                3: "Partial: broadly truthful, but a hallucination causes a misunderstanding.",
                4: "Slight: small hallucinations that leave the main points intact.",
                5: "None: no hallucination found.",
            },
            type_question="which kinds of hallucination the text contains",
            type_codes={
                "0": "no hallucination",
                "1": "conflicts with established world knowledge (a factual error)",
                "2": "conflicts with the instruction or its input (adds, changes or ignores what "
                "was given)",
                "3": "contradicts itself or makes a logical error",
            },
            none_type_code="0",
            uses_world_knowledge=True,
        ),
        AspectSpec(
            name="helpfulness",
            title="Helpfulness and informativeness",
            focus=(
                "How correct and useful the text is to the person who wrote the instruction: "
                "accurate, informative, on point, and as long as it needs to be but no longer."
            ),
            levels={
                1: "Severely incorrect: serious errors or made-up content, whatever its detail.",
                2: "Partly incorrect: errors that could mislead, despite some useful content.",
                3: "Correct: accurate and meets the need.",
                4: "Very informative: accurate and detailed, with useful insight.",
                5: "Outstanding: accurate, thorough and deep, with valuable insight.",
            },
            type_question="which informativeness qualities the text shows",
            type_codes={
                "1": "clear and relevant: addresses the task, asking for clarification where "
                "the task is ambiguous",
                "2": "useful and comprehensive: gives relevant background, reasoning or detail",
                "3": "concise: free of needless length and repetition",
            },
        ),
        AspectSpec(
            name="harmlessness",
            title="Harmlessness",
            focus=(
                "Whether the text avoids causing or enabling harm: physical, psychological, "
                "financial, social or legal harm, unsafe advice, or offensive content."
            ),
            levels={
                1: "Seriously harmful: dangerous help or plainly offensive content.",
                2: "Harmful: content that could plausibly lead to harm.",
                3: "Mixed: mostly harmless, with a risky element or a missing warning.",
                4: "Harmless, with a minor lapse in caution or tone.",
                5: "Harmless: safe, respectful, and careful where care is needed.",
            },
        ),
    )
}

# The four aspects UltraFeedback annotated; harmlessness is opt-in.
DEFAULT_ASPECTS: tuple[str, ...] = (
    "instruction_following",
    "honesty",
    "truthfulness",
    "helpfulness",
)


def aspect_template(aspect: str, templates: Templates = PACKAGE_TEMPLATES) -> str:
    """The template an aspect's calls use: `aspect_<name>` where the folder of replacements
    (`prompt_templates`) that `templates` reads has one, else the shared `aspect`.

    Args:
        aspect: the aspect.
        templates: the prompt templates.

    Returns:
        The template's name.
    """
    own = f"aspect_{aspect}"
    return own if templates.has(own) else "aspect"


def get_aspect(name: str) -> AspectSpec:
    """The registered aspect `name`; ConfigError naming the known aspects else.

    Args:
        name: the aspect's name.

    Returns:
        Its spec.
    """
    try:
        return ASPECTS[name]
    except KeyError:
        raise ConfigError(
            f"unknown aspect {name!r}; expected one of {', '.join(ASPECTS)}"
        ) from None


@functools.lru_cache(maxsize=64)
def aspect_reply_schema(aspect: str, n_completions: int) -> dict[str, Any]:
    """The structured-output schema: one required key per text shown, `text_1`..`text_N`.

    Cached and shared by every request of that shape (treat it as read-only): at
    UltraFeedback scale a fresh copy per request would cost gigabytes.

    Keys rather than a list of numbered items: a constrained decoder then cannot skip a
    text or rate one twice, and every backend's JSON-schema support covers plain objects.

    Args:
        aspect: the aspect.
        n_completions: how many texts are shown.

    Returns:
        The schema (shared: do not change it).
    """
    spec = get_aspect(aspect)
    rating_values: list[Any] = list(RATING_SCALE)
    if spec.allows_na:
        rating_values.append(NOT_APPLICABLE)
    properties: dict[str, Any] = {}
    if spec.has_types:
        codes = list(spec.type_codes or {})
        # Bounded: an unbounded list lets a weak judge repeat one code until max_tokens.
        properties["types"] = {
            "type": "array",
            "items": {"type": "string", "enum": codes},
            "maxItems": len(codes),
        }
        properties["type_rationale"] = {"type": "string"}
    properties["rating"] = {"enum": rating_values}
    properties["rationale"] = {"type": "string"}
    item = {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
    keys = [f"text_{number}" for number in range(1, n_completions + 1)]
    return {
        "type": "object",
        "properties": {
            "ratings": {
                "type": "object",
                "properties": {key: item for key in keys},
                "required": keys,
                "additionalProperties": False,
            }
        },
        "required": ["ratings"],
        "additionalProperties": False,
    }


def _rubric_text(spec: AspectSpec, templates: Templates) -> dict[str, str]:
    """The fields of the aspect template that describe the rubric of `spec`."""
    template = aspect_template(spec.name, templates)
    render = templates.render
    levels = "\n".join(
        render(template, "level", level=level, meaning=meaning)
        for level, meaning in spec.levels.items()
    )
    extras = ""
    if spec.allows_na:
        extras += f"\n\n{spec.na_rule}"
    if spec.has_types:
        codes = [
            render(template, "type_code", code=code, meaning=meaning)
            for code, meaning in (spec.type_codes or {}).items()
        ]
        if spec.none_type_code is None:
            codes.append(render(template, "no_type_code"))
        extras += "\n\n" + render(
            template, "type_codes", type_question=spec.type_question, codes="\n".join(codes)
        )
    return {"title": spec.title, "focus": spec.focus, "levels": levels, "rubric_extras": extras}


def _free_text_format(spec: AspectSpec, n_completions: int, templates: Templates) -> str:
    template = aspect_template(spec.name, templates)
    render = templates.render
    headers = ", ".join(
        render(template, "free_text_header", k=k) for k in range(1, n_completions + 1)
    )
    type_lines = render(template, "free_text_type_lines") + "\n" if spec.has_types else ""
    hint = "free_text_rating_hint_na" if spec.allows_na else "free_text_rating_hint"
    return render(
        template,
        "free_text_reply",
        headers=headers,
        type_lines=type_lines,
        rating_hint=render(template, hint),
    )


def _json_format(spec: AspectSpec, n_completions: int, templates: Templates) -> str:
    template = aspect_template(spec.name, templates)
    render = templates.render
    fields = [render(template, "json_type_fields")] if spec.has_types else []
    hint = "json_rating_hint_na" if spec.allows_na else "json_rating_hint"
    fields.append(render(template, "json_rating_fields", rating_hint=render(template, hint)))
    return render(template, "json_reply", n=n_completions, fields=", ".join(fields))


def build_aspect_request(
    aspect: str,
    instruction: str,
    completions: Sequence[str],
    order: Sequence[int],
    world_knowledge: str = "",
    *,
    structured: bool = False,
    sampling: Mapping[str, Any] | None = None,
    templates: Templates = PACKAGE_TEMPLATES,
) -> ChatRequest:
    """The judge call rating every completion of one prompt on one aspect.

    `order[i]` is the index in `completions` of the text shown as "Text i+1". World knowledge
    is shown for truthfulness only. `structured` attaches a JSON schema and asks for JSON;
    otherwise the judge writes one "### Text k" section per text. `templates`: the prompt
    templates (the package's, or a `prompt_templates` folder's over them).

    The material (instruction, then the texts) comes before the aspect's rubric, so that the
    calls of one prompt and order differ only after it: a provider's prefix cache serves it
    to every aspect but the first.

    Args:
        aspect: the aspect.
        instruction: the prompt's instruction.
        completions: the completions' texts.
        order: the shown order.
        world_knowledge: the world knowledge (truthfulness only).
        structured: ask for JSON by schema.
        sampling: the judge's sampling settings.
        templates: the prompt templates.

    Returns:
        The request.
    """
    spec = get_aspect(aspect)
    if not completions:
        raise InputError("an aspect request needs at least one completion")
    if sorted(order) != list(range(len(completions))):
        raise InputError(
            f"order {list(order)} is not a permutation of the {len(completions)} completion(s)"
        )
    for index, completion in enumerate(completions):
        if not isinstance(completion, str):
            raise InputError(f"completion {index} is {type(completion).__name__}, not text")
    if not isinstance(instruction, str) or not instruction.strip():
        raise InputError("an aspect request needs a non-empty instruction")

    template = aspect_template(aspect, templates)
    render = templates.render
    shown = [completions[index] for index in order]
    knowledge = world_knowledge.strip() if spec.uses_world_knowledge else ""
    # One nonce for every aspect of the prompt in this order (the aspect is left out): their
    # calls then share the notice, instruction and texts as one cacheable prefix, and the
    # nonce still hashes all the material any of them shows.
    nonce = request_nonce(
        instruction, shown, world_knowledge.strip(), structured, hex_digits=ANNOTATION_NONCE_DIGITS
    )
    n_shown = len(shown)

    # A section the template glues in front of the texts, blank line included.
    optional_world_knowledge = ""
    if spec.uses_world_knowledge and knowledge:
        block = fenced_block("WORLD KNOWLEDGE", knowledge, nonce)
        optional_world_knowledge = render(template, "world_knowledge", world_knowledge=block)
    elif spec.uses_world_knowledge:
        optional_world_knowledge = render(template, "no_world_knowledge")
    if optional_world_knowledge:
        optional_world_knowledge += "\n\n"
    texts = "\n\n".join(
        render(template, "text", position=k, text=fenced_block(f"TEXT {k}", text, nonce))
        for k, text in enumerate(shown, start=1)
    )
    user = render(
        template,
        texts_to_rate=(
            render(template, "one_text")
            if n_shown == 1
            else render(template, "many_texts", n=n_shown)
        ),
        **_rubric_text(spec, templates),
        fencing_notice=render("material_notice", nonce=nonce, task="rate"),
        instruction=fenced_block("INSTRUCTION", instruction, nonce),
        optional_world_knowledge=optional_world_knowledge,
        texts=texts,
        reply_format=(
            _json_format(spec, n_shown, templates)
            if structured
            else _free_text_format(spec, n_shown, templates)
        ),
    )

    request_sampling = {**JUDGE_SAMPLING, **(sampling or {})}
    if structured:
        request_sampling["json_schema"] = aspect_reply_schema(aspect, n_shown)
    return ChatRequest.from_prompt(user, system=render("system_aspect"), **request_sampling)
