"""Figures named after an anchor, beside the anchor's own code on the same inputs.

AlpacaEval 2: the shared annotations as published (`../shared/data/alpaca_eval`, the
folder of every model's `annotations.json`) go through the evaluate library as a run does
(`samples_format: auto`, no judge called) into `eval_alpaca_eval`; AlpacaEval's own
`alpaca_eval.metrics.glm_winrate.get_length_controlled_winrate` is run on each model's
annotations in the interpreter named by `BENCH_ALPACA_EVAL_PYTHON` (a scratch venv with
`pip install alpaca_eval`), with the same instruction difficulty: ours, fitted from the run's
models, handed to it as the `df_gamed.csv` it would download from the Hub (unreachable
here). Published leaderboard rows are shown beside both.

Run: BENCH_ALPACA_EVAL_PYTHON=/tmp/ae/bin/python python benchmarks/anchors.py
(without the variable, the reference columns are left empty and say why).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import save, write_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
ALPACA_EVAL = SHARED / "alpaca_eval"
BASELINE = "gpt4_1106_preview"
GLMS = ("length_controlled_minimal", "length_controlled_noreg")

# Runs in AlpacaEval's interpreter: argv = annotations folder, difficulty CSV (instruction,
# difficulty); prints {model: {figure: value}} from AlpacaEval's own functions.
_REFERENCE = r"""
import json, sys, tempfile
import pandas as pd
import alpaca_eval.metrics.glm_winrate as glm

folder, difficulty_csv = sys.argv[1], sys.argv[2]
difficulty = pd.read_csv(difficulty_csv).set_index("instruction")["difficulty"]
out = {}
for path in sorted(__import__("pathlib").Path(folder).glob("*/annotations.json")):
    df = pd.DataFrame(json.loads(path.read_text()))
    # The file AlpacaEval downloads: per row position, that instruction's difficulty.
    gamed = pd.DataFrame({"index": range(len(df)),
                          "instruction_difficulty": df["instruction"].map(difficulty).fillna(0.0),
                          "model": "none"})
    handle = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False)
    gamed.to_csv(handle.name, index=False)
    glm.hf_hub_download = lambda **kwargs: handle.name
    model = df["generator_2"].iloc[0]
    out[model] = {}
    for name in sys.argv[3:]:
        figures = glm.get_length_controlled_winrate(df.copy(), glm_name=name, save_weights_dir=None,
                                                    is_warn_extreme_changes=False)
        out[model][name] = float(figures["length_controlled_winrate"])
        for key in ("win_rate", "standard_error", "discrete_win_rate"):
            out[model][key] = float(figures[key])
        for key in ("n_wins", "n_wins_base", "n_draws", "n_total"):
            out[model][key] = int(figures[key])
print(json.dumps(out))
"""


def ours() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(eval_alpaca_eval of the shared annotations, the difficulty it fitted per instruction)."""
    from llm_feedback.evaluation import judge_all, prepare_samples, read_samples_file
    from llm_feedback.evaluation.ranking import alpaca_eval_win_rates, pairwise_battles
    from llm_feedback.evaluation.sample_files import samples_from_file
    from llm_feedback.params.evaluate import parse_evaluate
    from llm_feedback.stats.alpaca_eval import fitted_difficulty, oriented_preferences

    # No judge is called: the endpoint only has to parse.
    endpoints = {"local": {"backend": "openai", "model": "none", "base_url": "http://127.0.0.1:9"}}
    config = parse_evaluate({"mode": "pairwise", "ranking": {"baseline": BASELINE}}, endpoints)
    samples = prepare_samples(samples_from_file(read_samples_file(ALPACA_EVAL)), config)
    judgments, _ = judge_all(samples, config, None, progress=False)
    table = alpaca_eval_win_rates(judgments, samples, config)
    difficulty = fitted_difficulty(
        oriented_preferences(pairwise_battles(judgments, samples), BASELINE)
    )
    questions = samples.drop_duplicates("instance_id").assign(
        prompt=lambda frame: frame["prompt_key"]
    )
    by_instruction = (
        questions[["question", "prompt"]]
        .drop_duplicates("prompt")
        .assign(difficulty=lambda frame: frame["prompt"].map(difficulty))
        .rename(columns={"question": "instruction"})[["instruction", "difficulty"]]
    )
    return table, by_instruction


def reference(by_instruction: pd.DataFrame) -> dict | str:
    """AlpacaEval's own figures per model, or why they are missing."""
    python = os.environ.get("BENCH_ALPACA_EVAL_PYTHON")
    if not python:
        return "BENCH_ALPACA_EVAL_PYTHON not set"
    with tempfile.TemporaryDirectory() as folder:
        csv = Path(folder) / "difficulty.csv"
        by_instruction.to_csv(csv, index=False)
        finished = subprocess.run(
            [python, "-c", _REFERENCE, str(ALPACA_EVAL), str(csv), *GLMS],
            capture_output=True,
            text=True,
            check=False,
        )
    if finished.returncode:
        return f"AlpacaEval's code failed: {finished.stderr.strip().splitlines()[-1]}"
    return json.loads(finished.stdout.strip().splitlines()[-1])


def main() -> None:
    if not (ALPACA_EVAL / "leaderboard_rows.csv").is_file():
        sys.exit(f"error: {ALPACA_EVAL} (AlpacaEval 2's published annotations) is absent")
    table, by_instruction = ours()
    published = pd.read_csv(ALPACA_EVAL / "leaderboard_rows.csv", index_col=0)
    payload = {
        "alpaca_eval": {
            "ours": table.set_index("model").drop(columns=["baseline"]).to_dict("index"),
            "reference": reference(by_instruction),
            "published": published.drop(index=BASELINE).to_dict("index"),
        }
    }
    save("anchors", payload)
    from results_judging import anchors

    write_section("anchors", anchors([payload]))


if __name__ == "__main__":
    main()
