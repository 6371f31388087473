"""Running the annotation against a judge: aspect ratings, critiques and the score fix.

Each stage sends all of its calls through one `LLMClient.complete_many` (bounded
concurrency, cache, retries), then re-asks only the replies that could not be read, up to
`max_reasks` rounds. A call that still fails becomes a row with a null rating, its raw text
and a parse status: nothing is lost and nothing crashes the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from llm_feedback.annotation.aspects import build_aspect_request, get_aspect
from llm_feedback.annotation.critique import (
    build_critique_request,
    build_rescore_request,
    parse_critique_reply,
    parse_rescore_reply,
)
from llm_feedback.annotation.parsing import AspectRating, parse_aspect_reply
from llm_feedback.annotation.reask import build_reask_request, rating_problems
from llm_feedback.annotation.score_fix import (
    apply_reannotated_scores,
    collect_scores,
    fix_counts,
    pending_reannotation,
    plan_score_fix,
    require_columns,
    validate_thresholds,
)
from llm_feedback.annotation.shuffle import shuffle_orders
from llm_feedback.annotation.tables import (
    AspectJudgement,
    CritiqueJudgement,
    aspect_annotations_frame,
    critiques_frame,
)
from llm_feedback.backends import ChatRequest, ChatResult, LLMClient
from llm_feedback.errors import ConfigError, InputError

logger = logging.getLogger(__name__)

COMPLETION_COLUMNS = ("prompt_id", "completion_idx", "instruction", "response", "principle")


@dataclass
class _Call:
    """One logical judge call and its re-asks; `outcome` is the stage's parsed value."""

    request: ChatRequest | None
    reply: ChatResult | None = None
    outcome: Any = None
    reasks: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    raw_by_part: dict[int, str | None] = field(default_factory=dict)


def usable_completions(completions: pd.DataFrame) -> pd.DataFrame:
    """Completions a judge can read: generated without error and not blank."""
    require_columns(completions, COMPLETION_COLUMNS, "completions")
    if completions.duplicated(["prompt_id", "completion_idx"]).any():
        row = completions.index[
            completions.duplicated(["prompt_id", "completion_idx"]).to_numpy().argmax()
        ]
        raise InputError(
            f"completions row {row}: duplicate (prompt_id, completion_idx) "
            f"({completions.at[row, 'prompt_id']}, {completions.at[row, 'completion_idx']})"
        )
    empty_instruction = completions["instruction"].fillna("").astype(str).str.strip() == ""
    if empty_instruction.any():
        row = completions.index[empty_instruction.to_numpy().argmax()]
        raise InputError(f"completions row {row}, column 'instruction': empty instruction")
    failed = completions["response"].isna()
    if "error" in completions.columns:
        failed |= completions["error"].notna()
    failed |= completions["response"].fillna("").astype(str).str.strip() == ""
    if failed.any():
        logger.warning("annotate: %d completion(s) without a usable response are not judged",
                       int(failed.sum()))
    return completions[~failed].sort_values(["prompt_id", "completion_idx"], kind="stable")


def _run_with_reasks(
    client: LLMClient,
    calls: list[_Call],
    *,
    first_requests: Iterable[ChatRequest],
    total: int,
    parse: Callable[[int, str | None], Any],
    problems: Callable[[Any], list[str]],
    merge: Callable[[int, Any, str | None], None],
    max_reasks: int,
    desc: str,
) -> None:
    """Send every call; re-ask only those whose reply could not be read.

    `first_requests` yields each call's request after appending the call to `calls`, so
    the first calls are in flight while later ones are still being built.
    `parse(i, text)` reads a reply of call i; `merge(i, outcome, text)` folds a re-ask's
    outcome into call i's, keeping whatever the earlier replies already got right.
    """
    def receive(index: int, reply: ChatResult) -> None:
        # Runs as each reply arrives, so parsing overlaps the calls still in flight.
        call = calls[index]
        call.reply = reply
        call.prompt_tokens += reply.prompt_tokens
        call.completion_tokens += reply.completion_tokens
        if reply.ok:
            call.outcome = parse(index, reply.text)
        if max_reasks == 0 or not reply.ok or not problems(call.outcome):
            call.request = None  # never re-asked: at scale its prompt is most of the memory

    client.complete_many(first_requests, desc=desc, on_result=receive, total=total)
    for round_number in range(1, max_reasks + 1):
        retry = [i for i, c in enumerate(calls) if c.reply.ok and problems(c.outcome)]
        if not retry:
            break
        reasks = [_reask(calls[i], problems(calls[i].outcome)) for i in retry]
        replies = client.complete_many(reasks, desc=f"{desc} re-ask {round_number}")
        for index, request, reply in zip(retry, reasks, replies, strict=True):
            call = calls[index]
            call.reasks += 1
            call.prompt_tokens += reply.prompt_tokens
            call.completion_tokens += reply.completion_tokens
            if reply.ok:
                merge(index, parse(index, reply.text), reply.text)
                # The next round builds on the latest exchange.
                call.request, call.reply = request, reply


def _reask(call: _Call, problems: list[str]) -> ChatRequest:
    request = build_reask_request(call.request, call.reply.text, problems)
    if call.reply.finish_reason == "length":
        # Cut off by max_tokens: the same budget would cut the answer again.
        request = replace(request, max_tokens=2 * request.max_tokens)
    return request


# -- aspects ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _AspectTask:
    prompt_id: str
    aspect: str
    shuffle_idx: int
    order: list[int]
    completion_ids: list[int]


def annotate_aspects(
    completions: pd.DataFrame,
    client: LLMClient,
    *,
    aspects: Sequence[str],
    n_shuffles: int = 1,
    shuffle_seed: int = 42,
    max_reasks: int = 2,
    sampling: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """`aspect_annotations`: every usable completion of a prompt rated together, per aspect."""
    specs = [get_aspect(aspect) for aspect in aspects]  # unknown aspect: fail before any call
    if n_shuffles < 1:
        raise ConfigError("annotate.n_shuffles must be >= 1")
    if max_reasks < 0:
        raise ConfigError("annotate.max_reasks must be >= 0")
    usable = usable_completions(completions)
    structured = client.supports_json_schema
    tasks: list[_AspectTask] = []
    calls: list[_Call] = []

    def build_requests() -> Iterator[ChatRequest]:
        for prompt_id, group in usable.groupby("prompt_id", sort=True):
            completion_ids = group["completion_idx"].astype(int).tolist()
            responses = group["response"].astype(str).tolist()
            instruction = str(group["instruction"].iloc[0])
            knowledge = group["world_knowledge"].iloc[0] if "world_knowledge" in group else ""
            orders = shuffle_orders(str(prompt_id), len(responses), n_shuffles, shuffle_seed)
            for spec in specs:
                for shuffle_idx, order in enumerate(orders):
                    request = build_aspect_request(
                        spec.name, instruction, responses, order,
                        world_knowledge=knowledge if isinstance(knowledge, str) else "",
                        structured=structured, sampling=dict(sampling or {}),
                    )
                    tasks.append(_AspectTask(str(prompt_id), spec.name, shuffle_idx, order,
                                             completion_ids))
                    calls.append(_Call(request))
                    yield request

    def parse(index: int, text: str | None) -> list[AspectRating]:
        return parse_aspect_reply(tasks[index].aspect, text, len(tasks[index].order), structured)

    def merge(index: int, fresh: list[AspectRating], text: str | None) -> None:
        call = calls[index]
        merged = []
        for old, new in zip(call.outcome, fresh, strict=True):
            if old.status == "parse_error" and new.status != "parse_error":
                call.raw_by_part[old.position] = text  # this row's rating came from the re-ask
                merged.append(new)
            else:
                # Still the earlier reply's rating (call.reply is replaced after merging).
                call.raw_by_part.setdefault(old.position, call.reply.text)
                merged.append(old)
        call.outcome = merged

    _run_with_reasks(client, calls, first_requests=build_requests(),
                     total=usable["prompt_id"].nunique() * len(specs) * n_shuffles,
                     parse=parse, problems=rating_problems, merge=merge,
                     max_reasks=max_reasks, desc="annotate aspects")
    def judgements() -> Iterator[AspectJudgement]:
        for index, task in enumerate(tasks):
            call, calls[index] = calls[index], None  # the rows keep what they need, no more
            yield AspectJudgement(
                prompt_id=task.prompt_id, aspect=task.aspect, shuffle_idx=task.shuffle_idx,
                order=task.order, ratings=[] if not call.reply.ok else call.outcome,
                judge_model=client.model, raw_reply=call.reply.text, reasks=call.reasks,
                call_error=None if call.reply.ok else call.reply.error,
                completion_ids=task.completion_ids,
                raw_replies=[call.raw_by_part.get(position, call.reply.text)
                             for position in range(len(task.order))],
                prompt_tokens=call.prompt_tokens, completion_tokens=call.completion_tokens,
            )

    frame = aspect_annotations_frame(judgements())
    _log_parse_rate("aspect ratings", frame)
    return frame


def _log_parse_rate(what: str, frame: pd.DataFrame) -> None:
    if frame.empty:
        logger.info("annotate: no %s to report", what)
        return
    readable = frame["parse_status"].isin(["ok", "na"]).mean()
    logger.info("annotate: %d %s, %.1f%% readable (%d re-asked)", len(frame), what,
                100 * readable, int((frame["reasks"] > 0).sum()))


# -- critiques -------------------------------------------------------------------------


def critique_completions(
    completions: pd.DataFrame,
    client: LLMClient,
    *,
    max_reasks: int = 2,
    sampling: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """`critiques`: teacher-style feedback and an overall 1-10 score per completion."""
    usable = usable_completions(completions)
    structured = client.supports_json_schema
    keys = list(zip(usable["prompt_id"].astype(str), usable["completion_idx"].astype(int),
                    strict=True))
    calls: list[_Call] = []

    def build_requests() -> Iterator[ChatRequest]:
        for row in usable.itertuples(index=False):
            request = build_critique_request(
                str(row.instruction), str(row.response), str(row.principle or "helpfulness"),
                str(getattr(row, "system_prompt", "") or ""),
                structured=structured, sampling=dict(sampling or {}),
            )
            calls.append(_Call(request))
            yield request

    def problems(parsed: Any) -> list[str]:
        if parsed is None or parsed.overall_score is not None:
            return []
        return [parsed.error or "no overall score from 1 to 10 could be read"]

    def merge(index: int, new: Any, text: str | None) -> None:
        if new.overall_score is not None:
            calls[index].outcome = new
            calls[index].raw_by_part[0] = text

    _run_with_reasks(client, calls, first_requests=build_requests(), total=len(usable),
                     parse=lambda index, text: parse_critique_reply(text, structured),
                     problems=problems, merge=merge, max_reasks=max_reasks, desc="critique")
    judgements = [
        CritiqueJudgement(
            prompt_id=prompt_id, completion_idx=completion_idx,
            parsed=call.outcome if call.reply.ok else None, judge_model=client.model,
            raw_reply=call.raw_by_part.get(0, call.reply.text), reasks=call.reasks,
            call_error=None if call.reply.ok else call.reply.error,
        )
        for (prompt_id, completion_idx), call in zip(keys, calls, strict=True)
    ]
    frame = critiques_frame(judgements)
    frame["prompt_tokens"] = pd.array([c.prompt_tokens for c in calls], dtype="float64")
    frame["completion_tokens"] = pd.array([c.completion_tokens for c in calls], dtype="float64")
    _log_parse_rate("critiques", frame)
    return frame


# -- the overall-score fix -------------------------------------------------------------


def fix_overall_scores(
    completions: pd.DataFrame,
    aspect_annotations: pd.DataFrame,
    critiques: pd.DataFrame,
    client: LLMClient | None,
    *,
    flip_threshold: float = 2.0,
    reannotate_threshold: float = 4.0,
    aspects: Sequence[str] | None = None,
) -> pd.DataFrame:
    """`feedback`: fine-grained score, original and fixed overall score, and the action."""
    validate_thresholds(flip_threshold, reannotate_threshold)
    scores = collect_scores(completions, aspect_annotations, critiques, aspects=aspects)
    plan = plan_score_fix(scores, flip_threshold, reannotate_threshold)
    pending = pending_reannotation(plan)
    new_scores: dict[tuple[str, int], float | None] = {}
    if pending:
        if client is None:
            raise ConfigError("the score fix needs a judge to re-annotate suspicious scores")
        texts = completions.set_index(["prompt_id", "completion_idx"])
        critique_of = critiques.set_index(["prompt_id", "completion_idx"])["critique"]
        requests = [
            build_rescore_request(
                str(texts.at[key, "instruction"]), str(texts.at[key, "response"]),
                str(critique_of.get(key) or ""), structured=client.supports_json_schema,
            )
            for key in pending
        ]
        replies = client.complete_many(requests, desc="re-annotate overall scores")
        new_scores = {
            key: parse_rescore_reply(reply.text) if reply.ok else None
            for key, reply in zip(pending, replies, strict=True)
        }
    feedback = apply_reannotated_scores(plan, new_scores)
    counts = fix_counts(feedback)
    logger.info("score fix: %s", ", ".join(f"{k}={v}" for k, v in counts.items()))
    return feedback
