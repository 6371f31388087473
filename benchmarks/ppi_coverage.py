"""Coverage of the prediction-powered intervals with simulated judges of known error, as JSON.

    python benchmarks/ppi_coverage.py [--items 10000] [--labels 200] [--repetitions 500]
                                      [--seed 0] [--llmbar PATH] [--llmbar-labels 30]
                                      [--llmbar-slices 500]

Each repetition draws `--items` items with what people would say of them and what a judge
says, then `--labels` of them to be labelled by people: uniformly at random (the
prediction-powered, labels-only and Rogan-Gladen estimates) and, apart, by the judge's
uncertainty with each item's probability recorded (the weighted prediction-powered
estimate, `stats.prediction_powered.select_for_labels` / `weighted_estimate`). The true
value is the people's mean over all the items. Two judges:

  binary: people say "pass" on 30% of items; the judge's TPR is 0.8 and its TNR 0.7 on
    average, its errors more likely where its confidence (uniform on [0, 1]) is low
    (P(error) = 2 x base x (1 - confidence)); its uncertainty is 1 - confidence;
  rater: people rate 1-5 (a rounded normal, mean 3.2, sd 1); the judge says the people's
    rating + 0.4 (offset) + 0.3 x the response's standardised length (length bias) +
    noise of an sd drawn per item from [0.3, 1.5], rounded and clipped to 1-5; its
    uncertainty is that sd (the spread of its shuffles, say).

For every estimator: coverage of the true value by its 95% interval, mean width, mean
error, and the labels it used. Target: the prediction-powered intervals cover >= 94%.

Then a real judge: LLMBar's Natural set (`--llmbar`, the shared data's `dataset.json`, 100
pairs) with GPT-4's recorded Vanilla verdicts (first round, output_1 shown first) as the
judge of "output_1 is better", and `--llmbar-labels` random gold labels as the human
slice, `--llmbar-slices` times: coverage of the full set's gold share by each estimator.
Without the file that part is recorded as skipped.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from llm_feedback.stats.prediction_powered import (
    binary_estimates,
    mean_estimates,
    select_for_labels,
    weighted_estimate,
)
from llm_feedback.validation.formats import read_samples
from llm_feedback.validation.verdicts import ORIGINAL, pairs_table, verdicts_from_llmbar

sys.path.insert(0, str(Path(__file__).parent))
from common import save  # noqa: E402

TPR, TNR, PREVALENCE = 0.8, 0.7, 0.3
OFFSET, LENGTH_BIAS, NOISE = 0.4, 0.3, (0.3, 1.5)
TARGET_COVERAGE = 0.94
LLMBAR = Path(__file__).resolve().parents[2] / "shared/data/llmbar/natural/dataset.json"
GPT4_VANILLA = Path("gpt-4") / "vanilla" / "result.json"  # beside dataset.json


def binary_judge(
    rng: np.random.Generator, n_items: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(people's 0/1, the judge's 0/1, the judge's uncertainty) of `n_items` items."""
    human = (rng.random(n_items) < PREVALENCE).astype(float)
    confidence = rng.random(n_items)
    base = np.where(human == 1, 1 - TPR, 1 - TNR)
    wrong = rng.random(n_items) < 2 * base * (1 - confidence)
    return human, np.where(wrong, 1 - human, human), 1 - confidence


def rater_judge(
    rng: np.random.Generator, n_items: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(people's 1-5 rating, the judge's, the judge's uncertainty) of `n_items` items."""
    human = np.clip(np.round(rng.normal(3.2, 1.0, n_items)), 1, 5)
    length = rng.normal(0, 1, n_items)
    spread = rng.uniform(*NOISE, n_items)
    raw = human + OFFSET + LENGTH_BIAS * length + spread * rng.normal(0, 1, n_items)
    return human, np.clip(np.round(raw), 1, 5), spread


JUDGES = {"binary": binary_judge, "rater": rater_judge}


def one_repetition(
    judge: str, rng: np.random.Generator, n_items: int, n_labels: int
) -> pd.DataFrame:
    human, judged, uncertainty = JUDGES[judge](rng, n_items)
    labelled = rng.choice(n_items, n_labels, replace=False)
    estimate = binary_estimates if judge == "binary" else mean_estimates
    rows = estimate(judged, judged[labelled], human[labelled])
    selected, probabilities = select_for_labels(uncertainty, n_labels, rng)
    weighted = weighted_estimate(judged, np.where(selected, human, np.nan), selected, probabilities)
    rows = pd.concat([rows, weighted.assign(metric=rows["metric"].iloc[0])], ignore_index=True)
    return rows.assign(truth=human.mean())


def llmbar_natural(dataset: Path) -> tuple[np.ndarray, np.ndarray]:
    """(gold, GPT-4's verdict) per LLMBar Natural pair: 1 where output_1 is the better one
    (the authors' label; GPT-4's first-round verdict with output_1 shown first), 0 for
    output_2, NaN for an unreadable verdict."""
    pairs = pairs_table(read_samples(dataset, "llmbar"))
    verdicts = verdicts_from_llmbar(dataset.parent / GPT4_VANILLA, pairs)
    first = verdicts[verdicts["order"] == ORIGINAL].set_index("instance_id")["verdict"]
    says = first.reindex(pairs["instance_id"]).map({"A": 1.0, "B": 0.0}).astype(float)
    return (pairs["gold"] == "A").to_numpy(dtype=float), says.to_numpy(dtype=float)


def llmbar_coverage(
    dataset: Path, rng: np.random.Generator, n_labels: int, slices: int
) -> dict[str, Any]:
    """Coverage of the full set's gold share by each estimator over random gold slices."""
    if not dataset.is_file() or not (dataset.parent / GPT4_VANILLA).is_file():
        return {"skipped": f"{dataset} or its {GPT4_VANILLA} is not here"}
    gold, judge = llmbar_natural(dataset)
    rows = []
    for _ in range(slices):
        labelled = rng.choice(len(gold), n_labels, replace=False)
        rows.append(
            binary_estimates(judge, judge[labelled], gold[labelled], metric="output_1_better")
        )
    frame = pd.concat(rows, ignore_index=True).assign(truth=gold.mean())
    return {
        "dataset": str(dataset),
        "pairs": len(gold),
        "labels": n_labels,
        "slices": slices,
        "gold_share": float(gold.mean()),
        "judge_share": float(np.nanmean(judge)),
        "judge_accuracy": float(np.nanmean(judge == gold)),
        "estimators": summary(frame, "output_1_better"),
    }


def summary(rows: pd.DataFrame, metric: str | None = None) -> list[dict]:
    """Per estimator: coverage, width, error and labels over the repetitions."""
    rows = rows[rows["metric"].isin([metric] if metric else ["mean", "positive_rate"])]
    rows = rows.assign(
        covered=(rows["ci_low"] <= rows["truth"]) & (rows["truth"] <= rows["ci_high"]),
        width=rows["ci_high"] - rows["ci_low"],
        error=rows["estimate"] - rows["truth"],
    )
    out = []
    for (estimator, selection), group in rows.groupby(["estimator", "selection"], sort=False):
        ok = group[group["status"] == "ok"]
        out.append(
            {
                "estimator": estimator,
                "selection": selection,
                "estimates": len(ok),
                "not_estimated": len(group) - len(ok),
                "coverage": float(ok["covered"].mean()),
                "mean_width": float(ok["width"].mean()),
                "mean_error": float(ok["error"].mean()),
                "mean_labels": float(ok["n_labels"].mean()),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--labels", type=int, default=200)
    parser.add_argument("--repetitions", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--llmbar", type=Path, default=LLMBAR)
    parser.add_argument("--llmbar-labels", type=int, default=30)
    parser.add_argument("--llmbar-slices", type=int, default=500)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    judges = {}
    for judge in JUDGES:
        rows = pd.concat(
            [one_repetition(judge, rng, args.items, args.labels) for _ in range(args.repetitions)],
            ignore_index=True,
        )
        rates = rows[rows["metric"].isin(["tpr", "tnr"])].groupby("metric")["estimate"].mean()
        judges[judge] = {
            "truth_mean": float(rows["truth"].mean()),
            "estimators": summary(rows),
            "measured_tpr_tnr": {name: float(value) for name, value in rates.items()},
        }
    save(
        "ppi_coverage",
        {
            "items": args.items,
            "labels": args.labels,
            "repetitions": args.repetitions,
            "seed": args.seed,
            "target_coverage": TARGET_COVERAGE,
            "binary": {"tpr": TPR, "tnr": TNR, "prevalence": PREVALENCE},
            "rater": {"offset": OFFSET, "length_bias": LENGTH_BIAS, "noise_sd": list(NOISE)},
            "judges": judges,
            "llmbar": llmbar_coverage(args.llmbar, rng, args.llmbar_labels, args.llmbar_slices),
            "wall_s": time.perf_counter() - started,
        },
    )


if __name__ == "__main__":
    main()
