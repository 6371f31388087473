"""The annotate report's words for the judge that rated the data, read from the data's
lineage (`runs.record.recorded_judge`: the run record of the annotate run that wrote the
ratings), never from the configuration of the run that prints the report:
`recorded_judge_line` names the judge as recorded, and a judge that is not recorded gets
`not_recorded_standing`, a status line, not a guess."""

from __future__ import annotations

import json

from llm_feedback.reporting.markdown_escape import code_span, markdown_text
from llm_feedback.runs.record import RecordedJudge
from llm_feedback.validation.card import ValidationStanding

NOT_RECORDED_CAVEAT = (
    "**Caveat: the judge that rated this data is not recorded** (see Judge validation): "
    "no validation card can be matched to it, so these ratings carry no measured accuracy."
)


def _ratings_written_by(judge: RecordedJudge) -> str:
    return f"run {code_span(judge.run)}" if judge.run else "a run that is not known"


def recorded_judge_line(judge: RecordedJudge) -> str:
    """The report's line naming the judge that rated the data, as its run recorded it:
    model, endpoint name, backend, base URL (no password, query or fragment), model
    file, sampling and judge key; or the status line of a judge not recorded.

    Args:
        judge: The judge as the data's lineage recorded it.

    Returns:
        The line, in Markdown.
    """
    if not judge.recorded:
        return not_recorded_line(judge)
    endpoint, identity = judge.endpoint, judge.identity or {}
    where = [
        f"{endpoint['backend']} backend" if endpoint.get("backend") else None,
        markdown_text(str(endpoint["base_url"])) if endpoint.get("base_url") else None,
        f"model file {code_span(endpoint['model_file'])}" if endpoint.get("model_file") else None,
    ]
    shown = ", ".join(part for part in where if part)
    sampling = json.dumps(judge.sampling, sort_keys=True)
    return (
        f"Rated by {markdown_text(str(endpoint.get('model')))} at endpoint "
        f"{code_span(endpoint.get('name') or identity.get('judge_endpoint'))}"
        + (f" ({shown})" if shown else "")
        + f", sampling {code_span(sampling)}, judge key {code_span(identity.get('judge_key'))}: "
        f"as recorded by {_ratings_written_by(judge)}, which wrote these ratings."
    )


def not_recorded_line(judge: RecordedJudge) -> str:
    """The status line of ratings whose judge no run record names.

    Args:
        judge: The lineage's judge, not recorded (its `run` may still be known).

    Returns:
        The line, in Markdown.
    """
    written = (
        f"the run that wrote these ratings ({code_span(judge.run)}) left no run record "
        "naming its judge (written before runs kept records, or its record is missing)"
        if judge.run
        else "no run record names the run that wrote these ratings"
    )
    return (
        f"**Judge not recorded**: {written}, so no validation card can be matched to it; "
        "the current configuration is not taken for it. Rerun annotate to record its judge "
        "(answers in the request cache are not paid for again)."
    )


def not_recorded_standing(judge: RecordedJudge) -> ValidationStanding:
    """The first screen's standing of ratings whose judge is not recorded.

    Args:
        judge: The lineage's judge, not recorded.

    Returns:
        A standing that is not validated, with the status line and its caveat.
    """
    return ValidationStanding(False, (not_recorded_line(judge),), NOT_RECORDED_CAVEAT)
