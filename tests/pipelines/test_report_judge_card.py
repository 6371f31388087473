"""The annotate report shows the card of its judge: "not validated" until judge_validation
holds a card under the judge's key, then the card, with its warning against a baseline;
its first screen shows the cards of the same model, file, endpoint and sampling on any
task, and the headline and ratings carry the caveat."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from kedro.framework.session import KedroSession

from llm_feedback.params import parse_annotate
from llm_feedback.reporting.judge_card import annotate_judge_identity
from llm_feedback.validation.identity import judge_identity
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


def first_screen(root: Path) -> str:
    """What a reader sees without scrolling: report.md's first 40 lines."""
    return "\n".join(report_path(root).read_text().splitlines()[:40])


# The judge the builders' frames record: the configuration names it too.
JUDGE_1 = {"endpoints": {"local": {"model": "judge-1"}}}


def annotate_identity(root: Path) -> dict[str, str]:
    params = {"data_root": str(root), **JUDGE_1}
    with KedroSession.create(project_path=PROJECT_ROOT, runtime_params=params) as session:
        context = session.load_context()
        annotate = parse_annotate(context.params["annotate"], context.params["endpoints"])
    return annotate_judge_identity(annotate)


def save_cards(root: Path, cards: pd.DataFrame) -> None:
    params = {"data_root": str(root)}
    with KedroSession.create(project_path=PROJECT_ROOT, runtime_params=params) as session:
        session.load_context().catalog.save("judge_validation", cards)


def test_the_annotate_report_shows_its_judges_card(run_report: RunReport, data_root: Path):  # noqa: F811 - fixtures
    run_report(build_frames(four_rated()), annotated_with=JUDGE_1)
    text = report_path(data_root).read_text()
    assert "This judge has not been validated" in text.split("## Judge card", 1)[1]
    # The first screen says so too, and the ratings carry the caveat.
    screen = first_screen(data_root)
    assert "**Judge not validated**" in screen
    assert screen.index("## Judge validation") < screen.index("## Headline")
    assert "Caveat: the judge is not validated" in text.split("## Headline", 1)[1].split("##")[0]
    ratings = text.split("## Ratings per model and aspect", 1)[1].split("\n## ")[0]
    assert "Caveat: the judge is not validated" in ratings

    save_cards(data_root, always_first_card(annotate_identity(data_root)))
    run_report()  # the judge comes from the ratings' run record, whatever is configured
    text = report_path(data_root).read_text()
    section = text.split("## Judge card", 1)[1]
    assert "has not been validated" not in section
    assert "This judge cannot be told apart from always_first" in section
    assert "| positional_agreement | 0.000" in section
    screen = first_screen(data_root)
    assert "Judge not validated" not in screen
    assert "Validated on `pairs` (this prompt and task)" in screen
    assert "40 judged calls; 2026-12-01T22:00:00+00:00; accuracy 0.500 [" in screen
    assert "on its validation this judge did no better than a baseline" in screen


def test_the_first_screen_finds_the_same_models_card_on_another_task(
    run_report: RunReport,  # noqa: F811 - fixtures
    data_root: Path,  # noqa: F811 - fixtures
):
    """A card measured in evaluate (another prompt and task) for the same model, model file,
    endpoint and sampling is the annotate judge's validation; one of another GGUF file or
    other sampling is not."""
    own = annotate_identity(data_root)
    sampling = json.loads(own["sampling"])
    evaluate = judge_identity(
        own["judge_endpoint"],
        own["judge_model"],
        "an evaluate pairwise template",
        sampling,
        model_file=own["judge_model_file"],
        task={"task": "evaluate", "mode": "pairwise", "scale": [1, 10]},
    )
    other_file = judge_identity(
        own["judge_endpoint"],
        own["judge_model"],
        "an evaluate pairwise template",
        sampling,
        model_file="sha256:" + "0" * 64,  # a Gemma GGUF behind the same name
        task={"task": "evaluate", "mode": "pairwise", "scale": [1, 10]},
    )
    cards = pd.concat(
        [always_first_card(other_file).assign(validation_set="gemma-set")]
        + [always_first_card(evaluate).assign(validation_set="natural/dataset.json")],
        ignore_index=True,
    )
    save_cards(data_root, cards)
    run_report(build_frames(four_rated()), annotated_with=JUDGE_1)
    screen = first_screen(data_root)
    validated = (
        "Validated on `natural/dataset.json`: task evaluate, mode pairwise, scale \\[1, 10\\]"
    )
    assert f"{validated}; 40 judged calls; 2026-12-01T22:00:00+00:00" in screen
    assert "gemma-set" not in report_path(data_root).read_text()
    assert "**cannot be told apart from always_first, always_longer, random**" in screen


def test_the_judge_is_the_one_the_ratings_run_recorded_not_the_configured_one(
    run_report: RunReport,  # noqa: F811 - fixtures
    data_root: Path,  # noqa: F811 - fixtures
):
    """The configuration now names the embedded SmolLM2 (whose card exists, measured with
    other sampling); the ratings' run recorded judge-1: the report names judge-1, as
    recorded, and shows no SmolLM2 card."""
    run_report(build_frames(four_rated()), annotated_with=JUDGE_1)
    screen = first_screen(data_root)
    identity = annotate_identity(data_root)
    model_file = identity["judge_model_file"]
    assert (
        f"Rated by judge-1 at endpoint `local` (local backend, model file `{model_file}`)" in screen
    )
    assert f"judge key `{identity['judge_key']}`" in screen
    assert "**Judge not validated**: no card measures judge-1 at local" in screen
    assert "SmolLM2" not in screen and "natural/dataset.json" not in screen


def test_ratings_whose_run_left_no_record_have_their_judge_not_recorded(
    run_report: RunReport,  # noqa: F811 - fixtures
    data_root: Path,  # noqa: F811 - fixtures
):
    """Ratings written before runs kept records: the report says the judge is not
    recorded (first screen, caveat, judge card) and takes nothing from the configuration,
    whose judge has a card."""
    version = run_report(build_frames(four_rated())).get("completions").resolve_load_version()
    text = report_path(data_root).read_text()
    screen = first_screen(data_root)
    assert f"**Judge not recorded**: the run that wrote these ratings (`{version}`)" in screen
    assert "Caveat: the judge that rated this data is not recorded" in screen
    assert "**Judge not recorded**" in text.split("## Judge card", 1)[1]
    ratings = text.split("## Ratings per model and aspect", 1)[1].split("\n## ")[0]
    assert "the judge that rated this data is not recorded" in ratings
    assert "SmolLM2" not in text and "natural/dataset.json" not in text


def test_a_judge_requirement_on_ratings_without_a_recorded_judge_stops_the_report(
    run_report: RunReport,  # noqa: F811 - fixtures
    data_root: Path,  # noqa: F811 - fixtures
):
    from llm_feedback.validation.gate import JudgeRequirementError

    requirement = {"report": {"judge_requirement": {"metric": "accuracy", "min_lower_bound": 0.5}}}
    with pytest.raises(JudgeRequirementError, match="judge that rated this data is not recorded"):
        run_report(build_frames(four_rated()), requirement)
    assert not report_path(data_root).exists()
