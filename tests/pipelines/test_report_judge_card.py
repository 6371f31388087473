"""The annotate report shows the card of its judge: "not validated" until judge_validation
holds a card under the judge's key, then the card, with its warning against a baseline."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from kedro.framework.session import KedroSession

from llm_feedback.params import parse_annotate
from llm_feedback.reporting.judge_card import annotate_judge_identity
from llm_feedback.validation.validate import validate_pairwise
from tests.conftest import PROJECT_ROOT
from tests.pipelines.test_report_pipeline import (  # noqa: F401 - the report's fixtures
    RunReport,
    data_root,
    report_path,
    run_report,
    seed,
)
from tests.reporting.builders import build_frames, four_rated


def always_first_card(identity: dict[str, str]) -> pd.DataFrame:
    """The card of a judge that picked the response shown first on 20 labelled pairs."""
    samples = pd.DataFrame(
        [
            {
                "instance_id": f"i{number}",
                "model": model,
                "response": text,
                "category": None,
                "gold": "A" if number % 2 else "B",
            }
            for number in range(20)
            for model, text in (("m1", "short"), ("m2", "a longer answer"))
        ]
    )
    verdicts = pd.DataFrame(
        [
            {"instance_id": f"i{number}", "order": order, "verdict": verdict}
            for number in range(20)
            for order, verdict in (("original", "A"), ("swapped", "B"))
        ]
    )
    validation = validate_pairwise(
        samples, identity, "pairs", created_at="2026-12-01T22:00:00+00:00", verdicts=verdicts
    )
    return validation.card


def test_the_annotate_report_shows_its_judges_card(run_report: RunReport, data_root: Path):  # noqa: F811 - fixtures
    run_report(build_frames(four_rated()))
    section = report_path(data_root).read_text().split("## Judge card", 1)[1]
    assert "This judge has not been validated" in section

    params = {"data_root": str(data_root)}
    with KedroSession.create(project_path=PROJECT_ROOT, runtime_params=params) as session:
        context = session.load_context()
        annotate = parse_annotate(context.params["annotate"], context.params["endpoints"])
        context.catalog.save(
            "judge_validation", always_first_card(annotate_judge_identity(annotate))
        )
    run_report()
    section = report_path(data_root).read_text().split("## Judge card", 1)[1]
    assert "has not been validated" not in section
    assert "This judge cannot be told apart from always_first" in section
    assert "| positional_agreement | 0.000" in section
