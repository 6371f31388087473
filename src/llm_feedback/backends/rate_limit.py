"""Requests-per-minute and tokens-per-minute pacing of one endpoint, adapting to the
rate-limit headers its server sends.

Hosted APIs enforce per-minute limits on requests and on tokens and say in each response
what is left (`x-ratelimit-limit-*`, `x-ratelimit-remaining-*`, `x-ratelimit-reset-*`:
OpenAI, Azure, Groq, OpenRouter and vLLM behind a gateway use these names). A client
that only bounds its concurrency either leaves capacity unused or sends into a wall of
429s, each retried on its own. Here each send first takes from two token buckets, one
for requests and one for tokens, which refill continuously at the endpoint's
`requests_per_minute` / `tokens_per_minute` and hold at most `BURST_S` seconds of either
(so a run starts at the limit's pace rather than with a minute's worth in one burst).

A request's tokens are estimated before the call (its prompt by
`ChatRequest.estimated_input_tokens`, plus its `max_tokens` and any reasoning budget
(`ChatRequest.token_budget`), which providers count
against the limit until the reply is known) and corrected by its `usage` after it.
Headers adapt the pacing: a lower `x-ratelimit-limit-*` than configured lowers the rate
(or sets it, where none is configured); a `remaining` count below what the buckets hold
empties them to that count (another client shares the key); nothing remaining, where no
rate is known, pauses every send until the `reset` time; a 429's `Retry-After` pauses
every send, not only the retry of the request that got it, so one refusal does not
become a storm. Nor does the pause's end: the sends it held then go one per named wait,
and each answered send halves that spacing (a slow start, as TCP's after a loss). Without
it every held send goes at once, one is admitted, the rest are refused again, and a
request can lose every round until its retries are spent (a Gemini endpoint, which names
its wait only in a 429, lost one of 80 calls so).

A hand-written bucket rather than a library's (aiolimiter, pyrate-limiter): those take a
fixed rate and a fixed cost, and this one must change its rate, take a cost known only
after the call and go into debt for a request larger than its burst.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llm_feedback.backends.contract import ChatRequest, ChatResult

logger = logging.getLogger(__name__)

#: Seconds of the limit a bucket holds when full: the largest burst sent at once.
BURST_S = 1.0
#: Below this a 429's spacing is dropped: sends go as the buckets allow.
_LEAST_SPACING_S = 0.001
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def duration_seconds(value: str | None) -> float | None:
    """The seconds a reset header names.

    Args:
        value: "1s", "6m0s", "20ms", "1h2m3.5s" (OpenAI's form) or a plain number of
            seconds.

    Returns:
        Seconds, or None when absent or unreadable.
    """
    if value is None:
        return None
    text = value.strip().lower()
    if _NUMBER.fullmatch(text):
        return float(text)
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        return None
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def _count(value: str | None) -> float | None:
    if value is None or not _NUMBER.fullmatch(value.strip()):
        return None
    return float(value.strip())


@dataclass(frozen=True, slots=True)
class LimitHeaders:
    """What a response's rate-limit headers say about one limit (requests or tokens)."""

    limit: float | None
    remaining: float | None
    reset_s: float | None

    @classmethod
    def read(cls, headers: Mapping[str, str], name: str) -> LimitHeaders:
        """The `x-ratelimit-{limit,remaining,reset}-<name>` headers (case-insensitive).

        Args:
            headers: The response's headers.
            name: The limit's name in the headers ("requests" or "tokens").

        Returns:
            The limit, what remains and the seconds to reset (each None when absent or
            unreadable).
        """
        return cls(
            _count(headers.get(f"x-ratelimit-limit-{name}")),
            _count(headers.get(f"x-ratelimit-remaining-{name}")),
            duration_seconds(headers.get(f"x-ratelimit-reset-{name}")),
        )


class TokenBucket:
    """A bucket refilled at `per_minute / 60` a second up to `BURST_S` seconds of it; a
    cost larger than the bucket is taken once it is full, leaving it in debt."""

    def __init__(self, per_minute: float) -> None:
        """A full bucket.

        Args:
            per_minute: The limit per minute (requests or tokens).
        """
        self.per_minute = per_minute
        self.level = self.capacity
        self._updated = time.monotonic()

    @property
    def rate(self) -> float:
        return self.per_minute / 60.0

    @property
    def capacity(self) -> float:
        return max(1.0, self.rate * BURST_S)

    def refill(self, now: float) -> None:
        """Add what the rate has earned since the last refill, up to the capacity.

        Args:
            now: The current `time.monotonic()`.
        """
        self.level = min(self.capacity, self.level + (now - self._updated) * self.rate)
        self._updated = now

    def wait_s(self, cost: float) -> float:
        """Seconds until `cost` may be taken (0: now).

        Args:
            cost: What the send will take (1 request, or its tokens).

        Returns:
            The wait in seconds.
        """
        needed = min(cost, self.capacity)
        return 0.0 if self.level >= needed else (needed - self.level) / self.rate

    def take(self, cost: float) -> None:
        """Take `cost` from the bucket (it may go into debt).

        Args:
            cost: What the send takes.
        """
        self.level -= cost

    def give_back(self, amount: float) -> None:
        """Return what a send took but did not use, up to the capacity.

        Args:
            amount: What to return.
        """
        self.level = min(self.capacity, self.level + amount)

    def at_most(self, remaining: float) -> None:
        """The server has `remaining` left: never hold more than that.

        Args:
            remaining: What the server says is left.
        """
        self.level = min(self.level, remaining)

    def lower_rate(self, per_minute: float) -> bool:
        """Adopt the server's lower limit; whether the rate changed.

        Args:
            per_minute: The server's limit per minute (ignored unless lower and positive).

        Returns:
            Whether the rate changed.
        """
        if per_minute >= self.per_minute or per_minute <= 0:
            return False
        self.per_minute = per_minute
        self.level = min(self.level, self.capacity)
        return True


class RateLimiter:
    """The pacing of one endpoint's sends, on the client's event loop (see the module
    docstring). `acquire` before each attempt, `settle` after it, `observe` each
    response's headers, `pause` on a 429's Retry-After."""

    def __init__(
        self, requests_per_minute: float | None, tokens_per_minute: float | None, name: str
    ) -> None:
        """The limiter of one endpoint.

        Args:
            requests_per_minute: The endpoint's request limit; None or 0 for none.
            tokens_per_minute: Its token limit; None or 0 for none.
            name: The endpoint's name, for log lines.
        """
        self.requests = TokenBucket(requests_per_minute) if requests_per_minute else None
        self.tokens = TokenBucket(tokens_per_minute) if tokens_per_minute else None
        self.name = name
        self.paused_until = 0.0
        self.spacing_s = 0.0  # after a 429: the least time between sends, halved per answer
        self.next_send_at = 0.0
        self.waited_s = 0.0  # summed over sends: the time the limits cost
        self._lock = asyncio.Lock()

    @classmethod
    def for_endpoint(cls, config: Any) -> RateLimiter:
        """The limiter of an endpoint.

        Args:
            config: The endpoint, with its `requests_per_minute` and `tokens_per_minute`
                (either may be None; with neither it still follows the server's headers).

        Returns:
            Its limiter.
        """
        return cls(config.requests_per_minute, config.tokens_per_minute, config.describe())

    def _buckets(self) -> list[TokenBucket]:
        return [bucket for bucket in (self.requests, self.tokens) if bucket is not None]

    @staticmethod
    def estimate(request: ChatRequest) -> int:
        """The tokens a request is counted for before its usage is known.

        Args:
            request: The request.

        Returns:
            Its estimated prompt tokens plus its whole token budget.
        """
        return request.estimated_input_tokens() + request.token_budget

    async def acquire(self, tokens: int) -> None:
        """Wait until one request of `tokens` tokens may be sent, then count it. Waiters
        are served in turn, so a large request is not starved by small ones.

        Args:
            tokens: The request's estimate (`estimate`).
        """
        if not self._buckets() and not self.spacing_s and self.paused_until <= time.monotonic():
            return  # no limit known, no pause and no refusal to recover from: nothing to wait for
        async with self._lock:
            while True:
                now = time.monotonic()
                for bucket in self._buckets():
                    bucket.refill(now)
                wait = max(self.paused_until, self.next_send_at) - now
                if self.requests is not None:
                    wait = max(wait, self.requests.wait_s(1))
                if self.tokens is not None:
                    wait = max(wait, self.tokens.wait_s(tokens))
                if wait <= 0:
                    break
                self.waited_s += wait
                await asyncio.sleep(wait)
            self.next_send_at = time.monotonic() + self.spacing_s
            if self.requests is not None:
                self.requests.take(1)
            if self.tokens is not None:
                self.tokens.take(tokens)

    def settle(self, estimated: int, result: ChatResult | None) -> None:
        """Correct the tokens counted for a request by what it used.

        Args:
            estimated: What `acquire` counted for it.
            result: Its answer, whose usage is what it cost; None when it was refused
                before anything was used (all of the estimate comes back).
        """
        if result is not None:  # answered: the server took it, so send faster again
            self.spacing_s = self.spacing_s / 2 if self.spacing_s >= _LEAST_SPACING_S else 0.0
        if self.tokens is None:
            return
        used = 0 if result is None else result.prompt_tokens + result.completion_tokens
        if result is not None and not result.ok and used == 0:
            return  # a failure without usage: what it cost is unknown, keep the estimate
        self.tokens.give_back(estimated - used)

    def pause(self, seconds: float) -> None:
        """Hold every send for a while.

        Args:
            seconds: How long (a 429's Retry-After); afterwards sends go at most one per
                `seconds` until answers halve that spacing away.
        """
        self.paused_until = max(self.paused_until, time.monotonic() + seconds)
        self.spacing_s = max(self.spacing_s, seconds)

    def observe(self, headers: Mapping[str, str] | None) -> None:
        """Adapt to a response's rate-limit headers (see the module docstring).

        Args:
            headers: The response's headers (a case-insensitive mapping), or None.
        """
        if headers is None:
            return
        now = time.monotonic()
        for name in ("requests", "tokens"):
            seen = LimitHeaders.read(headers, name)
            if seen.limit is not None:
                self._adopt_limit(name, seen.limit)
            bucket = getattr(self, name)
            if seen.remaining is None:
                continue
            if bucket is not None:
                bucket.refill(now)
                bucket.at_most(seen.remaining)
            elif seen.remaining < 1 and seen.reset_s:
                # No rate known to wait for one unit by: wait for the reset.
                self.paused_until = max(self.paused_until, now + seen.reset_s)

    def _adopt_limit(self, name: str, limit: float) -> None:
        bucket = getattr(self, name)
        if bucket is None:
            setattr(self, name, TokenBucket(limit))
            logger.info(
                "%s: pacing to the server's limit of %g %s a minute", self.name, limit, name
            )
        elif bucket.lower_rate(limit):
            logger.warning(
                "%s: the server allows %g %s a minute, fewer than configured: pacing to it",
                self.name,
                limit,
                name,
            )
