"""A priced plan of a run before it pays: calls, tokens and cost per stage and endpoint.

The plan builds the requests each stage will send with the stages' own request builders,
looks each one up in the request cache (an answered request is free) and prices the rest
with the report's price table (`reporting.metrics.price_usage`). It calls nothing.

Rules, also in the `basis` column and docs/quickstart.md:
- input tokens: each message's characters / 4 (English averages ~4 characters a token in
  GPT-style BPE vocabularies) plus 4 tokens of chat framing.
- output tokens: a reply without a JSON schema (generation) may use all of `max_tokens`; a
  structured reply is as long as its schema filled in, free-text strings at their
  `maxLength` (the endpoint's `max_string_chars`) or `FREE_TEXT_CHARS`, at the same 4
  characters a token, capped by `max_tokens`.
- a stage whose input the same run produces (annotate after generate) is planned on the
  completions the request cache already holds and, for the others, placeholders as long
  as their generation estimate: then its figures are an "estimate of estimate".
- re-annotation by the score fix depends on critique scores nobody knows yet: not counted.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.annotation.stages import (
    aspect_call_shape,
    aspect_calls,
    aspect_calls_within,
    critique_calls,
    usable_completions,
)
from llm_feedback.backends import ChatRequest, ChatResult, EndpointConfig, make_backend
from llm_feedback.backends.cache import RequestCache
from llm_feedback.backends.client import request_key, sent_form
from llm_feedback.completions.generation import build_requests, validate_sampled_prompts
from llm_feedback.core.errors import CostLimitExceeded
from llm_feedback.engine.engine import too_long
from llm_feedback.evaluation.config import EvaluateParams
from llm_feedback.evaluation.generation import generation_request
from llm_feedback.evaluation.judging import judge_tasks
from llm_feedback.evaluation.recorded import has_recorded_verdicts
from llm_feedback.judges import Judge
from llm_feedback.params import AnnotateParams, GenerateParams
from llm_feedback.reporting.markdown import markdown_table
from llm_feedback.reporting.metrics import price_usage
from llm_feedback.storage.schema import RUN_PLAN_COLUMN_TYPES

# What an API bills, estimated without a tokenizer: English averages ~4 characters a token
# in GPT-style BPE vocabularies, and chat formats add a few tokens of framing per message.
# (`ChatRequest.estimated_input_tokens` errs high on purpose: it decides what fits a context.)
CHARS_PER_TOKEN = 4
MESSAGE_FRAMING_TOKENS = 4
# A free-text JSON field without a maxLength is assumed this long (a few sentences).
FREE_TEXT_CHARS = 600
SCALAR_CHARS = 4  # a number, boolean or null
JUDGE_STAGES = ("annotate", "critique")
COUNTED = "counted"
ESTIMATED = "estimate of estimate"
RESCORE_NOTE = (
    "not counted: the score fix re-asks only completions scored 10 whose aspects disagree, "
    "known after the critiques"
)


def _filled_chars(schema: Any, string_chars: int) -> int:
    """Characters of a JSON document that fills `schema`, every value at its longest."""
    if not isinstance(schema, Mapping):
        return SCALAR_CHARS
    if "enum" in schema:
        return max(len(json.dumps(value)) for value in schema["enum"])
    kind = schema.get("type")
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(kind, list):
        alternatives = [{**schema, "type": item} for item in kind]
    if alternatives:
        return max(_filled_chars(branch, string_chars) for branch in alternatives)
    if kind == "object" or "properties" in schema:
        return 2 + sum(
            len(name) + 4 + _filled_chars(value, string_chars)
            for name, value in schema.get("properties", {}).items()
        )
    if kind == "array":
        items = schema.get("maxItems", max(schema.get("minItems", 0), 1))
        return 2 + items * (_filled_chars(schema.get("items", {}), string_chars) + 2)
    return schema.get("maxLength", string_chars) + 2 if kind == "string" else SCALAR_CHARS


def estimated_input_tokens(request: ChatRequest) -> int:
    """What the prompt of `request` is expected to be billed (see the module's rules).

    Args:
        request: the request.

    Returns:
        The tokens.
    """
    return sum(
        -(-len(message["content"]) // CHARS_PER_TOKEN) + MESSAGE_FRAMING_TOKENS
        for message in request.messages
    )


def estimated_output_tokens(request: ChatRequest) -> int:
    """What the reply to `request` is expected to cost (see the module's rules); a
    reasoning judge's thinking budget is counted whole (its thinking is billed).

    Args:
        request: the request.

    Returns:
        The tokens.
    """
    if request.json_schema is None:
        return request.token_budget
    filled = _filled_chars(request.json_schema, FREE_TEXT_CHARS) // CHARS_PER_TOKEN + 1
    return min(request.max_tokens, filled) + request.reasoning_tokens


def _cached_answers(
    endpoint: EndpointConfig, keys: list[str], cache_path: str | Path | None
) -> dict[str, ChatResult]:
    """The answers the request cache already holds for these keys (read only)."""
    if not (cache_path and endpoint.cache and Path(cache_path).is_file()):
        return {}
    cache = RequestCache(cache_path)
    try:
        return cache.get_many(keys)
    finally:
        cache.close()


class Stage:
    """One stage's calls to one endpoint: each request as sent, its key and cached answer."""

    def __init__(
        self,
        endpoint: EndpointConfig,
        requests: Iterable[ChatRequest],
        cache_path: str | Path | None,
    ) -> None:
        """Key every request as the endpoint would get it and look it up in the cache;
        nothing is sent.

        Args:
            endpoint: the stage's endpoint.
            requests: its requests.
            cache_path: the request cache (None: nothing is cached).
        """
        backend = make_backend(endpoint)  # not opened: nothing starts, nothing is sent
        self.endpoint = endpoint
        self.requests = [sent_form(endpoint, request) for request in requests]
        self.keys = [request_key(endpoint, backend, request) for request in self.requests]
        self.cached = _cached_answers(endpoint, self.keys, cache_path)

    def answers(self) -> list[str | None]:
        """Each request's cached reply text, None where it is not cached."""
        return [self.cached[key].text if key in self.cached else None for key in self.keys]

    def rows(self, stage: str, labels: Iterable[str], basis: str) -> list[dict[str, Any]]:
        """One row per model label: calls, cached calls and the tokens of the calls to send.

        Args:
            stage: the stage's name.
            labels: each request's model label.
            basis: how the tokens were found (counted or estimated).

        Returns:
            The rows.
        """
        rows: dict[str, dict[str, Any]] = defaultdict(
            lambda: dict.fromkeys(
                ("calls", "cached_calls", "duplicate_calls", "skipped", "in", "out"), 0
            )
        )
        sent: set[str] = set()
        for label, request, key in zip(labels, self.requests, self.keys, strict=True):
            row = rows[label]
            row["calls"] += 1
            if key in self.cached:
                row["cached_calls"] += 1
            elif key in sent:  # the client sends identical requests once
                row["duplicate_calls"] += 1
            elif too_long(self.endpoint, request):
                row["skipped"] += 1
            else:
                sent.add(key)
                row["in"] += estimated_input_tokens(request)
                row["out"] += estimated_output_tokens(request)
        return [
            {
                "stage": stage,
                "endpoint": self.endpoint.name,
                "backend": self.endpoint.backend,
                "model": label,
                "mode": "batch" if self.endpoint.uses_batch_api else "online",
                "calls": row["calls"],
                "cached_calls": row["cached_calls"],
                "duplicate_calls": row["duplicate_calls"],
                "skipped_too_long": row["skipped"],
                "calls_to_send": row["calls"]
                - row["cached_calls"]
                - row["duplicate_calls"]
                - row["skipped"],
                "prompt_tokens": row["in"],
                "completion_tokens": row["out"],
                "minutes_at_limits": minutes_at_limits(
                    self.endpoint,
                    row["calls"] - row["cached_calls"] - row["duplicate_calls"] - row["skipped"],
                    row["in"] + row["out"],
                ),
                "basis": basis,
            }
            for label, row in rows.items()
        ]


def minutes_at_limits(endpoint: EndpointConfig, calls: int, tokens: int) -> float:
    """The least minutes `calls` of `tokens` in all take at the endpoint's per-minute
    limits (the slower of the two sets the pace); NaN without limits.

    Args:
        endpoint: The endpoint, with its `requests_per_minute` / `tokens_per_minute`.
        calls: Calls to send.
        tokens: Their input and output tokens.

    Returns:
        Minutes, or NaN.
    """
    paces = [
        amount / limit
        for amount, limit in (
            (calls, endpoint.requests_per_minute),
            (tokens, endpoint.tokens_per_minute),
        )
        if limit
    ]
    return max(paces) if paces else float("nan")


def placeholder_response(position: int, request: ChatRequest) -> str:
    """A reply not generated yet, as long as its estimate; distinct texts, so that real
    completions are not judged as duplicates.

    Args:
        position: the completion's position in the plan.
        request: its generation request.

    Returns:
        The placeholder text.
    """
    length = estimated_output_tokens(request) * CHARS_PER_TOKEN
    return (f"{position} " + "lorem ipsum " * (length // 12 + 1))[:length]


def _planned_generation(
    sampled: pd.DataFrame, generate: GenerateParams, cache_path: str | Path | None
) -> tuple[list[dict[str, Any]], pd.DataFrame, bool]:
    """The generate stage's rows, and the completions it will produce: the cached reply
    where there is one, else a placeholder as long as the reply's estimate. The flag says
    whether every completion is known (all cached)."""
    validate_sampled_prompts(sampled, generate.pool)
    sampled = sampled.reset_index(drop=True)
    requests = build_requests(sampled, generate.pool)
    endpoint_of_row = [generate.pool[model].endpoint.name for model in sampled["model"]]
    endpoints = {spec.endpoint.name: spec.endpoint for spec in generate.pool.values()}
    responses: list[str | None] = [None] * len(sampled)
    rows: list[dict[str, Any]] = []
    for name in sorted(set(endpoint_of_row)):
        positions = [i for i, endpoint in enumerate(endpoint_of_row) if endpoint == name]
        stage = Stage(endpoints[name], [requests[i] for i in positions], cache_path)
        rows += stage.rows("generate", sampled["model"].iloc[positions], COUNTED)
        for position, answer in zip(positions, stage.answers(), strict=True):
            responses[position] = answer
    known = all(response is not None for response in responses)
    for position, response in enumerate(responses):
        if response is None:
            responses[position] = placeholder_response(position, requests[position])
    return rows, sampled.assign(response=responses), known


def plan_run(
    *,
    sampled: pd.DataFrame | None,
    completions: pd.DataFrame | None,
    generate: GenerateParams | None,
    annotate: AnnotateParams | None,
    prices: Mapping[str, Mapping[str, float]],
    cache_path: str | Path | None,
    judge_stages: Collection[str] = JUDGE_STAGES,
) -> pd.DataFrame:
    """The plan: one row per stage, endpoint and model.

    sampled: the sampled prompts (needed to plan generate, or annotate before generate);
    completions: the completions to judge, or None when the same run generates them;
    generate / annotate: the stages' parameters, None for a stage the run does not include;
    judge_stages: which of the judge's stages ("annotate", "critique") the run includes.
    Columns: see `schema.RUN_PLAN_COLUMN_TYPES`; prompt_tokens and completion_tokens are
    those of the calls to send, estimated_cost their price.

    Args:
        sampled: the sampled prompts.
        completions: the completions to judge, or None.
        generate: generate's parameters (None: not run).
        annotate: annotate's parameters (None: not run).
        prices: USD per 1k tokens by model.
        cache_path: the request cache (None: nothing is cached).
        judge_stages: the judge's stages the run includes.

    Returns:
        The plan.
    """
    rows: list[dict[str, Any]] = []
    basis = COUNTED
    if generate is not None:
        rows, generated, known = _planned_generation(sampled, generate, cache_path)
        if completions is None:
            completions = generated
            basis = COUNTED if known else ESTIMATED
    if annotate is not None:
        usable = usable_completions(completions)
        judge = annotate.endpoint
        structured = judge.uses_structured_output
        if "annotate" in judge_stages:
            calls = aspect_calls(
                usable,
                annotate.aspects,
                annotate.n_shuffles,
                annotate.shuffle_seed,
                aspect_orders=annotate.aspect_orders,
                structured=structured,
                sampling=annotate.aspect_sampling,
                templates=annotate.templates,  # the plan prices the prompts sent
            )
            shape = aspect_call_shape(
                annotate.n_shuffles,
                annotate.shuffle_seed,
                aspect_orders=annotate.aspect_orders,
                structured=structured,
                sampling=annotate.aspect_sampling,
                templates=annotate.templates,
            )
            # A call over the budget is sent in parts, its longest text alone (stages.py).
            calls = aspect_calls_within(calls, lambda request: too_long(judge, request), shape)
            stage = Stage(judge, (request for _, request in calls), cache_path)
            rows += stage.rows("annotate", [judge.model] * len(stage.keys), basis)
        if "critique" in judge_stages:
            calls = critique_calls(
                usable,
                structured=structured,
                sampling=annotate.critique_sampling,
                templates=annotate.templates,
            )
            stage = Stage(judge, (request for _, request in calls), cache_path)
            rows += stage.rows("critique", [judge.model] * len(stage.keys), basis)
    plan = pd.DataFrame(rows, columns=list(RUN_PLAN_COLUMN_TYPES))
    plan = price_usage(plan, prices)
    return plan.loc[:, list(RUN_PLAN_COLUMN_TYPES)].astype(dict(RUN_PLAN_COLUMN_TYPES))


def describe_plan(plan: pd.DataFrame, max_cost_usd: float | None = None) -> str:
    """The plan as text: a Markdown table, the total and the rules behind the figures.

    Args:
        plan: the plan.
        max_cost_usd: the run's cost limit (None: none).

    Returns:
        The text.
    """
    total = float(plan["estimated_cost"].sum())
    lines = [
        "Run plan (nothing is sent to make it)",
        "",
        # The pace column only where an endpoint has per-minute limits.
        markdown_table(
            plan.drop(
                columns=["backend"]
                + (["minutes_at_limits"] if plan["minutes_at_limits"].isna().all() else [])
            )
        ),
        "",
        f"Total: {int(plan['calls_to_send'].sum()):,} calls to send "
        f"({int(plan['cached_calls'].sum()):,} already in the request cache), "
        f"~{int(plan['prompt_tokens'].sum()):,} input and "
        f"~{int(plan['completion_tokens'].sum()):,} output tokens, "
        f"estimated cost ${total:,.4f} (assuming no prompt-cache hits: every input token "
        "at the input price)"
        + (f" (max_cost_usd ${max_cost_usd:,.4f})" if max_cost_usd is not None else "")
        + ".",
    ]
    paced = plan.groupby("endpoint", sort=False)["minutes_at_limits"].sum(min_count=1).dropna()
    for endpoint, minutes in paced.items():
        lines.append(
            f"At its requests/tokens-per-minute limits, endpoint '{endpoint}' needs at least "
            f"~{minutes:,.1f} minutes for its calls."
        )
    unpriced = sorted(plan.loc[~plan["priced"], "model"].unique())
    if unpriced:
        lines.append(f"No price for {', '.join(unpriced)} (report.prices): counted as 0.")
    if (plan["basis"] == ESTIMATED).any():
        lines.append(
            f"'{ESTIMATED}': the completions to judge are generated by this run; those not "
            "in the request cache yet are assumed as long as their generation estimate."
        )
    lines += [
        f"Input tokens: characters / {CHARS_PER_TOKEN} plus {MESSAGE_FRAMING_TOKENS} a message. "
        "Output tokens: max_tokens for free text; a structured reply's schema filled in "
        f"(free-text fields at their cap, else {FREE_TEXT_CHARS} characters), capped by "
        "max_tokens.",
        f"Score fix re-annotation: {RESCORE_NOTE}.",
    ]
    return "\n".join(lines)


def check_cost_limit(plan: pd.DataFrame, max_cost_usd: float | None) -> None:
    """Raise `CostLimitExceeded` naming the estimate and the limit when the plan costs more.

    Args:
        plan: the plan.
        max_cost_usd: the run's cost limit (None: none).
    """
    if max_cost_usd is None:
        return
    total = float(plan["estimated_cost"].sum())
    if total > max_cost_usd:
        by_stage = plan.groupby("stage", sort=False)["estimated_cost"].sum()
        stages = ", ".join(f"{stage} ${cost:,.4f}" for stage, cost in by_stage.items())
        raise CostLimitExceeded(
            f"the run's estimated cost ${total:,.4f} ({stages}) exceeds max_cost_usd "
            f"${max_cost_usd:,.4f}; nothing was sent. See the plan with "
            "`--params plan_only=true`, reduce the run (e.g. sample.max_prompts) or raise "
            "max_cost_usd.\n\n" + describe_plan(plan, max_cost_usd)
        )


GENERATE_STAGE = "evaluate_generate"
JUDGE_STAGE = "evaluate"


def _generation_rows(
    samples: pd.DataFrame, config: EvaluateParams, cache_path: str | Path | None
) -> tuple[list[dict[str, Any]], pd.DataFrame, bool]:
    """The generation rows, the samples with their responses (cached or placeholders) and
    whether every response is known."""
    todo = samples[samples["response"].isna()]
    if todo.empty:
        return [], samples, True
    answered = samples.copy()
    known = True
    generators = todo["model"].map(config.generator_for)
    rows: list[dict[str, Any]] = []
    for _, part in todo.groupby(generators.map(lambda endpoint: endpoint.name), sort=True):
        requests = [generation_request(row, config) for row in part.itertuples()]
        stage = Stage(generators[part.index[0]], requests, cache_path)
        rows += stage.rows(GENERATE_STAGE, part["model"], COUNTED)
        for index, request, answer in zip(part.index, requests, stage.answers(), strict=True):
            known &= answer is not None
            # Placeholders differ by row: two models' responses are never one judge request.
            fill = answer if answer is not None else placeholder_response(int(index), request)
            answered.at[index, "response"] = fill
    return rows, answered, known


def plan_evaluation(
    samples: pd.DataFrame,
    config: EvaluateParams,
    prices: Mapping[str, Mapping[str, float]],
    cache_path: str | Path | None,
) -> pd.DataFrame:
    """The evaluate stages' plan rows (`schema.RUN_PLAN_COLUMN_TYPES`) for the prepared
    `samples` (`evaluation.prepare_samples`).

    Args:
        samples: the prepared samples.
        config: the evaluate parameters.
        prices: USD per 1k tokens by model.
        cache_path: the request cache (None: nothing is cached).

    Returns:
        The plan rows.
    """
    rows, answered, known = _generation_rows(samples, config, cache_path)
    # Recorded pairwise verdicts are judged without a call (`evaluation.recorded`).
    recorded = config.kind.compares and has_recorded_verdicts(samples)
    if config.evaluator is None and not recorded:
        for judge_params in config.judges.values():
            endpoint = judge_params.endpoint
            top_logprobs = config.judge_top_logprobs_asked if judge_params is config.judge else 0
            judge = Judge(
                endpoint, sampling=judge_params.sampling, connect=False, top_logprobs=top_logprobs
            )
            requests = [task.request for task in judge_tasks(answered, config, judge)]
            stage = Stage(endpoint, requests, cache_path)
            basis = COUNTED if known else ESTIMATED
            rows += stage.rows(JUDGE_STAGE, [endpoint.model] * len(requests), basis)
    plan = pd.DataFrame(rows, columns=list(RUN_PLAN_COLUMN_TYPES))
    plan = price_usage(plan, prices)
    return plan.loc[:, list(RUN_PLAN_COLUMN_TYPES)].astype(dict(RUN_PLAN_COLUMN_TYPES))
