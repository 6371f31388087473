"""The run record: which settings made the data a run wrote, so that a dataset card is
built from the data's own lineage, never from the configuration current when it is read.

Kedro saves every output of one run under the run's save version. The record is one more
versioned output (`run_record`, JSON), saved when the run starts, under that same version:
for dataset D at version v, the record at version v is the record of the run that wrote D.
It holds one part per feedback stage (`hub_card.stage_settings`: settings, and for annotate
the judge in words and its identity). A stage the run ran is described from the run's own
parameters; a stage whose output the run read instead is copied from the record at that
output's version (the run that wrote it), or marked "not recorded" when that version has
none (data written before records were kept). So the record of a report run names the
judge of the annotate run whose ratings it read.

The same record, built for any run whose nodes describe data (`run_lineage`, in memory:
the report, the card beside the export), is what they read their judge from:
`recorded_judge` gives the judge of the annotate run that wrote the ratings, or says
that it is not recorded; never the configuration current when they run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_feedback.publishing.dataset_card import (
    CARD_STAGES,
    card_settings,
    judge_endpoint_words,
    stage_settings,
)

# The dataset each stage's settings are read from: the stage's own output.
STAGE_OUTPUTS = {
    "sample": "sampled_prompts",
    "generate": "completions",
    "annotate": "aspect_annotations",
    "report": "preference_pairs",
}
NOT_RECORDED = "not recorded"


def stage_part(stage: str, run: str | None, settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """One stage's entry: the run (version) that wrote its output and its settings, or
    `recorded: false` when no record of that run exists.

    Args:
        stage: the stage's name.
        run: the version that wrote its output (None: unknown).
        settings: the stage's settings in that run's record (None: no record).

    Returns:
        The entry.
    """
    if settings is None:
        return {"run": run, "recorded": False}
    return {"run": run, "recorded": True, **settings}


def build_record(
    version: str,
    parameters: Mapping[str, Any],
    ran: Collection[str],
    read_version: Callable[[str], str | None],
    load_record: Callable[[str], Mapping[str, Any] | None],
) -> dict[str, Any]:
    """The record of a run saved as `version`.

    Args:
        version: the run's save version.
        parameters: the run's parameters.
        ran: the stages whose output the run writes.
        read_version: a stage's output dataset -> the version the run reads (None: none).
        load_record: a version -> the record saved under it, or None.

    Returns:
        {"version", "stages": {stage: part}}, JSON-serialisable.
    """
    stages: dict[str, Any] = {}
    for stage in CARD_STAGES:
        if stage in ran:
            stages[stage] = stage_part(stage, version, stage_settings(parameters, stage))
            continue
        source = read_version(STAGE_OUTPUTS[stage])
        if source is None:
            continue  # never written: nothing to describe
        earlier = load_record(source)
        part = ((earlier or {}).get("stages") or {}).get(stage)
        if part is None:
            part = stage_part(stage, source, None)
        stages[stage] = part
    return json.loads(json.dumps({"version": version, "stages": stages}, default=str))


def card_lineage(
    record: Mapping[str, Any] | None, version: str | None
) -> tuple[str | None, dict[str, Any]]:
    """(the judge in words, the settings) a dataset card lists for the data saved as
    `version`, from its run record; with no record, both say "not recorded".

    Args:
        record: the run record at `version`, or None.
        version: the pushed dataset's version.

    Returns:
        The judge (None: not recorded) and the settings, with `written_by`: stage -> run.
    """
    if record is None:
        where = f" at version {version}" if version else ""
        return None, {"lineage": f"{NOT_RECORDED}: no run record{where}"}
    stages = record.get("stages") or {}
    parts = {stage: part for stage, part in stages.items() if part.get("recorded")}
    judge, settings = card_settings(parts)
    if "annotate" in stages and "annotate" not in parts:
        judge = None
    settings["written_by"] = {
        stage: part.get("run") if part.get("recorded") else f"{part.get('run')} ({NOT_RECORDED})"
        for stage, part in stages.items()
    }
    return judge, settings


def judge_identity_of(record: Mapping[str, Any] | None) -> dict[str, str] | None:
    """The identity of the judge that rated the recorded data (`validation.card`), if
    recorded.

    Args:
        record: a run record (None: none).

    Returns:
        The identity, or None.
    """
    part = ((record or {}).get("stages") or {}).get("annotate") or {}
    identity = part.get("judge_identity")
    return dict(identity) if identity else None


@dataclass(frozen=True)
class RecordedJudge:
    """The judge of the annotate run that wrote the ratings, as that run recorded it.

    `identity` is None when it is not recorded (no record: data written before records
    were kept, or read where no record was built); `run` is the version that wrote the
    ratings when known. `endpoint`: name, backend, model, model_file and base_url (no
    password, query or fragment); a record written before these were kept has the
    identity's model, model file and endpoint name only."""

    run: str | None = None
    identity: dict[str, str] | None = None
    endpoint: dict[str, Any] = field(default_factory=dict)
    sampling: dict[str, Any] = field(default_factory=dict)
    words: str | None = None

    @property
    def recorded(self) -> bool:
        return self.identity is not None

    def endpoint_words(self) -> str | None:
        """A dataset card's line on the judge's endpoint (no URL: a card is public)."""
        if self.identity is None:
            return None
        return judge_endpoint_words(self.endpoint, self.sampling, self.identity.get("judge_key"))


def recorded_judge(record: Mapping[str, Any] | None) -> RecordedJudge:
    """The annotate judge of `record` (a run record or the in-memory `run_lineage`).

    Args:
        record: the record, or None / {} when there is none.

    Returns:
        The judge; not recorded (`identity` None) when the record has no annotate part,
        marks it not recorded, or lacks its identity.
    """
    part = ((record or {}).get("stages") or {}).get("annotate") or {}
    run = part.get("run")
    identity = part.get("judge_identity")
    if not part.get("recorded") or not identity:
        return RecordedJudge(run=str(run) if run else None)
    identity = {key: str(value) for key, value in identity.items()}
    endpoint = dict(part.get("judge_endpoint") or {})
    endpoint.setdefault("name", identity.get("judge_endpoint"))
    endpoint.setdefault("model", identity.get("judge_model"))
    endpoint.setdefault("model_file", identity.get("judge_model_file") or "")
    try:
        sampling = json.loads(identity.get("sampling") or "{}")
    except ValueError:
        sampling = {}
    return RecordedJudge(
        run=str(run) if run else None,
        identity=identity,
        endpoint=endpoint,
        sampling=dict(sampling) if isinstance(sampling, Mapping) else {},
        words=part.get("judge"),
    )


def recorded_test_split(record: Mapping[str, Any] | None) -> tuple[float, int] | None:
    """(test_fraction, split_seed) of the preference pairs the recorded report run wrote,
    when its settings name a test fraction (a run before the split existed names none).

    Args:
        record: a run record (None: none).

    Returns:
        (test_fraction, split_seed), or None.
    """
    part = ((record or {}).get("stages") or {}).get("report") or {}
    pairs = (part.get("preference_pairs") or {}) if part.get("recorded") else {}
    if "test_fraction" not in pairs:
        return None
    from llm_feedback.params.report import PairParams  # noqa: PLC0415 - the report's libraries

    seed = pairs.get("split_seed", PairParams.split_seed)
    return float(pairs["test_fraction"]), int(seed)
