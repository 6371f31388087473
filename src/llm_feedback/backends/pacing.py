"""Timeouts that follow the machine's load, for a model that shares this machine's cores.

A fixed `timeout_s` suits a remote server whose speed does not depend on us. The embedded
model runs on the same cores as everything else: on a busy laptop it answers five times
slower, and a fixed timeout turns "slower" into "failed". Here the endpoint's `timeout_s`
is a floor; above it, each request gets the time that the measured seconds per generated
token say a reply of its `max_tokens` takes, behind the requests already in flight for
the same slots, with headroom. A request that times out doubles the allowance (up to 16x)
until an answer arrives again, so its retry is not sent into the same wall.
"""

from __future__ import annotations

import math
from typing import Any

from llm_feedback.backends.base import RetryableError
from llm_feedback.backends.contract import ChatRequest, ChatResult

HEADROOM = 3.0
MAX_STRETCH = 16.0
# Weight of the newest answer in the running seconds-per-token (an exponential average:
# it follows a change of load within a few answers).
NEWEST_WEIGHT = 0.2


class AdaptiveTimeout:
    """Per-request timeouts from the measured token rate and queue (one event loop)."""

    def __init__(self, floor_s: float, slots: int) -> None:
        """Timeouts that start at the floor until a token rate is measured.

        Args:
            floor_s: The shortest timeout (the endpoint's `timeout_s`).
            slots: Requests the server works on at once (at least 1).
        """
        self.floor_s = floor_s
        self.slots = max(1, slots)
        self.seconds_per_token: float | None = None
        self.in_flight = 0
        self.stretch = 1.0

    def start(self, max_tokens: int) -> float:
        """Count a request in and return its timeout.

        Args:
            max_tokens: The request's token budget.

        Returns:
            Its timeout in seconds: the floor, or the time its queue and tokens are expected to
            take (with headroom), stretched after timeouts.
        """
        self.in_flight += 1
        estimate = 0.0
        if self.seconds_per_token is not None:
            waves = math.ceil(self.in_flight / self.slots)
            estimate = HEADROOM * waves * max(max_tokens, 1) * self.seconds_per_token
        return max(self.floor_s, estimate) * self.stretch

    def finish(self, result: ChatResult | None, timed_out: bool) -> None:
        """Count a request out; learn from its answer or its timeout.

        Args:
            result: Its result; None when it raised.
            timed_out: Whether it ran past its timeout (the next timeouts double, up to a
                limit).
        """
        self.in_flight -= 1
        if timed_out:
            self.stretch = min(self.stretch * 2, MAX_STRETCH)
            return
        if result is None or not result.ok or result.completion_tokens <= 0:
            return
        measured = result.latency_s / result.completion_tokens
        previous = self.seconds_per_token
        self.seconds_per_token = (
            measured
            if previous is None
            else (1 - NEWEST_WEIGHT) * previous + NEWEST_WEIGHT * measured
        )
        self.stretch = 1.0


class PacedSends:
    """A request backend mixin: each send gets its timeout from an `AdaptiveTimeout`."""

    config: Any
    _pace: AdaptiveTimeout | None = None

    async def send(self, sdk: Any, request: ChatRequest) -> ChatResult:
        """Send with a timeout from the endpoint's `AdaptiveTimeout`, and learn from the outcome.

        Args:
            sdk: The connection of the client's event loop.
            request: The request.

        Returns:
            Its result.

        Raises:
            RetryableError: As the backend's `send` raises it (a timeout stretches the next
                timeouts).
        """
        if self._pace is None:
            self._pace = AdaptiveTimeout(self.config.timeout_s, self.config.concurrency)
        timeout_s = self._pace.start(request.token_budget)
        result, timed_out = None, False
        try:
            result = await super().send(sdk, request, timeout_s=timeout_s)  # type: ignore[misc]
            return result
        except RetryableError as error:
            timed_out = error.timed_out
            raise
        finally:
            self._pace.finish(result, timed_out)
