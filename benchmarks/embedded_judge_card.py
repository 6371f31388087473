"""The embedded default judge (SmolLM2-135M via the `local` backend) validated on LLMBar's
Natural pairs: its card with argmax and probability-weighted verdicts, as JSON.

python benchmarks/embedded_judge_card.py [--items 100] [--dataset path/to/Natural/dataset.json]

Each pair is judged in both orders through the evaluate pipeline's own path: its judge
(`open_judge`, asking the endpoint for top log-probabilities as `evaluate.judge_logprobs:
auto` does on the local backend), `judge_samples` (eval_judgments with the probability
verdicts beside the argmax ones) and `validate_evaluation` (the judge card). Prints wall
time, calls and the card (rows and Markdown). Pairs are judged CHUNK at a time; after
`--budget-s` seconds the pairs judged so far are validated. `--ship` also writes the card
as the package's measured card (`llm_feedback/validation/measured_cards.json`), which a
report reads beside the data root's `judge_validation`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from llm_feedback.backends.local import stop_local_servers
from llm_feedback.evaluation import prepare_samples
from llm_feedback.evaluation.judge_validation import evaluation_identity, validate_evaluation
from llm_feedback.evaluation.judging import judge_samples, open_judge, with_carried_columns
from llm_feedback.params import parse_evaluate
from llm_feedback.storage.schema import JUDGE_VALIDATION_COLUMN_TYPES
from llm_feedback.validation.card import card_lines
from llm_feedback.validation.formats import read_samples
from llm_feedback.validation.measured import MEASURED_FILE, write_measured_cards

sys.path.insert(0, str(Path(__file__).parent))
from common import save  # noqa: E402

MEASURED_PATH = Path(__file__).resolve().parents[1] / "src/llm_feedback/validation" / MEASURED_FILE
DEFAULT_DATASET = Path(__file__).resolve().parents[2] / "shared/data/llmbar/natural/dataset.json"
LOCAL = {
    "backend": "local",
    "model": "SmolLM2-135M-Instruct",
    "parallel_slots": 4,
    "context_per_slot": 4096,
    "timeout_s": 300,
    "max_string_chars": 24,
    "cache": False,
}
# Pairs judged between two looks at the time budget.
CHUNK = 10


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--budget-s", type=float, default=480.0, help="then validate what is done")
    parser.add_argument("--ship", action="store_true", help="write the package's measured card")
    args = parser.parse_args()
    if not args.dataset.is_file():
        sys.exit(f"{args.dataset}: not found (LLMBar's Natural dataset.json)")

    gold = read_samples(args.dataset, "llmbar")
    gold = gold[gold["instance_id"].isin(gold["instance_id"].drop_duplicates()[: args.items])]
    config = parse_evaluate({"mode": "pairwise", "judge": {"endpoint": "local"}}, {"local": LOCAL})
    samples = prepare_samples(gold, config)
    instances = samples["instance_id"].drop_duplicates().tolist()
    started = time.perf_counter()
    judged = []
    with open_judge(config, None, progress=False) as judge:
        for start in range(0, len(instances), CHUNK):
            chunk = samples[samples["instance_id"].isin(instances[start : start + CHUNK])]
            # The gold labels reach eval_judgments as the judge node carries them.
            judged.append(with_carried_columns(judge_samples(chunk, config, judge), chunk, config))
            print(
                f"{judge.stats.calls} calls, {time.perf_counter() - started:.0f} s", file=sys.stderr
            )
            if time.perf_counter() - started > args.budget_s and start + CHUNK < len(instances):
                print(f"time budget of {args.budget_s} s spent: validating the pairs judged so far")
                break
        calls = judge.stats.calls
    wall = time.perf_counter() - started
    judgments = pd.concat(judged, ignore_index=True)
    done = set(judgments["instance_id"])
    no_cards = pd.DataFrame(columns=list(JUDGE_VALIDATION_COLUMN_TYPES)).astype(
        JUDGE_VALIDATION_COLUMN_TYPES
    )
    validation = validate_evaluation(
        judgments,
        samples[samples["instance_id"].isin(done)],
        config,
        no_cards,
        validation_set=f"{args.dataset.parent.name}/{args.dataset.name}",
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    card = validation.cards[validation.cards["category"].isna()]
    payload = {
        "items_asked": args.items,
        "budget_s": args.budget_s,
        "wall_s": round(wall, 1),
        "calls": calls,
        "items": len(done),
        "usable_probability_share": float(card["usable_probability_share"].iloc[0]),
        "card": card[
            ["kind", "judge", "verdict_source", "metric", "value", "ci_low", "ci_high", "n"]
        ].to_dict("records"),
        "card_markdown": card_lines(validation.cards, evaluation_identity(config)["judge_key"]),
    }
    save("embedded_judge_card", json.loads(json.dumps(payload, default=str)))
    if args.ship:
        source = (
            f"benchmarks/embedded_judge_card.py, {payload['items']} pairs of "
            f"{args.dataset.parent.name}/{args.dataset.name} in both orders, {calls} calls"
        )
        write_measured_cards(validation.cards, source, MEASURED_PATH)
    stop_local_servers()


if __name__ == "__main__":
    main()
