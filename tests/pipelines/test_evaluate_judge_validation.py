"""The evaluate pipeline validates its judge on gold-labelled samples: LLMBar's published
GPT-4 numbers replayed exactly, a judge of known bias, the card in the outputs."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from kedro.io import DatasetError

from llm_feedback.core.errors import InputError
from llm_feedback.replies.fencing import neutralise
from llm_feedback.replies.injection import suspected_injection
from llm_feedback.testing.server import FakeLLMServer, Reply, RequestContext
from tests.conftest import (
    SHARED_DATA,
    documentation_section,
    dotted_params,
    endpoints_via,
)

LLMBAR = SHARED_DATA / "llmbar" / "natural"
README_COMMAND = "kedro run --pipelines evaluate --params"
_BLOCK = re.compile(
    r"<<<(?P<name>[A-Z ]+) BEGIN (?P<nonce>\w+)>>>\n(?P<text>.*?)\n?<<<(?P=name) END", re.DOTALL
)
_PUBLISHED_VANILLA = {
    "accuracy_original_order": 0.95,
    "accuracy_swapped_order": 0.96,
    "accuracy": 0.955,
    "accuracy_both_orders": 0.93,
    "positional_agreement": 0.95,
}


def shown(prompt: str) -> tuple[str, str, str]:
    """(question, response shown first, response shown second) of a pairwise prompt."""
    blocks = {match["name"]: match["text"] for match in _BLOCK.finditer(prompt)}
    return blocks["QUESTION"], blocks["RESPONSE A"], blocks["RESPONSE B"]


class RecordedPairwiseJudge:
    """Answers each pairwise prompt with the recorded winner of its item in the order shown
    (`winners[item][swapped]`: 1 or 2, naming the item's original output), in our reply
    format; `items` are LLMBar's (input, output_1, output_2)."""

    def __init__(self, items: list[dict[str, Any]], winners: list[tuple[int | None, ...]]):
        self.winners = winners
        self.by_prompt: dict[tuple[str, str, str], tuple[int, bool]] = {}
        for number, item in enumerate(items):
            question = neutralise(item["input"])
            first, second = neutralise(item["output_1"]), neutralise(item["output_2"])
            self.by_prompt[(question, first, second)] = (number, False)
            self.by_prompt[(question, second, first)] = (number, True)
        self.served: list[tuple[int, bool]] = []

    def __call__(self, body: dict[str, Any], ctx: RequestContext) -> str | Reply:
        found = self.by_prompt.get(shown(body["messages"][-1]["content"]))
        if found is None:
            return Reply(status=400, error_message="no recorded item shows these texts")
        self.served.append(found)
        number, swapped = found
        winner = self.winners[number][swapped]
        if winner is None:
            return "I cannot decide."
        first_won = (winner == 1) != swapped
        return f"Recorded verdict.\nVerdict: [[{'A' if first_won else 'B'}]]"


def gpt4_vanilla_winners() -> list[tuple[int | None, int | None]]:
    results = json.loads((LLMBAR / "gpt-4" / "vanilla" / "result.json").read_text("utf-8"))
    winners = []
    for item in results:
        first_round = item["results"][0]
        winners.append(
            tuple(
                {"1": 1, "2": 2}.get(first_round[key]["winner"])
                for key in ("swap = False", "swap = True")
            )
        )
    return winners


def llmbar_params(server: FakeLLMServer, dataset: Path, **evaluate: Any) -> dict[str, Any]:
    return {
        "endpoints": endpoints_via(server, max_concurrent=8, structured_output=False),
        "eval_samples_path": str(dataset),
        "evaluate": {"mode": "pairwise", **evaluate},
    }


def metric_values(metrics: pd.DataFrame, raters: str) -> dict[str, float]:
    rows = metrics[(metrics["raters"] == raters) & metrics["category"].isna()]
    return dict(zip(rows["metric"], rows["value"], strict=True))


def readme_params(command_start: str, path: str, replacement: Path) -> dict[str, Any]:
    """The runtime params of the documented command that starts with `command_start`, its
    samples path replaced."""
    section = documentation_section("How good is my judge?")
    command = next(line for line in section.splitlines() if line.startswith(command_start))
    assignments = shlex.split(command)[shlex.split(command).index("--params") + 1]
    return dotted_params(assignments.replace(path, str(replacement)))


@pytest.mark.skipif(not LLMBAR.is_dir(), reason="../shared/data/llmbar is not here")
def test_gpt4_vanilla_verdicts_replayed_give_llmbars_published_numbers(run_kedro):
    """The documented LLMBar command, its judge replaying GPT-4's recorded verdicts."""
    items = json.loads((LLMBAR / "dataset.json").read_text("utf-8"))
    judge = RecordedPairwiseJudge(items, gpt4_vanilla_winners())
    params = readme_params(
        f"{README_COMMAND} eval_samples_path=path/to/LLMBar",
        "path/to/LLMBar/Natural/dataset.json",
        LLMBAR / "dataset.json",
    )
    with FakeLLMServer(responder=judge) as server:
        endpoints = endpoints_via(server, max_concurrent=8, structured_output=False)
        run = run_kedro("evaluate", {**params, "endpoints": endpoints})
    assert len(judge.served) == 200 and len(set(judge.served)) == 200  # each item, both orders
    catalog = run["catalog"]
    judgments = catalog.load("eval_judgments")
    assert len(judgments) == 100
    assert judgments["gold"].notna().all() and (judgments["model_a"] == "output_1").all()
    metrics = catalog.load("eval_metrics")
    measured = metric_values(metrics, "fake-model~gold")
    for metric, published in _PUBLISHED_VANILLA.items():
        assert measured[metric] == pytest.approx(published, abs=1e-12), metric
    row = metrics[(metrics["raters"] == "fake-model~gold") & (metrics["metric"] == "accuracy")]
    assert row["ci_low"].iloc[0] < 0.955 < row["ci_high"].iloc[0]
    assert "bootstrap" in row["ci_method"].iloc[0]
    cards = catalog.load("judge_validation")
    judged = cards[(cards["kind"] == "judge") & cards["category"].isna()]
    card_values = dict(zip(judged["metric"], judged["value"], strict=True))
    for metric, published in _PUBLISHED_VANILLA.items():
        assert card_values[metric] == pytest.approx(published, abs=1e-12), metric
    assert set(cards.loc[cards["kind"] == "baseline", "judge"]) == {
        "always_first",
        "always_longer",
        "random",
    }
    assert (cards["validation_set"] == "natural/dataset.json").all()
    card = catalog.load("eval_judge_card")
    assert "Judge card: fake-model" in card and "0.955" in card


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def labelled_pairs(count: int = 12) -> list[dict[str, Any]]:
    """Our JSONL pairs: gold A on even items, B on odd ones; the gold is the longer response
    on two items in three."""
    rows = []
    for number in range(count):
        short, long = f"answer {number}", f"a much longer answer number {number}, with detail"
        gold = "A" if number % 2 == 0 else "B"
        gold_longer = number % 3 != 0
        better, worse = (long, short) if gold_longer else (short, long)
        first, second = (better, worse) if gold == "A" else (worse, better)
        rows.append(
            {
                "instance_id": f"item-{number:02d}",
                "question": f"Question {number}?",
                "response_a": first,
                "response_b": second,
                "label": gold,
                "category": "even" if number % 2 == 0 else "odd",
            }
        )
    return rows


def always_first(body: dict[str, Any], ctx: RequestContext) -> str:
    return "The first one.\nVerdict: [[A]]"


def always_longer(body: dict[str, Any], ctx: RequestContext) -> str:
    _, first, second = shown(body["messages"][-1]["content"])
    return f"The longer one.\nVerdict: [[{'A' if len(first) > len(second) else 'B'}]]"


def test_an_always_first_judge_is_exactly_the_always_first_baseline(run_kedro, tmp_path):
    samples = write_jsonl(tmp_path / "pairs.jsonl", labelled_pairs())
    with FakeLLMServer(responder=always_first) as server:
        run = run_kedro("evaluate", llmbar_params(server, samples))
        assert server.request_count == 24
    metrics = run["catalog"].load("eval_metrics")
    judge = metric_values(metrics, "fake-model~gold")
    baseline = metric_values(metrics, "always_first~gold")
    assert judge["positional_agreement"] == 0.0
    assert judge["first_shown_share"] == 1.0
    assert judge["accuracy"] == baseline["accuracy"] == 0.5
    assert judge["accuracy_original_order"] == 0.5  # gold A on half the items
    assert judge["accuracy_both_orders"] == 0.0
    card = run["catalog"].load("eval_judge_card")
    assert "This judge cannot be told apart from always_first" in card
    agreement = run["catalog"].load("eval_annotator_agreement")
    assert agreement.empty  # one annotator


def test_an_always_longer_judge_gets_the_rates_the_data_implies(run_kedro, tmp_path):
    rows = labelled_pairs()
    samples = write_jsonl(tmp_path / "pairs.jsonl", rows)
    with FakeLLMServer(responder=always_longer) as server:
        run = run_kedro("evaluate", llmbar_params(server, samples))
    metrics = run["catalog"].load("eval_metrics")
    judge = metric_values(metrics, "fake-model~gold")
    baseline = metric_values(metrics, "always_longer~gold")
    gold_longer = sum(number % 3 != 0 for number in range(len(rows))) / len(rows)
    assert judge["longer_share"] == 1.0
    assert judge["positional_agreement"] == 1.0
    assert judge["accuracy"] == pytest.approx(gold_longer) == baseline["accuracy"]
    assert judge["gold_longer_share"] == pytest.approx(gold_longer)
    # Per category as for the other metrics: the odd items' gold is B.
    odd = metrics[(metrics["raters"] == "fake-model~gold") & (metrics["category"] == "odd")]
    assert "accuracy" in set(odd["metric"])


def test_several_annotators_give_their_agreement_and_the_judge_against_each(run_kedro, tmp_path):
    rows = labelled_pairs(6)
    for number, row in enumerate(rows):
        gold = row.pop("label")
        other = {"A": "B", "B": "A"}[gold] if number == 0 else gold
        row["labels"] = {"ann1": gold, "ann2": gold, "ann3": other}
    samples = write_jsonl(tmp_path / "pairs.jsonl", rows)
    with FakeLLMServer(responder=always_first) as server:
        run = run_kedro("evaluate", llmbar_params(server, samples))
    agreement = run["catalog"].load("eval_annotator_agreement")
    assert {"cohen_kappa", "fleiss_kappa", "exact_match_share"} <= set(agreement["metric"])
    pair = agreement[
        (agreement["metric"] == "exact_match_share") & (agreement["raters"] == "ann1~ann3")
    ]
    assert pair["value"].iloc[0] == pytest.approx(5 / 6)
    metrics = run["catalog"].load("eval_metrics")
    assert {"fake-model~ann1", "fake-model~ann2", "fake-model~ann3"} <= set(metrics["raters"])
    judgments = run["catalog"].load("eval_judgments")
    assert list(judgments["gold_annotators"].iloc[0]) == ["ann1", "ann2", "ann3"]


def test_a_is_the_first_row_and_further_columns_reach_eval_judgments(run_kedro, tmp_path):
    rows = [
        {"instance_id": "q1", "question": "Q?", "response": "first", "model": "zeta", "src": "x"},
        {"instance_id": "q1", "question": "Q?", "response": "second", "model": "alpha", "src": "y"},
    ]
    samples = write_jsonl(tmp_path / "native.jsonl", rows)
    with FakeLLMServer(responder=always_first) as server:
        run = run_kedro("evaluate", llmbar_params(server, samples))
    judgments = run["catalog"].load("eval_judgments")
    assert judgments[["model_a", "model_b", "src_a", "src_b"]].iloc[0].tolist() == [
        "zeta",
        "alpha",
        "x",
        "y",
    ]
    assert "this judge has not been validated" in run["catalog"].load("eval_judge_card").lower()


def test_a_further_column_named_like_a_judgment_column_is_refused_by_name(run_kedro, tmp_path):
    rows = [
        {"instance_id": "q1", "question": "Q?", "response": "r", "model": "m", "score": 3},
    ]
    samples = write_jsonl(tmp_path / "native.jsonl", rows)
    with FakeLLMServer(responder=always_first) as server:
        params = llmbar_params(server, samples, mode="single_1_10", samples_format="native")
        with pytest.raises(InputError, match="column 'score': eval_judgments has a column"):
            run_kedro("evaluate", params)
        assert server.request_count == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('[{"prompt": "x", "answer": "y"}]', r"item 0: not a known samples format"),
        (
            '[{"input": "q", "output_1": "a", "output_2": "b", "label": 3}]',
            r"item 0, field 'label'",
        ),
        ('{"question": "q"\n', r"line 1, column \d+: malformed JSON"),
    ],
)
def test_unknown_or_malformed_files_fail_before_any_call(run_kedro, tmp_path, content, message):
    path = tmp_path / "samples.json"
    path.write_text(content, encoding="utf-8")
    with FakeLLMServer(responder=always_first) as server:
        # A file that cannot be read fails as the dataset loads (Kedro wraps the error).
        with pytest.raises((InputError, DatasetError), match=rf"{re.escape(str(path))}, {message}"):
            run_kedro("evaluate", llmbar_params(server, path))
        assert server.request_count == 0


def test_gold_labels_need_the_pairwise_mode(run_kedro, tmp_path):
    samples = write_jsonl(tmp_path / "pairs.jsonl", labelled_pairs(2))
    with FakeLLMServer(responder=always_first) as server:
        with pytest.raises(InputError, match="column 'gold'.*set evaluate.mode=pairwise"):
            run_kedro("evaluate", llmbar_params(server, samples, mode="binary"))
        assert server.request_count == 0


def test_the_readme_pandalm_command_reads_three_annotators(run_kedro, tmp_path):
    """PandaLM's test set as published (annotator1..3, 0 = tie), named explicitly."""
    items = [
        {
            "idx": number,
            "motivation_app": "writing" if number % 2 else "coding",
            "instruction": f"Task {number}",
            "input": "" if number % 3 else f"context {number}",
            "response1": f"first answer {number}",
            "response2": f"the second, longer answer {number}",
            "annotator1": 1,
            "annotator2": 1 if number % 4 else 2,
            "annotator3": 0 if number % 5 == 0 else 1,
        }
        for number in range(8)
    ]
    path = tmp_path / "testset-v1.json"
    path.write_text(json.dumps(items), encoding="utf-8")
    params = readme_params(
        f"{README_COMMAND} eval_samples_path=path/to/pandalm",
        "path/to/pandalm_testset.json",
        path,
    )
    assert params["evaluate"]["samples_format"] == "pandalm"
    with FakeLLMServer(responder=always_first) as server:
        run = run_kedro("evaluate", {**params, "endpoints": endpoints_via(server)})
        assert server.request_count == 16
    agreement = run["catalog"].load("eval_annotator_agreement")
    assert "fleiss_kappa" in set(agreement["metric"])
    annotator1_annotator2 = agreement[
        (agreement["metric"] == "exact_match_share")
        & (agreement["raters"] == "annotator1~annotator2")
    ]
    assert annotator1_annotator2["value"].iloc[0] == pytest.approx(6 / 8)  # items 0 and 4 differ
    judgments = run["catalog"].load("eval_judgments")
    # Item 0's three labels are A, B and tie: a shared top count, a tie; else response1.
    assert judgments["gold"].tolist() == ["tie"] + ["A"] * 7
    assert set(judgments["category"]) == {"writing", "coding"}


def test_pointwise_gold_scores_validate_the_judge(run_kedro, tmp_path):
    """Our pointwise JSONL (`score`): a judge that reads the gold off the response agrees
    exactly; the card has the score metrics and no pairwise baselines."""
    rows = [
        {"instance_id": f"q{number}", "question": f"Q{number}?", "response": f"worth {score}"}
        | {"score": score}
        for number, score in enumerate([2, 9, 5, 7, 3, 8])
    ]
    samples = write_jsonl(tmp_path / "scores.jsonl", rows)

    def reads_the_gold(body: dict[str, Any], ctx: RequestContext) -> str:
        response = re.search(r"worth (\d+)", body["messages"][-1]["content"]).group(1)
        return f"Fair.\nRating: [[{response}]]"

    with FakeLLMServer(responder=reads_the_gold) as server:
        params = llmbar_params(server, samples, mode="single_1_10")
        run = run_kedro("evaluate", params)
    measured = metric_values(run["catalog"].load("eval_metrics"), "fake-model~gold")
    assert measured["spearman"] == pytest.approx(1.0)
    assert measured["exact_agreement"] == 1.0 and measured["mean_difference"] == 0.0
    cards = run["catalog"].load("judge_validation")
    assert set(cards["kind"]) == {"judge"}


def test_cards_accumulate_across_runs_and_a_run_without_gold_shows_its_judges(run_kedro, tmp_path):
    samples = write_jsonl(tmp_path / "pairs.jsonl", labelled_pairs(6))
    with FakeLLMServer(responder=always_first) as server:
        run_kedro("evaluate", llmbar_params(server, samples))
        # The demo samples have no gold: the same judge's card is shown, and kept.
        demo = {"endpoints": endpoints_via(server), "evaluate": {"mode": "pairwise"}}
        shown = run_kedro("evaluate", demo)["catalog"]
        assert "This judge cannot be told apart from always_first" in shown.load("eval_judge_card")
        assert not shown.load("eval_metrics")["raters"].fillna("").str.endswith("~gold").any()
        other = llmbar_params(server, samples)
        other["endpoints"]["local"]["model"] = "other-model"
        cards = run_kedro("evaluate", other)["catalog"].load("judge_validation")
    assert set(cards["judge_model"]) == {"fake-model", "other-model"}
    assert cards.groupby("judge_model")["judge_key"].nunique().eq(1).all()
    versions = list((tmp_path / "data" / "08_reporting" / "judge_validation.parquet").iterdir())
    assert len(versions) == 3


def test_mtbench_human_judgments_as_published_judge_both_turns(run_kedro, tmp_path):
    from tests.validation.test_formats import MTBENCH_ROWS  # noqa: PLC0415 - shared rows

    path = tmp_path / "human.json"
    path.write_text(json.dumps(MTBENCH_ROWS), encoding="utf-8")
    with FakeLLMServer(responder=always_first) as server:
        run = run_kedro("evaluate", llmbar_params(server, path))
        judgments = run["catalog"].load("eval_judgments")
        assert server.request_count == 2 * len(judgments)
    assert sorted(judgments["turn"]) == [1, 2] and judgments["gold"].notna().all()
    assert "question_id_a" in judgments.columns


def test_records_given_in_memory_are_read_in_any_format():
    from llm_feedback.evaluation import samples_from_file  # noqa: PLC0415
    from llm_feedback.evaluation.config import SAMPLES_FORMATS  # noqa: PLC0415
    from llm_feedback.evaluation.sample_files import RECORDED_FORMATS  # noqa: PLC0415
    from llm_feedback.validation.formats import FORMATS  # noqa: PLC0415

    assert SAMPLES_FORMATS == ("auto", "native", *FORMATS, *RECORDED_FORMATS)
    frame = pd.DataFrame(
        [{"input": "Say hi.", "output_1": "Hi!", "output_2": "Bye.", "label": 1}] * 2
    )
    samples = samples_from_file(frame)
    assert samples["model"].tolist() == ["output_1", "output_2"] * 2
    assert samples["gold"].tolist() == ["A"] * 4
    with pytest.raises(InputError, match=r"eval_samples, row 0, field 'label'"):
        samples_from_file(frame.assign(label=3), "llmbar")


def llmbar_figures(labels: list[int], winners: list[tuple[int | None, ...]]) -> dict[str, float]:
    """LLMBar's statistics of recorded winners, by its definitions: over ALL items, a
    verdict-less order wrong and its item not position-consistent; and the same figures
    over the readable verdicts only (suffix `_readable`)."""
    right = [
        [w[swapped] == label for w, label in zip(winners, labels, strict=True)]
        for swapped in (0, 1)
    ]
    readable = [[w[swapped] is not None for w in winners] for swapped in (0, 1)]
    both = [r0 and r1 for r0, r1 in zip(*right, strict=True)]
    equal = [w[0] is not None and w[0] == w[1] for w in winners]
    both_readable = [r0 and r1 for r0, r1 in zip(*readable, strict=True)]
    figures = {
        "accuracy_original_order": sum(right[0]) / len(labels),
        "accuracy_swapped_order": sum(right[1]) / len(labels),
        "accuracy_both_orders": sum(both) / len(labels),
        "positional_agreement": sum(equal) / len(labels),
        "accuracy_original_order_readable": sum(right[0]) / sum(readable[0]),
        "accuracy_swapped_order_readable": sum(right[1]) / sum(readable[1]),
        "accuracy_both_orders_readable": sum(both) / sum(both_readable),
        "positional_agreement_readable": sum(equal) / sum(both_readable),
    }
    for suffix in ("", "_readable"):
        orders = (
            figures[f"accuracy_original_order{suffix}"],
            figures[f"accuracy_swapped_order{suffix}"],
        )
        figures[f"accuracy{suffix}"] = sum(orders) / 2
    return figures


@pytest.mark.skipif(not LLMBAR.is_dir(), reason="../shared/data/llmbar is not here")
@pytest.mark.parametrize("removed", [None, 3])
def test_llmbar_replayed_without_logprobs_gives_both_conventions(run_kedro, removed):
    """GPT-4's recorded verdicts served without token probabilities: LLMBar's published
    figures exactly; with one item's verdict removed (its judge cannot decide), LLMBar's
    all-items figures beside the readable-only ones, and the run still writes its card."""
    items = json.loads((LLMBAR / "dataset.json").read_text("utf-8"))
    winners = gpt4_vanilla_winners()
    if removed is not None:
        winners[removed] = (None, winners[removed][1])
    with FakeLLMServer(responder=RecordedPairwiseJudge(items, winners)) as server:
        params = llmbar_params(server, LLMBAR / "dataset.json", judge_logprobs=False, max_reasks=0)
        run = run_kedro("evaluate", params)
        # A pair with a suspected injection is judged again without its spans, both orders;
        # detection reads each output in the context of its instruction, where none is
        # (the sentiment item's "score of 9 / 10" answers it).
        flagged = sum(
            suspected_injection(i["output_1"], i["input"])
            or suspected_injection(i["output_2"], i["input"])
            for i in items
        )
        assert flagged == 0
        assert server.request_count == 200
    measured = metric_values(run["catalog"].load("eval_metrics"), "fake-model~gold")
    assert measured["unreadable_count"] == (0 if removed is None else 1)
    expected = llmbar_figures([item["label"] for item in items], winners)
    for metric, value in expected.items():
        assert measured[metric] == pytest.approx(value, abs=1e-12), metric
    if removed is None:
        for metric, published in _PUBLISHED_VANILLA.items():
            assert measured[metric] == pytest.approx(published, abs=1e-12), metric
            assert measured[f"{metric}_readable"] == measured[metric]
    else:
        assert measured["accuracy_original_order"] < measured["accuracy_original_order_readable"]
        assert measured["positional_agreement"] == pytest.approx(94 / 100)
        card = run["catalog"].load("eval_judge_card")
        assert "1 of 200 calls" in card
