"""`params:evaluate` onto `EvaluateParams` (`llm_feedback.evaluation.config`): the judge or
panel and the generators resolved against `endpoints`, judge prompt files read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from llm_feedback.backends import EndpointConfig
from llm_feedback.backends.endpoints import resolve_endpoint
from llm_feedback.core.errors import ConfigError
from llm_feedback.evaluation.config import EvalIntervalParams, EvalRankingParams, EvaluateParams
from llm_feedback.params.judge import parse_judge
from llm_feedback.params.panel import parse_panel
from llm_feedback.params.reader import Block, defaults_of
from llm_feedback.params.report import parse_requirements

__all__ = ["EvaluateParams", "parse_evaluate"]

DEFAULT_JUDGE = {"endpoint": "local"}


def _judge_prompts(prompts: Any) -> Any:
    """{category: template}; a value with a {field} is the template itself, any other value
    names a template file (relative to the project folder), read here."""
    if not isinstance(prompts, Mapping):
        return prompts  # EvaluateParams names the problem
    templates = {}
    for category, value in prompts.items():
        templates[category] = value
        if isinstance(value, str) and "{" not in value:
            if not Path(value).is_file():
                raise ConfigError(
                    f"evaluate.judge_prompts.{category}: {value!r} is neither a template "
                    "(it has no {field}) nor a file"
                )
            templates[category] = Path(value).read_text(encoding="utf-8")
    return templates


def _generators(
    target: Any, endpoints: Mapping[str, Any] | None
) -> EndpointConfig | dict[str, EndpointConfig] | None:
    where = "evaluate.generate_with"
    if target is None:
        return None
    if isinstance(target, str):
        return resolve_endpoint(target, endpoints, where)
    if not isinstance(target, Mapping) or not all(isinstance(n, str) for n in target.values()):
        raise ConfigError(
            f"{where} must be null, an endpoint name, or a mapping {{model: endpoint name}}; "
            f"got {target!r}"
        )
    return {
        model: resolve_endpoint(name, endpoints, f"{where}.{model}")
        for model, name in target.items()
    }


def parse_evaluate(evaluate: Any, endpoints: Mapping[str, Any] | None) -> EvaluateParams:
    """`params:evaluate` with its judge and generators resolved against `endpoints`.

    Args:
        evaluate: the block.
        endpoints: the `endpoints` block (None: none defined).

    Returns:
        The checked parameters.
    """
    allowed = [item.name for item in fields(EvaluateParams) if item.init]
    defaults = {
        name: value for name, value in defaults_of(EvaluateParams).items() if name in allowed
    }
    block = Block(evaluate, "evaluate", allowed, defaults)
    values = dict(block.values)
    intervals = block.block(
        "intervals", ("n_resamples", "seed", "confidence"), defaults_of(EvalIntervalParams)
    )
    values["intervals"] = EvalIntervalParams(
        n_resamples=intervals.integer("n_resamples", minimum=10),
        seed=intervals.integer("seed"),
        confidence=intervals.number("confidence", minimum=0.5, maximum=0.999),
    )
    ranking = block.block(
        "ranking", ("baseline", "alpaca_eval_gamed"), defaults_of(EvalRankingParams)
    )
    values["ranking"] = EvalRankingParams(
        baseline=ranking.text("baseline", nullable=True),
        alpaca_eval_gamed=ranking.text("alpaca_eval_gamed", nullable=True),
    )
    values["judge_requirement"] = parse_requirements(
        block.raw("judge_requirement"), "evaluate.judge_requirement"
    )
    judge_block, panel_block = values.pop("judge", None), values.pop("panel", None)
    if judge_block is not None and panel_block is not None:
        raise ConfigError(
            "evaluate.judge and evaluate.panel are both set: one judge or a panel of judges; "
            "set evaluate.judge: null to use the panel"
        )
    panel = None if panel_block is None else parse_panel(panel_block, "evaluate.panel", endpoints)
    judge = (
        None if panel else parse_judge(judge_block or DEFAULT_JUDGE, "evaluate.judge", endpoints)
    )
    generate_with = _generators(values.pop("generate_with", None), endpoints)
    values["judge_prompts"] = _judge_prompts(values.get("judge_prompts", {}))
    return EvaluateParams(judge=judge, generate_with=generate_with, panel=panel, **values)
