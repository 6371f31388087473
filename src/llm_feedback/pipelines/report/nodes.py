"""Thin nodes: adapt parameters and catalog data to `llm_feedback.reporting`."""

import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import pandas as pd

from llm_feedback.backends.cache import unseen_calls
from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.params import ReportParams
from llm_feedback.params.blocks import ReportBlock
from llm_feedback.pipelines.parsed_params import report_params
from llm_feedback.publishing.dataset_card import contamination_rows, contamination_section
from llm_feedback.reporting import (
    cost_table,
    describe_run,
    render_markdown_report,
)
from llm_feedback.reporting.corrected import corrected_section
from llm_feedback.reporting.markdown import judge_card_section
from llm_feedback.reporting.pairs import PairsResult, binarize_export
from llm_feedback.reporting.recorded_judge import (
    not_recorded_line,
    not_recorded_standing,
    recorded_judge_line,
)
from llm_feedback.reporting.uncertainty import Bootstrap, model_ranking, ranking_battles
from llm_feedback.runs.record import RecordedJudge, recorded_judge
from llm_feedback.storage.parquet_source import ParquetSource
from llm_feedback.templates import Templates
from llm_feedback.validation.annotate_labels import (
    ESTIMATE_COLUMNS,
    annotate_card,
    corrected_ratings,
    judged_ratings,
    match_labels,
    repeats_latest,
)
from llm_feedback.validation.card import add_card, normalised, validation_standing
from llm_feedback.validation.formats import read_viewer_labels
from llm_feedback.validation.gate import check_requirements
from llm_feedback.validation.measured import measured_cards
from llm_feedback.viewer import StaticSite, feedback_site

# Figure name -> link in the report. catalog_report.yml saves every `<name>_figure` to
# 08_reporting/figures/<name>.png, next to 08_reporting/report.md, so the links are relative
# and the report renders wherever data_root points.
FIGURE_LINKS = {
    name: f"figures/{name}.png"
    for name in (
        "rating_distribution",
        "aspect_heatmap",
        "score_scatter",
        "position_bias",
        "model_ranking",
        "rating_by_length",
    )
}


def bootstrap_of(params: ReportParams) -> Bootstrap:
    intervals = params.intervals
    return Bootstrap(intervals.n_resamples, intervals.seed, intervals.confidence)


class WithBootstrap:
    """`function(*tables, bootstrap=...)` as a node taking the tables, then `params:report`
    (a class, so that the node pickles). It names itself after `function` but keeps its own
    signature: Kedro validates a `params:` input against the annotation of the parameter it
    lands on, and `params:report` lands here, not on `function`'s `bootstrap`."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.__name__ = self.__qualname__ = function.__name__
        self.__doc__ = function.__doc__
        # Kedro's parameter validation reads the node function's annotations: none here
        # (`report_params` checks the block), rather than a warning on every `kedro run`.
        self.__annotations__: dict[str, Any] = {}

    def __call__(self, *args: Any) -> Any:
        *tables, report = args
        return self.function(*tables, bootstrap=bootstrap_of(report_params(report)))


def rank_models(
    completions: ParquetSource,
    overall_scores: ParquetSource,
    aspect_annotations: ParquetSource,
    report: ReportBlock,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    params = report_params(report)
    # The battles are spooled to a temporary file that the fits pass over a batch at a time.
    with tempfile.TemporaryDirectory(prefix="llmfb-battles-") as folder:
        battles = ranking_battles(
            completions, overall_scores, aspect_annotations, params.pairs.score, Path(folder)
        )
        ranking, style_coefficients = model_ranking(
            battles, params.ranking.baseline, bootstrap_of(params)
        )
    return ranking, style_coefficients


def estimate_costs(
    completions: ParquetSource,
    aspect_annotations: ParquetSource,
    critiques: ParquetSource,
    overall_scores: ParquetSource,
    report: ReportBlock,
    parameters: Mapping[str, Any],
) -> pd.DataFrame:
    # The cache path is read from all parameters: `params:request_cache` as an input would
    # mark this node as one that calls models (hooks.py refuses ParallelRunner for those).
    request_cache = parameters.get("request_cache")
    return cost_table(
        completions,
        aspect_annotations,
        critiques,
        report_params(report).prices,
        overall_scores=overall_scores,
        unseen=unseen_calls(request_cache),  # sent by a killed run, reply never received
        # a reply without usage is estimated from the prompts the run's templates made
        templates=Templates(parameters.get("prompt_templates")),
    )


def preference_pairs(
    completions: ParquetSource,
    overall_scores: ParquetSource,
    aspect_annotations: ParquetSource,
    decontamination_questions: str | pd.DataFrame,
    report: ReportBlock,
) -> PairsResult:
    # The drops and counts are counted now; the pairs are built as they are saved, a chunk
    # of prompts at a time from the tables on disk.
    params = report_params(report)
    return binarize_export(
        completions,
        overall_scores,
        aspect_annotations,
        score=params.pairs.score,
        strategy=params.pairs.strategy,
        seed=params.pairs.seed,
        decontaminate=question_list(decontamination_questions),
        layout=params.pairs.layout,
        include_suspected=params.pairs.include_suspected,
        test_fraction=params.pairs.test_fraction,
        split_seed=params.pairs.split_seed,
    )


def question_list(questions: str | pd.DataFrame) -> list[str]:
    """The questions to keep out of the preference pairs, from a text file with one question
    a line (blank lines and `#` comments skipped) or a one-column table, e.g. TruthfulQA.csv
    loaded with `load_args: {usecols: [Question]}`."""
    if isinstance(questions, pd.DataFrame):
        if questions.shape[1] != 1:
            raise ConfigError(
                "decontamination_questions: expected one column of questions, got "
                f"{list(questions.columns)}; pick one with load_args: {{usecols: [...]}}"
            )
        return [str(question) for question in questions.iloc[:, 0].dropna()]
    return [
        line.strip()
        for line in questions.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def judgment_viewer(
    completions: ParquetSource,
    aspect_annotations: ParquetSource,
    critiques: ParquetSource,
    overall_scores: ParquetSource,
) -> StaticSite:
    # Read as the site is saved, a chunk of prompts at a time, and only the columns the
    # pages show: the judge's raw replies stay on disk.
    return feedback_site(completions, aspect_annotations, critiques, overall_scores)


def viewer_link(index: str) -> str:
    """The judgment viewer's index page as a link from the report, which catalog_report.yml
    writes beside the viewer's folder (as beside its figures): `<folder>/<version>/<folder>/
    index.html` of a versioned site, `<folder>/index.html` of an unversioned one; a remote
    site's URL as it is.

    Args:
        index: the path `StaticSiteDataset` loads as (its index.html).

    Returns:
        The link the report shows.
    """
    if "://" in index:
        return index
    parts = PurePosixPath(Path(index).as_posix()).parts
    versioned = len(parts) >= 4 and parts[-4] == parts[-2]
    return "/".join(parts[-4:] if versioned else parts[-2:])


def _annotate_judge(run_lineage: Mapping[str, Any] | None) -> RecordedJudge:
    """The judge of the annotate run that wrote the ratings, from the data's lineage
    (`run_lineage`: the run records of the versions read), never from the configuration
    of this run: a judge changed since annotate ran is not the one that rated the data."""
    return recorded_judge(run_lineage)


def _every_card(judge_cards: pd.DataFrame, annotate_cards: pd.DataFrame) -> pd.DataFrame:
    # The project's own measured cards (the embedded judge's) count beside the data root's,
    # and the cards the viewer's labels made of annotate's judge beside both.
    return add_card(add_card(measured_cards(), judge_cards), annotate_cards)


# Labels matched and left out, on every corrected_ratings row (the report's section says so).
_LABEL_COUNTS = ("labels_unmatched", "labels_without_aspect")


def validate_annotate_judge(
    completions: ParquetSource,
    aspect_annotations: ParquetSource,
    previous: pd.DataFrame,
    report: ReportBlock,
    run_lineage: Mapping[str, Any],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The viewer labels of `report.labels.path` matched to annotate's ratings: the cards
    of annotate's judge, as the annotate run recorded it (`previous` and, unless its
    figures repeat the latest card's, this one) and the corrected mean ratings; without
    labels, `previous` and no rows. Labels on ratings whose judge is not recorded are
    refused: their card could be filed under no judge."""
    params = report_params(report)
    path = params.labels.path
    if path is None:
        return normalised(previous), pd.DataFrame(columns=[*ESTIMATE_COLUMNS, *_LABEL_COUNTS])
    judge = _annotate_judge(run_lineage)
    if judge.identity is None:
        written = f"aspect_annotations {judge.run}" if judge.run else "aspect_annotations"
        raise InputError(
            f"report.labels.path: the judge that rated {written} is not recorded (no run "
            "record names it), so the labels' card could be filed under no judge; rerun "
            "annotate to record its judge (answers in the request cache are not paid for "
            "again)"
        )
    try:
        labels = read_viewer_labels(path)
    except InputError as error:
        raise InputError(f"report.labels.path: {error}") from error
    match = match_labels(
        labels.pairs, labels.scores, judged_ratings(completions, aspect_annotations)
    )
    validation_set = params.labels.validation_set or "/".join(Path(path).parts[-2:])
    card = annotate_card(
        match,
        judge.identity,
        validation_set,
        created_at=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        resamples=params.intervals.n_resamples,
        seed=params.intervals.seed,
    )
    cards = previous if repeats_latest(previous, card) else add_card(previous, card)
    estimates = corrected_ratings(match, params.ranking.baseline, params.intervals.confidence)
    counts = dict(zip(_LABEL_COUNTS, (match.unmatched, match.no_aspect), strict=True))
    if estimates.empty:  # a row that says so, with the counts
        estimates = pd.DataFrame([{"status": "no_matched_labels"}], columns=estimates.columns)
    return normalised(cards), estimates.assign(**counts)


def render_report(
    input_versions: Mapping[str, str],
    report: ReportBlock,
    completions: ParquetSource,
    judgment_viewer: str,
    judge_cards: pd.DataFrame,
    annotate_cards: pd.DataFrame,
    corrected_ratings: pd.DataFrame,
    run_lineage: Mapping[str, Any],
    contamination_counts: pd.DataFrame,
    **tables: pd.DataFrame,
) -> str:
    params = report_params(report)
    # The judge that rated the data, as the annotate run recorded it: never this run's
    # configuration, which may name another judge since.
    judge = _annotate_judge(run_lineage)
    identity = judge.identity
    judge_cards = _every_card(judge_cards, annotate_cards)
    # The gate first: a judge whose card falls short (or has none, or is not recorded)
    # stops the run here, and report.md is not written (`validation.gate`).
    requirements_met = check_requirements(judge_cards, identity, params.judge_requirement)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    run_info = {
        **describe_run(completions, tables["cost_table"], when),
        "preference pairs": params.pairs.describe(),
        "intervals": params.intervals.describe(),
    }
    if identity is None:
        standing = not_recorded_standing(judge)
        judge_lines = standing.lines
    else:
        # The models the rows record: a record that names another is not believed.
        costs = tables["cost_table"]
        rated_by = set(costs.loc[costs["stage"] == "annotate", "model"].astype(str))
        standing = validation_standing(judge_cards, identity, rated_by)
        judge_lines = (recorded_judge_line(judge), *standing.lines)
    text = render_markdown_report(
        tables,
        dict(FIGURE_LINKS),
        input_versions,
        run_info,
        judge_validation=judge_lines,
        caveat=standing.caveat,
        viewer=viewer_link(judgment_viewer),
        confidence=params.intervals.confidence,
    )
    decontamination = "\n## Decontamination\n\n" + "\n".join(
        contamination_section(contamination_rows(contamination_counts))
    )
    counts = corrected_ratings.reindex(columns=list(_LABEL_COUNTS)).head(1).fillna(0)
    section = corrected_section(
        corrected_ratings[corrected_ratings["status"] != "no_matched_labels"],
        params.labels.path,
        *(int(counts[name].iloc[0]) if len(counts) else 0 for name in _LABEL_COUNTS),
    )
    gate = "".join(f"\n{line}\n" for line in requirements_met)
    return (
        text
        + section
        + decontamination
        + "\n"
        + (
            judge_card_section(judge_cards, identity["judge_key"])
            if identity is not None
            else "\n## Judge card\n\n" + not_recorded_line(judge) + "\n"
        )
        + gate
    )
