"""Principles that steer each completion, their system prompts and the source weights.

UltraFeedback gave every completion one "principle" system prompt, drawn with weights that
depend on where the prompt came from, so that the completions of one prompt differ in
style as well as in model. The prompts below are our own wording of the same five ideas.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Real
from types import MappingProxyType

from llm_feedback.core.errors import ConfigError

HELPFULNESS = "helpfulness"
HONESTY = "honesty"
TRUTHFULNESS = "truthfulness"
VERBALIZED_CALIBRATION = "verbalized_calibration"
HARMLESSNESS = "harmlessness"

PRINCIPLES: tuple[str, ...] = (
    HELPFULNESS,
    HONESTY,
    TRUTHFULNESS,
    VERBALIZED_CALIBRATION,
    HARMLESSNESS,
)

SOURCES: tuple[str, ...] = (
    "evol_instruct",
    "false_qa",
    "flan",
    "sharegpt",
    "truthful_qa",
    "ultrachat",
)

# Several phrasings per principle, so that no single wording dominates a dataset.
SYSTEM_PROMPTS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        HELPFULNESS: (
            "You are a capable assistant. Give answers that are correct, complete and "
            "directly useful, and explain your reasoning when it helps the user act on it.",
            "Help the user as well as you can: understand what they actually need, answer "
            "it clearly, and add relevant detail or examples that make the answer easier "
            "to use.",
            "You are a knowledgeable guide. Keep your answers accurate and on topic, "
            "organise them so they are easy to follow, and make them engaging without "
            "padding.",
            "Aim for the most useful reply you can write: precise facts, concrete steps "
            "where steps are needed, and a short summary when the answer is long.",
        ),
        HONESTY: (
            "You are an honest assistant. When you are not sure of something, say so "
            "plainly instead of guessing, and never present a guess as a fact.",
            "Answer only what you actually know. If a question is outside your knowledge "
            "or cannot be answered from the information given, tell the user that rather "
            "than inventing an answer.",
            "Be candid about the limits of what you know. Point out which parts of your "
            "answer are certain and which are uncertain, and admit it when you do not "
            "know.",
        ),
        TRUTHFULNESS: (
            "You are a truthful assistant. State only what is supported by well-"
            "established facts, and do not make up names, numbers, quotes or sources.",
            "Check every claim before you make it. If the question assumes something that "
            "is not true, say that the assumption is wrong instead of answering as if it "
            "held.",
            "Stay faithful to reality and to the user's input: do not add details that "
            "were not asked for and cannot be verified, and correct misconceptions gently "
            "but clearly.",
        ),
        VERBALIZED_CALIBRATION: (
            "Answer the question, then finish with a line stating how confident you are "
            "in the answer as a percentage, for example 'Confidence: 70%'.",
            "After your answer, rate your own certainty on a scale from 0% to 100% and "
            "write it on its own final line as 'Confidence: N%'. Be realistic: lower the "
            "number when you are unsure.",
            "Give your best answer and express how sure you are. End with 'Confidence: "
            "N%', where N reflects how likely you think the answer is to be correct.",
        ),
        HARMLESSNESS: (
            "You are a careful assistant. Do not give advice or content that could hurt "
            "people, damage property or break the law, and suggest a safe alternative "
            "when you decline.",
            "Be respectful and considerate to everyone. Avoid offensive, discriminatory or "
            "dangerous content, and steer risky requests toward safe and constructive "
            "help.",
            "Put the user's wellbeing and the wellbeing of others first. Answer helpfully "
            "where it is safe to do so, and explain briefly why when it is not.",
        ),
    }
)

# Default source -> principle weights, the UltraFeedback recipe. Weights are relative;
# `validate_principle_weights` normalises each source to sum to 1.
DEFAULT_PRINCIPLE_WEIGHTS: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {
        "evol_instruct": MappingProxyType({HELPFULNESS: 1.0}),
        "false_qa": MappingProxyType({HONESTY: 0.5, TRUTHFULNESS: 0.5}),
        "flan": MappingProxyType({HELPFULNESS: 0.8, VERBALIZED_CALIBRATION: 0.2}),
        "sharegpt": MappingProxyType({HELPFULNESS: 0.6, TRUTHFULNESS: 0.2, HONESTY: 0.2}),
        "truthful_qa": MappingProxyType({HONESTY: 0.5, TRUTHFULNESS: 0.5}),
        "ultrachat": MappingProxyType({HELPFULNESS: 0.6, TRUTHFULNESS: 0.2, HONESTY: 0.2}),
    }
)

# Share of honesty draws that are turned into verbalized_calibration.
DEFAULT_VERBALIZED_CALIBRATION_RATE = 0.1


def validate_principle_weights(
    weights: Mapping[str, Mapping[str, float]] | None,
    parameter: str = "principle_weights",
) -> dict[str, dict[str, float]]:
    """Check a source -> {principle: weight} table and return it normalised per source.

    `None` means the default table. Every error names `parameter`, the source and, where
    relevant, the principle, so a typo in a parameters file is easy to find.

    Args:
        weights: source -> {principle: weight} (None: the default table).
        parameter: the parameter's name, for messages.

    Returns:
        The table, normalised per source.
    """
    if weights is None:
        weights = DEFAULT_PRINCIPLE_WEIGHTS
    if not isinstance(weights, Mapping) or not weights:
        raise ConfigError(
            f"{parameter} must be a non-empty mapping of source -> {{principle: weight}}, "
            f"got {weights!r}"
        )
    normalised: dict[str, dict[str, float]] = {}
    for source, source_weights in weights.items():
        if not isinstance(source, str) or not source.strip():
            raise ConfigError(
                f"{parameter}: source names must be non-empty strings, got {source!r}"
            )
        if not isinstance(source_weights, Mapping) or not source_weights:
            raise ConfigError(
                f"{parameter}[{source!r}] must be a non-empty mapping of principle -> weight, "
                f"got {source_weights!r}"
            )
        checked: dict[str, float] = {}
        for principle, weight in source_weights.items():
            where = f"{parameter}[{source!r}][{principle!r}]"
            if principle not in PRINCIPLES:
                raise ConfigError(
                    f"{where}: unknown principle; expected one of {', '.join(PRINCIPLES)}"
                )
            # bool is a Real in Python, but `true` as a weight is a config mistake.
            if isinstance(weight, bool) or not isinstance(weight, Real):
                raise ConfigError(f"{where}: weight must be a number, got {weight!r}")
            if not math.isfinite(weight) or weight < 0:
                raise ConfigError(f"{where}: weight must be finite and >= 0, got {weight!r}")
            checked[principle] = float(weight)
        total = sum(checked.values())
        if total <= 0:
            raise ConfigError(f"{parameter}[{source!r}]: all weights are zero")
        normalised[source] = {principle: w / total for principle, w in checked.items()}
    return normalised


def validate_calibration_rate(rate: float, parameter: str = "verbalized_calibration_rate") -> float:
    """Check the honesty -> verbalized_calibration rate is a probability.

    Args:
        rate: the rate.
        parameter: the parameter's name, for messages.

    Returns:
        The rate, as a float.
    """
    if isinstance(rate, bool) or not isinstance(rate, Real) or not 0.0 <= rate <= 1.0:
        raise ConfigError(f"{parameter} must be a number between 0 and 1, got {rate!r}")
    return float(rate)
