"""Wall time and peak memory of the interval statistics at scale, printed as JSON.

    python benchmarks/stats_scale.py [--prompts 64000] [--battles 100000] [--resamples 1000]
                                     [--only annotate,pairwise]

Two groups, each in a fresh process so that each peak RSS is its own:
  annotate: the report's metrics on synthetic annotate tables of `--prompts` prompts x 4
    completions x 4 aspects (one shuffle): mean ratings per model x aspect, overall and
    fine-grained scores with their correlations, rating by position, judge bias, rating by
    length, and the model ranking from per-prompt pairs (Bradley-Terry, raw and
    length-controlled win rates, style control), all with `--resamples` bootstrap resamples;
  pairwise: `--battles` pairwise judgments (half the instances judged in both orders) of
    8 models: win rates vs a baseline, Bradley-Terry, length-controlled win rates and
    style-controlled Bradley-Terry.
Input generation is timed apart (`build_s`) from the statistics (`stats_s`); peak_rss_mib
is the process's maximum resident set (getrusage), inputs included; stats_cpu_s the CPU
time of the statistics (user + system, all threads), which a shared machine's load does
not inflate as it does wall time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from common import peak_rss_mib, save  # noqa: E402

MODELS = ("alpha", "beta", "gamma", "delta")
ASPECTS = ("instruction_following", "honesty", "truthfulness", "helpfulness")


def annotate_tables(n_prompts: int, rng: np.random.Generator):
    n = n_prompts * len(MODELS)
    prompt_ids = np.repeat([f"p{i}" for i in range(n_prompts)], len(MODELS))
    completion_idx = np.tile(np.arange(len(MODELS)), n_prompts)
    lengths = rng.integers(50, 1500, n)
    completions = pd.DataFrame(
        {
            "prompt_id": prompt_ids,
            "completion_idx": completion_idx,
            "model": np.tile(MODELS, n_prompts),
            "response": ["x" * int(length) for length in lengths],
            "error": None,
        }
    )
    quality = rng.normal(0, 1, n) + np.tile(np.linspace(-0.5, 0.5, len(MODELS)), n_prompts)
    position = np.concatenate([rng.permutation(len(MODELS)) for _ in range(n_prompts)])
    rows = len(ASPECTS) * n
    rating = np.clip(np.round(3 + np.tile(quality, len(ASPECTS)) + rng.normal(0, 0.7, rows)), 1, 5)
    aspect_annotations = pd.DataFrame(
        {
            "prompt_id": np.tile(prompt_ids, len(ASPECTS)),
            "completion_idx": np.tile(completion_idx, len(ASPECTS)),
            "aspect": np.repeat(ASPECTS, n),
            "shuffle_idx": 0,
            "position": np.tile(position, len(ASPECTS)),
            "rating": rating,
            "is_na": False,
            "judge_model": "judge",
        }
    )
    fine = aspect_annotations.groupby(["prompt_id", "completion_idx"], sort=False)["rating"].mean()
    overall = np.clip(np.round(2 * fine.to_numpy() + rng.normal(0, 1, n)), 1, 10)
    overall_scores = pd.DataFrame(
        {
            "prompt_id": fine.index.get_level_values(0),
            "completion_idx": fine.index.get_level_values(1),
            "model": np.tile(MODELS, n_prompts),
            "fine_grained_score": fine.to_numpy(),
            "overall_score_original": overall,
            "overall_score_fixed": overall,
        }
    )
    return completions, aspect_annotations, overall_scores


def run_annotate(n_prompts: int, n_resamples: int) -> dict:
    from llm_feedback.reporting.metrics import model_aspect_metrics, model_score_metrics
    from llm_feedback.reporting.pairs import completion_scores
    from llm_feedback.reporting.positions import rating_by_position
    from llm_feedback.reporting.uncertainty import (
        Bootstrap,
        annotate_battles,
        judge_bias,
        model_ranking,
        rating_by_length,
    )

    start = time.perf_counter()
    completions, annotations, overall_scores = annotate_tables(n_prompts, np.random.default_rng(0))
    built, built_cpu = time.perf_counter(), time.process_time()
    bootstrap = Bootstrap(n_resamples=n_resamples)
    steps = {}

    def timed(name, function, *args):
        began = time.perf_counter()
        result = function(*args)
        steps[name] = round(time.perf_counter() - began, 2)
        return result

    timed("model_aspect_metrics", model_aspect_metrics, annotations, completions, bootstrap)
    timed("model_score_metrics", model_score_metrics, overall_scores, bootstrap)
    timed("rating_by_position", rating_by_position, annotations, bootstrap)
    timed("judge_bias", judge_bias, annotations, completions, bootstrap)
    timed("rating_by_length", rating_by_length, annotations, completions, bootstrap)
    scores = completion_scores(overall_scores, annotations, "overall")
    battles = timed("annotate_battles", annotate_battles, completions, scores)
    ranking, _ = timed("model_ranking", model_ranking, battles, None, bootstrap)
    done = time.perf_counter()
    return {
        "group": "annotate",
        "prompts": n_prompts,
        "completions": len(completions),
        "aspect_rows": len(annotations),
        "battles": len(battles),
        "resamples": n_resamples,
        "build_s": round(built - start, 2),
        "stats_s": round(done - built, 2),
        "stats_cpu_s": round(time.process_time() - built_cpu, 2),
        "steps_s": steps,
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "top_model": str(ranking.iloc[0]["model"]),
    }


def run_pairwise(n_battles: int, n_resamples: int) -> dict:
    from llm_feedback.stats.length_control import length_controlled_win_rates
    from llm_feedback.stats.ranking import bradley_terry, win_rates
    from llm_feedback.stats.style_control import style_controlled_ranking

    start = time.perf_counter()
    rng = np.random.default_rng(1)
    models = np.array([f"m{i}" for i in range(8)])
    strength = np.linspace(-1, 1, len(models))
    n_instances = n_battles * 2 // 3  # half the instances judged in both orders
    a = rng.integers(0, len(models), n_instances)
    b = (a + rng.integers(1, len(models), n_instances)) % len(models)
    both = rng.random(n_instances) < 0.5
    instance = np.r_[np.arange(n_instances), np.flatnonzero(both)][:n_battles]
    first = np.r_[a, b[both]][:n_battles]
    second = np.r_[b, a[both]][:n_battles]
    frame = {"instance": instance, "model_a": models[first], "model_b": models[second]}
    for feature, scale in (("length", 800), ("headers", 3), ("bold", 4), ("list_items", 6)):
        frame[f"{feature}_a"] = rng.poisson(scale, len(instance)).astype("float64")
        frame[f"{feature}_b"] = rng.poisson(scale, len(instance)).astype("float64")
    p = 1 / (1 + np.exp(-(strength[first] - strength[second])))
    frame["outcome"] = (rng.random(len(instance)) < p).astype("float64")
    battles = pd.DataFrame(frame)
    built, built_cpu = time.perf_counter(), time.process_time()
    steps = {}

    def timed(name, function, *args, **kwargs):
        began = time.perf_counter()
        result = function(*args, **kwargs)
        steps[name] = round(time.perf_counter() - began, 2)
        return result

    timed("win_rates", win_rates, battles, "m0", n_resamples=n_resamples)
    ranking = timed("bradley_terry", bradley_terry, battles, n_resamples=n_resamples)
    timed("length_controlled", length_controlled_win_rates, battles, "m0", n_resamples=n_resamples)
    timed("style_controlled", style_controlled_ranking, battles, n_resamples=n_resamples)
    done = time.perf_counter()
    return {
        "group": "pairwise",
        "battles": len(battles),
        "instances": int(len(np.unique(instance))),
        "models": len(models),
        "resamples": n_resamples,
        "build_s": round(built - start, 2),
        "stats_s": round(done - built, 2),
        "stats_cpu_s": round(time.process_time() - built_cpu, 2),
        "steps_s": steps,
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "top_model": str(ranking.iloc[0]["model"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=64000)
    parser.add_argument("--battles", type=int, default=100000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--only", default="annotate,pairwise")
    parser.add_argument("--group", help=argparse.SUPPRESS)  # the child process's group
    args = parser.parse_args()
    if args.group == "annotate":
        print(json.dumps(run_annotate(args.prompts, args.resamples)))
        return
    if args.group == "pairwise":
        print(json.dumps(run_pairwise(args.battles, args.resamples)))
        return
    results = []
    for group in args.only.split(","):
        command = [
            sys.executable,
            __file__,
            "--group",
            group,
            "--prompts",
            str(args.prompts),
            "--battles",
            str(args.battles),
            "--resamples",
            str(args.resamples),
        ]
        began = time.perf_counter()
        child = subprocess.run(command, capture_output=True, text=True, check=True)
        result = json.loads(child.stdout.strip().splitlines()[-1])
        result["process_wall_s"] = round(time.perf_counter() - began, 2)
        results.append(result)
    save("stats_scale", {"resamples": args.resamples, "results": results})


if __name__ == "__main__":
    main()
