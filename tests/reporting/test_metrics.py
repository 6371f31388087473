import numpy as np
import pandas as pd
import pytest
from scipy import stats

from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.reporting import (
    cost_table,
    judge_health,
    model_aspect_metrics,
    model_score_metrics,
    position_consistency,
    rating_by_position,
    shuffle_agreement,
    source_aspect_metrics,
    to_0_100,
)
from llm_feedback.storage.parquet_source import ParquetSource
from llm_feedback.storage.schema import (
    COST_TABLE_COLUMN_TYPES,
    JUDGE_HEALTH_COLUMN_TYPES,
    MODEL_ASPECT_METRICS_COLUMN_TYPES,
    MODEL_SCORE_METRICS_COLUMN_TYPES,
    POSITION_CONSISTENCY_COLUMN_TYPES,
    RATING_BY_POSITION_COLUMN_TYPES,
    SOURCE_ASPECT_METRICS_COLUMN_TYPES,
)

from .builders import NA, Completion, build_frames, empty_frames, on_disk, typical_specs

# Any RuntimeWarning (mean of empty slice, division by zero) fails the test.
pytestmark = pytest.mark.filterwarnings("error")

PRICES = {"judge-1": {"prompt_per_1k": 0.01, "completion_per_1k": 0.03}}


def assert_schema(frame: pd.DataFrame, schema: dict[str, str]) -> None:
    assert list(frame.columns) == list(schema)
    assert {column: str(dtype) for column, dtype in frame.dtypes.items()} == schema


def row(frame: pd.DataFrame, **where: str) -> pd.Series:
    mask = np.logical_and.reduce([frame[column] == value for column, value in where.items()])
    (index,) = np.flatnonzero(mask)
    return frame.iloc[index]


def health_value(table: pd.DataFrame, metric: str, scope: str) -> float:
    return row(table, metric=metric, scope=scope)["value"]


# --- model_aspect_metrics -------------------------------------------------------------


def test_model_aspect_metrics_counts_and_means():
    frames = build_frames(typical_specs())
    table = model_aspect_metrics(frames.aspect_annotations, frames.completions)

    assert_schema(table, MODEL_ASPECT_METRICS_COLUMN_TYPES)
    assert len(table) == 4 * 4
    # Canonical aspect order within each model, models alphabetical.
    assert list(table["aspect"][:4]) == [
        "instruction_following",
        "honesty",
        "truthfulness",
        "helpfulness",
    ]
    alpha = row(table, model="alpha", aspect="helpfulness")
    assert (alpha["n_rated"], alpha["n_na"], alpha["n_failed"]) == (3, 0, 0)
    assert alpha["mean_rating"] == pytest.approx(14 / 3)
    assert alpha["mean_rating_0_100"] == pytest.approx((14 / 3 - 1) / 4 * 100)
    assert alpha["std_error"] == pytest.approx(np.std([5, 4, 5], ddof=1) / np.sqrt(3))
    beta_honesty = row(table, model="beta", aspect="honesty")
    assert (beta_honesty["n_rated"], beta_honesty["n_na"]) == (2, 1)
    gamma_truth = row(table, model="gamma", aspect="truthfulness")
    assert (gamma_truth["n_rated"], gamma_truth["n_failed"]) == (2, 1)
    # delta's p2 generation failed and was never annotated; p3's call errored.
    delta_if = row(table, model="delta", aspect="instruction_following")
    assert (delta_if["n_rated"], delta_if["n_failed"]) == (1, 1)
    assert np.isnan(delta_if["std_error"])  # one rating: no standard error


def test_source_aspect_metrics_break_the_ratings_down_per_prompt_source():
    frames = build_frames(typical_specs())
    completions = frames.completions.copy()
    completions.loc[completions["prompt_id"] == "p1", "source"] = "flan"
    table = source_aspect_metrics(frames.aspect_annotations, completions)

    assert_schema(table, SOURCE_ASPECT_METRICS_COLUMN_TYPES)
    assert sorted(set(table["source"])) == ["evol_instruct", "flan"]
    flan = table[table["source"] == "flan"].drop(columns="source").reset_index(drop=True)
    p1 = frames.aspect_annotations[frames.aspect_annotations["prompt_id"] == "p1"]
    expected = model_aspect_metrics(p1, completions[completions["prompt_id"] == "p1"])
    pd.testing.assert_frame_equal(flan, expected)
    # The sources' counts add up to the whole table's.
    whole = model_aspect_metrics(frames.aspect_annotations, frames.completions)
    summed = table.groupby(["model", "aspect"])[["n_rated", "n_na", "n_failed"]].sum()
    pd.testing.assert_frame_equal(
        summed.sort_index(),
        whole.set_index(["model", "aspect"])[["n_rated", "n_na", "n_failed"]].sort_index(),
    )


@pytest.mark.parametrize("table", [model_aspect_metrics, source_aspect_metrics])
def test_aspect_tables_of_files_read_a_prompt_at_a_time_are_those_of_the_frames(tmp_path, table):
    frames = build_frames(typical_specs(), shuffles=2)
    completions = frames.completions.copy()
    completions.loc[completions["prompt_id"] == "p1", "source"] = "flan"
    expected = table(frames.aspect_annotations, completions)
    streamed = table(
        on_disk(tmp_path, "aspects", frames.aspect_annotations),
        on_disk(tmp_path, "completions", completions),
        prompts_per_chunk=1,
    )
    pd.testing.assert_frame_equal(streamed, expected, check_exact=False, rtol=1e-9)
    assert streamed["n_rated"].sum() > 0 and streamed["ci_low"].notna().any()


def test_model_aspect_metrics_folds_shuffles_into_one_rating_per_completion():
    frames = build_frames(typical_specs(), shuffles=2)
    annotations = frames.aspect_annotations
    second_look = (
        (annotations["prompt_id"] == "p1")
        & (annotations["completion_idx"] == 0)
        & (annotations["aspect"] == "helpfulness")
        & (annotations["shuffle_idx"] == 1)
    )
    annotations.loc[second_look, "rating"] = 3.0  # first shuffle said 5

    table = model_aspect_metrics(annotations, frames.completions)

    alpha = row(table, model="alpha", aspect="helpfulness")
    assert alpha["n_rated"] == 3
    assert alpha["mean_rating"] == pytest.approx((4 + 4 + 5) / 3)


def test_model_whose_generations_all_failed_gets_empty_rows():
    specs = [
        *typical_specs(),
        Completion("p1", "broken", error="HTTP 500"),
        Completion("p2", "broken", error="HTTP 500"),
    ]
    frames = build_frames(specs)

    table = model_aspect_metrics(frames.aspect_annotations, frames.completions)

    broken = table[table["model"] == "broken"]
    assert len(broken) == 4
    assert (broken[["n_rated", "n_na", "n_failed"]] == 0).all().all()
    assert broken[["mean_rating", "mean_rating_0_100", "std_error"]].isna().all().all()


def test_all_ratings_na_gives_nan_mean_without_warnings():
    specs = [
        Completion("p1", "alpha", {"honesty": NA}),
        Completion("p1", "beta", {"honesty": NA}),
    ]
    frames = build_frames(specs)

    table = model_aspect_metrics(frames.aspect_annotations, frames.completions)

    honesty = table[table["aspect"] == "honesty"]
    assert list(honesty["n_na"]) == [1, 1]
    assert list(honesty["n_rated"]) == [0, 0]
    assert honesty["mean_rating"].isna().all()


def test_model_aspect_metrics_on_empty_inputs():
    frames = empty_frames()
    table = model_aspect_metrics(frames.aspect_annotations, frames.completions)
    assert table.empty
    assert_schema(table, MODEL_ASPECT_METRICS_COLUMN_TYPES)


def test_annotation_of_an_unknown_completion_is_an_input_error():
    frames = build_frames(typical_specs())
    completions = frames.completions[frames.completions["prompt_id"] != "p3"]
    with pytest.raises(InputError, match=r"aspect_annotations.*'p3'.*no row in completions"):
        model_aspect_metrics(frames.aspect_annotations, completions)


def test_missing_column_is_named():
    frames = build_frames(typical_specs())
    with pytest.raises(InputError, match=r"aspect_annotations: missing column\(s\) 'is_na'"):
        model_aspect_metrics(frames.aspect_annotations.drop(columns="is_na"), frames.completions)


def test_0_100_maps_the_ends_of_the_1_5_scale():
    assert [to_0_100(value) for value in (1.0, 3.0, 5.0)] == [0.0, 50.0, 100.0]


# --- model_score_metrics ----------------------------------------------------------------


def test_model_score_metrics_means_and_correlations():
    frames = build_frames(typical_specs())
    table = model_score_metrics(frames.overall_scores)

    assert_schema(table, MODEL_SCORE_METRICS_COLUMN_TYPES)
    assert list(table["model"]) == ["alpha", "beta", "delta", "gamma"]
    alpha = row(table, model="alpha")
    alpha_scores = frames.overall_scores[frames.overall_scores["model"] == "alpha"]
    overall = alpha_scores["overall_score_fixed"].astype(float)
    fine = alpha_scores["fine_grained_score"].astype(float)
    assert alpha["n"] == 3
    assert alpha["mean_overall_fixed"] == pytest.approx(overall.mean())
    assert alpha["pearson_overall_vs_fine_grained"] == pytest.approx(
        np.corrcoef(overall, fine)[0, 1]
    )
    assert alpha["spearman_overall_vs_fine_grained"] == pytest.approx(
        np.corrcoef(overall.rank(), fine.rank())[0, 1]
    )
    # delta: p1 flipped 10 -> 1 and p2 never generated.
    delta = row(table, model="delta")
    assert delta["mean_overall_original"] == pytest.approx(7.5)
    assert delta["mean_overall_fixed"] == pytest.approx(3.0)
    # gamma's p3 has no overall score: 2 pairs are too few for a correlation.
    gamma = row(table, model="gamma")
    assert gamma["n"] == 3
    assert gamma["n_paired"] == 2
    assert np.isnan(gamma["pearson_overall_vs_fine_grained"])


def test_model_score_metrics_of_a_file_read_in_batches_are_those_of_the_frame(tmp_path):
    """Two passes over batches of 4 rows (a prompt's rows split between batches) give the
    table of the frame whole, correlations and their intervals included; the scores are
    spread over many prompts so that every correlation is defined."""
    rng = np.random.default_rng(4)
    n = 240
    fine = rng.integers(1, 6, size=n).astype("float64")
    scores = pd.DataFrame(
        {
            "prompt_id": [f"p{i // 4:03d}" for i in range(n)],
            "completion_idx": np.arange(n) % 4,
            "model": rng.choice(["alpha", "beta", "gamma"], size=n),
            "fine_grained_score": np.where(rng.random(n) < 0.1, np.nan, fine),
            "overall_score_original": rng.integers(1, 11, size=n).astype("float64"),
            "overall_score_fixed": np.clip(2 * fine + rng.integers(-2, 3, size=n), 1, 10),
        }
    )
    expected = model_score_metrics(scores)
    streamed = model_score_metrics(on_disk(tmp_path, "scores", scores, rows=4))
    pd.testing.assert_frame_equal(streamed, expected, check_exact=False, rtol=1e-9)
    assert streamed["spearman_overall_vs_fine_grained_ci_low"].notna().all()
    # The Spearman estimate is scipy's, ties and all.
    alpha = scores[scores["model"] == "alpha"].dropna()
    rho = stats.spearmanr(alpha["overall_score_fixed"], alpha["fine_grained_score"]).statistic
    assert streamed.loc[0, "spearman_overall_vs_fine_grained"] == pytest.approx(rho)


def test_correlation_of_a_constant_score_is_nan():
    specs = [Completion(f"p{i}", "alpha", {"helpfulness": 1 + i}, overall=7) for i in range(4)]
    table = model_score_metrics(build_frames(specs).overall_scores)
    assert np.isnan(table["pearson_overall_vs_fine_grained"].iloc[0])
    assert np.isnan(table["spearman_overall_vs_fine_grained"].iloc[0])


def test_model_score_metrics_on_empty_overall_scores():
    table = model_score_metrics(empty_frames().overall_scores)
    assert table.empty
    assert_schema(table, MODEL_SCORE_METRICS_COLUMN_TYPES)


# --- judge_health -----------------------------------------------------------------------


def test_judge_health_counts_failures_reasks_and_fixes():
    frames = build_frames(typical_specs())
    table = judge_health(frames.aspect_annotations, frames.critiques, frames.overall_scores)

    assert_schema(table, JUDGE_HEALTH_COLUMN_TYPES)
    annotated = 11  # 12 completions, one failed generation
    assert health_value(table, "rows", "truthfulness") == annotated
    assert health_value(table, "parse_errors", "truthfulness") == 1
    assert health_value(table, "parse_error_rate", "truthfulness") == pytest.approx(1 / annotated)
    assert health_value(table, "reasks", "truthfulness") == 1
    assert health_value(table, "call_errors", "instruction_following") == 1
    assert health_value(table, "na_rate", "honesty") == pytest.approx(1 / annotated)
    assert health_value(table, "parse_errors", "critique") == 1
    assert health_value(table, "reasks", "critique") == 2
    fixes = {
        action: health_value(table, "fix_count", action)
        for action in ("kept", "reannotated", "flipped", "no_overall_score")
    }
    assert fixes == {"kept": 8, "reannotated": 1, "flipped": 1, "no_overall_score": 1}
    assert health_value(table, "fix_share", "kept") == pytest.approx(8 / 11)


def test_judge_health_on_empty_inputs_lists_every_fix_action():
    frames = empty_frames()
    table = judge_health(frames.aspect_annotations, frames.critiques, frames.overall_scores)

    assert_schema(table, JUDGE_HEALTH_COLUMN_TYPES)
    fix_counts = table[table["metric"] == "fix_count"]
    assert list(fix_counts["scope"]) == [
        "kept",
        "reannotated",
        "reannotate_failed",
        "flipped",
        "no_overall_score",
    ]
    assert (fix_counts["value"] == 0).all()
    assert np.isnan(health_value(table, "parse_error_rate", "critique"))


def test_judge_health_of_empty_tables_still_counts_the_injections_they_record():
    frames = empty_frames()
    critiques = frames.critiques.assign(suspected_injection=pd.Series(dtype="bool"))
    table = judge_health(frames.aspect_annotations, critiques, frames.overall_scores)
    assert health_value(table, "suspected_injections", "critique") == 0
    assert health_value(table, "rows", "critique") == 0


def test_judge_health_of_tables_on_disk_counted_in_batches_is_the_same(tmp_path):
    frames = build_frames(typical_specs())
    sources = []
    for name in ("aspect_annotations", "critiques", "overall_scores"):
        getattr(frames, name).to_parquet(tmp_path / f"{name}.parquet", row_group_size=3)
        sources.append(ParquetSource(str(tmp_path / f"{name}.parquet"), batch_rows=3))
    in_memory = judge_health(frames.aspect_annotations, frames.critiques, frames.overall_scores)
    pd.testing.assert_frame_equal(judge_health(*sources), in_memory)


def test_judge_health_rejects_an_unknown_fix_action():
    frames = build_frames(typical_specs())
    overall_scores = frames.overall_scores.assign(fix_action="ignored")
    with pytest.raises(InputError, match="fix_action"):
        judge_health(frames.aspect_annotations, frames.critiques, overall_scores)


# --- position_consistency / rating_by_position -------------------------------------------


def test_with_a_single_shuffle_only_the_comparisons_between_shuffles_are_empty():
    annotations = build_frames(typical_specs()).aspect_annotations
    consistency = position_consistency(annotations)
    by_position = rating_by_position(annotations)
    assert consistency.empty
    assert_schema(consistency, POSITION_CONSISTENCY_COLUMN_TYPES)
    # Shown positions are random, so one shuffle already gives the mean by position.
    assert not by_position.empty
    assert_schema(by_position, RATING_BY_POSITION_COLUMN_TYPES)
    assert (by_position["ci_low"] <= by_position["mean_rating"]).all()
    assert (by_position["mean_rating"] <= by_position["ci_high"]).all()


def test_rating_by_position_of_a_file_read_in_batches_is_that_of_the_frame(tmp_path):
    annotations = build_frames(typical_specs(), shuffles=2).aspect_annotations
    expected = rating_by_position(annotations)
    streamed = rating_by_position(on_disk(tmp_path, "aspects", annotations, rows=5))
    pd.testing.assert_frame_equal(streamed, expected, check_exact=False, rtol=1e-9)


@pytest.mark.parametrize("shuffles", [1, 2])
def test_the_shuffle_tables_of_a_table_on_disk_are_those_of_the_frame(tmp_path, shuffles):
    annotations = build_frames(typical_specs(), shuffles=shuffles).aspect_annotations
    annotations.loc[annotations["completion_idx"] == 1, "rating"] += annotations["shuffle_idx"]
    source = on_disk(tmp_path, "aspects", annotations, rows=5)
    for table in (position_consistency, shuffle_agreement):
        expected = table(annotations)
        assert expected.empty == (shuffles == 1)
        # A chunk of one prompt at a time: the items and pairs of each prompt meet in it.
        streamed = table(source, prompts_per_chunk=1)
        pd.testing.assert_frame_equal(streamed, expected, check_exact=False, rtol=1e-9)


def test_position_consistency_counts_changed_ratings():
    annotations = build_frames(typical_specs(), shuffles=2).aspect_annotations
    helpfulness = annotations["aspect"] == "helpfulness"
    changed = (
        helpfulness
        & (annotations["prompt_id"] == "p1")
        & (annotations["completion_idx"] == 0)
        & (annotations["shuffle_idx"] == 1)
    )
    annotations.loc[changed, "rating"] = 3.0  # was 5

    table = position_consistency(annotations)

    assert_schema(table, POSITION_CONSISTENCY_COLUMN_TYPES)
    result = row(table, aspect="helpfulness")
    assert result["n_compared"] == 11
    assert result["share_changed"] == pytest.approx(1 / 11)
    assert result["mean_abs_change"] == pytest.approx(2 / 11)
    # N/A and failed judgments are not compared.
    assert row(table, aspect="honesty")["n_compared"] == 10
    assert row(table, aspect="truthfulness")["share_changed"] == 0


def test_mean_abs_change_averages_all_pairs_of_shuffles():
    annotations = build_frames(
        [Completion("p1", "alpha", {"helpfulness": 3}), Completion("p1", "beta")], shuffles=3
    ).aspect_annotations
    third_look = (
        (annotations["aspect"] == "helpfulness")
        & (annotations["completion_idx"] == 0)
        & (annotations["shuffle_idx"] == 2)
    )
    annotations.loc[third_look, "rating"] = 5.0  # ratings 3, 3, 5: |0|, |2|, |2|

    table = position_consistency(annotations)

    result = row(table, aspect="helpfulness")
    assert result["mean_abs_change"] == pytest.approx((0 + 4 / 3) / 2)


def test_rating_by_position_exposes_a_first_position_bias():
    annotations = build_frames(typical_specs(), shuffles=4).aspect_annotations
    rated = annotations["rating"].notna()
    annotations.loc[rated, "rating"] = np.where(annotations.loc[rated, "position"] == 0, 5.0, 3.0)

    table = rating_by_position(annotations)

    assert_schema(table, RATING_BY_POSITION_COLUMN_TYPES)
    helpfulness = table[table["aspect"] == "helpfulness"]
    assert list(helpfulness["position"]) == [0, 1, 2, 3]
    assert list(helpfulness["mean_rating"]) == [5.0, 3.0, 3.0, 3.0]


# --- cost_table -------------------------------------------------------------------------


def test_cost_table_sums_tokens_and_prices_known_models():
    frames = build_frames(typical_specs())
    table = cost_table(frames.completions, frames.aspect_annotations, frames.critiques, PRICES)

    assert_schema(table, COST_TABLE_COLUMN_TYPES)
    assert list(table["stage"].unique()) == ["generate", "annotate", "critique"]
    generate = table[table["stage"] == "generate"]
    assert set(generate["model"]) == {"alpha", "beta", "gamma", "delta"}
    assert (generate["endpoint"] == "server").all()
    assert not generate["priced"].any()
    assert (generate["estimated_cost"] == 0).all()
    assert row(table, stage="generate", model="delta")["prompt_tokens"] == 80  # 2 of 3 ran
    annotate = row(table, stage="annotate")
    annotations = frames.aspect_annotations
    assert annotate["endpoint"] == "judge"
    assert annotate["priced"]
    assert annotate["prompt_tokens"] == annotations["prompt_tokens"].sum()
    assert annotate["estimated_cost"] == pytest.approx(
        annotations["prompt_tokens"].sum() / 1000 * 0.01
        + annotations["completion_tokens"].sum() / 1000 * 0.03
    )


def test_cost_table_on_empty_inputs():
    frames = empty_frames()
    table = cost_table(frames.completions, frames.aspect_annotations, frames.critiques, {})
    assert table.empty
    assert_schema(table, COST_TABLE_COLUMN_TYPES)


def test_cost_table_prices_each_row_by_the_endpoint_and_backend_it_records():
    frames = build_frames(typical_specs())
    critiques = frames.critiques.copy()
    # Half of the critiques came from an embedded judge on another endpoint.
    embedded = critiques.index[::2]
    critiques.loc[embedded, ["judge_endpoint", "judge_backend", "judge_model"]] = [
        "local",
        "local",
        "smollm2",
    ]
    table = cost_table(frames.completions, frames.aspect_annotations, critiques, PRICES)
    critique = table[table["stage"] == "critique"].set_index("endpoint")
    assert set(critique.index) == {"judge", "local"}
    local = critique.loc["local"]
    assert local["model"] == "smollm2" and local["priced"] and local["estimated_cost"] == 0
    assert local["prompt_tokens"] == critiques.loc[embedded, "prompt_tokens"].sum()
    assert critique.loc["judge", "estimated_cost"] > 0


def test_cost_table_prices_batch_answered_rows_apart_at_the_batch_price():
    frames = build_frames(typical_specs())
    annotations = frames.aspect_annotations.copy()
    batched = annotations.index[::2]
    annotations["judge_via_batch"] = annotations.index.isin(batched)
    critiques = frames.critiques.assign(judge_via_batch=True)
    own_batch_price = {"judge-1": {**PRICES["judge-1"], "batch_completion_per_1k": 0.0}}

    table = cost_table(frames.completions, annotations, critiques, PRICES)
    priced_apart = cost_table(frames.completions, annotations, critiques, own_batch_price)

    batch = row(table, stage="annotate", mode="batch")
    online = row(table, stage="annotate", mode="online")
    tokens = annotations.loc[batched]
    assert batch["prompt_tokens"] == tokens["prompt_tokens"].sum()
    assert batch["estimated_cost"] == pytest.approx(
        (tokens["prompt_tokens"].sum() * 0.01 + tokens["completion_tokens"].sum() * 0.03) / 2000
    )
    assert online["prompt_tokens"] == annotations["prompt_tokens"].sum() - batch["prompt_tokens"]
    assert set(table.loc[table["stage"] == "critique", "mode"]) == {"batch"}
    assert set(table.loc[table["stage"] == "generate", "mode"]) == {"online"}  # no column
    assert row(priced_apart, stage="annotate", mode="batch")["estimated_cost"] == pytest.approx(
        tokens["prompt_tokens"].sum() * 0.01 / 2000
    )


def test_cost_table_needs_the_recorded_endpoint_columns():
    frames = build_frames(typical_specs())
    with pytest.raises(InputError, match="judge_backend"):
        cost_table(
            frames.completions,
            frames.aspect_annotations,
            frames.critiques.drop(columns="judge_backend"),
            PRICES,
        )


@pytest.mark.parametrize("bad_price", [None, "0.01", -1.0, True])
def test_cost_table_rejects_a_bad_price(bad_price):
    frames = build_frames(typical_specs())
    prices = {"judge-1": {"prompt_per_1k": bad_price, "completion_per_1k": 0.03}}
    with pytest.raises(ConfigError, match=r"prices\.judge-1\.prompt_per_1k"):
        cost_table(
            frames.completions,
            frames.aspect_annotations,
            frames.critiques,
            prices,
        )


# --- storage ----------------------------------------------------------------------------


@pytest.mark.parametrize("frames", [build_frames(typical_specs(), shuffles=2), empty_frames()])
def test_tables_round_trip_through_parquet(frames, tmp_path):
    tables = {
        "model_aspect_metrics": model_aspect_metrics(frames.aspect_annotations, frames.completions),
        "model_score_metrics": model_score_metrics(frames.overall_scores),
        "judge_health": judge_health(
            frames.aspect_annotations, frames.critiques, frames.overall_scores
        ),
        "position_consistency": position_consistency(frames.aspect_annotations),
        "rating_by_position": rating_by_position(frames.aspect_annotations),
        "cost_table": cost_table(
            frames.completions,
            frames.aspect_annotations,
            frames.critiques,
            PRICES,
        ),
    }
    for name, table in tables.items():
        path = tmp_path / f"{name}.parquet"
        table.to_parquet(path)
        pd.testing.assert_frame_equal(pd.read_parquet(path), table)


def test_judge_health_names_the_critiques_most_frequent_score_and_its_share():
    """typical_specs' 10 read overall scores give 9 and 10 twice each: the tie goes to the
    higher score, 2 of 10, with its Wilson interval; no score read: no such row."""
    frames = build_frames(typical_specs())
    table = judge_health(frames.aspect_annotations, frames.critiques, frames.overall_scores)
    assert health_value(table, "modal_score", "critique") == 10
    assert health_value(table, "modal_score_count", "critique") == 2
    share = row(table, metric="modal_score_share", scope="critique")
    assert share["value"] == pytest.approx(2 / 10)
    assert share["ci_method"] == "wilson"
    assert share["ci_low"] < 0.2 < share["ci_high"]

    empty = empty_frames()
    table = judge_health(empty.aspect_annotations, empty.critiques, empty.overall_scores)
    assert not table["metric"].str.startswith("modal_score").any()


def test_cost_table_prices_prompt_cache_tokens_at_published_or_configured_rates(tmp_path):
    frames = build_frames(typical_specs())
    annotations = frames.aspect_annotations.assign(
        judge_backend="anthropic", cached_prompt_tokens=100.0, cache_write_tokens=np.nan
    )
    annotations.loc[annotations.index[0], "cache_write_tokens"] = 50.0  # null: none reported
    # Old critiques (no cache columns) on disk: read as no cache tokens.
    critiques = on_disk(tmp_path, "critiques", frames.critiques)
    configured = {"judge-1": {**PRICES["judge-1"], "cached_prompt_per_1k": 0.002}}

    published = row(
        cost_table(frames.completions, annotations, critiques, PRICES), stage="annotate"
    )
    own = row(cost_table(frames.completions, annotations, critiques, configured), stage="annotate")
    critique = row(cost_table(frames.completions, annotations, critiques, PRICES), stage="critique")

    prompt, completion = annotations["prompt_tokens"].sum(), annotations["completion_tokens"].sum()
    read, written = 100 * len(annotations), 50
    assert (published["cached_prompt_tokens"], published["cache_write_tokens"]) == (read, written)
    uncached = prompt - read - written
    assert published["estimated_cost"] == pytest.approx(
        (uncached * 0.01 + read * 0.001 + written * 0.0125 + completion * 0.03) / 1000
    )
    assert published["cache_pricing"] == (
        "anthropic's published rates: reads 0.1x input, writes 1.25x"
    )
    assert own["estimated_cost"] == pytest.approx(
        (uncached * 0.01 + read * 0.002 + written * 0.0125 + completion * 0.03) / 1000
    )
    assert own["cache_pricing"].endswith("(cached_prompt_per_1k from report.prices)")
    assert critique["cached_prompt_tokens"] == critique["cache_write_tokens"] == 0
    assert critique["cache_pricing"] == "no cache tokens"
    # Through a Batch API, the cache's shares of the batch price: half of everything.
    batch = annotations.assign(judge_via_batch=True)
    by_batch = cost_table(frames.completions, batch, critiques, PRICES)
    assert row(by_batch, stage="annotate")["estimated_cost"] == pytest.approx(
        published["estimated_cost"] / 2
    )
    assert critique["estimated_cost"] == pytest.approx(
        (
            frames.critiques["prompt_tokens"].sum() * 0.01
            + frames.critiques["completion_tokens"].sum() * 0.03
        )
        / 1000
    )


def test_a_cache_rate_no_provider_publishes_is_the_input_price():
    frames = build_frames(typical_specs())
    annotations = frames.aspect_annotations.assign(cached_prompt_tokens=100.0)
    cached = row(
        cost_table(frames.completions, annotations, frames.critiques, PRICES), stage="annotate"
    )
    plain = row(
        cost_table(frames.completions, frames.aspect_annotations, frames.critiques, PRICES),
        stage="annotate",
    )
    assert cached["estimated_cost"] == pytest.approx(plain["estimated_cost"])
    assert cached["cache_pricing"] == "no published cache rate: at the input price"
