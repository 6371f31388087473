"""Figures named after an anchor, beside the anchor's own code on the same inputs.

AlpacaEval 2: the shared annotations as published (`../shared/data/alpaca_eval`, the
folder of every model's `annotations.json`) go through the evaluate library as a run does
(`samples_format: auto`, no judge called) into `eval_alpaca_eval`; AlpacaEval's own
`alpaca_eval.metrics.glm_winrate.get_length_controlled_winrate` is run on each model's
annotations in the interpreter named by `BENCH_ANCHORS_PYTHON` (a scratch venv with
`pip install alpaca_eval`), both given the same `df_gamed.csv` (the file AlpacaEval
downloads from the Hub, unreachable here): the instruction difficulty fitted from the four
models, and as the two gamed baselines STAND-INS, two of the shared models (a concise and a
verbose variant), since the real gamed baselines' annotations are only on the Hub. Each
model's annotations are handed to AlpacaEval's code indexed by the instruction's position
in AlpacaEval's order (a model with 802 of the 805 instructions keeps its difficulty).
Published leaderboard rows are shown beside both: the published `length_controlled_winrate`
(v1 with the Hub's file) is not reproducible here.

Arena-Hard-Auto (`BENCH_ARENA_HARD_REPO`: a checkout of lmarena/arena-hard-auto at 196f6b8,
run by the same interpreter): its `utils/add_markdown_info.get_element_counts` on the shared
answers (`../shared/data/arena_hard`) beside ours (`stats.length_control.style_features`);
and judgments written in its format (`model_judgment/<judge>/<model>.jsonl`, five-level
verdicts drawn per question by a fixed hash) read by its `show_result.py` (plain
leaderboard; its torch imports are given empty stand-ins, that path never calls torch)
and by the evaluate library (`eval_arena_hard`). Both bootstraps draw 100 resamples, so
each run's interval moves by a few tenths: both sides are run with `SEEDS` seeds and
their means compared.

Run: BENCH_ANCHORS_PYTHON=/tmp/ae/bin/python BENCH_ARENA_HARD_REPO=/tmp/arena-hard-auto \
     python benchmarks/anchors.py
(without them, the reference columns are left empty and say why).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
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
GLMS = ("length_controlled_minimal", "length_controlled_noreg", "length_controlled_v1")
# Stand-ins for AlpacaEval's gamed baselines (the concise one first: it has every instruction,
# so its rows number the instructions as df_gamed.csv does).
GAMED_STAND_INS = ("Mixtral-8x7B-Instruct-v0.1_concise", "alpaca-7b_verbose")
ARENA_HARD = SHARED / "arena_hard"
ARENA_BASELINE = "gpt-4-0314"
ARENA_BENCH = "arena-hard-v0.1"
# The judged models and how often each wins a game (the rest: losses, 10% ties).
ARENA_MODELS = {"gpt-4-0613": 0.45, "gpt-3.5-turbo-0125": 0.3}
SEEDS = 50
# Style control refits 100 times a seed: fewer seeds (each side's mean moves by about 0.05).
STYLE_SEEDS = 20

# Runs in Arena-Hard's checkout (argv: the checkout, the answers folder): its own Markdown
# counts, summed per model.
_ARENA_COUNTS = r"""
import glob, json, os, sys
import pandas as pd
sys.path.insert(0, sys.argv[1])
from utils.add_markdown_info import get_element_counts
out = {}
for file in sorted(glob.glob(os.path.join(sys.argv[2], "*.jsonl"))):
    data = pd.read_json(file, lines=True)
    counts = get_element_counts(data, column="messages")
    out[data.iloc[0]["model"]] = {
        "headers": sum(sum(c["header_count"].values()) for c in counts),
        "list_items": sum(sum(c["list_count"].values()) for c in counts),
        "bold": sum(sum(c["bold_count"].values()) for c in counts),
    }
print(json.dumps(out))
"""
# Runs in a benchmark folder laid out as Arena-Hard's `data/` (argv: the checkout, seeds):
# show_result.py's plain leaderboard per seed of numpy's global generator (which its
# pandas sampling draws from), as printed.
_ARENA_SHOW = r"""
import contextlib, io, json, sys, types
import numpy as np
def stub(name):
    module = types.ModuleType(name)
    module.__getattr__ = lambda attr: type(attr, (), {})
    return module
# The plain leaderboard never calls torch; its module imports only need the names.
for name in ("torch", "torch.nn", "torch.nn.functional", "torch.optim"):
    sys.modules[name] = stub(name)
torch = sys.modules["torch"]
torch.nn, torch.optim = sys.modules["torch.nn"], sys.modules["torch.optim"]
sys.modules["torch.nn"].functional = sys.modules["torch.nn.functional"]
sys.path.insert(0, sys.argv[1])
import show_result
battles = show_result.load_judgments(["judge"], "arena-hard-v0.1")
printed = []
for seed in range(int(sys.argv[2])):
    np.random.seed(seed)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(io.StringIO()):
        show_result.print_leaderboard(battles.copy(), "arena-hard-v0.1")
    printed.append(buffer.getvalue())
print(json.dumps(printed))
"""
# Runs in the same folder (argv: the checkout, seeds): show_result.py's style-controlled
# leaderboard (`--control-features length markdown`) per seed. Its answers' metadata are made
# by its own add_markdown_info.py, lengths counted in characters (the o200k_base file cannot
# be fetched here, and ours falls back to characters alike). torch cannot be installed here:
# numpy arrays stand in for its tensors, and its LBFGS fit (torch autograd) is replaced by
# scipy's L-BFGS on the same loss (the summed binary cross-entropy, started at 0.5) over the
# same bootstrap draws (numpy's global generator, as it draws them).
_ARENA_STYLE = r"""
import contextlib, glob, io, json, sys, types
import numpy as np
import pandas as pd
from scipy.optimize import minimize
from scipy.special import expit

class Tensor(np.ndarray):
    def isnan(self):
        return np.isnan(np.asarray(self))
def plain(x):
    return np.asarray(x, dtype=np.float64)
def stub(name):
    module = types.ModuleType(name)
    module.__getattr__ = lambda attr: type(attr, (), {})
    return module
for name in ("torch", "torch.nn", "torch.nn.functional", "torch.optim"):
    sys.modules[name] = stub(name)
torch = sys.modules["torch"]
torch.nn, torch.optim = sys.modules["torch.nn"], sys.modules["torch.optim"]
sys.modules["torch.nn"].functional = sys.modules["torch.nn.functional"]
torch.float32 = None
torch.tensor = lambda data, dtype=None: plain(data).view(Tensor)
torch.zeros_like = lambda x: np.zeros_like(plain(x)).view(Tensor)
torch.zeros = lambda *shape: np.zeros(shape).view(Tensor)
torch.mean = lambda x, axis: plain(x).mean(axis=axis)
torch.std = lambda x, axis: plain(x).std(axis=axis, ddof=1)
torch.cat = lambda xs, dim: np.concatenate([plain(x) for x in xs], axis=dim).view(Tensor)
torch.exp = lambda x: np.exp(plain(x)).view(Tensor)
torch.stack = lambda xs: np.stack([plain(x) for x in xs]).view(Tensor)
torch.quantile = lambda x, q, axis: np.quantile(plain(x), q, axis=axis)
sys.path.insert(0, sys.argv[1])
import show_result
from utils.add_markdown_info import add_markdown_meta, get_element_counts

class Characters:
    def encode(self, text, disallowed_special=()):
        return list(text)

for file in glob.glob("data/arena-hard-v0.1/model_answer/*.jsonl"):
    data = pd.read_json(file, lines=True)
    temp = data[["uid", "messages"]].copy()
    temp["markdown_meta"] = get_element_counts(data, column="messages")
    data["metadata"] = temp.apply(lambda row: add_markdown_meta(row, Characters()), axis=1)
    data.to_json(file, orient="records", lines=True)

def bootstrap_pairwise_model(features, outcomes, loss_type="bt", num_round=100):
    x, y = plain(features), plain(outcomes)
    draws = np.random.randint(low=0, high=x.shape[0], size=(num_round, x.shape[0]))
    fits = []
    for rows in draws:
        xi, yi = x[rows], y[rows]
        def loss(w):
            z = xi @ w
            return np.sum(np.logaddexp(0, z) - yi * z), xi.T @ (expit(z) - yi)
        fitted = minimize(loss, np.full(x.shape[1], 0.5), jac=True, method="L-BFGS-B",
                          options={"gtol": 1e-9, "ftol": 1e-15, "maxiter": 1000})
        fits.append(fitted.x)
    return np.array(fits).view(Tensor), None

show_result.bootstrap_pairwise_model = bootstrap_pairwise_model
battles = show_result.load_judgments(["judge"], "arena-hard-v0.1")
printed = []
for seed in range(int(sys.argv[2])):
    np.random.seed(seed)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(io.StringIO()):
        show_result.print_leaderboard_with_style_features(
            battles.copy(), "arena-hard-v0.1", "arena-hard-v0.1", ["length", "markdown"])
    printed.append(buffer.getvalue())
print(json.dumps(printed))
"""
_COEFFICIENTS = re.compile(r"Feature Coefs: \[([^\]]*)\]")
_LEADERBOARD_ROW = re.compile(
    r"^\s*\d+\s+(?P<model>\S+)\s+(?P<score>[\d.]+)\s+\(-(?P<minus>[\d.]+) / \+(?P<plus>[\d.]+)\)",
    re.M,
)

# Runs in AlpacaEval's interpreter: argv = annotations folder, df_gamed CSV, instruction
# order (JSON list), figure names; prints {model: {figure: value}} from AlpacaEval's own code.
_REFERENCE = r"""
import json, pathlib, sys
import pandas as pd
import alpaca_eval.metrics.glm_winrate as glm

folder, gamed_csv, order_json = sys.argv[1:4]
position = {text: n for n, text in enumerate(json.loads(pathlib.Path(order_json).read_text()))}
glm.hf_hub_download = lambda **kwargs: gamed_csv  # the Hub's df_gamed.csv, unreachable here
out = {}
for path in sorted(pathlib.Path(folder).glob("*/annotations.json")):
    df = pd.DataFrame(json.loads(path.read_text()))
    # AlpacaEval numbers the instructions by the frame's index (reset_index): AlpacaEval's order.
    df.index = df["instruction"].map(position).to_numpy()
    model = df["generator_2"].iloc[0]
    out[model] = {}
    for name in sys.argv[4:]:
        figures = glm.get_length_controlled_winrate(df.copy(), glm_name=name, save_weights_dir=None,
                                                    is_warn_extreme_changes=False)
        out[model][name] = float(figures["length_controlled_winrate"])
        for key in ("win_rate", "standard_error", "discrete_win_rate"):
            out[model][key] = float(figures[key])
        for key in ("n_wins", "n_wins_base", "n_draws", "n_total"):
            out[model][key] = int(figures[key])
print(json.dumps(out))
"""


def gamed_stand_in(difficulty: dict[str, float], order: list[str]) -> pd.DataFrame:
    """A df_gamed.csv of AlpacaEval's format: the instruction difficulty fitted from the run
    (by instruction text), and `GAMED_STAND_INS`' annotations as the gamed baselines' rows."""
    position = {text: n for n, text in enumerate(order)}
    frames = []
    for model in GAMED_STAND_INS:
        rows = pd.DataFrame(json.loads((ALPACA_EVAL / model / "annotations.json").read_text()))
        delta = rows["output_1"].str.len() - rows["output_2"].str.len()
        preference = rows["preference"].astype(float).replace({0.0: 1.5}) - 1
        frames.append(
            pd.DataFrame(
                {
                    "index": rows["instruction"].map(position),
                    "instruction_difficulty": rows["instruction"].map(difficulty),
                    "model": model,
                    "preference": preference,
                    "std_delta_len": delta / delta.std(),
                    "not_gamed_baseline": False,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def ours(folder: Path) -> tuple[pd.DataFrame, Path, Path]:
    """(eval_alpaca_eval of the shared annotations with the stand-in df_gamed.csv, that file,
    the instructions in AlpacaEval's order as a JSON file), files written in `folder`."""
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
    by_prompt = fitted_difficulty(
        oriented_preferences(pairwise_battles(judgments, samples), BASELINE)
    )
    questions = samples.drop_duplicates("prompt_key")
    order = questions["question"].tolist()
    difficulty = dict(zip(order, questions["prompt_key"].map(by_prompt), strict=True))
    gamed, order_file = folder / "df_gamed.csv", folder / "instructions.json"
    gamed_stand_in(difficulty, order).to_csv(gamed, index=False)
    order_file.write_text(json.dumps(order))
    config = parse_evaluate(
        {
            "mode": "pairwise",
            "ranking": {"baseline": BASELINE, "alpaca_eval_gamed": str(gamed)},
        },
        endpoints,
    )
    return alpaca_eval_win_rates(judgments, samples, config), gamed, order_file


def reference(gamed: Path, order: Path) -> dict | str:
    """AlpacaEval's own figures per model, or why they are missing."""
    python = os.environ.get("BENCH_ANCHORS_PYTHON")
    if not python:
        return "BENCH_ANCHORS_PYTHON not set"
    finished = subprocess.run(
        [python, "-c", _REFERENCE, str(ALPACA_EVAL), str(gamed), str(order), *GLMS],
        capture_output=True,
        text=True,
        check=False,
    )
    if finished.returncode:
        return f"AlpacaEval's code failed: {finished.stderr.strip().splitlines()[-1]}"
    return json.loads(finished.stdout.strip().splitlines()[-1])


def _draw(*parts: str) -> float:
    digest = hashlib.sha256("/".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _level(model: str, uid: str, game: int) -> str:
    """A game's verdict in Arena-Hard's order (game 1: the baseline is A; game 2: the
    model is A), drawn by a fixed hash: ties 10%, strong verdicts 30% of the rest."""
    x = _draw(model, uid, str(game))
    if x > 0.9:
        return "A=B"
    strong = ">>" if _draw(model, uid, str(game), "strong") < 0.3 else ">"
    model_wins = x < ARENA_MODELS[model]
    model_side, baseline_side = ("B", "A") if game == 1 else ("A", "B")
    first, second = (model_side, baseline_side) if model_wins else (baseline_side, model_side)
    return f"{first}{strong}{second}"


def arena_hard_bench(folder: Path) -> Path:
    """Arena-Hard's `data/<bench>` layout: the shared answers and drawn judgments."""
    bench = folder / "data" / ARENA_BENCH
    shutil.copytree(ARENA_HARD / "model_answer", bench / "model_answer")
    judged = bench / "model_judgment" / "judge"
    judged.mkdir(parents=True)
    uids = [json.loads(line)["uid"] for line in (ARENA_HARD / "question.jsonl").open()]
    for model in ARENA_MODELS:
        records = [
            {
                "uid": uid,
                "category": ARENA_BENCH,
                "judge": "judge",
                "model": model,
                "games": [{"score": _level(model, uid, game)} for game in (1, 2)],
            }
            for uid in uids
        ]
        (judged / f"{model}.jsonl").write_text("\n".join(map(json.dumps, records)) + "\n")
    return judged


def arena_hard_ours(judged: Path) -> dict:
    """Our Markdown counts of the shared answers, and eval_arena_hard per seed."""
    from llm_feedback.evaluation import judge_all, prepare_samples, read_samples_file
    from llm_feedback.evaluation.ranking import arena_hard_win_rates
    from llm_feedback.evaluation.sample_files import samples_from_file
    from llm_feedback.params.evaluate import parse_evaluate
    from llm_feedback.stats.length_control import style_features

    counts = {}
    for file in sorted((ARENA_HARD / "model_answer").glob("*.jsonl")):
        rows = [json.loads(line) for line in file.open()]
        texts = pd.Series([row["messages"][-1]["content"]["answer"] for row in rows])
        totals = style_features(texts)[["headers", "list_items", "bold"]].sum()
        counts[rows[0]["model"]] = {key: int(value) for key, value in totals.items()}
    endpoints = {"local": {"backend": "openai", "model": "none", "base_url": "http://127.0.0.1:9"}}
    scores: dict[str, list[dict]] = {}
    samples = judgments = None
    for seed in range(SEEDS):
        config = parse_evaluate(
            {
                "mode": "pairwise",
                "ranking": {"baseline": ARENA_BASELINE},
                "intervals": {"seed": seed, "n_resamples": 100},
            },
            endpoints,
        )
        if judgments is None:
            frame = samples_from_file(read_samples_file(judged), "auto", ARENA_BASELINE)
            samples = prepare_samples(frame, config)
            judgments, _ = judge_all(samples, config, None, progress=False)
        for row in arena_hard_win_rates(judgments, samples, config).to_dict("records"):
            scores.setdefault(row["model"], []).append(row)
    return {"counts": counts, "scores": scores}


def arena_hard_reference(judged: Path) -> dict | str:
    """Arena-Hard's own counts and show_result.py's leaderboards, or why they are missing."""
    python, repo = os.environ.get("BENCH_ANCHORS_PYTHON"), os.environ.get("BENCH_ARENA_HARD_REPO")
    if not (python and repo):
        return "BENCH_ANCHORS_PYTHON or BENCH_ARENA_HARD_REPO not set"
    counted = subprocess.run(
        [python, "-c", _ARENA_COUNTS, repo, str(ARENA_HARD / "model_answer")],
        capture_output=True,
        text=True,
        check=False,
    )
    shown = subprocess.run(
        [python, "-c", _ARENA_SHOW, repo, str(SEEDS)],
        capture_output=True,
        text=True,
        check=False,
        cwd=judged.parent.parent.parent.parent,
    )
    styled = subprocess.run(
        [python, "-c", _ARENA_STYLE, repo, str(STYLE_SEEDS)],
        capture_output=True,
        text=True,
        check=False,
        cwd=judged.parent.parent.parent.parent,
    )
    for finished in (counted, shown, styled):
        if finished.returncode:
            return f"Arena-Hard's code failed: {finished.stderr.strip().splitlines()[-1]}"
    leaderboards: dict[str, list[dict]] = {}
    for printed in json.loads(shown.stdout.strip().splitlines()[-1]):
        for match in _LEADERBOARD_ROW.finditer(printed):
            leaderboards.setdefault(match["model"], []).append(
                {key: float(match[key]) for key in ("score", "minus", "plus")}
            )
    style: dict[str, list[dict]] = {}
    coefficients = []
    for printed in json.loads(styled.stdout.strip().splitlines()[-1]):
        for match in _LEADERBOARD_ROW.finditer(printed):
            style.setdefault(match["model"], []).append(
                {key: float(match[key]) for key in ("score", "minus", "plus")}
            )
        found = _COEFFICIENTS.search(printed)
        coefficients.append([float(value) for value in found[1].split()] if found else [])
    return {
        "counts": json.loads(counted.stdout.strip().splitlines()[-1]),
        "scores": leaderboards,
        "style": style,
        "style_coefficients": coefficients,
    }


def main() -> None:
    for needed in (ALPACA_EVAL / "leaderboard_rows.csv", ARENA_HARD / "question.jsonl"):
        if not needed.is_file():
            sys.exit(f"error: {needed} (the anchors' published data) is absent")
    published = pd.read_csv(ALPACA_EVAL / "leaderboard_rows.csv", index_col=0)
    with tempfile.TemporaryDirectory() as folder:
        table, gamed, order = ours(Path(folder))
        alpaca_reference = reference(gamed, order)
        judged = arena_hard_bench(Path(folder))
        arena_hard = {"ours": arena_hard_ours(judged), "reference": arena_hard_reference(judged)}
    payload = {
        "alpaca_eval": {
            "ours": table.set_index("model").drop(columns=["baseline"]).to_dict("index"),
            "reference": alpaca_reference,
            "gamed_stand_ins": list(GAMED_STAND_INS),
            "published": published.drop(index=BASELINE).to_dict("index"),
        },
        "arena_hard": arena_hard,
        "seeds": SEEDS,
    }
    save("anchors", payload)
    from results_judging import anchors

    write_section("anchors", anchors([payload]))


if __name__ == "__main__":
    main()
