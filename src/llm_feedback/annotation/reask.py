"""A bounded re-ask after a reply that could not be read.

Repeating the identical request at temperature 0 tends to return the identical reply, so the
re-ask shows the judge its previous answer and says what was wrong with it. `attempt` goes up
by one, which keeps the re-ask a distinct entry in the request cache.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from llm_feedback.annotation.parsing import AspectRating
from llm_feedback.backends.contract import ChatRequest


def rating_problems(ratings: Sequence[AspectRating]) -> list[str]:
    """What went wrong, per unreadable position; empty when every position was read."""
    return [
        f"Text {rating.position + 1}: {rating.error}"
        for rating in ratings
        if rating.status == "parse_error"
    ]


def build_reask_request(
    request: ChatRequest, reply_text: str | None, problems: Sequence[str]
) -> ChatRequest:
    """`request` one attempt later, followed by the unreadable reply and what to fix."""
    if not reply_text or not reply_text.strip():
        return dataclasses.replace(request, attempt=request.attempt + 1)
    correction = (
        "Your answer above could not be read: "
        + "; ".join(problems or ["its format did not match"])
        + ". Answer the original request again from the start, in exactly the requested "
        "format, covering every text."
    )
    return dataclasses.replace(
        request,
        messages=(
            *request.messages,
            {"role": "assistant", "content": reply_text},
            {"role": "user", "content": correction},
        ),
        attempt=request.attempt + 1,
    )
