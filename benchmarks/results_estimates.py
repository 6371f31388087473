"""RESULTS.md section of the prediction-powered estimates' coverage benchmark."""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate

_NAMES = {
    ("judge", "uniform"): "judge only",
    ("prediction_powered", "uniform"): "prediction-powered (uniform labels)",
    ("labels_only", "uniform"): "labels only",
    ("rogan_gladen", "uniform"): "Rogan-Gladen (uniform labels)",
    (
        "prediction_powered",
        "probability_weighted",
    ): "prediction-powered (uncertainty-drawn, weighted)",
}


_HEADERS = ["estimator", "labels", "coverage", "mean width", "width / labels only", "mean error"]


def _estimator_rows(estimators: Sequence[dict]) -> list[list[str]]:
    """One row per estimator: coverage ± its Monte Carlo standard error (one repetition's
    coverage is a Bernoulli draw), width, width over the labels-only one, error."""
    widths = {(row["estimator"], row["selection"]): row["mean_width"] for row in estimators}
    alone = widths[("labels_only", "uniform")]
    rows = []
    for row in estimators:
        key = (row["estimator"], row["selection"])
        se = (row["coverage"] * (1 - row["coverage"]) / max(row["estimates"], 1)) ** 0.5
        rows.append(
            [
                _NAMES.get(key, f"{key[0]} ({key[1]})"),
                f"{row['mean_labels']:.0f}",
                f"{row['coverage']:.1%} ± {se:.1%}",
                f"{row['mean_width']:.3f}",
                f"{row['mean_width'] / alone:.2f}",
                f"{row['mean_error']:+.4f}",
            ]
        )
    return rows


def _llmbar(result: dict | None) -> list[str]:
    if result is None:
        return []
    if "skipped" in result:
        return [
            "",
            f"LLMBar Natural with GPT-4's recorded verdicts: skipped ({result['skipped']}).",
        ]
    return [
        "",
        f"LLMBar Natural ({result['pairs']} pairs) with GPT-4's recorded Vanilla verdicts "
        '(first round, output_1 shown first) as the judge of "output_1 is better" '
        f"(accuracy {result['judge_accuracy']:.0%}; its share {result['judge_share']:.2f}, "
        f"the gold share {result['gold_share']:.2f}), {result['labels']} random gold labels "
        f"as the human slice, {result['slices']:,} slices: coverage of the full set's gold "
        f"share. The full set is only {result['pairs']} pairs, {result['labels']} of them "
        "in the slice: the intervals, which treat the pairs as a sample from a larger "
        "population, are conservative here; the judge-only interval's coverage rests on "
        "GPT-4's share lying "
        f"{abs(result['judge_share'] - result['gold_share']):.2f} from the gold.",
        "",
        tabulate(
            _estimator_rows(result["estimators"]),
            headers=_HEADERS,
            tablefmt="github",
            disable_numparse=True,
        ),
    ]


def ppi_coverage(runs: Sequence[dict]) -> str:
    """`ppi_coverage.py`: coverage and width of each estimator's 95% interval."""
    last = runs[-1]
    repetitions = last["repetitions"]
    rows = []
    for judge, result in last["judges"].items():
        rows += [[judge, *row] for row in _estimator_rows(result["estimators"])]
    binary, rater = last["binary"], last["rater"]
    return "\n".join(
        [
            "## Prediction-powered estimates: coverage (`benchmarks/ppi_coverage.py`)",
            "",
            f"Simulated judges of known error, {last['items']:,} judged items, "
            f"{last['labels']:,} labelled by people, {repetitions:,} repetitions (seed "
            f"{last['seed']}, {last['wall_s']:.0f} s): a binary judge with TPR "
            f"{binary['tpr']} and TNR {binary['tnr']} (people say yes on "
            f"{binary['prevalence']:.0%}), and a 1-5 rater {rater['offset']} high with a "
            f"length bias of {rater['length_bias']} per sd of length and noise of sd "
            f"{rater['noise_sd'][0]}-{rater['noise_sd'][1]}. Coverage of the people's mean "
            "over all items by each 95% interval (± its Monte Carlo standard error); width "
            "also as a ratio to the labels-only interval from the same labels. Target: the "
            f"prediction-powered intervals cover >= {last['target_coverage']:.0%}.",
            "",
            tabulate(rows, headers=["judge", *_HEADERS], tablefmt="github", disable_numparse=True),
            *_llmbar(last.get("llmbar")),
        ]
    )
