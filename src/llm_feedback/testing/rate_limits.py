"""A provider's per-minute rate limits, enforced by the fake server: requests and tokens.

Each limit is a bucket refilled continuously at `per_minute / 60` a second that holds
`burst_s` seconds of it (a hosted API's holds a minute's). A chat request is admitted
when a request is left and the tokens bucket is not below what the request may cost
(its prompt words plus its `max_tokens`, capped at the bucket's size); else it is
refused with 429 and a `Retry-After` saying when it would be admitted. An admitted
request's tokens are counted at that estimate and corrected by its reply's usage.
Every answer carries the headers OpenAI sends: `x-ratelimit-limit-*`,
`x-ratelimit-remaining-*` and `x-ratelimit-reset-*` (the time until the bucket is full,
as "1.5s"); Anthropic's routes send Anthropic's (`anthropic-ratelimit-requests-limit`,
`-remaining`, `-reset` as the RFC 3339 moment it is full; likewise `-tokens-`), Gemini's
none (a 429 there says its wait in `RetryInfo`). The counters (`rate_limited`: 429s
sent) are part of `/_stats`.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True, slots=True)
class RateLimits:
    """What the server enforces: requests and tokens a minute (None: no such limit), and
    how many seconds of each its buckets hold."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    burst_s: float = 60.0


class _Bucket:
    def __init__(self, per_minute: float, burst_s: float) -> None:
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst_s)
        self.level = self.capacity
        self.updated = time.monotonic()

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
        self.updated = now

    def wait_s(self, cost: float) -> float:
        needed = min(cost, self.capacity)
        return 0.0 if self.level >= needed else (needed - self.level) / self.rate

    def headers(self, name: str, style: str) -> str:
        reset = (self.capacity - self.level) / self.rate
        remaining = max(0, math.floor(self.level))
        if style == "anthropic":  # the reset is the moment the bucket is full (RFC 3339)
            moment = datetime.fromtimestamp(time.time() + reset, UTC)
            return (
                f"anthropic-ratelimit-{name}-limit: {self.per_minute:g}\r\n"
                f"anthropic-ratelimit-{name}-remaining: {remaining}\r\n"
                f"anthropic-ratelimit-{name}-reset: {moment.isoformat(timespec='milliseconds')}"
                "\r\n"
            )
        return (
            f"x-ratelimit-limit-{name}: {self.per_minute:g}\r\n"
            f"x-ratelimit-remaining-{name}: {remaining}\r\n"
            f"x-ratelimit-reset-{name}: {reset:.3f}s\r\n"
        )


class ServerRateLimiter:
    """The fake server's enforcement of `RateLimits` (thread-safe)."""

    def __init__(self, limits: RateLimits) -> None:
        """A token bucket per configured limit (none for a limit not set).

        Args:
            limits: the per-minute limits.
        """
        self._requests = (
            _Bucket(limits.requests_per_minute, limits.burst_s)
            if limits.requests_per_minute
            else None
        )
        self._tokens = (
            _Bucket(limits.tokens_per_minute, limits.burst_s) if limits.tokens_per_minute else None
        )
        self._lock = threading.Lock()
        self.rate_limited = 0

    def admit(self, estimated_tokens: int) -> float | None:
        """Count a request in.

        Args:
            estimated_tokens: What it may cost: its prompt and its max_tokens.

        Returns:
            None when admitted, else the seconds until it would be (a 429).
        """
        with self._lock:
            now = time.monotonic()
            wait = 0.0
            for bucket, cost in ((self._requests, 1), (self._tokens, estimated_tokens)):
                if bucket is not None:
                    bucket.refill(now)
                    wait = max(wait, bucket.wait_s(cost))
            if wait > 0:
                self.rate_limited += 1
                return wait
            if self._requests is not None:
                self._requests.level -= 1
            if self._tokens is not None:
                self._tokens.level -= estimated_tokens
            return None

    def correct(self, estimated_tokens: int, used_tokens: int) -> None:
        """Count an admitted request at what it used rather than its estimate.

        Args:
            estimated_tokens: What `admit` counted.
            used_tokens: Its usage's total tokens.
        """
        if self._tokens is not None:
            with self._lock:
                self._tokens.level = min(
                    self._tokens.capacity, self._tokens.level + estimated_tokens - used_tokens
                )

    def headers(self, style: str = "openai") -> str:
        """The rate-limit header lines of an answer, as they stand now.

        Args:
            style: "openai" (`x-ratelimit-*`) or "anthropic" (`anthropic-ratelimit-*`).

        Returns:
            "Name: value" lines, each ending in CRLF.
        """
        with self._lock:
            now = time.monotonic()
            lines = ""
            for name, bucket in (("requests", self._requests), ("tokens", self._tokens)):
                if bucket is not None:
                    bucket.refill(now)
                    lines += bucket.headers(name, style)
            return lines

    def reset(self) -> None:
        with self._lock:
            self.rate_limited = 0
