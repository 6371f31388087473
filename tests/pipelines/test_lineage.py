"""A report refuses inputs from different runs, naming their versions (issue 21: after an
annotate that failed part-way, `report` mixed the new run's aspects with the old run's
overall scores and pairs)."""

from __future__ import annotations

import json

import pytest

from llm_feedback.core.errors import InputError
from llm_feedback.runs.lineage import mixed_runs
from llm_feedback.testing.server import FakeLLMServer, Reply, schema_responder
from tests.conftest import endpoints_via

SMALL = {"sample": {"max_prompts": 3}}


def _schema_keys(body):
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    return set(schema.get("properties", {}))


def fails_the_score_fix(body, ctx):
    """Both judge stages answered (every critique a 10), every re-score call of the score fix
    failed: `judge_completions` writes its two tables, `fix_overall_scores` fails."""
    keys = _schema_keys(body)
    if keys == {"overall_score"}:  # a re-score
        return Reply(status=400, error_message="this judge is broken")
    reply = schema_responder(body, ctx)
    if "feedback" in keys:
        reply = json.dumps({**json.loads(reply), "overall_score": 10})
    return reply


# Every critique's 10 is asked again (`fails_the_score_fix` fails those calls).
RESCORE_ALL = {"score_fix": {"flip_threshold": 1, "reannotate_threshold": 5}}


def _versions(catalog, *names):
    return {name: catalog.get(name).resolve_load_version() for name in names}


def test_a_report_after_an_annotate_that_failed_part_way_is_refused(run_kedro):
    with FakeLLMServer() as server:
        params = {**SMALL, "endpoints": endpoints_via(server)}
        for name in ("sample", "generate", "annotate"):
            run_kedro(name, params)
    with FakeLLMServer(fails_the_score_fix) as server:
        second = {
            **SMALL,
            "endpoints": endpoints_via(server, model="measure-v2", max_retries=0),
            "annotate": RESCORE_ALL,
        }
        with pytest.raises(Exception):  # noqa: B017 - the failing stage's own error
            run_kedro("annotate", second)
    with FakeLLMServer() as server:
        params = {**SMALL, "endpoints": endpoints_via(server)}
        with pytest.raises(InputError, match="different runs") as refused:
            run_kedro("report", params)
        catalog = run_kedro("report", {**params, "report": {"allow_mixed_runs": True}})["catalog"]
    versions = _versions(catalog, "aspect_annotations", "critiques", "overall_scores")
    message = str(refused.value)
    assert f"overall_scores {versions['overall_scores']} is older than" in message
    newer = [name for name in ("aspect_annotations", "critiques") if versions[name] in message]
    assert newer, message
    assert "report.allow_mixed_runs: true" in message
    assert catalog.load("report")  # allowed explicitly, the report is written
    # A version chosen with --load-versions is asked for too: reported, with a warning.
    with FakeLLMServer() as server:
        pinned = {"overall_scores": versions["overall_scores"]}
        run_kedro("report", {**SMALL, "endpoints": endpoints_via(server)}, load_versions=pinned)


def test_one_runs_tables_and_separate_stage_runs_are_one_history():
    computed_from = {
        "completions": ["sampled_prompts"],
        "aspect_annotations": ["completions"],
        "critiques": ["completions"],
        "overall_scores": ["completions", "aspect_annotations", "critiques"],
    }
    one_run = dict.fromkeys(("aspect_annotations", "critiques", "overall_scores"), "2026-01-02")
    assert mixed_runs({"completions": "2026-01-01", **one_run}, computed_from) == []
    rerun_generate = {"completions": "2026-01-03", **one_run}
    stale = mixed_runs(rerun_generate, computed_from)
    assert {(item.dataset, item.source) for item in stale} == {
        ("aspect_annotations", "completions"),
        ("critiques", "completions"),
        ("overall_scores", "completions"),
    }


def test_the_export_after_an_annotate_that_failed_part_way_is_refused(run_kedro):
    with FakeLLMServer() as server:
        params = {**SMALL, "endpoints": endpoints_via(server)}
        for name in ("sample", "generate", "annotate"):
            run_kedro(name, params)
    with FakeLLMServer(fails_the_score_fix) as server:
        second = {
            **SMALL,
            "endpoints": endpoints_via(server, model="v2", max_retries=0),
            "annotate": RESCORE_ALL,
        }
        with pytest.raises(Exception):  # noqa: B017 - the failing stage's own error
            run_kedro("annotate", second)
    export = {"node_names": ["export_ultrafeedback"]}
    with pytest.raises(InputError, match="different runs") as refused:
        run_kedro("annotate", SMALL, **export)
    assert "overall_scores" in str(refused.value) and "is older than" in str(refused.value)
    allowed = {**SMALL, "report": {"allow_mixed_runs": True}}
    assert len(run_kedro("annotate", allowed, **export)["catalog"].load("ultrafeedback"))
