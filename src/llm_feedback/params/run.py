"""A whole run's parameters, checked before its first node: every block the selected
pipelines read, and the endpoints they will call."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm_feedback import params
from llm_feedback.params.reader import Block, defaults_of

if TYPE_CHECKING:
    from llm_feedback.backends import EndpointConfig
    from llm_feedback.params import (
        AnnotateParams,
        EvaluateParams,
        GenerateParams,
        ReportParams,
        SampleParams,
    )

RUN_OPTION_KEYS = ("plan_only", "max_cost_usd")


@dataclass(frozen=True)
class RunOptions:
    """Top-level parameters about the run as a whole."""

    # Print and save the priced plan (calls, tokens, cost) and call nothing.
    plan_only: bool = False
    # A run whose plan is estimated above this many USD stops before its first call.
    max_cost_usd: float | None = None


def parse_run_options(parameters: Mapping[str, Any]) -> RunOptions:
    """Read the top-level run options (`plan_only`, `max_cost_usd`).

    Args:
        parameters: all of the run's parameters.

    Returns:
        The options.
    """
    present = {key: parameters[key] for key in RUN_OPTION_KEYS if key in parameters}
    block = Block(present, "", RUN_OPTION_KEYS, defaults_of(RunOptions))
    return RunOptions(
        plan_only=block.boolean("plan_only"),
        max_cost_usd=block.number("max_cost_usd", minimum=0, nullable=True),
    )


@dataclass(frozen=True)
class CheckedRun:
    """Every block a run reads, parsed once before its first node (None: not read)."""

    sample: SampleParams | None = None
    generate: GenerateParams | None = None
    annotate: AnnotateParams | None = None
    evaluate: EvaluateParams | None = None
    report: ReportParams | None = None

    @property
    def endpoints(self) -> list[EndpointConfig]:
        """The endpoints the run will call, each once, in the order the pipelines use them."""
        used: dict[str, EndpointConfig] = {}
        if self.generate is not None:
            used.update((spec.endpoint.name, spec.endpoint) for spec in self.generate.pool.values())
        if self.annotate is not None:
            used.setdefault(self.annotate.endpoint.name, self.annotate.endpoint)
        if self.evaluate is not None:
            if self.evaluate.evaluator is None:  # an evaluator scores in place of the judges
                for judge in self.evaluate.judges.values():
                    used.setdefault(judge.endpoint.name, judge.endpoint)
            generators = self.evaluate.generate_with
            if isinstance(generators, Mapping):
                generators = list(generators.values())
            for generator in generators if isinstance(generators, list) else [generators]:
                if generator is not None:
                    used.setdefault(generator.name, generator)
        return list(used.values())


def describe_pool(checked: CheckedRun) -> str | None:
    """The model pool a run draws from, as one line for the run log and the plan.

    Args:
        checked: the run's parsed blocks.

    Returns:
        "Model pool (N): name (endpoint: model), ..." (names only when the run samples but
        does not generate), or None when the run reads no pool.
    """
    if checked.generate is not None:
        models = [
            f"{name} ({spec.endpoint.name}: {spec.endpoint.model})"
            for name, spec in checked.generate.pool.items()
        ]
    elif checked.sample is not None:
        models = list(checked.sample.models)
    else:
        return None
    return f"Model pool ({len(models)}): {', '.join(models)}"


def check_run(parameters: Mapping[str, Any], blocks: Iterable[str]) -> CheckedRun:
    """Parse each block the run reads (`blocks`: parameter names such as "annotate").

    Args:
        parameters: all of the run's parameters.
        blocks: the blocks the run reads.

    Returns:
        Each block parsed (None: not read).
    """
    blocks = set(blocks)
    endpoints = parameters.get("endpoints")

    def parsed(name: str, parser: str, *arguments: Any) -> Any:
        # Looked up by name: only the parsers of the blocks read are imported (params/).
        return getattr(params, parser)(*arguments) if name in blocks else None

    return CheckedRun(
        sample=parsed(
            "sample",
            "parse_sample",
            parameters.get("sample"),
            parameters.get("model_pool"),
            parameters.get("prompt_templates"),
        ),
        generate=parsed(
            "generation",
            "parse_generate",
            endpoints,
            parameters.get("model_pool"),
            parameters.get("generation"),
        ),
        annotate=parsed(
            "annotate",
            "parse_annotate",
            parameters.get("annotate"),
            endpoints,
            parameters.get("prompt_templates"),
        ),
        evaluate=parsed("evaluate", "parse_evaluate", parameters.get("evaluate"), endpoints),
        report=parsed("report", "parse_report", parameters.get("report")),
    )
