"""The report pipeline on a real catalog: annotate outputs are seeded from the reporting
builders through one KedroSession, the pipeline runs in another, outputs land in tmp."""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project
from kedro.io import DataCatalog
from kedro.validation import ParameterValidationError

from llm_feedback.core.errors import ConfigError
from llm_feedback.pipelines.report.nodes import FIGURE_LINKS, question_list, viewer_link
from llm_feedback.pipelines.report.pipeline import REPORT_TABLES
from llm_feedback.runs.record import build_record
from llm_feedback.storage.schema import (
    PREFERENCE_PAIRS_ARROW_SCHEMA,
    PREFERENCE_PAIRS_H4_ARROW_SCHEMA,
)
from tests.conftest import PROJECT_ROOT, documentation_text
from tests.reporting.builders import (
    NA,
    Completion,
    Frames,
    build_frames,
    empty_frames,
    four_rated,
    rate_in_shuffle,
    typical_specs,
)

# A division by zero or a mean of nothing inside a node must not happen, not even as a warning.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

INPUTS = ("completions", "aspect_annotations", "critiques", "overall_scores")
IMAGE_LINK = re.compile(r"!\[[^\]]*\]\(([^)]+)\)")
PNG_MAGIC = b"\x89PNG"

RunReport = Callable[..., DataCatalog]
# Bootstrap resamples in these runs: enough for intervals, few enough for a quick suite
# (the default 1,000 is what benchmarks/stats_scale.py times).
FAST_RESAMPLES = 50


def merged(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`base` updated by `override`, nested mappings merged key by key."""
    result = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = merged(result[key], value)
        else:
            result[key] = value
    return result


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def seed(data_root: Path) -> Callable[..., str]:
    """Save annotate-shaped frames as the report's inputs; returns their version. With
    `annotated_with` (runtime params, e.g. a judge endpoint), also the run record an
    annotate run with that configuration saves beside them (`runs.record`): the frames'
    lineage, from which the report names their judge; without, none (data written before
    runs kept records)."""
    bootstrap_project(PROJECT_ROOT)

    def save(frames: Frames, annotated_with: Mapping[str, Any] | None = None) -> str:
        runtime_params = merged({"data_root": str(data_root)}, annotated_with or {})
        with KedroSession.create(project_path=PROJECT_ROOT, runtime_params=runtime_params) as s:
            context = s.load_context()
            catalog = context.catalog
            for name in INPUTS:
                catalog.save(name, getattr(frames, name))
            version = catalog.get("completions").resolve_save_version()
            if annotated_with is not None:
                record = build_record(
                    version, context.params, ("generate", "annotate"), no_version, no_version
                )
                catalog.save("run_record", json.dumps(record))
            return version

    return save


def no_version(_: str) -> None:
    return None


@pytest.fixture
def run_report(data_root: Path, seed: Callable[[Frames], str]) -> RunReport:
    """Seed `frames` (if given; with the run record of `annotated_with`, if given), run the
    report pipeline, return a catalog to load from."""

    def run(
        frames: Frames | None = None,
        runtime_params: Mapping[str, Any] | None = None,
        *,
        annotated_with: Mapping[str, Any] | None = None,
        **run_args: Any,
    ) -> DataCatalog:
        if frames is not None:
            seed(frames, annotated_with)
        params = merged(
            {"data_root": str(data_root), "report": {"intervals": {"n_resamples": FAST_RESAMPLES}}},
            runtime_params or {},
        )
        with KedroSession.create(project_path=PROJECT_ROOT, runtime_params=params) as session:
            session.run(pipeline_names=["report"], **run_args)
            return session.load_context().catalog

    return run


def report_path(data_root: Path) -> Path:
    return data_root / "08_reporting" / "report.md"


def drop_counts(catalog: DataCatalog) -> dict[str, int]:
    drops = catalog.load("pair_drops")
    return dict(zip(drops["reason"], drops["n_prompts"], strict=True))


def test_report_writes_versioned_tables_pairs_figures_and_a_readable_report(
    run_report: RunReport, data_root: Path
):
    catalog = run_report(build_frames(typical_specs(), shuffles=2))

    for table in REPORT_TABLES:
        layer = "07_model_output" if table in ("preference_pairs", "pair_drops") else "08_reporting"
        versions = list((data_root / layer / f"{table}.parquet").iterdir())
        assert len(versions) == 1 and (versions[0] / f"{table}.parquet").is_file(), table

    aspects = catalog.load("model_aspect_metrics")
    assert set(aspects["model"]) == {"alpha", "beta", "gamma", "delta"}
    by_source = catalog.load("source_aspect_metrics")
    assert set(by_source["source"]) == {"evol_instruct"}  # every built prompt's source
    assert by_source["n_rated"].sum() == aspects["n_rated"].sum()
    assert aspects["mean_rating_0_100"].between(0, 100).all()
    assert not catalog.load("position_consistency").empty  # two shuffles were stored
    assert not catalog.load("rating_by_position").empty

    costs = catalog.load("cost_table")
    judge_rows = costs[costs["stage"].isin(["annotate", "critique"])]
    assert set(judge_rows["endpoint"]) == {"judge"}  # as the judge rows record it
    # The recorded models run on an `openai` backend and have no price in parameters.
    assert not costs["priced"].any() and (costs["estimated_cost"] == 0).all()

    pairs = catalog.load("preference_pairs")
    assert list(pairs["prompt_id"]) == ["p1", "p2", "p3"]
    # What the report says of the pairs, counted without reading them back.
    test = pairs[pairs["split"] == "test"]
    assert catalog.load("pair_counts").iloc[0].tolist() == [
        3,
        3,
        len(test),
        test["prompt_id"].nunique(),
    ]
    assert (
        f"Preference pairs: 3 from 3 prompts (test split: {len(test)} pairs from "
        f"{test['prompt_id'].nunique()} prompts)" in report_path(data_root).read_text()
    )
    first = pairs.iloc[0]
    # TRL's layout: chat message lists survive Parquet (they load as arrays of dicts).
    assert [dict(message) for message in first["prompt"]] == [
        {"role": "user", "content": "Question p1?"}
    ]
    assert [dict(message) for message in first["chosen"]] == [
        {"role": "assistant", "content": f"A helpful answer by {first['model_chosen']}."}
    ]
    assert [message["role"] for message in first["rejected"]] == ["assistant"]
    assert (pairs["score_chosen"] > pairs["score_rejected"]).all()
    pairs_file = next((data_root / "07_model_output" / "preference_pairs.parquet").iterdir())
    written = pq.read_schema(pairs_file / "preference_pairs.parquet")
    assert written.remove_metadata().equals(PREFERENCE_PAIRS_ARROW_SCHEMA)  # string, not large

    report = report_path(data_root).read_text()
    assert "## Ratings per model and aspect" in report
    assert "## Ratings per prompt source, model and aspect" in report
    assert "## Position consistency" in report
    links = IMAGE_LINK.findall(report)
    assert links == list(FIGURE_LINKS.values())
    for link in links:  # relative to the report, so it renders where it lies
        assert (report_path(data_root).parent / link).read_bytes().startswith(PNG_MAGIC)
    # The viewer this run built, linked relative to the report.
    viewer = re.search(r"## Judgment viewer\n\n\[[^\]]+\]\(([^)]+)\)", report)
    assert viewer is not None
    (site,) = (data_root / "08_reporting" / "judgment_viewer").glob("*/judgment_viewer")
    assert report_path(data_root).parent / viewer.group(1) == site / "index.html"
    assert (site / "index.html").is_file()
    run = report.split("## Run", 1)[1].split("\n## ", 1)[0]
    assert "- **prompts**: 3" in run and "- **completions**: 12 (1 without a response)" in run
    assert "- **judge**: judge-1 (judge)" in run
    assert re.search(r"- \*\*date\*\*: \d{4}-\d\d-\d\d \d\d:\d\d UTC", run)


@pytest.mark.parametrize(
    ("index", "link"),
    [
        (
            "/data/08_reporting/judgment_viewer/2026-12-05T10.00.00.000Z/judgment_viewer/index.html",
            "judgment_viewer/2026-12-05T10.00.00.000Z/judgment_viewer/index.html",
        ),
        ("/data/08_reporting/site/index.html", "site/index.html"),  # unversioned
        ("s3://bucket/runs/judgment_viewer/v/judgment_viewer/index.html", None),  # as it is
    ],
)
def test_the_viewer_link_is_relative_to_the_report_beside_it(index: str, link: str | None):
    assert viewer_link(index) == (link or index)


def test_with_one_shuffle_position_bias_is_still_measured(run_report: RunReport, data_root: Path):
    # Shown positions are random, so one shuffle gives the mean by position and its slope;
    # only the comparisons between shuffles need two.
    catalog = run_report(build_frames(typical_specs(), shuffles=1))
    report = report_path(data_root).read_text()
    assert "figures/position_bias.png" in report
    assert not catalog.load("rating_by_position").empty
    bias = catalog.load("judge_bias")
    assert {"position_slope", "length_spearman"} <= set(bias["diagnostic"])
    consistency = report.split("## Position consistency", 1)[1].split("\n## ", 1)[0]
    assert "more than one shuffled order" in consistency
    assert "Position slope (rating points per position further down):" in report
    assert "Rating vs response length (Spearman):" in report


def test_report_says_which_dataset_versions_it_was_built_from(
    run_report: RunReport, seed: Callable[[Frames], str], data_root: Path
):
    older = seed(build_frames(typical_specs()))
    newer = seed(build_frames(typical_specs()))

    # An older overall_scores beside newer aspects mixes two runs: chosen explicitly with
    # --load-versions, it is reported (the refusal of unchosen mixes: test_lineage.py).
    run_report(load_versions={"overall_scores": older})

    built_from = report_path(data_root).read_text().split("## Built from")[1]
    versions = dict(re.findall(r"^\| (\w+) +\| (\S+) +\|$", built_from, flags=re.MULTILINE))
    assert versions, "no versions recorded: is ReportProvenanceHooks in settings.HOOKS?"
    assert versions["overall_scores"] == older  # --load-versions honoured
    assert versions["completions"] == versions["critiques"] == newer  # latest on disk
    assert versions["decontamination_questions"] == "unversioned"
    run_version = next((data_root / "08_reporting" / "judge_health.parquet").iterdir()).name
    assert versions["judge_health"] == versions["pair_counts"] == run_version
    assert older < newer < run_version


def test_decontaminated_prompts_get_no_pair(run_report: RunReport):
    demo_list = (PROJECT_ROOT / "data" / "01_raw" / "decontamination_questions.txt").read_text()
    benchmark_question = question_list(demo_list)[0]
    specs = [
        Completion("p1", "alpha", overall=9, instruction=f"  {benchmark_question.upper()} "),
        Completion("p1", "beta", overall=3, instruction=f"  {benchmark_question.upper()} "),
        Completion("p2", "alpha", overall=9),
        Completion("p2", "beta", overall=3),
    ]

    catalog = run_report(build_frames(specs))

    assert list(catalog.load("preference_pairs")["prompt_id"]) == ["p2"]
    assert drop_counts(catalog)["decontaminated"] == 1


def test_pairs_can_use_the_mean_aspect_rating(run_report: RunReport):
    specs = [
        Completion("p1", "alpha", {"helpfulness": 5}, overall=2),
        Completion("p1", "beta", {"helpfulness": 1}, overall=9),
    ]
    params = {"report": {"pairs": {"score": "mean_aspects"}}}

    pair = run_report(build_frames(specs), params).load("preference_pairs").iloc[0]

    assert (pair["score_kind"], pair["model_chosen"], pair["model_rejected"]) == (
        "mean_aspects",
        "alpha",
        "beta",
    )


def test_pairs_in_the_h4_layout(run_report: RunReport):
    params = {"report": {"pairs": {"layout": "h4"}}}

    pairs = run_report(build_frames(typical_specs()), params).load("preference_pairs")

    assert list(pairs.columns) == PREFERENCE_PAIRS_H4_ARROW_SCHEMA.names
    first = pairs.iloc[0]
    assert first["prompt"] == "Question p1?"
    assert [message["role"] for message in first["messages"]] == ["user", "assistant"]


README_LOADER = re.compile(r"```python\n( *from glob import glob\n.*?) *```", re.DOTALL)


def test_the_readme_loads_an_output_with_datasets(
    run_report: RunReport, data_root: Path, monkeypatch: pytest.MonkeyPatch
):
    datasets = pytest.importorskip("datasets")
    run_report(build_frames(typical_specs()))
    run_report()  # a second version: the snippet must pick the latest
    snippet = README_LOADER.search(documentation_text())
    assert snippet, "documentation: no ```python block starting `from glob import glob`"
    code = textwrap.dedent(snippet.group(1))
    monkeypatch.chdir(data_root.parent)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", data_root.parent / "hf")

    namespace: dict[str, Any] = {}
    exec(code, namespace)

    versions = sorted((data_root / "07_model_output" / "preference_pairs.parquet").iterdir())
    assert len(versions) == 2 and namespace["latest"].startswith(
        f"data/07_model_output/preference_pairs.parquet/{versions[-1].name}/"
    )
    dataset = namespace["dataset"]
    assert dataset.num_rows == 3
    assert dataset.features.arrow_schema.remove_metadata().equals(PREFERENCE_PAIRS_ARROW_SCHEMA)


def test_empty_inputs_give_empty_tables_and_placeholder_figures(
    run_report: RunReport, data_root: Path
):
    catalog = run_report(empty_frames())

    for table in (
        "model_aspect_metrics",
        "model_score_metrics",
        "position_consistency",
        "rating_by_position",
        "cost_table",
        "preference_pairs",
    ):
        assert catalog.load(table).empty, table
    assert set(drop_counts(catalog).values()) == {0}
    health = catalog.load("judge_health")
    assert health.loc[health["metric"] == "parse_error_rate", "value"].isna().all()
    for link in FIGURE_LINKS.values():
        assert (report_path(data_root).parent / link).read_bytes().startswith(PNG_MAGIC)
    assert "_No rows._" in report_path(data_root).read_text()


def test_all_ratings_not_applicable(run_report: RunReport):
    all_na = dict.fromkeys(("instruction_following", "honesty", "truthfulness", "helpfulness"), NA)
    specs = [Completion(f"p{i}", model, all_na) for i in (1, 2) for model in ("alpha", "beta")]

    catalog = run_report(build_frames(specs), {"report": {"pairs": {"score": "mean_aspects"}}})

    aspects = catalog.load("model_aspect_metrics")
    assert (aspects["n_rated"] == 0).all() and (aspects["n_na"] == 2).all()
    assert aspects["mean_rating"].isna().all() and aspects["std_error"].isna().all()
    scores = catalog.load("model_score_metrics")
    assert scores["mean_fine_grained"].isna().all()
    assert (scores["n_paired"] == 0).all()
    assert catalog.load("preference_pairs").empty
    assert drop_counts(catalog)["fewer_than_two_scored"] == 2


def test_a_single_completion_per_prompt_gives_no_pairs_and_no_correlation(
    run_report: RunReport,
):
    specs = [Completion(f"p{i}", "alpha", overall=i) for i in range(1, 5)]
    specs[0].ratings = {"helpfulness": 1}  # the scores vary, only the pairing is impossible

    catalog = run_report(build_frames(specs))

    assert catalog.load("preference_pairs").empty
    assert drop_counts(catalog)["fewer_than_two_scored"] == 4
    scores = catalog.load("model_score_metrics")
    assert scores["n_paired"].tolist() == [4]
    assert scores["pearson_overall_vs_fine_grained"].notna().all()


def test_a_model_whose_generations_all_failed_is_listed_with_zero_counts(
    run_report: RunReport,
):
    specs = [
        Completion("p1", "alpha", overall=9),
        Completion("p1", "broken", error="timeout"),
        Completion("p2", "alpha", overall=4),
        Completion("p2", "broken", error="timeout"),
    ]

    catalog = run_report(build_frames(specs))

    broken = catalog.load("model_aspect_metrics").query("model == 'broken'")
    assert len(broken) == 4
    assert (broken[["n_rated", "n_na", "n_failed"]] == 0).all().all()
    assert broken["mean_rating"].isna().all()
    assert drop_counts(catalog)["fewer_than_two_scored"] == 2


def test_an_unknown_pair_setting_fails_naming_the_parameter(run_report: RunReport):
    # Kedro's own parameter validation stops it (params.blocks.ReportBlock), in the parser's words.
    with pytest.raises(ParameterValidationError, match=r"report\.pairs\.seeed: unknown setting"):
        run_report(build_frames(typical_specs()), {"report": {"pairs": {"seeed": 1}}})


def test_question_list_reads_a_text_file_or_a_one_column_table():
    text = "# a comment\nAre bats blind?\n\n  Why is the sky blue?  \n"
    assert question_list(text) == ["Are bats blind?", "Why is the sky blue?"]
    table = pd.DataFrame({"Question": ["Are bats blind?", None]})
    assert question_list(table) == ["Are bats blind?"]
    with pytest.raises(ConfigError, match="usecols"):
        question_list(pd.DataFrame({"Type": ["x"], "Question": ["y"]}))


def shuffle_stats(table: pd.DataFrame, aspect: str) -> dict[tuple[str, str], tuple[float, int]]:
    part = table[table["aspect"] == aspect]
    return {(r.raters, r.statistic): (r.value, r.n) for r in part.itertuples()}


def test_the_report_has_the_agreement_between_shuffles(run_report: RunReport, data_root: Path):
    frames = build_frames(four_rated(), shuffles=2)
    rate_in_shuffle(frames.aspect_annotations, "helpfulness", 1, [2.0, 1.0, 3.0, 4.0])
    table = run_report(frames).load("shuffle_agreement")
    assert shuffle_stats(table, "helpfulness")[("shuffle_0~shuffle_1", "spearman")] == (
        pytest.approx(0.8),
        4,
    )
    report = report_path(data_root).read_text()
    section = report.split("## Agreement between shuffles", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in section.splitlines()]
    found = [row for row in rows if row[:3] == ["helpfulness", "shuffle_0~shuffle_1", "spearman"]]
    assert found and found[0][3].startswith("0.8 [") and found[0][4] == "4"


def test_the_report_says_why_there_is_no_shuffle_agreement(run_report: RunReport, data_root: Path):
    run_report(build_frames(four_rated()))
    report = report_path(data_root).read_text()
    section = report.split("## Agreement between shuffles", 1)[1].split("\n## ", 1)[0]
    assert "more than one shuffled order" in section


def test_kedro_reads_every_node_signature_without_a_warning(caplog: pytest.LogCaptureFixture):
    """Kedro validates `params:` inputs against node annotations on every `kedro run`; a
    node it cannot read logs a warning per node per run (the report's wrapped nodes did)."""
    from kedro.validation.type_extractor import TypeExtractor

    from llm_feedback.pipeline_registry import register_pipelines

    bootstrap_project(PROJECT_ROOT)
    pipelines = register_pipelines()
    assert len(pipelines["report"].nodes) > 10
    with caplog.at_level("WARNING", logger="kedro.validation"):
        TypeExtractor(pipelines).extract_types_from_pipelines()
    assert [record.getMessage() for record in caplog.records] == []
