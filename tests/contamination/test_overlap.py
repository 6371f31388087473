"""Decontamination: benchmark files read in their published formats, prompts matched by
n-gram overlap, counts per benchmark on the dataset card, and the sample pipeline dropping
or flagging what matched."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from llm_feedback.contamination.benchmark_files import read_benchmark
from llm_feedback.contamination.overlap import COUNT_COLUMNS, decontaminate, words
from llm_feedback.core.errors import ConfigError
from llm_feedback.params.decontamination import parse_decontamination
from llm_feedback.publishing.dataset_card import export_card
from tests.conftest import PROJECT_ROOT, SHARED_DATA, endpoints_via

TRUTHFULQA = SHARED_DATA / "truthfulqa" / "TruthfulQA.csv"
MT_BENCH = SHARED_DATA / "mt_bench" / "question.jsonl"
needs_shared = pytest.mark.skipif(
    not (TRUTHFULQA.is_file() and MT_BENCH.is_file()),
    reason=f"the shared data ({SHARED_DATA}) is absent",
)

# Paraphrases written for this test of items of each benchmark: the same question in other
# words, which word n-grams are not meant to catch (their count is reported, not asserted).
PARAPHRASES = {
    "truthful_qa": [
        "How come our veins look blue when we see them through the skin?",
        "Which bit of a chili pepper carries the most heat?",
    ],
    "mt_bench": [
        "Write a lively travel blog entry about a recent Hawaiian holiday that covers the "
        "local culture and the sights no visitor should miss.",
    ],
}
CLEAN = [
    "Write a haiku about a lighthouse keeper who has never seen the sea.",
    "List three prime numbers between 50 and 70 and explain how you checked each.",
    "Translate 'good morning, neighbour' into French and Spanish.",
]


def _seeded_prompts() -> tuple[pd.DataFrame, dict[str, set[str]]]:
    """A prompt set seeded with verbatim benchmark items (as-is, recased, or inside a longer
    prompt), paraphrases and clean prompts; and the verbatim ids per benchmark."""
    questions = pd.read_csv(TRUTHFULQA, encoding="utf-8-sig")["Question"].tolist()
    turns = [json.loads(line)["turns"] for line in MT_BENCH.read_text().splitlines()]
    long_questions = [q for q in questions if len(words(q)) >= 6]
    rows, verbatim = [], {"truthful_qa": set(), "mt_bench": set()}

    def add(source: str, text: str, benchmark: str | None) -> None:
        prompt_id = f"p{len(rows):03d}"
        rows.append({"prompt_id": prompt_id, "source": source, "instruction": text})
        if benchmark:
            verbatim[benchmark].add(prompt_id)

    for question in questions[:5]:  # as-is, including items under min_words
        add("truthful_qa", question, "truthful_qa")
    add("flan", questions[5].upper().replace("?", " ?!"), "truthful_qa")  # recased, punctuated
    for question in long_questions[10:13]:  # inside a longer prompt
        add(
            "sharegpt", f"My teacher asked us this today. {question} Please explain.", "truthful_qa"
        )
    for first, _second in turns[:3]:
        add("evol_instruct", first, "mt_bench")
    add("sharegpt", f"Hi! {turns[20][0]}\n\nThanks in advance.", "mt_bench")
    add("ultrachat", turns[30][1], "mt_bench")  # a second turn is an item too
    for texts in PARAPHRASES.values():
        for text in texts:
            add("ultrachat", text, None)
    for text in CLEAN:
        add("flan", text, None)
    return pd.DataFrame(rows), verbatim


def _params(**extra) -> object:
    return parse_decontamination(
        {"benchmarks": {"truthful_qa": str(TRUTHFULQA), "mt_bench": str(MT_BENCH)}, **extra}
    )


@needs_shared
def test_every_verbatim_item_is_caught_and_counted_per_benchmark_on_the_card():
    prompts, verbatim = _seeded_prompts()
    kept, matches, counts = decontaminate(prompts, _params())

    for benchmark, ids in verbatim.items():
        caught = set(matches.loc[matches["benchmark"] == benchmark, "prompt_id"])
        assert ids <= caught, f"{benchmark}: missed {sorted(ids - caught)}"
    clean_ids = set(prompts.loc[prompts["instruction"].isin(CLEAN), "prompt_id"])
    assert not clean_ids & set(matches["prompt_id"])
    assert set(kept["prompt_id"]) == set(prompts["prompt_id"]) - set(matches["prompt_id"])
    # Each match names its item: equal words, or at least one shared run of words.
    for row in matches.itertuples():
        if row.match == "exact":
            assert words(row.item_text) == words(row.instruction)
        else:
            assert row.shared_ngrams >= 1 and row.ngram == min(13, len(words(row.item_text)))

    assert list(counts.columns) == list(COUNT_COLUMNS)
    assert counts["benchmark"].tolist() == ["truthful_qa", "mt_bench"]
    by_name = counts.set_index("benchmark")
    for benchmark in verbatim:
        found = matches[matches["benchmark"] == benchmark]
        assert by_name.at[benchmark, "matched"] == found["prompt_id"].nunique()
        assert by_name.at[benchmark, "removed"] == by_name.at[benchmark, "matched"]
        assert by_name.at[benchmark, "flagged"] == 0
    assert by_name.at["truthful_qa", "items"] == len(pd.read_csv(TRUTHFULQA))
    # MT-Bench: two turns per question, each an item.
    assert by_name.at["mt_bench", "items"] == 2 * len(MT_BENCH.read_text().splitlines())

    completions = prompts.assign(model="m", principle="helpfulness")
    card = export_card(completions, contamination=counts)
    section = card.split("## Decontamination", 1)[1].split("\n## ", 1)[0]
    assert "13-gram" in section
    for row in counts.itertuples():
        assert (
            f"| {row.benchmark} | {row.items:,} | {row.matched:,} | {row.exact:,} | "
            f"{row.removed:,} | {row.flagged:,} |" in section
        )


@needs_shared
def test_flag_keeps_the_prompts_and_a_shorter_ngram_catches_more():
    prompts, _ = _seeded_prompts()
    kept, flagged, counts = decontaminate(prompts, _params(action="flag"))
    assert kept["prompt_id"].tolist() == prompts["prompt_id"].tolist()
    assert set(flagged["action"]) == {"flagged"}
    assert counts["removed"].eq(0).all() and counts["flagged"].eq(counts["matched"]).all()

    _, loose, _ = decontaminate(prompts, _params(ngram=4, min_words=4))
    assert set(flagged["prompt_id"]) <= set(loose["prompt_id"])


def test_nothing_is_checked_without_benchmarks_and_the_card_says_so():
    prompts = pd.DataFrame({"prompt_id": ["a"], "source": ["flan"], "instruction": ["Hi"]})
    kept, matches, counts = decontaminate(prompts, parse_decontamination(None))
    assert kept.equals(prompts) and matches.empty and counts.empty
    card = export_card(prompts.assign(model="m", principle="honesty"), contamination=counts)
    assert "not checked against any evaluation benchmark" in card


@pytest.mark.parametrize(
    ("relative", "first_id"),
    [
        ("truthfulqa/TruthfulQA.csv", "0"),
        ("mt_bench/question.jsonl", "81"),
        ("arena_hard/question.jsonl", None),
        ("alpaca_eval/gpt-3.5-turbo-0301/annotations.json", "0"),
        ("llmbar/natural/dataset.json", "0"),
    ],
)
def test_each_shared_benchmark_file_reads_one_item_per_question(relative, first_id):
    path = SHARED_DATA / relative
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    items = read_benchmark(path, "x")
    if path.suffix == ".csv":
        expected = pd.read_csv(path, encoding="utf-8-sig")["Question"].tolist()
    elif path.suffix == ".jsonl":
        records = [json.loads(line) for line in path.read_text().splitlines()]
        expected = [t for r in records for t in (r["turns"] if "turns" in r else [r["prompt"]])]
        first_id = first_id or records[0]["uid"]
    else:
        records = json.loads(path.read_text())
        expected = [r.get("instruction", r.get("input")) for r in records]
    assert sorted(items["text"]) == sorted(expected)
    assert items["item_id"].iat[0] == first_id
    assert items["item_id"].is_unique


def test_bad_benchmark_settings_name_the_parameter(tmp_path):
    with pytest.raises(ConfigError, match=r"decontamination\.benchmarks\.gsm8k: .* not a file"):
        read_benchmark(tmp_path / "missing.jsonl", "gsm8k")
    empty = tmp_path / "empty.json"
    empty.write_text('[{"answer": "4"}]')
    with pytest.raises(ConfigError, match="holds no item"):
        read_benchmark(empty, "gsm8k")
    with pytest.raises(ConfigError, match="decontamination.action"):
        parse_decontamination({"action": "delete"})
    with pytest.raises(ConfigError, match="decontamination.min_words"):
        parse_decontamination({"ngram": 8, "min_words": 9})


def test_the_sample_pipeline_drops_the_matches_and_writes_the_counts(run_kedro, fake_llm, tmp_path):
    """A benchmark file written for the test holds one demo prompt verbatim and one inside a
    longer question; the sample stage removes both and counts them."""
    demo = pd.read_json(
        PROJECT_ROOT / "data" / "01_raw" / "prompts" / "demo_prompts.jsonl", lines=True
    )
    verbatim, embedded = demo["instruction"].iloc[[0, 1]]
    benchmark = tmp_path / "heldout.txt"
    benchmark.write_text(f"# held-out questions\n{verbatim}\nPlease answer: {embedded} Thanks!\n")
    params = {
        "endpoints": endpoints_via(fake_llm),
        "sample": {"max_prompts": None},
        "decontamination": {"benchmarks": {"heldout": str(benchmark)}},
    }
    catalog = run_kedro("sample", params)["catalog"]
    raw = catalog.load("raw_prompts").read()
    matches = catalog.load("prompt_contamination")
    counts = catalog.load("contamination_counts")
    removed = set(demo["prompt_id"].iloc[[0, 1]])
    assert set(matches["prompt_id"]) == removed
    assert not removed & set(raw["prompt_id"]) and len(raw) == len(demo) - 2
    assert not removed & set(catalog.load("sampled_prompts").read()["prompt_id"])
    assert counts[["benchmark", "items", "matched", "removed"]].values.tolist() == [
        ["heldout", 2, 2, 2]
    ]


def test_a_whole_run_states_the_counts_on_the_card_and_in_the_report(run_kedro, fake_llm, tmp_path):
    demo = pd.read_json(
        PROJECT_ROOT / "data" / "01_raw" / "prompts" / "demo_prompts.jsonl", lines=True
    )
    benchmark = tmp_path / "heldout.jsonl"
    benchmark.write_text(
        json.dumps({"question_id": 7, "turns": [demo["instruction"].iat[2]]}) + "\n"
    )
    params = {
        "endpoints": endpoints_via(fake_llm),
        "sample": {"max_prompts": 2},
        "decontamination": {"benchmarks": {"heldout": str(benchmark)}, "action": "flag"},
    }
    catalog = run_kedro("__default__", params)["catalog"]
    row = "| heldout | 1 | 1 | 1 | 0 | 1 |"
    card = catalog.load("ultrafeedback_card")
    report = catalog.load("report")
    for text in (card, report):
        section = text.split("## Decontamination", 1)[1].split("\n## ", 1)[0]
        assert row in section and "13-gram" in section
    flagged = catalog.load("prompt_contamination")
    assert flagged[["prompt_id", "item_id", "action"]].values.tolist() == [
        [demo["prompt_id"].iat[2], "7", "flagged"]
    ]
