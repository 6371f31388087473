"""AlpacaEval 2's figures under AlpacaEval's own names, from pairwise battles.

Each battle against the baseline is read from the other model's side as a preference in
[0, 1]: the probability-weighted verdict where the battle has one (`probability`: a
recorded AlpacaEval preference less 1, or the judge's `prob_margin` made a probability),
else the discrete outcome (1 win, 0.5 tie, 0 loss). As AlpacaEval computes them
(`metrics/winrate.py` and `glm_winrate.py` at commit cd543a1):

- `win_rate`: the mean preference x 100; `standard_error`: the standard error of that mean
  (sample standard deviation / sqrt(n)) x 100;
- `discrete_win_rate`: the same of each preference rounded to 0 or 1, exactly 0.5 a draw;
- `n_wins` (preference > 0.5), `n_wins_base` (< 0.5), `n_draws` (exactly 0.5), `n_total`;
- `length_controlled_minimal`: per model, a logistic regression of the continuous
  preference on tanh(d / sd(d)) (d: the baseline's length less the model's, in characters;
  sd its sample standard deviation over the model's battles) and a model term, without
  intercept, L1-penalised with the penalty chosen by 5-fold cross-validation on the
  continuous log loss (scikit-learn's liblinear, AlpacaEval's grid of 10 penalties); the
  figure is the predicted preference at equal lengths x 100;
- `length_controlled_noreg`: the same with an instruction-difficulty term, averaged over
  the instructions. The difficulty is given per prompt (from AlpacaEval's `df_gamed.csv`,
  see `GamedBaselines`), or fitted from the run's models (`fitted_difficulty`);
- `length_controlled_v1` (the leaderboard's): `length_controlled_noreg` fitted together
  with the rows of AlpacaEval's two "gamed" baselines (the baseline prompted to be verbose
  and to be concise; their continuous preference, standardised length difference and
  instruction difficulty as `df_gamed.csv` has them, their model term 0), each gamed row
  weighted 0.2 / 2 against 1 for the model's own, so that the length and difficulty
  coefficients are pulled toward the gamed baselines'; the cross-validated log loss is
  weighted the same way. Only with a `GamedBaselines` read from that file (AlpacaEval
  downloads it from the Hub): without it the figure is NaN.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit, logit
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold

from llm_feedback.core.errors import InputError

ALPACA_EVAL_COLUMNS = {
    "model": "string",
    "baseline": "string",
    "win_rate": "float64",
    "standard_error": "float64",
    "n_wins": "int64",
    "n_wins_base": "int64",
    "n_draws": "int64",
    "n_total": "int64",
    "discrete_win_rate": "float64",
    "length_controlled_minimal": "float64",
    "length_controlled_noreg": "float64",
    "length_controlled_v1": "float64",
    "avg_length": "float64",
    "preference_source": "string",  # "probabilities", "discrete outcomes" or "both"
    "difficulty_source": "string",  # where the noreg / v1 difficulty came from
}
# AlpacaEval's settings of its GLM fit: the penalty grid (scikit-learn's default of 10
# values), the folds and the solver's seed.
PENALTIES = np.logspace(-4, 4, 10)
N_FOLDS = 5
SOLVER_SEED = 123
# Mean preferences of exactly 0 or 1 have no logit: fitted difficulty clips them.
_DIFFICULTY_CLIP = 1e-3
# length_controlled_v1's pull toward the gamed baselines (AlpacaEval's
# regularize_to_baseline_lambda), shared by its two gamed baselines: each row weighs 0.1.
GAMED_WEIGHT = 0.2
N_GAMED_BASELINES = 2
GAMED_COLUMNS = ("index", "instruction_difficulty", "preference", "std_delta_len")


@dataclass(frozen=True)
class GamedBaselines:
    """AlpacaEval's `df_gamed.csv`: `difficulty` per instruction (by its position in
    AlpacaEval's instruction order, or by prompt where the file names the instructions) and
    the gamed baselines' `rows` (preference in [0, 1], std_delta_len, instruction_difficulty)."""

    difficulty: pd.Series
    rows: pd.DataFrame
    source: str

    @classmethod
    def read(cls, path: str | Path) -> GamedBaselines:
        """The file as AlpacaEval publishes it: one row per gamed baseline and instruction,
        columns `index` (the instruction's position), `instruction_difficulty`, `preference`
        (the model's preference over the baseline, in [0, 1]), `std_delta_len` (the baseline's
        length less the gamed model's, over its standard deviation), optional `model` and
        `instruction` (its text: then difficulty is matched by text, not position).

        Args:
            path: the CSV file.

        Returns:
            The gamed baselines and the per-instruction difficulty.

        Raises:
            InputError: the file is unreadable or a column is missing or not numeric.
        """
        path = Path(path)
        try:
            frame = pd.read_csv(path)
        except (OSError, ValueError) as error:
            raise InputError(f"{path}: not a readable CSV file ({error})") from None
        missing = [column for column in GAMED_COLUMNS if column not in frame.columns]
        if missing:
            raise InputError(
                f"{path}: AlpacaEval's df_gamed.csv has columns {', '.join(GAMED_COLUMNS)}; "
                f"missing {', '.join(missing)}"
            )
        for column in GAMED_COLUMNS:
            values = pd.to_numeric(frame[column], errors="coerce")
            # A gamed row may lack its preference (it is left out of the fit, as AlpacaEval
            # leaves it out); nothing else may be missing.
            bad = values.isna() if column != "preference" else values.isna() & frame[column].notna()
            if column == "preference":
                bad |= (values < 0) | (values > 1)
            if bad.any():
                row = int(np.flatnonzero(bad.to_numpy())[0])
                raise InputError(
                    f"{path}, line {row + 2}, column {column!r}: must be a number"
                    f"{' in [0, 1]' if column == 'preference' else ''}, got "
                    f"{frame[column].iloc[row]!r}"
                )
            frame[column] = values
        key = "instruction" if "instruction" in frame.columns else "index"
        difficulty = frame.drop_duplicates(key).set_index(key)["instruction_difficulty"]
        return cls(difficulty, frame[list(GAMED_COLUMNS)].reset_index(drop=True), str(path))


def oriented_preferences(battles: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """The battles against `baseline` from the other model's side: prompt (the battle's
    `instance`), model, preference (its probability-weighted win, else its outcome),
    probabilistic (whether it had one), length and baseline_length (characters).

    Args:
        battles: the battles table.
        baseline: the baseline model.

    Returns:
        One row per battle against the baseline, from the other model's side.
    """
    as_a = battles["model_b"].to_numpy() == baseline
    as_b = battles["model_a"].to_numpy() == baseline
    rows = as_a | as_b
    outcome = battles["outcome"].to_numpy(dtype="float64")
    probability = (
        battles["probability"].to_numpy(dtype="float64")
        if "probability" in battles.columns
        else np.full(len(battles), np.nan)
    )
    probabilistic = ~np.isnan(probability)
    a_wins = np.where(probabilistic, probability, outcome)
    length_a = battles["length_a"].to_numpy(dtype="float64")
    length_b = battles["length_b"].to_numpy(dtype="float64")
    return pd.DataFrame(
        {
            "prompt": battles["instance"].to_numpy()[rows],
            "model": np.where(as_a, battles["model_a"], battles["model_b"])[rows],
            "preference": np.where(as_a, a_wins, 1 - a_wins)[rows],
            "probabilistic": probabilistic[rows],
            "length": np.where(as_a, length_a, length_b)[rows],
            "baseline_length": np.where(as_a, length_b, length_a)[rows],
        }
    )


def head_to_head(preference: np.ndarray) -> dict[str, float]:
    """AlpacaEval's head-to-head figures of one model's preferences (NaN ones left out).

    Args:
        preference: one model's preferences against the baseline, in [0, 1].

    Returns:
        win_rate and standard_error (percent), the win, loss and draw counts, n_total
        and discrete_win_rate.
    """
    p = preference[~np.isnan(preference)]
    discrete = np.where(p == 0.5, 0.5, np.round(p))
    n = len(p)
    return {
        "win_rate": p.mean() * 100 if n else np.nan,
        "standard_error": p.std(ddof=1) / np.sqrt(n) * 100 if n > 1 else np.nan,
        "n_wins": int((p > 0.5).sum()),
        "n_wins_base": int((p < 0.5).sum()),
        "n_draws": int((p == 0.5).sum()),
        "n_total": n,
        "discrete_win_rate": discrete.mean() * 100 if n else np.nan,
    }


def _continuous_log_loss(
    model: LogisticRegression, x: np.ndarray, p: np.ndarray, w: np.ndarray
) -> float:
    """The mean of each row's weight times its log loss against the continuous `p` (as
    AlpacaEval scores its folds: a mean over rows, not a weighted mean)."""
    predicted = np.clip(model.predict_proba(x)[:, 1], 1e-15, 1 - 1e-15)
    return float(-np.mean(w * (p * np.log(predicted) + (1 - p) * np.log(1 - predicted))))


def _l1_fit(x: np.ndarray, p: np.ndarray, w: np.ndarray, penalty: float) -> LogisticRegression:
    """L1 logistic regression without intercept of a continuous response: each row once as
    a success weighted w p and once as a failure weighted w (1 - p)."""
    model = LogisticRegression(
        C=penalty, l1_ratio=1.0, solver="liblinear", fit_intercept=False, random_state=SOLVER_SEED
    )
    with warnings.catch_warnings():
        # Separated outcomes: the penalty keeps the fit finite; liblinear may still warn.
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(
            np.vstack([x, x]),
            np.concatenate([np.ones(len(p)), np.zeros(len(p))]),
            sample_weight=np.concatenate([w * p, w * (1 - p)]),
        )
    return model


def cross_validated_fit(
    x: np.ndarray, p: np.ndarray, w: np.ndarray | None = None
) -> LogisticRegression:
    """The L1 fit at the penalty with the least mean held-out (weighted) continuous log loss
    over `N_FOLDS` folds of the rows (a row's two copies in one fold), refitted on every row.

    Args:
        x: the design, one row per preference.
        p: the preferences in [0, 1].
        w: each row's weight (None: 1 each).

    Returns:
        The refitted scikit-learn model.
    """
    w = np.ones(len(p)) if w is None else w
    folds = list(GroupKFold(n_splits=min(N_FOLDS, len(p))).split(x, p, np.arange(len(p))))
    losses = [
        np.mean(
            [
                _continuous_log_loss(_l1_fit(x[fit], p[fit], w[fit], c), x[held], p[held], w[held])
                for fit, held in folds
            ]
        )
        for c in PENALTIES
    ]
    return _l1_fit(x, p, w, PENALTIES[int(np.argmin(losses))])


def length_controlled(
    preferences: pd.DataFrame,
    difficulty: pd.Series | None = None,
    gamed: pd.DataFrame | None = None,
) -> float:
    """One model's length-controlled win rate (x 100) from its `oriented_preferences`.

    Args:
        preferences: the model's `oriented_preferences`.
        difficulty: per prompt (a prompt without one counts 0); None for
            `length_controlled_minimal`.
        gamed: the gamed baselines' rows (`GamedBaselines.rows`), with `difficulty`, for
            `length_controlled_v1`; None for `length_controlled_noreg`.

    Returns:
        The predicted preference at equal lengths averaged over the model's instructions
        x 100; NaN with fewer than `N_FOLDS` preferences or no length variation.
    """
    delta = (preferences["baseline_length"] - preferences["length"]).to_numpy(dtype="float64")
    spread = np.std(delta, ddof=1) if len(delta) > 1 else 0.0
    if not spread > 0:
        return np.nan
    columns = [np.tanh(delta / spread)]
    test = [np.zeros(len(delta))]
    if difficulty is not None:
        level = preferences["prompt"].map(difficulty).fillna(0.0).to_numpy(dtype="float64")
        columns.append(level)
        test.append(level)
    columns.append(np.ones(len(delta)))  # the model's own term (AlpacaEval's not_gamed_baseline)
    test.append(np.ones(len(delta)))
    x, x_test = np.column_stack(columns), np.column_stack(test)
    p = preferences["preference"].to_numpy(dtype="float64")
    w = np.ones(len(p))
    if gamed is not None and difficulty is not None:
        # The gamed baselines' rows first, as AlpacaEval stacks them (the folds follow rows).
        baselines = np.column_stack(
            [
                np.tanh(gamed["std_delta_len"].to_numpy(dtype="float64")),
                gamed["instruction_difficulty"].to_numpy(dtype="float64"),
                np.zeros(len(gamed)),
            ]
        )
        x = np.vstack([baselines, x])
        p = np.concatenate([gamed["preference"].to_numpy(dtype="float64"), p])
        w = np.concatenate([np.full(len(gamed), GAMED_WEIGHT / N_GAMED_BASELINES), w])
    known = ~np.isnan(p)
    if known.sum() < N_FOLDS:
        return np.nan
    model = cross_validated_fit(x[known], p[known], w[known])
    # Every instruction is predicted, a missing preference's too (as AlpacaEval does).
    return float(expit(x_test @ model.coef_[0]).mean() * 100)


def fitted_difficulty(oriented: pd.DataFrame) -> pd.Series:
    """Per prompt, a difficulty from the run's models: minus the logit of the mean
    preference of every model against the baseline on it (clipped to [0.001, 0.999]),
    centred; a prompt the models lose more often is harder.

    Args:
        oriented: `oriented_preferences` of every model.

    Returns:
        The difficulty of each prompt, indexed by prompt.
    """
    mean = oriented.groupby("prompt")["preference"].mean()
    value = -logit(mean.clip(_DIFFICULTY_CLIP, 1 - _DIFFICULTY_CLIP))
    return value - value.mean()


def alpaca_eval_table(
    battles: pd.DataFrame,
    baseline: str,
    difficulty: pd.Series | None = None,
    gamed: GamedBaselines | None = None,
) -> pd.DataFrame:
    """AlpacaEval 2's figures of every model that met the baseline.

    Args:
        battles: instance (the prompt), model_a, model_b, outcome, optional probability
            (A's probability-weighted win), length_a, length_b.
        baseline: the model every other one is compared with.
        difficulty: per prompt, for length_controlled_noreg and v1; None: the gamed
            baselines' file's (keyed by prompt by the caller), else `fitted_difficulty` of
            these battles.
        gamed: AlpacaEval's gamed baselines, for length_controlled_v1 (NaN without).

    Returns:
        `ALPACA_EVAL_COLUMNS`, one row per model, sorted by win_rate, best first.
    """
    oriented = oriented_preferences(battles, baseline)
    if difficulty is not None:
        source = f"given ({gamed.source})" if gamed is not None else "given"
    else:
        source = "fitted from the run's models"
        difficulty = fitted_difficulty(oriented)
    rows = []
    for model, mine in oriented.groupby("model", sort=True):
        probabilistic = mine["probabilistic"]
        rows.append(
            {
                "model": model,
                "baseline": baseline,
                **head_to_head(mine["preference"].to_numpy(dtype="float64")),
                "length_controlled_minimal": length_controlled(mine),
                "length_controlled_noreg": length_controlled(mine, difficulty),
                "length_controlled_v1": length_controlled(mine, difficulty, gamed.rows)
                if gamed is not None
                else np.nan,
                "avg_length": float(mine["length"].mean()),
                "preference_source": "probabilities"
                if probabilistic.all()
                else ("discrete outcomes" if not probabilistic.any() else "both"),
                "difficulty_source": source,
            }
        )
    table = pd.DataFrame(rows, columns=list(ALPACA_EVAL_COLUMNS))
    return (
        table.sort_values("win_rate", ascending=False)
        .astype(ALPACA_EVAL_COLUMNS)
        .reset_index(drop=True)
    )
