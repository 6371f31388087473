"""Length- and style-controlled comparisons against a judge with an injected length bias."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy.special import expit, logit

from llm_feedback.stats.battles import Battles
from llm_feedback.stats.intervals import cluster_ids, poisson_weights
from llm_feedback.stats.length_control import (
    length_controlled_win_rates,
    style_features,
)
from llm_feedback.stats.ranking import bradley_terry, win_rates
from llm_feedback.stats.style_control import style_controlled_ranking

TRUE_WIN_RATE = 0.40  # the model is worse than the baseline at equal length
LENGTH_BIAS = 2.0  # log-odds per unit of tanh(length difference / its sd)


def length_biased_battles(seed: int, n: int = 4000) -> pd.DataFrame:
    """'verbose' against 'base', both orders of each instance; verbose writes longer answers
    on average and the judge favours the longer one."""
    rng = np.random.default_rng(seed)
    length_verbose = rng.normal(900, 300, n).clip(50)
    length_base = rng.normal(500, 300, n).clip(50)
    difference = length_verbose - length_base
    squashed = np.tanh(difference / difference.std())
    p_verbose = expit(logit(TRUE_WIN_RATE) + LENGTH_BIAS * squashed)
    wins = (rng.random(n) < p_verbose).astype(float)
    # The base model is A in one order and B in the other; one verdict per instance and
    # order, drawn independently.
    wins_swapped = (rng.random(n) < p_verbose).astype(float)
    return pd.DataFrame(
        {
            "instance": np.r_[np.arange(n), np.arange(n)],
            "model_a": ["verbose"] * n + ["base"] * n,
            "model_b": ["base"] * n + ["verbose"] * n,
            "outcome": np.r_[wins, 1 - wins_swapped],
            "length_a": np.r_[length_verbose, length_base],
            "length_b": np.r_[length_base, length_verbose],
        }
    )


def test_length_control_undoes_an_injected_length_bias():
    table = length_controlled_win_rates(length_biased_battles(0), "base", n_resamples=200)
    row = table.set_index("model").loc["verbose"]
    assert row["win_rate"] > TRUE_WIN_RATE + 0.15  # raw: far from the truth
    assert not row["win_rate_ci_low"] <= TRUE_WIN_RATE <= row["win_rate_ci_high"]
    assert (
        row["lc_win_rate_ci_low"] <= TRUE_WIN_RATE <= row["lc_win_rate_ci_high"]
    )  # controlled: covers it
    assert row["lc_win_rate_ci_high"] - row["lc_win_rate_ci_low"] < 0.1
    assert row["length_coefficient_ci_low"] <= LENGTH_BIAS <= row["length_coefficient_ci_high"]
    assert row["lc_method"] == "poisson-bootstrap-200-cluster-one-step"
    assert row["win_rate_method"] == "poisson-bootstrap-200-cluster"


def test_length_control_read_a_batch_at_a_time_is_statsmodels_fit_of_the_whole_table():
    verbose = length_biased_battles(6, n=700)
    terse = length_biased_battles(7, n=500).replace({"verbose": "terse"})
    terse["instance"] += 10_000
    rivals = verbose.assign(model_b="terse").iloc[:300]  # no baseline: left out
    battles = pd.concat([verbose, terse, rivals], ignore_index=True)
    whole = length_controlled_win_rates(battles, "base", n_resamples=100, seed=2)
    shuffled = battles.sample(frac=1.0, random_state=0)
    batches = [shuffled.iloc[start : start + 450] for start in range(0, len(shuffled), 450)]
    streamed = length_controlled_win_rates(
        Battles(lambda: iter(batches), battles.columns), "base", n_resamples=100, seed=2
    )
    pd.testing.assert_frame_equal(streamed, whole, check_exact=False, rtol=1e-9)
    # Given the raw win rates a caller already has, the table is the same.
    raw = win_rates(battles, "base", n_resamples=100, seed=2)
    given = length_controlled_win_rates(battles, "base", n_resamples=100, seed=2, raw=raw)
    pd.testing.assert_frame_equal(given, whole)
    for model, own in (("verbose", verbose), ("terse", terse)):
        is_a = own["model_a"] == model
        score = np.where(is_a, own["outcome"], 1 - own["outcome"])
        difference = np.where(
            is_a, own["length_a"] - own["length_b"], own["length_b"] - own["length_a"]
        )
        design = np.column_stack([np.ones(len(own)), np.tanh(difference / difference.std())])
        glm = sm.GLM(score, design, family=sm.families.Binomial()).fit()
        row = whole.set_index("model").loc[model]
        assert row["lc_win_rate"] == pytest.approx(expit(glm.params[0]), rel=1e-8)
        assert row["length_coefficient"] == pytest.approx(glm.params[1], rel=1e-8)
        assert row["n_battles"] == len(own)


def test_a_model_winning_every_battle_has_no_length_controlled_rate_and_the_others_do():
    battles = length_biased_battles(8, n=300)
    sweeper = length_biased_battles(9, n=300).replace({"verbose": "sweeper"})
    sweeper["outcome"] = np.where(sweeper["model_a"] == "sweeper", 1.0, 0.0)
    table = length_controlled_win_rates(
        pd.concat([battles, sweeper], ignore_index=True), "base", n_resamples=50
    ).set_index("model")
    assert np.isnan(table.loc["sweeper", "lc_win_rate"])
    assert table.loc["sweeper", "win_rate"] == 1.0
    assert 0 < table.loc["verbose", "lc_win_rate"] < 1


def test_one_step_replicates_agree_with_full_refits_of_the_same_resamples():
    battles = length_biased_battles(1, n=600)
    table = length_controlled_win_rates(battles, "base", n_resamples=100, seed=4).iloc[0]
    # The same fit refitted by statsmodels on each of the same 100 resamples of instances.
    oriented = battles.assign(
        score=np.where(battles["model_a"] == "verbose", battles["outcome"], 1 - battles["outcome"]),
        difference=np.where(
            battles["model_a"] == "verbose",
            battles["length_a"] - battles["length_b"],
            battles["length_b"] - battles["length_a"],
        ),
    )
    codes, instances = pd.factorize(oriented["instance"])
    # The resamples' weights as the table draws them: by each instance's id.
    weights = poisson_weights(cluster_ids(pd.Series(instances)), 0, 100, 4).astype("float64")
    squashed = np.tanh(oriented["difference"] / oriented["difference"].std())
    design = np.column_stack([np.ones(len(oriented)), squashed])
    refits = np.array(
        [
            sm.GLM(oriented["score"], design, family=sm.families.Binomial(), freq_weights=w[codes])
            .fit()
            .params
            for w in weights
        ]
    )
    low, high = np.quantile(expit(refits[:, 0]), [0.025, 0.975])
    assert table["lc_win_rate_ci_low"] == pytest.approx(low, abs=0.005)
    assert table["lc_win_rate_ci_high"] == pytest.approx(high, abs=0.005)
    low, high = np.quantile(refits[:, 1], [0.025, 0.975])
    assert table["length_coefficient_ci_low"] == pytest.approx(low, abs=0.05)
    assert table["length_coefficient_ci_high"] == pytest.approx(high, abs=0.05)


def test_length_control_resamples_both_orders_of_an_instance_together():
    # The judge always prefers the answer shown first, each instance judged in both
    # orders: per instance the model wins once and loses once at the same length
    # difference, so every resample of instances fits exactly 0.5. Resampling battles
    # (each its own instance) would split the orders and widen the interval.
    battles = length_biased_battles(5, n=400)
    n = len(battles) // 2
    battles["outcome"] = 1.0
    clustered = length_controlled_win_rates(battles, "base", n_resamples=200).iloc[0]
    assert clustered["lc_win_rate"] == pytest.approx(0.5)
    assert clustered["lc_win_rate_ci_low"] == pytest.approx(0.5, abs=1e-9)
    assert clustered["lc_win_rate_ci_high"] == pytest.approx(0.5, abs=1e-9)
    split = battles.assign(instance=np.arange(2 * n))
    per_battle = length_controlled_win_rates(split, "base", n_resamples=200).iloc[0]
    assert per_battle["lc_win_rate_ci_high"] - per_battle["lc_win_rate_ci_low"] > 0.05


def test_without_length_differences_lc_equals_the_fitted_raw_rate():
    battles = length_biased_battles(2, n=300).assign(length_a=100.0, length_b=100.0)
    row = length_controlled_win_rates(battles, "base", n_resamples=50).iloc[0]
    assert row["lc_win_rate"] == pytest.approx(row["win_rate"])
    assert np.isnan(row["length_coefficient"])


def test_style_control_ranks_by_quality_when_the_judge_likes_long_answers():
    rng = np.random.default_rng(3)
    quality = {"good": 0.5, "plain": 0.0, "padded": -0.3}
    mean_length = {"good": 400, "plain": 400, "padded": 1500}
    models = list(quality)
    n = 6000
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(1, 3, n)) % 3
    names_a, names_b = np.array(models)[a], np.array(models)[b]
    length_a = rng.normal([mean_length[m] for m in names_a], 100).clip(20)
    length_b = rng.normal([mean_length[m] for m in names_b], 100).clip(20)
    difference = (length_a - length_b) / (length_a + length_b)
    skill = np.array([quality[m] for m in names_a]) - np.array([quality[m] for m in names_b])
    outcome = (rng.random(n) < expit(skill + 1.0 * difference / difference.std())).astype(float)
    battles = pd.DataFrame(
        {
            "instance": np.arange(n),
            "model_a": names_a,
            "model_b": names_b,
            "outcome": outcome,
            "length_a": length_a,
            "length_b": length_b,
        }
    )
    raw = bradley_terry(battles, n_resamples=20)
    assert raw.loc[0, "model"] == "padded"  # the length bias wins the raw ranking
    styled = style_controlled_ranking(battles, features=("length",))
    assert list(styled.scores["model"]) == ["good", "plain", "padded"]
    length = styled.coefficients.set_index("feature").loc["length"]
    assert length["ci_low"] <= 1.0 <= length["ci_high"]
    gap = styled.scores.set_index("model")["score"]
    true_gap = 400 / np.log(10) * (quality["good"] - quality["padded"])
    assert gap["good"] - gap["padded"] == pytest.approx(true_gap, rel=0.25)
    assert (styled.scores["ci_low"] < styled.scores["score"]).all()
    assert (styled.scores["score"] < styled.scores["ci_high"]).all()
    assert (
        styled.scores["method"]
        .eq("bradley-terry-style-control, poisson-bootstrap-1000-cluster-one-step")
        .all()
    )
    # Newton's method over batches finds statsmodels' maximum likelihood: the design is
    # the strengths of "plain" and "padded" against "good" (the reference) and the length.
    design = np.column_stack(
        [
            (names_a == "padded").astype(float) - (names_b == "padded"),
            (names_a == "plain").astype(float) - (names_b == "plain"),
            difference / difference.std(),
        ]
    )
    glm = sm.GLM(outcome, design, family=sm.families.Binomial()).fit()
    assert length["coefficient"] == pytest.approx(glm.params[2], rel=1e-6)
    centred = np.array([0.0, glm.params[1], glm.params[0]])  # good, plain, padded
    elo = 1000 + 400 / np.log(10) * (centred - centred.mean())
    assert gap[["good", "plain", "padded"]].to_numpy() == pytest.approx(elo, rel=1e-6)
    # Read a batch at a time (six batches, any instance's battles in any of them), the
    # comparison is the one of the whole table.
    batches = [battles.iloc[start : start + 1000] for start in range(0, n, 1000)]
    streamed = style_controlled_ranking(
        Battles(lambda: iter(batches), battles.columns), features=("length",)
    )
    pd.testing.assert_frame_equal(streamed.scores, styled.scores, check_exact=False, rtol=1e-9)
    pd.testing.assert_frame_equal(
        streamed.coefficients, styled.coefficients, check_exact=False, rtol=1e-9
    )
    ranked = bradley_terry(Battles(lambda: iter(batches), battles.columns), n_resamples=20)
    pd.testing.assert_frame_equal(ranked, raw, check_exact=False, rtol=1e-6)


def test_style_features_count_markdown_elements():
    text = "# Title\n\nSome **bold** and __also__.\n\n- one\n- two\n1. three\n## Sub\nplain"
    row = style_features(pd.Series([text, None])).iloc[0]
    assert row.to_dict() == {"length": len(text), "headers": 2, "bold": 2, "list_items": 3}
    assert style_features(pd.Series([None])).iloc[0].sum() == 0


def test_markdown_inside_fenced_code_is_not_counted():
    # As Arena-Hard counts: a `#` comment, a `- ` line or `**` in code is no Markdown.
    code = "```python\n# a comment\n- not a list\nx = a**2 ** b\n```"
    text = f"## Real header\n{code}\n1) not ordered (Arena-Hard counts `1.` only)\n* item"
    row = style_features(pd.Series([text])).iloc[0]
    assert (row["headers"], row["list_items"], row["bold"]) == (1, 1, 0)


def test_newton_totals_made_a_block_of_rows_at_a_time_are_those_of_the_whole_sums(monkeypatch):
    from llm_feedback.stats import glm_bootstrap
    from llm_feedback.stats.intervals import resampled_totals

    rng = np.random.default_rng(8)
    design = np.column_stack([np.ones(500), rng.normal(size=500)])
    response = (rng.random(500) < 0.6).astype("float64")
    clusters = rng.integers(0, 120, size=500)
    params = np.array([0.3, -0.2])
    whole = resampled_totals(
        glm_bootstrap.newton_cluster_sums(response, design, params, clusters, 120), 50, 3
    )
    monkeypatch.setattr(glm_bootstrap, "NEWTON_BLOCK_ROWS", 37)  # a cluster's rows split
    blocks = glm_bootstrap.resampled_newton_totals(
        response, design, params, clusters, n_resamples=50, seed=3
    )
    assert blocks == pytest.approx(whole)
