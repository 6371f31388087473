"""Win rates against a baseline and Bradley-Terry rankings on data with a known truth."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from llm_feedback.core.errors import InputError
from llm_feedback.evaluation import run_evaluation
from llm_feedback.evaluation.ranking import OUTCOME_SCORES
from llm_feedback.stats.battles import Battles
from llm_feedback.stats.comparison import compare_models
from llm_feedback.stats.ranking import ELO_SCALE, bradley_terry, check_pairs, win_rates
from llm_feedback.testing.server import FakeLLMServer, RequestContext

MODELS = [f"m{i}" for i in range(6)]
TRUE_BETA = np.array([-1.0, -0.6, -0.2, 0.1, 0.5, 1.2])


def simulated_battles(seed: int, n_instances: int = 300) -> pd.DataFrame:
    """Each instance: two random models judged in both orders (two battles), outcomes drawn
    from Bradley-Terry with TRUE_BETA; a tie band in the middle of the win probability."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, len(MODELS), n_instances)
    b = (a + rng.integers(1, len(MODELS), n_instances)) % len(MODELS)
    p_a = 1 / (1 + np.exp(-(TRUE_BETA[a] - TRUE_BETA[b])))
    rows = []
    for first, second, p in ((a, b, p_a), (b, a, 1 - p_a)):
        u = rng.random(n_instances)
        rows.append(
            pd.DataFrame(
                {
                    "instance": np.arange(n_instances),
                    "model_a": np.array(MODELS)[first],
                    "model_b": np.array(MODELS)[second],
                    "outcome": np.where(u < p, 1.0, 0.0),
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


def true_elo() -> pd.Series:
    centred = TRUE_BETA - TRUE_BETA.mean()
    return pd.Series(1000 + ELO_SCALE * centred / np.log(10), index=MODELS)


def test_bradley_terry_recovers_the_generating_order():
    ranking = bradley_terry(simulated_battles(0, n_instances=3000), n_resamples=100, seed=0)
    assert list(ranking["model"]) == MODELS[::-1]  # sorted by rank, best first
    assert list(ranking["rank"]) == [1, 2, 3, 4, 5, 6]
    assert spearmanr(ranking["score"], true_elo()[ranking["model"]]).statistic == 1.0
    assert ranking["score"].mean() == pytest.approx(1000.0)
    assert (ranking["n_battles"] == 0).sum() == 0 and ranking["n_battles"].sum() == 2 * 6000
    assert set(ranking["method"]) == {"bradley-terry-mle, poisson-bootstrap-100-cluster"}


def test_bradley_terry_intervals_cover_the_truth_at_about_the_nominal_rate():
    truth = true_elo()
    covered = []
    for seed in range(40):
        ranking = bradley_terry(simulated_battles(seed), n_resamples=100, seed=seed)
        ranking = ranking.set_index("model")
        covered += list(
            (ranking["ci_low"] <= truth[ranking.index])
            & (truth[ranking.index] <= ranking["ci_high"])
        )
    coverage = np.mean(covered)
    assert 0.85 <= coverage <= 0.99, coverage


def test_bradley_terry_matches_a_statsmodels_fit_of_the_same_likelihood():
    import statsmodels.api as sm

    battles = simulated_battles(5, n_instances=500)
    ranking = bradley_terry(battles, n_resamples=20).set_index("model")
    design = np.zeros((len(battles), len(MODELS)))
    design[np.arange(len(battles)), battles["model_a"].map(MODELS.index)] = 1
    design[np.arange(len(battles)), battles["model_b"].map(MODELS.index)] = -1
    fit = sm.GLM(battles["outcome"], design[:, 1:], family=sm.families.Binomial()).fit()
    beta = np.r_[0.0, fit.params]
    expected = 1000 + ELO_SCALE * (beta - beta.mean()) / np.log(10)
    assert ranking.loc[MODELS, "score"].to_numpy() == pytest.approx(expected, abs=1e-3)


def test_win_rates_count_ties_half_and_orient_each_battle_from_the_model():
    battles = pd.DataFrame(
        {
            "instance": ["q1", "q1", "q2", "q2", "q3", "q4"],
            "model_a": ["x", "base", "x", "base", "y", "x"],
            "model_b": ["base", "x", "base", "x", "base", "y"],
            "outcome": [1.0, 1.0, 0.5, 0.0, 0.0, 1.0],
        }
    )
    table = win_rates(battles, "base", n_resamples=200, seed=0).set_index("model")
    # x vs base: win (q1), loss (q1, base shown first and won), tie (q2), win (q2).
    assert table.loc["x", ["n_battles", "wins", "ties", "losses"]].tolist() == [4, 2, 1, 1]
    assert table.loc["x", "win_rate"] == pytest.approx(2.5 / 4)
    assert table.loc["y", "win_rate"] == 0.0 and table.loc["y", "n_battles"] == 1
    # Two instances for x: resamples give q1 twice (0.5), q2 twice (0.75) or both (0.625).
    assert table.loc["x", "ci_low"] == pytest.approx(0.5)
    assert table.loc["x", "ci_high"] == pytest.approx(0.75)
    # Read two battles at a time (q1's two orders apart from q2's, the last batch without
    # the baseline), the table is the one of all the battles at once.
    batches = [battles.iloc[start:stop] for start, stop in ((0, 2), (2, 4), (4, 5), (5, 6))]
    streamed = win_rates(Battles(lambda: iter(batches), battles.columns), "base", n_resamples=200)
    pd.testing.assert_frame_equal(streamed.set_index("model"), table)


def test_bad_outcomes_and_self_battles_are_refused_by_row():
    battles = pd.DataFrame(
        {"instance": [1, 2], "model_a": ["x", "x"], "model_b": ["y", "x"], "outcome": [1.0, 1.0]}
    )
    with pytest.raises(InputError, match="row 1 compares 'x' with itself"):
        bradley_terry(battles, n_resamples=10)
    with pytest.raises(InputError, match="row 0 has outcome 2"):
        win_rates(battles.assign(outcome=[2, 1]), "y", n_resamples=10)


def test_an_unreadable_outcome_is_a_row_with_a_status_left_out_and_counted():
    """A battle whose verdict was never read (NaN, None, a word) neither refuses nor breaks
    the ranking: `check_pairs` marks it unreadable, every figure is the one of the readable
    battles alone, and the Bradley-Terry table counts it per model."""
    battles = simulated_battles(seed=3, n_instances=120)
    unread = pd.DataFrame(
        {
            "instance": [900, 901, 902],
            "model_a": ["m0", "m1", "m0"],
            "model_b": ["m5", "m5", "m2"],
            "outcome": [np.nan, None, "no verdict"],
        }
    )
    with_unread = pd.concat([battles, unread], ignore_index=True)
    checked = check_pairs(with_unread)
    assert checked["status"].value_counts().to_dict() == {"ok": len(battles), "unreadable": 3}
    assert checked["outcome"].isna().sum() == 3

    ranked = bradley_terry(with_unread, n_resamples=50).set_index("model")
    alone = bradley_terry(battles, n_resamples=50).set_index("model")
    pd.testing.assert_frame_equal(
        ranked.drop(columns="n_unreadable"), alone.drop(columns="n_unreadable")
    )
    assert ranked["n_unreadable"].to_dict() == {m: 0 for m in MODELS} | {
        "m0": 2,
        "m1": 1,
        "m5": 2,
        "m2": 1,
    }
    assert alone["n_unreadable"].eq(0).all()
    pd.testing.assert_frame_equal(
        win_rates(with_unread, "m5", n_resamples=50), win_rates(battles, "m5", n_resamples=50)
    )
    # Nothing readable at all: an empty ranking, not an error.
    assert bradley_terry(unread, n_resamples=10).empty


def test_the_model_comparison_runs_over_unreadable_battles():
    """The whole comparison (Bradley-Terry, win rates, length and style control) reads the
    readable battles: the same table as without the unreadable ones."""
    rng = np.random.default_rng(5)
    battles = simulated_battles(seed=5, n_instances=80)
    battles = battles.assign(
        length_a=rng.integers(50, 500, len(battles)), length_b=rng.integers(50, 500, len(battles))
    )
    unread = battles.iloc[:4].assign(instance=[990, 991, 992, 993], outcome=np.nan)
    with_unread = pd.concat([battles, unread], ignore_index=True)
    compared = compare_models(with_unread, "m0", n_resamples=20).ranking
    plain = compare_models(battles, "m0", n_resamples=20).ranking
    pd.testing.assert_frame_equal(
        compared.drop(columns="n_unreadable"), plain.drop(columns="n_unreadable")
    )
    assert compared["n_unreadable"].sum() == 2 * len(unread)


def test_a_pairwise_run_with_a_verdict_less_reply_ranks_over_http():
    """Judged over HTTP by the test server, one pair gets no verdict (the judge cannot
    decide, in both orders): its outcome is null in eval_judgments, and the ranking of the
    judgments as they stand counts it instead of refusing."""

    def judge(body: dict, ctx: RequestContext) -> str:
        shown = "\n".join(message["content"] for message in body["messages"])
        if "question 0" in shown:
            return "I cannot decide between them."
        return "[[A]]" if shown.index("long answer") < shown.index("short") else "[[B]]"

    samples = pd.DataFrame(
        [
            {
                "instance_id": f"i{k}",
                "question": f"Explain it (question {k}).",
                "response": text,
                "model": model,
            }
            for k in range(4)
            for model, text in (("long", f"A long answer, number {k}."), ("short", f"short {k}"))
        ]
    )
    with FakeLLMServer(judge) as server:
        endpoint = {
            "backend": "openai",
            "model": "judge",
            "base_url": server.base_url,
            "structured_output": False,
        }
        params = {"mode": "pairwise", "max_reasks": 0}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            judgments, _ = run_evaluation(
                samples, params, {"local": endpoint}, None, progress=False
            )
        assert server.request_count == 2 * len(judgments)
    battles = judgments.assign(
        instance=judgments["instance_id"],
        outcome=judgments["outcome"].astype("object").map(OUTCOME_SCORES),
    )
    assert battles["outcome"].isna().sum() == 1
    ranked = bradley_terry(battles, n_resamples=20).set_index("model")
    assert ranked["n_battles"].to_dict() == {"long": 3, "short": 3}
    assert ranked["n_unreadable"].to_dict() == {"long": 1, "short": 1}
    assert ranked.index[0] == "long"
