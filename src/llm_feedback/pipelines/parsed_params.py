"""Each node reads its parameter blocks (`params:<block>`) and parses them here, once per
distinct content, into the pipeline's typed object.

The typed objects used to be memory datasets made by a `read_<pipeline>_params` node, so
that any `--from-nodes` / `--from-inputs` slice that left that node out failed with
"Pipeline input(s) {'annotate_params'} not found". Parsing in the node keeps every slice
whole; the cache makes the parse happen once per run and process, not once per node. A bad
parameter still stops the run before any call: `RunGuardHooks` parses every block the run
reads before its first node. Each parser is looked up in `llm_feedback.params` when first
called, so a run imports only its own pipelines' parsers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from llm_feedback import params
from llm_feedback.params.ultrafeedback_fix import UltraFeedbackFixParams, parse_ultrafeedback_fix

if TYPE_CHECKING:
    from llm_feedback.params import (
        AnnotateParams,
        EvaluateParams,
        GenerateParams,
        ReportParams,
        SampleParams,
    )

Parsed = TypeVar("Parsed")
# Distinct parameter contents kept per parser: one run has one; tests run a few.
CACHE_SIZE = 16

_cache: dict[tuple[str, str], Any] = {}


def _parse_once(parse: Callable[..., Parsed], *blocks: Any) -> Parsed:
    # Keyed by the blocks' JSON text: parameter blocks are dicts, which do not hash.
    key = (parse.__qualname__, json.dumps(blocks, sort_keys=True, default=repr))
    if key not in _cache:
        if len(_cache) >= CACHE_SIZE:
            _cache.pop(next(iter(_cache)))
        _cache[key] = parse(*blocks)
    return _cache[key]


def sample_params(
    sample: Mapping[str, Any], model_pool: Mapping[str, Any], prompt_templates: str | None = None
) -> SampleParams:
    """`params.parse_sample` of the blocks, once per distinct content.

    Args:
        sample: `params:sample`.
        model_pool: `params:model_pool`.
        prompt_templates: `params:prompt_templates` (None: the package's templates).

    Returns:
        The parsed parameters.
    """
    return _parse_once(params.parse_sample, sample, model_pool, prompt_templates)


def generate_params(
    endpoints: Mapping[str, Any], model_pool: Mapping[str, Any], generation: Mapping[str, Any]
) -> GenerateParams:
    """`params.parse_generate` of the blocks, once per distinct content.

    Args:
        endpoints: `params:endpoints`.
        model_pool: `params:model_pool`.
        generation: `params:generation`.

    Returns:
        The parsed parameters.
    """
    return _parse_once(params.parse_generate, endpoints, model_pool, generation)


def annotate_params(
    annotate: Mapping[str, Any], endpoints: Mapping[str, Any], prompt_templates: str | None = None
) -> AnnotateParams:
    """`params.parse_annotate` of the blocks, once per distinct content.

    Args:
        annotate: `params:annotate`.
        endpoints: `params:endpoints`.
        prompt_templates: `params:prompt_templates` (None: the package's templates).

    Returns:
        The parsed parameters.
    """
    return _parse_once(params.parse_annotate, annotate, endpoints, prompt_templates)


def evaluate_params(evaluate: Mapping[str, Any], endpoints: Mapping[str, Any]) -> EvaluateParams:
    """`params.parse_evaluate` of the blocks, once per distinct content.

    Args:
        evaluate: `params:evaluate`.
        endpoints: `params:endpoints`.

    Returns:
        The parsed parameters.
    """
    return _parse_once(params.parse_evaluate, evaluate, endpoints)


def ultrafeedback_fix_params(
    ultrafeedback_fix: Mapping[str, Any],
    annotate: Mapping[str, Any],
    endpoints: Mapping[str, Any],
    prompt_templates: str | None,
) -> UltraFeedbackFixParams:
    """`params.ultrafeedback_fix.parse_ultrafeedback_fix` of the blocks, once per distinct content.

    Args:
        ultrafeedback_fix: `params:ultrafeedback_fix`.
        annotate: `params:annotate`.
        endpoints: `params:endpoints`.
        prompt_templates: `params:prompt_templates` (None: the package's templates).

    Returns:
        The parsed parameters.
    """
    return _parse_once(
        parse_ultrafeedback_fix, ultrafeedback_fix, annotate, endpoints, prompt_templates
    )


def report_params(report: Mapping[str, Any]) -> ReportParams:
    """`params.parse_report` of the block, once per distinct content.

    Args:
        report: `params:report`.

    Returns:
        The parsed parameters.
    """
    return _parse_once(params.parse_report, report)
