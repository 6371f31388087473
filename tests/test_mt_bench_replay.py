"""The evaluate pipeline in single_1_10 mode, replaying 330 real GPT-4 MT-Bench judgments.

The fake server answers each judge request with the recorded judgment whose question and
answer texts the request contains (both turns for a second-turn judgment), so our prompts
and FastChat's differ in their wording while the judgments are GPT-4's own. Every parsed
score must equal the one FastChat recorded, and the per-model means its means. What the
judge is shown must be what GPT-4 was shown: each fenced text of every request equals the
text in FastChat's recorded `user_prompt`, character for character (a line that imitates a
reply is quoted "> ", and otherwise as written).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from llm_feedback.replies.fencing import neutralise
from llm_feedback.replies.injection import suspected_injection, without_suspicious_spans
from llm_feedback.replies.normalise import lines_and_breaks
from llm_feedback.testing.server import FakeLLMServer, Reply, RequestContext
from tests.conftest import SHARED_DATA, endpoints_via

MT_BENCH = SHARED_DATA / "mt_bench"
NORMAL = "Meta-Llama-3-8B-Instruct-Normal"
GRIFFIN = "Meta-Llama-3-8B-Instruct-Griffin"

Key = tuple[str, int, int]  # (model, question_id, turn)

# A fenced block of a request: its label and the text shown in it.
BLOCK = re.compile(
    r"<<<(?P<label>[A-Z][A-Z ]*?\d*) BEGIN (?P<nonce>[0-9a-f]+)>>>\n(?P<text>.*?)\n"
    r"<<<(?P=label) END (?P=nonce)>>>",
    re.DOTALL,
)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


class RecordedJudge:
    """A responder that replays the recorded judgment of the conversation in a request.

    A judgment's signature is the texts its request must contain: the turn-1 question and
    answer, plus the turn-2 question and answer for a second-turn judgment; the longest
    signature found wins. Identical requests (replicates of one answer) get the recorded
    judgments of that answer in the order they were made. An answer suspected of injection
    is also judged without its suspicious spans (`evaluation.differential`): that request
    gets the same recorded judgment, and is counted in `variants`, not `served`.
    """

    def __init__(
        self,
        questions: dict[int, list[str]],
        answers: dict[tuple[str, int], list[str]],
        judgments: list[dict[str, Any]],
    ) -> None:
        self.replies: dict[Key, list[str]] = defaultdict(list)
        for row in sorted(judgments, key=lambda row: row["tstamp"]):
            self.replies[(row["model"], row["question_id"], row["turn"])].append(row["judgment"])
        # Candidates are found by their first question, then checked in full.
        self.by_question: dict[str, list[tuple[tuple[str, ...], Key, bool]]] = defaultdict(list)
        for model, question_id, turn in self.replies:
            asked, said = questions[question_id], answers[(model, question_id)]
            said = said[:turn]
            # Read as the pipeline reads them: in the context of the questions asked so far.
            context = "\n".join(asked[:turn])
            shown = [said] + (
                [[without_suspicious_spans(t, context) for t in said]]
                if any(suspected_injection(t, context) for t in said)
                else []
            )
            for variant, texts in enumerate(shown):
                # The prompt shows every text fenced, with reply-like lines quoted "> ".
                signature = tuple(
                    neutralise(text)
                    for text in (asked[0], texts[0]) + ((asked[1], texts[1]) if turn == 2 else ())
                )
                key = (model, question_id, turn)
                self.by_question[signature[0]].append((signature, key, bool(variant)))
        self.served: list[Key] = []
        # What FastChat showed GPT-4, and the fenced texts of each request we served.
        self.user_prompts = {
            (row["model"], row["question_id"], row["turn"]): row["user_prompt"] for row in judgments
        }
        self.shown: dict[Key, list[dict[str, str]]] = defaultdict(list)
        self.variants = 0

    def __call__(self, body: dict[str, Any], ctx: RequestContext) -> str | Reply:
        text = body["messages"][-1]["content"]
        found = [
            (len(signature), sum(map(len, signature)), key, variant)
            for question, candidates in self.by_question.items()
            if question in text
            for signature, key, variant in candidates
            if all(part in text for part in signature)
        ]
        # The most texts matched, then the longest (an answer as written, not a part of it).
        best = max((found_[:2] for found_ in found), default=None)
        matches = {(key, variant) for *size, key, variant in found if tuple(size) == best}
        keys = [key for key, _ in matches]
        if len(keys) != 1:
            return Reply(status=400, error_message=f"no unique recorded judgment: {keys}")
        if next(iter(matches))[1]:
            self.variants += 1
            return self.replies[keys[0]][ctx.key_call_index]
        replies = self.replies[keys[0]]
        if ctx.key_call_index >= len(replies):
            return Reply(status=400, error_message=f"{keys[0]} asked more often than recorded")
        self.served.append(keys[0])
        self.shown[keys[0]].append(
            {block["label"]: block["text"] for block in BLOCK.finditer(text)}
        )
        return replies[ctx.key_call_index]


@pytest.fixture(scope="module")
def mt_bench() -> dict[str, Any]:
    if not (MT_BENCH / "gpt-4_single_judgments.jsonl").is_file():
        pytest.skip(f"shared MT-Bench data not found at {MT_BENCH} (no ../shared/data here)")
    questions = {
        row["question_id"]: row["turns"] for row in _read_jsonl(MT_BENCH / "question.jsonl")
    }
    references = {
        row["question_id"]: row["choices"][0]["turns"]
        for row in _read_jsonl(MT_BENCH / "reference_answer_gpt-4.jsonl")
    }
    answers = {
        (path.stem, row["question_id"]): row["choices"][0]["turns"]
        for path in sorted((MT_BENCH / "model_answer").glob("*.jsonl"))
        for row in _read_jsonl(path)
    }
    judgments = _read_jsonl(MT_BENCH / "gpt-4_single_judgments.jsonl")
    return {
        "questions": questions,
        "references": references,
        "answers": answers,
        "judgments": judgments,
    }


def eval_samples(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per recorded judgment: a turn-1 row, or a turn-2 row carrying turn 1 as
    `prior_*`; an answer judged twice gets two replicates. Math references included."""
    judged_times: dict[Key, int] = defaultdict(int)
    for row in data["judgments"]:
        judged_times[(row["model"], row["question_id"], row["turn"])] += 1
    rows = []
    for (model, question_id, turn), times in sorted(judged_times.items()):
        asked, said = data["questions"][question_id], data["answers"][(model, question_id)]
        reference = data["references"].get(question_id, [None, None])
        sample = {
            "instance_id": str(question_id),
            "model": model,
            "question": asked[turn - 1],
            "response": said[turn - 1],
            "reference": reference[turn - 1],
        }
        if turn == 2:
            sample |= {
                "prior_question": asked[0],
                "prior_response": said[0],
                "prior_reference": reference[0],
            }
        rows += [{**sample, "replicate": replicate} for replicate in range(times)]
    return rows


def shown_texts(data: dict[str, Any], key: Key) -> dict[str, str]:
    """The texts of a judgment by the label of the block that shows each: the question and
    answer (the two turns of each for turn 2), and the references of a math question."""
    model, question_id, turn = key
    asked, said = data["questions"][question_id], data["answers"][(model, question_id)]
    references = data["references"].get(question_id)
    if turn == 1:
        texts = {"QUESTION": asked[0], "ANSWER": said[0]}
        return texts | ({"REFERENCE ANSWER": references[0]} if references else {})
    texts = {"QUESTION 1": asked[0], "ANSWER 1": said[0], "QUESTION 2": asked[1]}
    texts["ANSWER 2"] = said[1]
    if references:
        texts |= {"REFERENCE 1": references[0], "REFERENCE 2": references[1]}
    return texts


def is_written_text(shown: str, written: str) -> bool:
    """Whether `shown` is `written`, each line as written, with the same line breaks, a
    line that imitates a reply quoted "> "."""
    shown_parts, written_parts = lines_and_breaks(shown), lines_and_breaks(written)
    return len(shown_parts) == len(written_parts) and all(
        seen == line or (seen == f"> {line}" == neutralise(line))
        if index % 2 == 0
        else seen == line
        for index, (seen, line) in enumerate(zip(shown_parts, written_parts, strict=True))
    )


def test_replayed_gpt4_judgments_give_the_recorded_scores_and_means(mt_bench, run_kedro, tmp_path):
    samples_path = tmp_path / "mt_bench_samples.jsonl"
    samples_path.write_text(
        "".join(json.dumps(row) + "\n" for row in eval_samples(mt_bench)), encoding="utf-8"
    )
    responder = RecordedJudge(mt_bench["questions"], mt_bench["answers"], mt_bench["judgments"])
    with FakeLLMServer(responder) as server:
        # One call at a time: the replicates of an answer meet their judgments in order.
        params = {
            "endpoints": endpoints_via(server, structured_output=False, max_concurrent=1),
            # No re-asks: the recording holds one judgment per request, so a re-ask of the
            # four `$ERROR$` replies would have nothing to replay (and 330 calls is the point).
            "evaluate": {"mode": "single_1_10", "missing": "exclude", "max_reasks": 0},
            "eval_samples_path": str(samples_path),
        }
        catalog = run_kedro("evaluate", params)["catalog"]
        judgments, metrics = catalog.load("eval_judgments"), catalog.load("eval_metrics")
        # Answers that give ratings because their question asks for them (movie reviews
        # rated 1 to 5 as JSON, an answer's self-critique) are read in the context of the
        # question: none is suspected, none is judged a second time.
        assert responder.variants == int(judgments["suspected_injection"].sum()) == 0
        assert server.request_count == 330 + responder.variants
        assert sorted(responder.served) == sorted(
            (row["model"], row["question_id"], row["turn"]) for row in mt_bench["judgments"]
        )

        # A rerun is answered from the cache: no call, the same judgments.
        rerun = run_kedro("evaluate", params)["catalog"].load("eval_judgments")
        assert server.request_count == 330 + responder.variants
        assert rerun["cached"].all()
        assert rerun["score"].equals(judgments["score"])

    # Every one of the 320 judged conversations is shown as FastChat showed it to GPT-4:
    # each text is in the recorded prompt, and each block of ours shows it as written.
    assert len(responder.shown) == len(responder.user_prompts) == 320
    as_recorded, verbatim = set(), set()
    for key, requests in responder.shown.items():
        texts, recorded = shown_texts(mt_bench, key), responder.user_prompts[key]
        assert all(f"\n{text}\n" in recorded for text in texts.values())
        if all(
            blocks.keys() == texts.keys()
            and all(is_written_text(blocks[label], text) for label, text in texts.items())
            for blocks in requests
        ):
            as_recorded.add(key)
        if all(blocks == texts for blocks in requests):
            verbatim.add(key)
    assert as_recorded == set(responder.shown)
    # Byte for byte wherever no line had to be quoted.
    quoting = {
        key
        for key in responder.shown
        if any(neutralise(text) != text for text in shown_texts(mt_bench, key).values())
    }
    assert verbatim == set(responder.shown) - quoting

    recorded: dict[Key, list[float | None]] = defaultdict(list)
    for row in sorted(mt_bench["judgments"], key=lambda row: row["tstamp"]):
        score = None if row["score"] == -1 else float(row["score"])
        recorded[(row["model"], row["question_id"], row["turn"])].append(score)
    assert len(judgments) == 330
    mismatches = []
    for row in judgments.itertuples():
        expected = recorded[(row.model, int(row.instance_id), row.turn)][row.replicate]
        parsed = None if row.score != row.score else row.score  # NaN: no rating
        if parsed != expected:
            mismatches.append((row.model, row.instance_id, row.turn, row.replicate, parsed))
    assert mismatches == []

    # The four `$ERROR$` replies (failed GPT-4 calls) are failures, not ratings.
    failed = judgments[~judgments["success"]]
    assert len(failed) == 4
    assert set(failed["raw_reply"]) == {"$ERROR$"}
    assert set(failed["parse_status"]) == {"no_match"}

    means = metrics[(metrics["metric"] == "mean") & metrics["criterion"].isna()]
    means = means.set_index("model")
    assert round(means.at[NORMAL, "value"], 3) == 7.843
    assert round(means.at[GRIFFIN, "value"], 3) == 2.700
    assert (means.at[NORMAL, "n"], means.at[NORMAL, "n_missing"]) == (170, 4)
    assert (means.at[GRIFFIN, "n"], means.at[GRIFFIN, "n_missing"]) == (160, 0)

    # Each mean with its 95% interval, clustered by question (both turns and every
    # replicate of a question resampled together), and Normal's difference to Griffin
    # (the baseline: first by name) over the 80 shared questions, paired by question.
    for model in (NORMAL, GRIFFIN):
        low, estimate, high = means.loc[model, ["ci_low", "value", "ci_high"]]
        assert low < estimate < high and high - low < 1.5
        assert means.at[model, "ci_method"] == "poisson-bootstrap-1000-cluster"
    assert means.at[NORMAL, "ci_low"] > means.at[GRIFFIN, "ci_high"]
    difference = metrics[
        (metrics["metric"] == f"mean_difference_vs_{GRIFFIN}")
        & metrics["category"].isna()
        & metrics["criterion"].isna()
    ]
    assert list(difference["model"]) == [NORMAL]
    row = difference.iloc[0]
    assert row["n"] == 80
    assert 4.5 < row["value"] < 5.7  # per-question means: close to 7.843 - 2.700
    assert 0 < row["ci_low"] < row["value"] < row["ci_high"]
    assert row["ci_method"] == "poisson-bootstrap-1000-cluster-paired"

    # Math questions were judged against GPT-4's reference answers, second turns in
    # the context of the first.
    math_turn_2 = judgments[(judgments["instance_id"] == "101") & (judgments["turn"] == 2)]
    prompt = math_turn_2["prompt"].iloc[0]
    assert neutralise(mt_bench["references"][101][1]) in prompt
    assert neutralise(mt_bench["questions"][101][0]) in prompt
