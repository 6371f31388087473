"""The annotation stages as engine tasks: aspect ratings and critiques (the score fix is
`rescore`).

Each stage turns its rows into `Task`s for the `TaskEngine` (which caches, bounds
concurrency, re-asks only unreadable replies and doubles the budget of cut-off ones) and
its outcomes back into rows. A call that still fails becomes a row with a null rating, its
raw text and a parse status: nothing is lost and nothing crashes the run.

Each stage is built first (its input checked and its calls counted, off the client's loop)
and then run on the client's loop (`Stage`): alone (`aspect_annotations_table`,
`critiques_table`) or together with the other on one endpoint queue (`judge_tables`), so that
neither stage's tail leaves the judge idle while the other has calls to send.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from llm_feedback.annotation.aspects import build_aspect_request, get_aspect
from llm_feedback.annotation.critique import (
    CritiqueParse,
    critique_request,
    parse_critique_reply,
)
from llm_feedback.annotation.isolation import (
    DifferentialRows,
    judged_together,
    variants,
)
from llm_feedback.annotation.parsing import AspectRating, parse_aspect_reply
from llm_feedback.annotation.rescore_ahead import (
    ASPECTS_STAGE,
    CRITIQUES_STAGE,
    RescoreAhead,
    ScoreFixAhead,
)
from llm_feedback.annotation.shuffle import ASPECT_ORDERS, INDEPENDENT, shuffle_orders
from llm_feedback.annotation.tables import (
    AspectJudgement,
    CritiqueJudgement,
    aspect_rows,
    critique_row,
)
from llm_feedback.backends import ChatRequest, LLMClient
from llm_feedback.core.errors import ConfigError, InputError, require_columns
from llm_feedback.engine import Outcome, Reading, Task, TaskEngine, run_together
from llm_feedback.engine.prefetch import built_ahead
from llm_feedback.replies.injection import suspected_injection
from llm_feedback.replies.status import (
    NO_MATCH,
    PARTIAL,
    READ,
    SKIPPED_TOO_LONG,
    is_unreadable,
)
from llm_feedback.storage.parquet_source import CHUNK_PROMPTS, ParquetSource, table_chunks
from llm_feedback.storage.schema import (
    ASPECT_ANNOTATIONS_COLUMN_TYPES,
    CACHE_TOKEN_COLUMN_TYPES,
    CRITIQUES_COLUMN_TYPES,
)
from llm_feedback.storage.spool import SpooledTable, TableBuilder
from llm_feedback.templates import PACKAGE_TEMPLATES, Templates

logger = logging.getLogger(__name__)

# The critiques table and each row's tokens (all of its call's).
CRITIQUE_TABLE_TYPES = {
    **CRITIQUES_COLUMN_TYPES,
    "prompt_tokens": "float64",
    "completion_tokens": "float64",
    **CACHE_TOKEN_COLUMN_TYPES,
}
COMPLETION_COLUMNS = ("prompt_id", "completion_idx", "instruction", "response", "principle")


# What the judge stages read of the completions (the rest of the table stays on disk).
COMPLETION_COLUMNS_READ = (*COMPLETION_COLUMNS, "world_knowledge", "system_prompt", "error")
KEY_COLUMNS = ("prompt_id", "completion_idx", "instruction")
Completions = pd.DataFrame | ParquetSource
# A stage built and ready to run: called on the client's loop, it sends the stage's calls
# (`TaskEngine.stream_into`) and gives its table (`engine.run_together` runs several at once).
Stage = Callable[[], Awaitable[SpooledTable]]
# Calls a stage's builder thread may hold finished ahead of the loop (a few MiB of prompts).
BUILT_AHEAD = 256


def _check_rows(completions: pd.DataFrame) -> None:
    """Duplicate keys and empty instructions: input errors, named by row."""
    duplicated = completions.duplicated(["prompt_id", "completion_idx"])
    if duplicated.any():
        row = completions.index[duplicated.to_numpy().argmax()]
        raise InputError(
            f"completions row {row}: duplicate (prompt_id, completion_idx) "
            f"({completions.at[row, 'prompt_id']}, {completions.at[row, 'completion_idx']})"
        )
    empty_instruction = completions["instruction"].fillna("").astype(str).str.strip() == ""
    if empty_instruction.any():
        row = completions.index[empty_instruction.to_numpy().argmax()]
        raise InputError(f"completions row {row}, column 'instruction': empty instruction")


def check_completions(completions: Completions, prompts_per_chunk: int = CHUNK_PROMPTS) -> None:
    """Raise on the input errors of `usable_completions` before any call; a table on disk
    is checked a chunk of prompts at a time, reading its keys and instructions only.

    Args:
        completions: the completions, a DataFrame or a table on disk.
        prompts_per_chunk: prompts per chunk read from disk.
    """
    require_columns(completions, COMPLETION_COLUMNS, "completions")
    for chunk in table_chunks(completions, prompts_per_chunk, KEY_COLUMNS):
        _check_rows(chunk)


def _usable(completions: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The completions a judge can read, in key order, and how many were left out."""
    require_columns(completions, COMPLETION_COLUMNS, "completions")
    _check_rows(completions)
    failed = completions["response"].isna()
    if "error" in completions.columns:
        failed |= completions["error"].notna()
    # A match, not a stripped copy of every response.
    failed |= ~completions["response"].astype("str").str.contains(r"\S", regex=True, na=False)
    left_out = int(failed.sum())
    if left_out:
        completions = completions[~failed]
    # Copied only when out of order (the generate stage writes them in order): at
    # UltraFeedback scale the responses alone are a few hundred megabytes.
    if not pd.MultiIndex.from_frame(
        completions[["prompt_id", "completion_idx"]]
    ).is_monotonic_increasing:
        completions = completions.sort_values(["prompt_id", "completion_idx"], kind="stable")
    return completions, left_out


def _log_left_out(left_out: int) -> None:
    if left_out:
        logger.warning(
            "annotate: %d completion(s) without a usable response are not judged", left_out
        )


def usable_completions(completions: pd.DataFrame) -> pd.DataFrame:
    """Completions a judge can read: generated without error and not blank.

    Args:
        completions: the completions.

    Returns:
        The usable rows.
    """
    usable, left_out = _usable(completions)
    _log_left_out(left_out)
    return usable


def usable_chunks(
    completions: Completions,
    prompts_per_chunk: int = CHUNK_PROMPTS,
    count: Callable[[pd.DataFrame], int] | None = None,
) -> tuple[Iterable[pd.DataFrame], int | None]:
    """The usable completions as chunks of whole prompts, and `count` of all of them (the
    progress bar's total, so that it shows the time left): a DataFrame is one chunk, a
    table on disk (`ParquetSource`) is checked first, counted in a pass of its own (a judge
    stage takes hours, the pass seconds), then read a chunk at a time, lazily.

    Args:
        completions: the completions, a DataFrame or a table on disk.
        prompts_per_chunk: prompts per chunk read from disk.
        count: counts a chunk's work (None: no total).

    Returns:
        (the chunks, the total or None).
    """
    if isinstance(completions, pd.DataFrame):
        usable = usable_completions(completions)
        return [usable], None if count is None else count(usable)
    check_completions(completions, prompts_per_chunk)
    total = None
    if count is not None:
        total = sum(
            count(_usable(chunk)[0])
            for chunk in table_chunks(completions, prompts_per_chunk, COMPLETION_COLUMNS_READ)
        )

    def chunks() -> Iterator[pd.DataFrame]:
        left_out = 0
        for chunk in table_chunks(completions, prompts_per_chunk, COMPLETION_COLUMNS_READ):
            usable, dropped = _usable(chunk)
            left_out += dropped
            if len(usable):
                yield usable
        _log_left_out(left_out)

    return chunks(), total


def _call_fields(client: LLMClient, outcome: Outcome) -> dict[str, Any]:
    """What a judgement records of its call: which judge answered, and its reply."""
    return {
        "judge_model": client.model,
        "judge_endpoint": client.config.name,
        "judge_backend": client.config.backend,
        "judge_via_batch": outcome.reply.via_batch,
        "raw_reply": outcome.text,
        "reasks": outcome.reasks,
    }


def _token_fields(outcome: Outcome) -> dict[str, Any]:
    """What a judgement records of its calls' tokens: prompt, completion, and of the prompt
    what the provider's cache served and wrote (None where no reply said)."""
    return {
        "prompt_tokens": outcome.prompt_tokens,
        "completion_tokens": outcome.completion_tokens,
        "cached_prompt_tokens": outcome.cached_prompt_tokens,
        "cache_write_tokens": outcome.cache_write_tokens,
    }


# -- aspects ---------------------------------------------------------------------------


def rating_problems(ratings: Sequence[AspectRating]) -> list[str]:
    """What went wrong, per unreadable position; empty when every position was read.

    Args:
        ratings: one call's ratings, by position.

    Returns:
        One message per unreadable position.
    """
    return [
        f"Text {rating.position + 1}: {rating.error}"
        for rating in ratings
        if is_unreadable(rating.status)
    ]


def _ratings_reading(ratings: list[AspectRating]) -> Reading:
    problems = rating_problems(ratings)
    if not problems:
        return Reading(ratings)
    status = NO_MATCH if len(problems) == len(ratings) else PARTIAL
    return Reading(ratings, status, ok=False, problem="; ".join(problems))


def _aspect_reading(ratings: list[AspectRating], text: str | None) -> Reading:
    for rating in ratings:
        rating.reply = text
    return _ratings_reading(ratings)


def _merge_ratings(earlier: Reading, fresh: Reading) -> Reading:
    """Per position, the earlier rating unless only the re-ask could read it."""
    return _ratings_reading(
        [
            new if is_unreadable(old.status) and not is_unreadable(new.status) else old
            for old, new in zip(earlier.value, fresh.value, strict=True)
        ]
    )


@dataclass(frozen=True, slots=True)
class _Prompt:
    """What a prompt's aspect calls show the judge: kept (not copied) by each call while it
    is out, so that a call refused as too long can be sent again in parts."""

    prompt_id: str
    instruction: str
    knowledge: str
    responses: list[str]
    completion_ids: list[int]
    flags: list[bool]


@dataclass(frozen=True, slots=True)
class _AspectCall:
    prompt_id: str
    aspect: str
    shuffle_idx: int
    order: list[int]
    completion_ids: list[int]
    injection_flags: list[bool]
    prompt: _Prompt
    members: tuple[int, ...]  # the prompt's completions shown, by their place in `prompt`
    # "" for a call of clean completions, else the variant of the differential check
    variant: str = ""


@dataclass(frozen=True, slots=True)
class _CallShape:
    """How a stage builds its aspect requests (shared by every call of the stage)."""

    n_shuffles: int
    shuffle_seed: int
    aspect_orders: str
    structured: bool
    sampling: Mapping[str, Any]
    templates: Templates = PACKAGE_TEMPLATES


def _member_calls(
    prompt: _Prompt,
    aspect: str,
    members: Sequence[int],
    shape: _CallShape,
    shuffles: Sequence[int] | None = None,
) -> Iterator[tuple[_AspectCall, ChatRequest]]:
    """The calls that rate `members` of `prompt` together on `aspect`: one per shuffle (or
    per shuffle in `shuffles`)."""
    orders = shuffle_orders(
        prompt.prompt_id,
        len(members),
        shape.n_shuffles,
        shape.shuffle_seed,
        aspect=aspect if shape.aspect_orders == INDEPENDENT else None,
    )
    shown = [prompt.responses[member] for member in members]
    # A suspected completion (alone) is rated as written and without its spans.
    alone = len(members) == 1 and prompt.flags[members[0]]
    shown_as = (
        [(variant, [text]) for variant, text in variants(shown[0], True, prompt.instruction)]
        if alone
        else [("", shown)]
    )
    for shuffle_idx, order in enumerate(orders):
        if shuffles is not None and shuffle_idx not in shuffles:
            continue
        for variant, texts in shown_as:
            request = build_aspect_request(
                aspect,
                prompt.instruction,
                texts,
                order,
                world_knowledge=prompt.knowledge,
                structured=shape.structured,
                sampling=shape.sampling,
                templates=shape.templates,
            )
            call = _AspectCall(
                prompt.prompt_id,
                aspect,
                shuffle_idx,
                order,
                [prompt.completion_ids[member] for member in members],
                [prompt.flags[member] for member in members],
                prompt,
                tuple(members),
                variant,
            )
            yield call, request


def aspect_calls(
    usable: pd.DataFrame,
    aspects: Sequence[str],
    n_shuffles: int,
    shuffle_seed: int,
    *,
    aspect_orders: str = INDEPENDENT,
    structured: bool,
    sampling: Mapping[str, Any],
    templates: Templates = PACKAGE_TEMPLATES,
) -> Iterator[tuple[_AspectCall, ChatRequest]]:
    """Each judge call of the aspect stage, built lazily: per prompt, aspect, group of
    completions judged together (`judged_together`) and shuffle.

    A prompt's completions are read for injections (`suspected_injection`, in the context
    of its instruction) as its calls are built, so the first calls go out while later
    prompts are still being read. `templates`: the prompt templates the requests are
    rendered from.

    `aspect_orders` is `independent` (each aspect call shuffles on its own, as UltraFeedback)
    or `shared` (one order per prompt and shuffle for all aspects).

    Args:
        usable: the usable completions.
        aspects: the aspects rated.
        n_shuffles: orders per prompt.
        shuffle_seed: the orders' seed.
        aspect_orders: "independent" or "shared".
        structured: ask for JSON by schema.
        sampling: the judge's sampling settings.
        templates: the prompt templates.

    Returns:
        (the call, its request), one at a time.
    """
    if aspect_orders not in ASPECT_ORDERS:
        raise ConfigError(
            f"aspect_orders must be one of {', '.join(ASPECT_ORDERS)}, got {aspect_orders!r}"
        )
    shape = _CallShape(n_shuffles, shuffle_seed, aspect_orders, structured, sampling, templates)
    for prompt_id, group in usable.groupby("prompt_id", sort=True):
        knowledge = group["world_knowledge"].iloc[0] if "world_knowledge" in group else ""
        instruction = str(group["instruction"].iloc[0])
        responses = group["response"].astype(str).tolist()
        prompt = _Prompt(
            str(prompt_id),
            instruction,
            knowledge if isinstance(knowledge, str) else "",
            responses,
            group["completion_idx"].astype(int).tolist(),
            [suspected_injection(response, instruction) for response in responses],
        )
        for aspect in aspects:
            for members in judged_together(prompt.flags):
                yield from _member_calls(prompt, aspect, members, shape)


def aspect_calls_within(
    calls: Iterable[tuple[_AspectCall, ChatRequest]],
    too_long: Callable[[ChatRequest], object],
    shape: _CallShape,
) -> Iterator[tuple[_AspectCall, ChatRequest]]:
    """`calls` as the stage sends them under an input budget: a call of several texts that
    `too_long` refuses is replaced by its parts (`split_too_long`), in turn (the run plan
    counts these calls; the stage finds them as the engine skips the whole call).

    Args:
        calls: `aspect_calls`' calls.
        too_long: The endpoint's budget check (`engine.too_long` bound to the endpoint):
            true-ish when a request would not be sent.
        shape: How the calls were built (`aspect_call_shape`).

    Returns:
        The calls and requests that would be sent, or skipped alone.
    """
    for call, request in calls:
        if len(call.members) < 2 or not too_long(request):
            yield call, request
            continue
        for members in split_too_long(call):
            parts = _member_calls(call.prompt, call.aspect, members, shape, [call.shuffle_idx])
            yield from aspect_calls_within(parts, too_long, shape)


def aspect_call_shape(
    n_shuffles: int,
    shuffle_seed: int,
    *,
    aspect_orders: str = INDEPENDENT,
    structured: bool,
    sampling: Mapping[str, Any],
    templates: Templates = PACKAGE_TEMPLATES,
) -> _CallShape:
    """How `aspect_calls` with these arguments builds its requests (for
    `aspect_calls_within`).

    Args:
        n_shuffles: Orders per group.
        shuffle_seed: The orders' seed.
        aspect_orders: `independent` or `shared`.
        structured: Whether the endpoint takes a JSON schema.
        sampling: The judge's sampling settings.
        templates: The prompt templates the requests are rendered from.

    Returns:
        The shape.
    """
    return _CallShape(n_shuffles, shuffle_seed, aspect_orders, structured, sampling, templates)


def split_too_long(call: _AspectCall) -> list[list[int]]:
    """The parts a call refused as too long is sent again in: its longest text alone, and
    the others together (split again in turn if they are refused too), so that an over-long
    text is judged on its own and its siblings keep their shared call.

    Args:
        call: An aspect call of two or more completions whose request did not fit.

    Returns:
        Two groups of the call's members (places in its prompt).
    """
    responses = call.prompt.responses
    longest = max(call.members, key=lambda member: len(responses[member]))
    return [[longest], [member for member in call.members if member != longest]]


def annotate_aspects(completions: pd.DataFrame, client: LLMClient, **options: Any) -> pd.DataFrame:
    """`aspect_annotations` as a DataFrame; `options` are `aspect_annotations_table`'s.

    Args:
        completions: the completions.
        client: the judge client.
        **options: `aspect_annotations_table`'s keyword arguments.

    Returns:
        The table.
    """
    return aspect_annotations_table(completions, client, **options).frame()


def aspect_annotations_table(
    completions: Completions, client: LLMClient, **options: Any
) -> SpooledTable:
    """`aspect_annotations`: every usable completion of a prompt rated together, per aspect,
    spooled to disk as the calls finish (a Kedro dataset writes it a row group at a time).
    `options` are `aspect_annotations_stage`'s.

    Args:
        completions: the completions, a DataFrame or a table on disk.
        client: the judge client.
        **options: `aspect_annotations_stage`'s keyword arguments.

    Returns:
        The spooled table.
    """
    return client.call(aspect_annotations_stage(completions, client, **options)())


def aspect_annotations_stage(
    completions: Completions,
    client: LLMClient,
    *,
    aspects: Sequence[str],
    n_shuffles: int = 1,
    shuffle_seed: int = 42,
    aspect_orders: str = INDEPENDENT,
    max_reasks: int = 2,
    fail_loud: bool = False,
    sampling: Mapping[str, Any] | None = None,
    prompts_per_chunk: int = CHUNK_PROMPTS,
    templates: Templates = PACKAGE_TEMPLATES,
    ahead: RescoreAhead | None = None,
) -> Stage:
    """The aspect stage, built (aspects checked, calls counted) and ready to run on
    `client`'s loop; running it gives `aspect_annotations`. `ahead`: told of each prompt's
    calls and rows, to send its re-scores once both judge stages have finished it.

    `completions` on disk (`ParquetSource`) are read `prompts_per_chunk` prompts at a time
    as the calls are sent. `aspect_orders`: see `aspect_calls`. `templates`: the prompt
    templates (the package's, or a `prompt_templates` folder's over them).

    Args:
        completions: the completions, a DataFrame or a table on disk.
        client: the judge client.
        aspects: the aspects rated.
        n_shuffles: orders per prompt.
        shuffle_seed: the orders' seed.
        aspect_orders: "independent" or "shared".
        max_reasks: re-asks of an unreadable reply.
        fail_loud: raise when too many calls fail.
        sampling: the judge's sampling settings.
        prompts_per_chunk: prompts per chunk read from disk.
        templates: the prompt templates.
        ahead: the score fix's early re-scores (None: none).

    Returns:
        The stage.
    """
    aspects = [get_aspect(aspect).name for aspect in aspects]  # unknown: fail before any call
    calls_per_group = len(aspects) * n_shuffles

    def count(usable: pd.DataFrame) -> int:
        # A prompt's calls when none of its texts is suspected: the flags are found as the
        # calls are built, and a suspected text's extra calls join the bar's total then.
        return usable["prompt_id"].nunique() * calls_per_group

    chunks, total = usable_chunks(completions, prompts_per_chunk, count)
    structured = client.supports_json_schema
    sampling = dict(sampling or {})
    # Task index -> its call, while the call is out: only the table grows.
    calls: dict[int, _AspectCall] = {}
    indices = itertools.count()  # the engine numbers tasks in the order given
    # One reader per (aspect, number of texts): shared by every task of that shape.
    readers: dict[tuple[str, int], Any] = {}

    def reader(aspect: str, n_texts: int) -> Any:
        if (aspect, n_texts) not in readers:
            readers[aspect, n_texts] = lambda text: _aspect_reading(
                parse_aspect_reply(aspect, text, n_texts, structured), text
            )
        return readers[aspect, n_texts]

    def task(call: _AspectCall, request: ChatRequest) -> Task:
        calls[next(indices)] = call
        return Task(request, reader(call.aspect, len(call.order)), _merge_ratings)

    def built() -> Iterator[tuple[_AspectCall, ChatRequest]]:
        for usable in chunks:
            yield from aspect_calls(
                usable,
                aspects,
                n_shuffles,
                shuffle_seed,
                aspect_orders=aspect_orders,
                structured=structured,
                sampling=sampling,
                templates=templates,
            )

    def tasks() -> Iterator[Task]:
        # Built in a thread of their own; the loop only numbers them and tells `ahead`.
        for call, request in built_ahead(built(), BUILT_AHEAD, "build aspect calls"):
            if ahead:
                ahead.sent(ASPECTS_STAGE, call.prompt_id)
            yield task(call, request)
        if ahead:
            ahead.sent_all(ASPECTS_STAGE)

    table = TableBuilder(ASPECT_ANNOTATIONS_COLUMN_TYPES)
    tally = _ParseTally()
    differential = DifferentialRows("rating")
    # Calls of several texts that did not fit the endpoint: sent again in parts.
    too_long: list[_AspectCall] = []
    shape = _CallShape(n_shuffles, shuffle_seed, aspect_orders, structured, sampling, templates)

    def parts(refused: list[_AspectCall]) -> Iterator[Task]:
        for call in refused:
            sent_again = [
                task(part, request)
                for members in split_too_long(call)
                for part, request in _member_calls(
                    call.prompt, call.aspect, members, shape, shuffles=[call.shuffle_idx]
                )
            ]
            if ahead:
                ahead.replaced(ASPECTS_STAGE, call.prompt_id, len(sent_again))
            yield from sent_again

    def take(index: int, outcome: Outcome) -> None:
        call = calls.pop(index)  # rows as each call's outcome is final
        if outcome.reading.status == SKIPPED_TOO_LONG and len(call.members) > 1:
            too_long.append(call)  # no rows yet: its texts are rated in parts
            return
        ratings = outcome.value if outcome.reply.ok else []
        judgement = AspectJudgement(
            prompt_id=call.prompt_id,
            aspect=call.aspect,
            shuffle_idx=call.shuffle_idx,
            order=call.order,
            ratings=ratings,
            **_call_fields(client, outcome),
            call_error=outcome.error if not ratings else None,
            completion_ids=call.completion_ids,
            injection_flags=call.injection_flags,
            raw_replies=[rating.reply for rating in ratings] or None,
            **_token_fields(outcome),
        )
        rows = aspect_rows(judgement)
        if call.variant:
            key = (call.prompt_id, call.aspect, call.shuffle_idx, call.completion_ids[0])
            kept = differential.add(key, call.variant, index, rows[0])
            rows = [] if kept is None else [kept[1]]
            index = index if kept is None else kept[0]
        for position, row in enumerate(rows):
            table.add(index << 16 | position, row)  # rows in call order, then position
            tally.count(row)
        if ahead:
            ahead.taken(ASPECTS_STAGE, call.prompt_id, rows)

    async def run() -> SpooledTable:
        nonlocal indices
        # `fail_loud` is checked on every round together: a first round whose calls were
        # all too long is answered by the next.
        engine = TaskEngine(client, max_reasks=max_reasks)
        summary = await engine.stream_into(tasks(), take, desc="annotate aspects", total=total)
        while too_long:  # each round splits every refused call in two: at most one per text
            refused, too_long[:] = list(too_long), []
            logger.warning(
                "annotate aspects: %d call(s) too long for %s are sent again, their longest "
                "text alone and the others together",
                len(refused),
                client.config.describe(),
            )
            # The engine numbers this round's tasks from 0; the table's keys go on from here.
            offset = next(indices)
            indices = itertools.count(offset)
            summary = summary.plus(
                await engine.stream_into(
                    list(parts(refused)),  # a few calls, listed: the bar knows its total
                    lambda index, outcome, offset=offset: take(offset + index, outcome),
                    desc="annotate aspects (in parts)",
                )
            )
        if fail_loud:
            engine.raise_if_failing(summary, "annotate aspects")
        tally.log("aspect ratings")
        if ahead:
            ahead.stage_done(ASPECTS_STAGE)
        return table.finish()

    return run


@dataclass(slots=True)
class _ParseTally:
    """How many of a stage's rows were read, counted as they are added."""

    rows: int = 0
    readable: int = 0
    reasked: int = 0

    def count(self, row: Mapping[str, Any]) -> None:
        self.rows += 1
        self.readable += row["parse_status"] in READ
        self.reasked += row["reasks"] > 0

    def log(self, what: str) -> None:
        if not self.rows:
            logger.info("annotate: no %s to report", what)
            return
        logger.info(
            "annotate: %d %s, %.1f%% readable (%d re-asked)",
            self.rows,
            what,
            100 * self.readable / self.rows,
            self.reasked,
        )


# -- critiques -------------------------------------------------------------------------


def _critique_reading(parsed: CritiqueParse) -> Reading:
    if parsed.overall_score is not None:
        return Reading(parsed)
    problem = parsed.error or "no overall score from 1 to 10 could be read"
    return Reading(parsed, NO_MATCH, ok=False, problem=problem)


@dataclass(frozen=True, slots=True)
class _CritiqueCall:
    row: Any  # the completion's row, a named tuple
    suspected_injection: bool
    variant: str  # "" for a clean completion, else the variant of the differential check


def critique_calls(
    usable: pd.DataFrame,
    *,
    structured: bool,
    sampling: Mapping[str, Any],
    templates: Templates = PACKAGE_TEMPLATES,
) -> Iterator[tuple[_CritiqueCall, ChatRequest]]:
    """The critique stage's judge calls, built lazily: per usable completion its call and
    request; a suspected injection is critiqued as written and without its suspicious
    spans (`annotation.isolation`).

    Args:
        usable: the usable completions.
        structured: ask for JSON by schema.
        sampling: the judge's sampling settings.
        templates: the prompt templates.

    Returns:
        (the call, its request), one at a time.
    """
    for row in usable.itertuples(index=False):
        flagged = suspected_injection(str(row.response), str(row.instruction))
        for variant, text in variants(str(row.response), flagged, str(row.instruction)):
            shown = row._replace(response=text) if variant else row
            yield (
                _CritiqueCall(row, flagged, variant),
                critique_request(shown, structured, sampling, templates),
            )


def critique_completions(
    completions: pd.DataFrame, client: LLMClient, **options: Any
) -> pd.DataFrame:
    """`critiques` as a DataFrame; `options` are `critiques_table`'s.

    Args:
        completions: the completions.
        client: the judge client.
        **options: `critiques_table`'s keyword arguments.

    Returns:
        The table.
    """
    return critiques_table(completions, client, **options).frame()


def critiques_table(completions: Completions, client: LLMClient, **options: Any) -> SpooledTable:
    """`critiques`: teacher-style feedback and an overall 1-10 score per completion,
    spooled to disk as the calls finish. `options` are `critiques_stage`'s.

    Args:
        completions: the completions, a DataFrame or a table on disk.
        client: the judge client.
        **options: `critiques_stage`'s keyword arguments.

    Returns:
        The spooled table.
    """
    return client.call(critiques_stage(completions, client, **options)())


def critiques_stage(
    completions: Completions,
    client: LLMClient,
    *,
    max_reasks: int = 2,
    fail_loud: bool = False,
    sampling: Mapping[str, Any] | None = None,
    prompts_per_chunk: int = CHUNK_PROMPTS,
    templates: Templates = PACKAGE_TEMPLATES,
    ahead: RescoreAhead | None = None,
) -> Stage:
    """The critique stage, built (calls counted) and ready to run on `client`'s loop;
    running it gives `critiques`. `completions` on disk are read a chunk of prompts at a
    time, as in `aspect_annotations_stage`; `templates` and `ahead` as there.

    Args:
        completions: the completions, a DataFrame or a table on disk.
        client: the judge client.
        max_reasks: re-asks of an unreadable reply.
        fail_loud: raise when too many calls fail.
        sampling: the judge's sampling settings.
        prompts_per_chunk: prompts per chunk read from disk.
        templates: the prompt templates.
        ahead: the score fix's early re-scores, told of each finished prompt (None: none).

    Returns:
        The stage.
    """
    # One call per completion; a suspected one's second call joins the bar's total when
    # it is found, as the calls are built.
    chunks, total = usable_chunks(completions, prompts_per_chunk, len)
    structured = client.supports_json_schema
    sampling = dict(sampling or {})

    def read(text: str | None) -> Reading:
        return _critique_reading(parse_critique_reply(text, structured))

    # Task index -> the call (completion and variant) it judges, while its call is out.
    completions_judged: dict[int, _CritiqueCall] = {}
    indices = itertools.count()

    def built() -> Iterator[tuple[_CritiqueCall, ChatRequest]]:
        # The plan builds its requests with `critique_calls` too: both send the same calls.
        for usable in chunks:
            yield from critique_calls(
                usable, structured=structured, sampling=sampling, templates=templates
            )

    def tasks() -> Iterator[Task]:
        for call, request in built_ahead(built(), BUILT_AHEAD, "build critique calls"):
            completions_judged[next(indices)] = call
            if ahead:
                ahead.sent(CRITIQUES_STAGE, str(call.row.prompt_id))
                ahead.completion(call.row)
            yield Task(request, read)
        if ahead:
            ahead.sent_all(CRITIQUES_STAGE)

    table = TableBuilder(CRITIQUE_TABLE_TYPES)
    tally = _ParseTally()
    differential = DifferentialRows("overall_score")

    def take(index: int, outcome: Outcome) -> None:
        call = completions_judged.pop(index)
        prompt_id, completion_idx = str(call.row.prompt_id), int(call.row.completion_idx)
        row = critique_row(
            CritiqueJudgement(
                prompt_id=prompt_id,
                completion_idx=completion_idx,
                parsed=outcome.value if outcome.reply.ok else None,
                **_call_fields(client, outcome),
                call_error=None if outcome.reply.ok else outcome.error,
                suspected_injection=call.suspected_injection,
            )
        )
        row.update(_token_fields(outcome))
        if call.variant:
            kept = differential.add((prompt_id, completion_idx), call.variant, index, row)
            if kept is None:
                if ahead:
                    ahead.taken(CRITIQUES_STAGE, prompt_id)
                return
            index, row = kept
        table.add(index, row)
        tally.count(row)
        if ahead:
            ahead.taken(CRITIQUES_STAGE, prompt_id, [row])

    async def run() -> SpooledTable:
        engine = TaskEngine(client, max_reasks=max_reasks, fail_loud=fail_loud)
        await engine.stream_into(tasks(), take, desc="critique", total=total)
        tally.log("critiques")
        if ahead:
            ahead.stage_done(CRITIQUES_STAGE)
        return table.finish()

    return run


# -- both stages on one queue ------------------------------------------------------------


def judge_tables(
    completions: Completions,
    client: LLMClient,
    *,
    aspects: Sequence[str],
    n_shuffles: int = 1,
    shuffle_seed: int = 42,
    aspect_orders: str = INDEPENDENT,
    max_reasks: int = 2,
    fail_loud: bool = False,
    aspect_sampling: Mapping[str, Any] | None = None,
    critique_sampling: Mapping[str, Any] | None = None,
    prompts_per_chunk: int = CHUNK_PROMPTS,
    templates: Templates = PACKAGE_TEMPLATES,
    score_fix: ScoreFixAhead | None = None,
) -> tuple[SpooledTable, SpooledTable]:
    """`aspect_annotations` and `critiques` of `completions`, their calls sent together on
    `client`'s one queue (`engine.run_together`): under the endpoint's concurrency limit the
    judge gets a call from either stage the moment a slot frees, so neither stage's tail,
    re-asks or too-long parts leave it idle while the other has calls to send. Each table
    is the one its stage alone gives (`aspect_annotations_table`, `critiques_table`); each
    stage keeps its own progress bar, summary line and `fail_loud` check.

    Args:
        completions: The completions (a DataFrame, or a `ParquetSource` read a chunk of
            prompts at a time by each stage).
        client: The judge's client (open).
        aspects: The aspects rated, as `aspect_annotations_stage`'s.
        n_shuffles: Orders per group of completions rated together.
        shuffle_seed: The orders' seed.
        aspect_orders: `independent` or `shared` (`aspect_calls`).
        max_reasks: Re-asks per unreadable reply, in each stage.
        fail_loud: Raise `EndpointError` when a stage's failures pass the endpoint's
            `max_failure_share` (the other stage stops too; what was answered is cached).
        aspect_sampling: The aspect calls' sampling settings.
        critique_sampling: The critique calls' sampling settings.
        prompts_per_chunk: Prompts each stage reads at a time from a table on disk.
        templates: The prompt templates both stages render their requests from.
        score_fix: The score fix's settings: its re-score calls are sent on the same queue
            as each prompt's judge calls finish (`rescore_ahead`), into the request cache
            the fix node then reads; None, no cache, or a backend that runs streams in
            turn: the fix node sends them itself.

    Returns:
        (`aspect_annotations`, `critiques`), spooled.
    """
    ahead = None
    if score_fix is not None and RescoreAhead.applies(client):
        ahead = RescoreAhead(client, score_fix, templates)
    stages: list[Callable[[], Awaitable[Any]]] = [
        aspect_annotations_stage(
            completions,
            client,
            aspects=aspects,
            n_shuffles=n_shuffles,
            shuffle_seed=shuffle_seed,
            aspect_orders=aspect_orders,
            max_reasks=max_reasks,
            fail_loud=fail_loud,
            sampling=aspect_sampling,
            prompts_per_chunk=prompts_per_chunk,
            templates=templates,
            ahead=ahead,
        ),
        critiques_stage(
            completions,
            client,
            max_reasks=max_reasks,
            fail_loud=fail_loud,
            sampling=critique_sampling,
            prompts_per_chunk=prompts_per_chunk,
            templates=templates,
            ahead=ahead,
        ),
    ]
    if ahead is not None:
        stages.append(ahead.stage)
    aspect_table, critique_table, *_ = run_together(client, stages)
    return aspect_table, critique_table
