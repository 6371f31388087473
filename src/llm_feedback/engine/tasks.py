"""What the engine runs: a `Task` (a request and how to read its reply), the `Reading` made
of a reply, and the `Outcome` of a task once its re-asks are done."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.replies.status import CALL_FAILED, OK, PROBLEM_BY_STATUS


@dataclass(frozen=True, slots=True)
class Reading:
    """What was made of one reply.

    `ok` says whether the value is usable as it is; an unusable reading is re-asked, and
    `problem` (or, without one, its status) tells the judge what was wrong.
    """

    value: Any
    status: str = OK
    ok: bool = True
    problem: str | None = None
    details: Mapping[str, Any] | None = None

    @property
    def problem_text(self) -> str:
        return self.problem or PROBLEM_BY_STATUS.get(self.status, "its format did not match")


Reader = Callable[[str | None], Reading]
# Folds a re-ask's reading into the earlier one, keeping what the earlier reply got right.
Merger = Callable[[Reading, Reading], Reading]


def read_text(text: str | None) -> Reading:
    """The reader of a generation: the reply text is the value.

    Args:
        text: the reply (None: no reply).

    Returns:
        The reading.
    """
    return Reading(text)


@dataclass(frozen=True, slots=True)
class Task:
    """One model call: the request, how to read its reply, and how to fold in a re-ask.

    `merge` None means a re-ask's reading replaces the earlier one when it is usable.
    `reask` False never re-asks (generation: any reply is the answer).
    """

    request: ChatRequest
    read: Reader = read_text
    merge: Merger | None = None
    reask: bool = True


@dataclass(slots=True)
class Outcome:
    """A task after its first call and any re-asks.

    `reply` is the latest reply that was read (the failed one when the first call failed);
    `error` is set when a call failed, which ends the task's re-asks. Token counts add up
    every call of the task; `cached` holds while every reply came from the request cache.
    """

    reading: Reading
    reply: ChatResult
    reasks: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Of `prompt_tokens`, read from and written to the provider's prompt cache (None: no
    # reply said).
    cached_prompt_tokens: int | None = None
    cache_write_tokens: int | None = None
    cached: bool = True
    error: str | None = None

    @property
    def value(self) -> Any:
        return self.reading.value

    def add_usage(self, reply: ChatResult) -> None:
        """Count a re-ask's reply in the task's tokens.

        Args:
            reply: The re-ask's reply; its cache counts add only where it reports them.
        """
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        for name in ("cached_prompt_tokens", "cache_write_tokens"):
            mine, theirs = getattr(self, name), getattr(reply, name)
            if theirs is not None:
                setattr(self, name, (mine or 0) + theirs)

    @property
    def status(self) -> str:
        return self.reading.status

    @property
    def ok(self) -> bool:
        return self.reading.ok

    @property
    def text(self) -> str | None:
        return self.reply.text


def failed_reading(read: Reader, error: str | None) -> Reading:
    """The reading of a failed call: the reader's empty value keeps the shape of the value.

    Args:
        read: the task's reader.
        error: the call's error.

    Returns:
        The reading, not usable.
    """
    return dataclasses.replace(read(None), status=CALL_FAILED, ok=False, problem=error)
