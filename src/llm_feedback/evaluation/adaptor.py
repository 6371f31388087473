"""genlm.eval's runner: a model adaptor's responses to instances, scored by an evaluator.

`run_evaluation(dataset, model, evaluator, output_dir, ...)` (see `run.py`) awaits
`evaluate_instances`. The dataset is an iterable of instances, each a mapping or an object
(a dataclass, a pydantic model) with an `instance_id`; every other field it has reaches the
model and the evaluator untouched, as the instance itself. The model adaptor is an async
callable, or an object whose async `generate` method is one, called as
`model(instance, output_dir, replicate)` (or with its first one or two of those, as its
signature takes); it returns a `ModelOutput` (a weighted ensemble of responses), a list of
`ModelResponse`s, or one response. The evaluator's `evaluate_sample(instance, response)`
(sync or async; a plain function will do, and so will the evaluate pipeline's evaluators
given mapping instances) returns an `EvaluationResult` (any finite float score, a
description and metadata, kept in the results), a bare number or a bool.

Each (instance, replicate) is scored as genlm.eval scores an ensemble: the sum of score x
weight over its responses, the weights as given (genlm's adaptors give probabilities that
sum to 1; weights that do not are not rescaled). Its result is {"weighted_accuracy",
"runtime_seconds" (the output's, else the adaptor call's wall time), "results"}. With an
`output_dir`, its output and its result are cached as `<instance_id>-<replicate>-output.json`
and `-results.json`, genlm.eval's names (JSON: a response that JSON cannot hold is kept as
its str); a later run reads them back instead of asking again. `overwrite_results` scores again,
`overwrite_outputs` (only together with `overwrite_results`) also asks again. `verbosity`
1 logs each instance's scores.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import math
import numbers
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.evaluation.evaluators import EvaluatorResult

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelResponse:
    """One response of an ensemble and its weight (e.g. its probability)."""

    response: Any
    weight: float = 1.0


@dataclass(frozen=True)
class ModelOutput:
    """What the model adaptor produced for one instance and replicate."""

    responses: list[ModelResponse]
    runtime_seconds: float | None = None


@dataclass(frozen=True)
class EvaluationResult:
    """The evaluator's score of one response (any finite float), why, and what else it
    measured."""

    score: float
    desc: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def instance_id(instance: Any) -> str:
    """The instance_id of a genlm instance (a mapping or an object); InputError when it
    has none usable as a file name.

    Args:
        instance: the instance.

    Returns:
        The id, as text.
    """
    found = instance.get("instance_id") if isinstance(instance, Mapping) else None
    found = getattr(instance, "instance_id", found)
    if found is None or str(found) == "" or any(c in str(found) for c in "/\\"):
        raise InputError(f"every instance needs an instance_id without '/', got {instance!r}")
    return str(found)


def check_options(n_replicates: int, overwrite_results: bool, overwrite_outputs: bool) -> None:
    """The runner's settings, checked before anything is asked.

    Args:
        n_replicates: replicates per instance, >= 1.
        overwrite_results: whether results are evaluated again.
        overwrite_outputs: whether outputs are generated again (needs overwrite_results).
    """
    if not isinstance(n_replicates, int) or isinstance(n_replicates, bool) or n_replicates < 1:
        raise ConfigError(f"n_replicates must be an integer >= 1, got {n_replicates!r}")
    if overwrite_outputs and not overwrite_results:
        raise ConfigError("overwrite_outputs needs overwrite_results: new outputs need new results")


def _adaptor_call(model: Any):
    call = model if callable(model) else getattr(model, "generate", None)
    if not callable(call):
        raise ConfigError("the model adaptor must be an async callable or have a generate method")
    try:
        parameters = inspect.signature(call).parameters.values()
    except (TypeError, ValueError):
        return call, 3
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return call, 3
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return call, max(1, min(3, len(positional)))


def _model_output(produced: Any, where: str) -> ModelOutput:
    if isinstance(produced, ModelOutput):
        output = produced
    elif isinstance(produced, list) and all(isinstance(r, ModelResponse) for r in produced):
        output = ModelOutput(produced)
    elif isinstance(produced, ModelResponse):
        output = ModelOutput([produced])
    else:
        output = ModelOutput([ModelResponse(produced)])
    if not output.responses:
        raise InputError(f"{where}: the model adaptor returned no response")
    for response in output.responses:
        if not _finite(response.weight) or response.weight < 0:
            raise InputError(f"{where}: response weight must be >= 0, got {response.weight!r}")
    return output


def _finite(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _evaluation(scored: Any, where: str) -> EvaluationResult:
    if isinstance(scored, EvaluatorResult):  # the evaluate pipeline's own evaluators
        scored = EvaluationResult(scored.score, scored.detail)
    if isinstance(scored, bool):
        return EvaluationResult(float(scored))
    if _finite(scored):
        return EvaluationResult(float(scored))
    if isinstance(scored, EvaluationResult) and _finite(scored.score):
        return scored
    if isinstance(scored, Mapping) and _finite(scored.get("score")):
        return EvaluationResult(
            float(scored["score"]), scored.get("desc"), dict(scored.get("metadata") or {})
        )
    raise InputError(f"{where}: the evaluator must return a finite score, got {scored!r}")


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _read_json(path: Path | None) -> Any:
    if path is None or not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _write_json(path: Path | None, value: Any) -> None:
    if path is not None:
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(value, default=str), encoding="utf-8")
        temporary.replace(path)


class _Run:
    def __init__(self, model, evaluator, output_dir, overwrite_results, overwrite_outputs):
        self.call, self.arity = _adaptor_call(model)
        self.evaluate = getattr(evaluator, "evaluate_sample", evaluator)
        if not callable(self.evaluate):
            raise ConfigError(
                "the evaluator must have an evaluate_sample(instance, response) method or be "
                "such a function"
            )
        self.output_dir = None if output_dir is None else Path(output_dir)
        if self.output_dir is not None:
            self.output_dir.mkdir(parents=True, exist_ok=True)
        self.overwrite_results, self.overwrite_outputs = overwrite_results, overwrite_outputs

    def _path(self, key: str, suffix: str) -> Path | None:
        return None if self.output_dir is None else self.output_dir / f"{key}-{suffix}.json"

    async def output(self, instance: Any, key: str, replicate: int) -> tuple[ModelOutput, bool]:
        """The instance's output for `replicate`, and whether it was read from the cache."""
        path = self._path(key, "output")
        cached = None if self.overwrite_outputs else _read_json(path)
        if cached is not None:
            responses = [ModelResponse(**response) for response in cached["responses"]]
            return ModelOutput(responses, cached.get("runtime_seconds")), True
        arguments = (instance, self.output_dir, replicate)[: self.arity]
        started = time.perf_counter()
        output = _model_output(await _maybe_await(self.call(*arguments)), f"instance {key}")
        if output.runtime_seconds is None:  # an adaptor that does not time itself
            output = ModelOutput(output.responses, time.perf_counter() - started)
        _write_json(path, asdict(output))
        return output, False

    async def result(self, instance: Any, replicate: int) -> tuple[dict, dict]:
        key = f"{instance_id(instance)}-{replicate}"
        path = self._path(key, "results")
        cached = None if self.overwrite_results else _read_json(path)
        output, output_cached = await self.output(instance, key, replicate)
        if cached is not None and output_cached:  # a result of the output it came with
            return cached, asdict(output)
        where = f"instance {key}"
        evaluations = [
            _evaluation(await _maybe_await(self.evaluate(instance, r.response)), where)
            for r in output.responses
        ]
        weighted = [e.score * r.weight for e, r in zip(evaluations, output.responses, strict=True)]
        result = {
            "weighted_accuracy": math.fsum(weighted),
            "runtime_seconds": output.runtime_seconds,
            "results": [asdict(e) for e in evaluations],
        }
        _write_json(path, result)
        return result, asdict(output)


def _mean_interval(values: list[float], confidence: float = 0.95) -> list[float]:
    """Student's t interval of the mean over instances (NaN below two instances)."""
    if len(values) < 2:
        return [math.nan, math.nan]
    if np.ptp(values) == 0:  # scipy's interval is NaN when every value is the same
        return [float(values[0])] * 2
    low, high = stats.ttest_1samp(values, 0.0).confidence_interval(confidence)
    return [float(low), float(high)]


async def evaluate_instances(
    dataset: Iterable[Any],
    model: Any,
    evaluator: Any,
    output_dir: str | Path | None = None,
    *,
    n_replicates: int = 1,
    overwrite_results: bool = False,
    overwrite_outputs: bool = False,
    max_instances: float = math.inf,
    max_concurrent: int = 1,
    verbosity: int = 0,
) -> dict[str, Any]:
    """The genlm.eval results of the first `max_instances` instances of `dataset`:
    "average_weighted_accuracy" (mean over instances of the mean over replicates) with its
    "weighted_accuracy_interval" (95%), "n_instances", and per instance (a list per
    replicate) "all_instance_results" ({"weighted_accuracy", "runtime_seconds", "results":
    [{"score", "desc", "metadata"}]}) and "all_instance_outputs" ({"responses",
    "runtime_seconds"}).

    Args:
        dataset: the instances, each with an instance_id.
        model: the genlm model adaptor (generates an instance's responses).
        evaluator: the genlm evaluator (scores them).
        output_dir: where each instance's outputs and results are cached (None: not kept).
        n_replicates: replicates per instance.
        overwrite_results: evaluate again what has results.
        overwrite_outputs: generate again what has outputs.
        max_instances: how many instances at most.
        max_concurrent: instances run at once.
        verbosity: above 0, log each instance's scores.

    Returns:
        The results dict above.
    """
    check_options(n_replicates, overwrite_results, overwrite_outputs)
    run = _Run(model, evaluator, output_dir, overwrite_results, overwrite_outputs)
    instances, seen = [], set()
    for position, instance in enumerate(dataset):
        if position >= max_instances:
            break
        key = instance_id(instance)
        if key in seen:
            raise InputError(f"instance_id {key!r} occurs twice: each names its cached files")
        seen.add(key)
        instances.append(instance)
    gate = asyncio.Semaphore(max(1, int(max_concurrent)))

    async def replicates(instance: Any) -> list[tuple[dict, dict]]:
        async with gate:
            done = [await run.result(instance, replicate) for replicate in range(n_replicates)]
        if verbosity > 0:
            scores = [result["weighted_accuracy"] for result, _ in done]
            logger.info("instance %s: weighted accuracy %s", instance_id(instance), scores)
        return done

    done = await asyncio.gather(*(replicates(instance) for instance in instances))
    per_instance = [float(np.mean([r["weighted_accuracy"] for r, _ in pairs])) for pairs in done]
    return {
        "average_weighted_accuracy": float(np.mean(per_instance)) if per_instance else math.nan,
        "weighted_accuracy_interval": _mean_interval(per_instance),
        "n_instances": len(instances),
        "all_instance_results": [[r for r, _ in pairs] for pairs in done],
        "all_instance_outputs": [[o for _, o in pairs] for pairs in done],
    }
