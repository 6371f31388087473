"""Completions suspected of injection are rated apart from their siblings.

A completion that imitates the judge's answer format (`replies.fencing.suspected_injection`)
may steer a judge that reads it; rated in the same call as its siblings, it could move
their ratings too. So each suspected completion is rated in an aspect call of its own, and
the clean completions of the prompt together; its rows carry `suspected_injection`, and
preference pairs leave it out by default (`report.pairs.include_suspected`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from llm_feedback.replies.injection import suspected_injection


def judged_together(injection_flags: Sequence[bool]) -> list[list[int]]:
    """Which of a prompt's completions share an aspect call: all of them, unless some are
    suspected injections; then each of those is judged alone and the clean ones together,
    so that a judge obeying a completion's instructions moves no rating but its own (and that
    row carries `suspected_injection`)."""
    flagged = [index for index, flag in enumerate(injection_flags) if flag]
    clean = [index for index, flag in enumerate(injection_flags) if not flag]
    if not flagged:
        return [clean]
    return ([clean] if clean else []) + [[index] for index in flagged]


def injection_flags(usable: pd.DataFrame) -> pd.Series:
    """Per completion row, whether it is a suspected injection (computed once per stage:
    the scan reads every line of every completion)."""
    return usable["response"].astype(str).map(suspected_injection).astype(bool)


def aspect_call_count(usable: pd.DataFrame, flagged: pd.Series, calls_per_group: int) -> int:
    """How many aspect calls `aspect_calls` makes (for the progress bar); `flagged` is
    `injection_flags(usable)`."""
    per_prompt = flagged.groupby(usable["prompt_id"]).agg(["sum", "size"])
    groups = per_prompt["sum"] + (per_prompt["sum"] < per_prompt["size"])
    return int(groups.sum()) * calls_per_group
