"""A whole run's parameters, checked before its first node: every block the selected
pipelines read, and the endpoints they will call."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from llm_feedback.backends import EndpointConfig
from llm_feedback.params.annotate import parse_annotate
from llm_feedback.params.evaluate import parse_evaluate
from llm_feedback.params.generate import parse_generate
from llm_feedback.params.reader import Block, defaults_of
from llm_feedback.params.report import parse_report
from llm_feedback.params.sample import parse_sample

RUN_OPTION_KEYS = ("plan_only", "max_cost_usd")


@dataclass(frozen=True)
class RunOptions:
    """Top-level parameters about the run as a whole."""

    # Print and save the priced plan (calls, tokens, cost) and call nothing.
    plan_only: bool = False
    # A run whose plan is estimated above this many USD stops before its first call.
    max_cost_usd: float | None = None


def parse_run_options(parameters: Mapping[str, Any]) -> RunOptions:
    present = {key: parameters[key] for key in RUN_OPTION_KEYS if key in parameters}
    block = Block(present, "", RUN_OPTION_KEYS, defaults_of(RunOptions))
    return RunOptions(
        plan_only=block.boolean("plan_only"),
        max_cost_usd=block.number("max_cost_usd", minimum=0, nullable=True),
    )


def check_run(parameters: Mapping[str, Any], blocks: Iterable[str]) -> list[EndpointConfig]:
    """Parse each block the run reads (`blocks`: parameter names such as "annotate");
    return the endpoints the run will call, each once, in the order the pipelines use them."""
    blocks = set(blocks)
    endpoints = parameters.get("endpoints")
    used: dict[str, EndpointConfig] = {}
    if "sample" in blocks:
        parse_sample(
            parameters.get("sample"),
            parameters.get("model_pool"),
            parameters.get("prompt_templates"),
        )
    if "generation" in blocks:
        pool = parse_generate(
            endpoints, parameters.get("model_pool"), parameters.get("generation")
        ).pool
        used.update((spec.endpoint.name, spec.endpoint) for spec in pool.values())
    if "annotate" in blocks:
        judge = parse_annotate(
            parameters.get("annotate"), endpoints, parameters.get("prompt_templates")
        ).endpoint
        used.setdefault(judge.name, judge)
    if "evaluate" in blocks:
        evaluate = parse_evaluate(parameters.get("evaluate"), endpoints)
        if evaluate.evaluator is None:  # an evaluator scores in place of the judges
            for judge in evaluate.judges.values():
                used.setdefault(judge.endpoint.name, judge.endpoint)
        generators = evaluate.generate_with
        for generator in (
            generators.values()
            if isinstance(generators, Mapping)
            else [generators]
            if generators
            else []
        ):
            used.setdefault(generator.name, generator)
    if "report" in blocks:
        parse_report(parameters.get("report"))
    return list(used.values())
