"""The judge gate: a run's report is written only when its judge's card meets the
requirements, e.g. accuracy's lower bound at least 0.7: the report pipeline's
`report.judge_requirement` on the annotate judge before `report.md`, the evaluate
pipeline's `evaluate.judge_requirement` on its judge before `eval_metrics` and the ranking.

A requirement is checked on the judge's latest card of every validation set that measures
its metric (or of the one set it names), over all items, on every verdict source measured
(`argmax`, `ratings`, ...): each must meet it. A card that does not exist, or measures
no such metric, fails the requirement as surely as a low figure: an unvalidated judge is
not a validated one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from llm_feedback.core.errors import ConfigError
from llm_feedback.params.report import JudgeRequirement
from llm_feedback.validation.card import CARD_METRICS, JUDGE, latest_rows


class JudgeRequirementError(ConfigError):
    """The judge's card falls short of a requirement, or there is none to check."""


def check_requirements(
    cards: pd.DataFrame,
    identity: Mapping[str, str] | None,
    requirements: Sequence[JudgeRequirement],
    *,
    setting: str = "report.judge_requirement",
    validate_with: str = "report.labels.path, or evaluate with gold labels",
) -> list[str]:
    """Check the judge's latest cards against the requirements.

    Args:
        cards: judge_validation rows (every judge's).
        identity: the judge's identity columns (`identity.judge_identity`); None when the
            judge that rated the data is not recorded, which fails any requirement.
        requirements: what its card must show.
        setting: the parameter the requirements come from, for the messages.
        validate_with: how the judge gets a card, for the message when it has none.

    Returns:
        A line per requirement met (for the report).

    Raises:
        JudgeRequirementError: naming the judge, the metric, its bound and the requirement,
            for the first requirement not met; ConfigError for a metric no card has.
    """
    if identity is None:
        if requirements:
            wanted = "; ".join(requirement.describe() for requirement in requirements)
            raise JudgeRequirementError(
                "the judge that rated this data is not recorded (no run record of the run "
                "that wrote the ratings names it), so no card can be checked; "
                f"report.judge_requirement requires {wanted} (rerun annotate to record "
                "its judge)"
            )
        return []
    judge = (
        f"judge {identity['judge_model']} at {identity['judge_endpoint']} "
        f"(judge key {identity['judge_key']})"
    )
    rows = latest_rows(cards, identity["judge_key"]) if len(cards) else cards
    met = []
    for requirement in requirements:
        if requirement.metric not in CARD_METRICS:
            raise ConfigError(
                f"{setting}.metric: {requirement.metric!r} is not a card "
                f"metric; one of {', '.join(CARD_METRICS)}"
            )
        wanted = f"{setting} requires {requirement.describe()}"
        measured = rows[(rows["kind"] == JUDGE) & (rows["metric"] == requirement.metric)]
        if requirement.validation_set is not None:
            measured = measured[measured["validation_set"] == requirement.validation_set]
        if measured.empty:
            raise JudgeRequirementError(
                f"{judge} has no card measuring {requirement.metric}"
                + (f" on {requirement.validation_set}" if requirement.validation_set else "")
                + f"; {wanted} (validate it: {validate_with})"
            )
        for _, row in measured.iterrows():
            low = float(row["ci_low"])
            where = (
                f"{requirement.metric} ({row['verdict_source']}) {row['value']:.3f} "
                f"[{low:.3f}, {float(row['ci_high']):.3f}] on {row['validation_set']} "
                f"({row['created_at']})"
            )
            if not np.isfinite(low) or low < requirement.min_lower_bound:
                bound = f"{low:.3f}" if np.isfinite(low) else "none (no interval)"
                raise JudgeRequirementError(
                    f"{judge} falls short: {requirement.metric} lower bound {bound} < "
                    f"{requirement.min_lower_bound:g}, {where}; {wanted}"
                )
            met.append(f"Requirement met: {requirement.describe()} ({where}).")
    return met
