"""Arena-Hard-Auto's scores as its `show_result.py` makes them (commit 196f6b8), from
pairwise judgments against its baseline.

Each judgment is two games (the answers' order swapped) and each game is a battle of its
own, a strong verdict (`A>>B`, `B>>A`) counting as three battles: the model's score of a
battle is 1 (won), 0.5 (tie) or 0 (lost). Judgments with Arena-Hard's five levels
(recorded: `recorded_verdict_a_first` / `_b_first`) keep their strength; a judge of ours
gives A / tie / B per order, one battle each. A judgment with a game missing is left out,
as Arena-Hard leaves it out.

The score is the model's win probability against the baseline from a Bradley-Terry fit by
logistic regression (`stats.ranking.bradley_terry` on the battles; when every battle is
against the baseline this is the mean battle score), x 100. Two intervals, both labelled:
Arena-Hard's (`arena_hard_ci_*`: 90%, the model's battles resampled with replacement, the
5th and 95th percentiles of the resampled means, 100 resamples as it draws) and ours
(`clustered_ci_*`: the clustered bootstrap of `stats.ranking.win_rates`, every battle of a
prompt resampled together, at the run's confidence).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from llm_feedback.stats.intervals import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES
from llm_feedback.stats.ranking import ELO_BASE, ELO_SCALE, bradley_terry, win_rates

# A verdict level read from side A: A's battles (score, copies).
LEVEL_BATTLES = {
    "A>>B": (1.0, 3),
    "A>B": (1.0, 1),
    "A=B": (0.5, 1),
    "B>A": (0.0, 1),
    "B>>A": (0.0, 3),
}
PLAIN_BATTLES = {"A": (1.0, 1), "tie": (0.5, 1), "B": (0.0, 1)}
ARENA_HARD_RESAMPLES = 100  # show_result.py's bootstrap rounds
ARENA_HARD_CONFIDENCE = 0.90  # its 5th to 95th percentile

ARENA_HARD_COLUMNS = {
    "model": "string",
    "baseline": "string",
    "score": "float64",  # win probability against the baseline x 100 (baseline: 50)
    "arena_hard_ci_low": "float64",
    "arena_hard_ci_high": "float64",
    "arena_hard_ci_method": "string",
    "clustered_ci_low": "float64",
    "clustered_ci_high": "float64",
    "clustered_ci_method": "string",
    "n_battles": "int64",
    "n_judgments": "int64",
}


def _game_battles(level: object, plain: object) -> tuple[float, int] | None:
    """(A's score, copies) of one game: its recorded level, else the judge's verdict."""
    if isinstance(level, str) and level in LEVEL_BATTLES:
        return LEVEL_BATTLES[level]
    if isinstance(plain, str) and plain in PLAIN_BATTLES:
        return PLAIN_BATTLES[plain]
    return None


def arena_hard_battles(judgments: pd.DataFrame, instance: str = "instance_id") -> pd.DataFrame:
    """One row per battle: instance, model_a, model_b, outcome (A's score), judgment (the
    judgment's row number); both games of every judgment whose two games were read."""
    levels = [
        judgments[column].astype(object).where(judgments[column].notna(), None)
        if column in judgments.columns
        else pd.Series([None] * len(judgments), index=judgments.index)
        for column in ("recorded_verdict_a_first", "recorded_verdict_b_first")
    ]
    rows = []
    for number, (index, judgment) in enumerate(judgments.iterrows()):
        games = [
            _game_battles(levels[0][index], judgment.get("verdict_a_first")),
            _game_battles(levels[1][index], judgment.get("verdict_b_first")),
        ]
        if any(game is None for game in games):
            continue
        for score, copies in games:
            rows += [
                {
                    "instance": judgment[instance],
                    "model_a": judgment["model_a"],
                    "model_b": judgment["model_b"],
                    "outcome": score,
                    "judgment": number,
                }
            ] * copies
    return pd.DataFrame(rows, columns=["instance", "model_a", "model_b", "outcome", "judgment"])


def battle_bootstrap(
    scores: np.ndarray, n_resamples: int, seed: int, confidence: float
) -> tuple[float, float]:
    """Arena-Hard's interval of a mean: the battles resampled with replacement, the
    percentiles of the resampled means."""
    rng = np.random.default_rng(seed)
    means = scores[rng.integers(0, len(scores), (n_resamples, len(scores)))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def arena_hard_scores(
    battles: pd.DataFrame,
    baseline: str,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """`ARENA_HARD_COLUMNS`, one row per model that met `baseline`, best first, from
    `arena_hard_battles`."""
    if battles.empty or baseline not in set(battles["model_a"]) | set(battles["model_b"]):
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in ARENA_HARD_COLUMNS.items()})
    # Only the fit is used (the intervals are below): the fewest resamples it allows.
    fitted = bradley_terry(battles, n_resamples=10, seed=seed).set_index("model")["score"]
    clustered = win_rates(
        battles, baseline, n_resamples=n_resamples, seed=seed, confidence=confidence
    ).set_index("model")
    as_a = battles["model_b"] == baseline
    against = battles[as_a | (battles["model_a"] == baseline)]
    model = np.where(as_a[against.index], against["model_a"], against["model_b"])
    score = np.where(as_a[against.index], against["outcome"], 1 - against["outcome"])
    oriented = pd.DataFrame({"model": model, "score": score, "judgment": against["judgment"]})
    rows = []
    for name, mine in oriented.groupby("model", sort=True):
        gap = (fitted[name] - fitted[baseline]) * np.log(ELO_BASE) / ELO_SCALE
        low, high = battle_bootstrap(
            mine["score"].to_numpy(), ARENA_HARD_RESAMPLES, seed, ARENA_HARD_CONFIDENCE
        )
        rows.append(
            {
                "model": name,
                "baseline": baseline,
                "score": 100 / (1 + np.exp(-gap)),
                "arena_hard_ci_low": low * 100,
                "arena_hard_ci_high": high * 100,
                "arena_hard_ci_method": (
                    f"arena-hard battle bootstrap, {ARENA_HARD_RESAMPLES} resamples, "
                    f"{ARENA_HARD_CONFIDENCE:.0%}"
                ),
                "clustered_ci_low": clustered.at[name, "ci_low"] * 100,
                "clustered_ci_high": clustered.at[name, "ci_high"] * 100,
                "clustered_ci_method": f"{clustered.at[name, 'method']}, {confidence:.0%}",
                "n_battles": len(mine),
                "n_judgments": mine["judgment"].nunique(),
            }
        )
    table = pd.DataFrame(rows, columns=list(ARENA_HARD_COLUMNS))
    return (
        table.sort_values("score", ascending=False)
        .astype(ARENA_HARD_COLUMNS)
        .reset_index(drop=True)
    )
