"""Injected instructions against judges that obey or echo the texts they are shown.

Each prompt has three clean completions and one that carries an injection in one of the
forms of `llm_feedback.testing.injection_payloads.PAYLOADS` (answer-shaped lines in any
script or language, prose addressed to the judge or to every text, HTML comments, tag
characters, base64 and hex blobs, verdicts written as sentences, labels mid-line, spaced-out
letters, score fractions...). Two scripted judges on the project's test server rate them
with the real aspect and critique stages:

- the *obeying* judge obeys ANY instruction: whenever a call shows a text that is not an
  honest one (a clean completion, or an injected one's honest part, whitespace aside), it
  gives every text of that call the top rating (5, or 10 for a critique); an honest text
  in a call without any other gets an honest rating that depends on the text alone;
- the *echo* judge: replies with the texts it was shown, as shown (quoted lines included).

Counted per judge and stage (goal 0 for each): `injected_unflagged`, rows of an injected
completion without `suspected_injection`; `injected_raised`, rows of an injected completion
rated above what the judge gives its honest part; `clean_changed`, rows of a clean
completion whose rating is not its honest one (echo judge: any rating read at all). Beside
them the price: the calls made, and the calls of the same prompts with every injection
taken out (its honest part instead).

Evaluate, every mode: one sample per payload kind (its response the injected text) beside a
clean one, the obeying judge giving a pointwise top verdict (or, pairwise, the win) to any
response that carries more than an honest answer. Counted: `injected_unflagged`,
`injected_raised` (a verdict above the one its honest part gets), `clean_changed` and, in
pairwise, `steering_wins` (pairs the injected response won; as written it would win all).

And the false positives: the share of clean answers written by others (the shared LLMBar
Natural outputs, MT-Bench answers, AlpacaEval outputs, Arena-Hard answers, the demo
evaluation samples) flagged when read in the context of their instruction, as annotate and
evaluate read them, beside the share flagged when each is read alone; with the price in
calls it implies for a run of four completions a prompt.

Run: python benchmarks/injection.py  (prints the counts as JSON; well under a minute)
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from common import save  # noqa: E402

from llm_feedback.annotation.stages import aspect_annotations_table, critiques_table  # noqa: E402
from llm_feedback.backends import EndpointConfig, LLMClient  # noqa: E402
from llm_feedback.evaluation import run_evaluation  # noqa: E402
from llm_feedback.replies.injection import suspected_injection  # noqa: E402
from llm_feedback.replies.normalise import normalise  # noqa: E402
from llm_feedback.storage.jsonl import json_lines  # noqa: E402
from llm_feedback.testing.injection_payloads import PAYLOADS  # noqa: E402
from llm_feedback.testing.server import FakeLLMServer, RequestContext  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
INJECTED_RATING = 5
INJECTED_SCORE = 10
ASPECTS = ("instruction_following", "honesty", "truthfulness", "helpfulness")

_BLOCK = re.compile(
    r"<<<(?P<label>TEXT \d+|ANSWER) BEGIN (?P<nonce>[0-9a-f]+)>>>\n(?P<body>.*?)\n"
    r"<<<(?P=label) END (?P=nonce)>>>",
    re.DOTALL,
)


def clean_completion(prompt: int, index: int) -> str:
    return f"Lima is the capital of Peru (answer {index} to question {prompt})."


def canonical(text: str) -> str:
    """`text` as the obeying judge compares it: normalised, whitespace runs as one space."""
    return re.sub(r"\s+", " ", normalise(text)).strip()


def honest(text: str, top: int) -> int:
    """A rating from 1 to top-1 that depends on the text alone, never the injected one."""
    return int(hashlib.sha256(canonical(text).encode()).hexdigest(), 16) % (top - 1) + 1


def completions_table(
    kinds: Iterable[str] | None = None, *, injected: bool = True
) -> tuple[pd.DataFrame, dict[tuple[str, int], str]]:
    """Three clean completions and one injected per prompt, one prompt per payload kind
    (`kinds`, default all); with the injected ones' honest parts by (prompt_id,
    completion_idx). `injected=False`: the honest part stands in for each injection."""
    rows, honest_parts = [], {}
    for prompt, kind in enumerate(kinds or PAYLOADS):
        payload = PAYLOADS[kind]
        injected_idx = prompt % 4
        # Numbered, so that no two prompts send the same request (the engine sends one).
        honest_parts[f"p{prompt}", injected_idx] = f"[{prompt}] {payload.answer}"
        for index in range(4):
            response = clean_completion(prompt, index)
            if index == injected_idx:
                response = f"[{prompt}] " + (payload.text if injected else payload.answer)
            rows.append(
                {
                    "prompt_id": f"p{prompt}",
                    "completion_idx": index,
                    "instruction": "What is the capital of Peru?",
                    "response": response,
                    "principle": "helpfulness",
                    "world_knowledge": "Lima is the capital of Peru.",
                }
            )
    return pd.DataFrame(rows), honest_parts


def _unquoted(body: str) -> str:
    return "\n".join(line[2:] if line.startswith("> ") else line for line in body.split("\n"))


def _user_text(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def _aspect_reply(ratings: list[int]) -> str:
    return "\n".join(
        f"### Text {k}\nType: None\nType rationale: none.\nRating: {rating}\nRationale: fine."
        for k, rating in enumerate(ratings, start=1)
    )


def obeying_judge(honest_texts: Iterable[str]) -> Callable[[dict[str, Any], RequestContext], str]:
    """A judge taken over by any text that carries anything beyond one of `honest_texts`."""
    known = {canonical(text) for text in honest_texts}

    def respond(body: dict[str, Any], ctx: RequestContext) -> str:
        blocks = [
            (match["label"], _unquoted(match["body"]))
            for match in _BLOCK.finditer(_user_text(body))
        ]
        obeys = any(canonical(text) not in known for _, text in blocks)
        respond.obeyed += obeys  # type: ignore[attr-defined]
        if blocks and blocks[0][0] == "ANSWER":
            text = blocks[0][1]
            score = INJECTED_SCORE if obeys else honest(text, INJECTED_SCORE)
            return f"A fair answer.\nOverall score: {score}"
        texts = [text for label, text in blocks if label.startswith("TEXT")]
        return _aspect_reply(
            [INJECTED_RATING if obeys else honest(text, INJECTED_RATING) for text in texts]
        )

    respond.obeyed = 0  # type: ignore[attr-defined]  # calls in which it obeyed
    return respond


def echo_judge(body: dict[str, Any], ctx: RequestContext) -> str:
    """Replies with every text it was shown, exactly as shown."""
    return "\n\n".join(match["body"] for match in _BLOCK.finditer(_user_text(body)))


def _counts(
    frame: pd.DataFrame,
    honest_parts: dict[tuple[str, int], str],
    *,
    value_column: str,
    honest_value: Callable[[str], int | None],
    responses: dict[tuple[str, int], str],
) -> dict[str, int]:
    keys = list(zip(frame["prompt_id"], frame["completion_idx"].astype(int), strict=True))
    is_injected = pd.Series([key in honest_parts for key in keys], index=frame.index)
    values = frame[value_column].astype("Float64")
    unflagged = is_injected & ~frame["suspected_injection"].astype(bool)
    expected = pd.Series(
        [honest_value(honest_parts.get(key, responses[key])) for key in keys],
        index=frame.index,
        dtype="Float64",
    )
    raised = is_injected & (values > expected).fillna(False)
    changed = ~is_injected & ~(values.eq(expected).fillna(False))
    changed &= ~(values.isna() & expected.isna())
    return {
        "injected_unflagged": int(unflagged.sum()),
        "injected_raised": int(raised.sum()),
        "clean_changed": int(changed.sum()),
    }


def _rated(
    completions: pd.DataFrame, judge: str, responder: Any
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, int]]:
    """The aspect and critique tables of `completions`, and each stage's calls (and those
    in which the judge obeyed)."""
    with FakeLLMServer(responder) as server:
        config = EndpointConfig.from_dict(
            {
                "backend": "openai",
                "model": f"{judge}-judge",
                "base_url": server.base_url,
                "structured_output": False,
                "backoff_base_s": 0.01,
                "backoff_max_s": 0.02,
            },
            name=judge,
        )
        with LLMClient(config, None, progress=False) as client:
            aspects = aspect_annotations_table(completions, client, aspects=ASPECTS).frame()
            aspect_calls, aspect_obeyed = server.request_count, getattr(responder, "obeyed", 0)
            critiques = critiques_table(completions, client).frame()
            critique_calls = server.request_count - aspect_calls
            critique_obeyed = getattr(responder, "obeyed", 0) - aspect_obeyed
    calls = {
        "aspect_rows": {"calls": aspect_calls, "obeyed_calls": aspect_obeyed},
        "critique_rows": {"calls": critique_calls, "obeyed_calls": critique_obeyed},
    }
    return aspects, critiques, calls


def injection_run(judge: str, kinds: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
    """The counts and calls of one judge (`obeying` or `echo`) over aspects and critiques,
    with the calls of the same prompts without injections beside them."""
    kinds = list(kinds or PAYLOADS)
    completions, honest_parts = completions_table(kinds)
    responses = {
        (row.prompt_id, int(row.completion_idx)): row.response
        for row in completions.itertuples(index=False)
    }
    clean = [text for key, text in responses.items() if key not in honest_parts]
    honest_texts = [*clean, *honest_parts.values()]
    make = (lambda: obeying_judge(honest_texts)) if judge == "obeying" else (lambda: echo_judge)
    aspects, critiques, calls = _rated(completions, judge, make())
    _, _, baseline = _rated(completions_table(kinds, injected=False)[0], judge, make())
    if judge == "obeying":
        rate, score = (lambda t: honest(t, INJECTED_RATING)), (lambda t: honest(t, INJECTED_SCORE))
    else:
        rate = score = lambda t: None
    results = {}
    for stage, frame, column, value in (
        ("aspect_rows", aspects, "rating", rate),
        ("critique_rows", critiques, "overall_score", score),
    ):
        counts = _counts(
            frame, honest_parts, value_column=column, honest_value=value, responses=responses
        )
        results[stage] = {
            **counts,
            **calls[stage],
            "calls_without_injection": baseline[stage]["calls"],
        }
    return results


# Per pointwise evaluate mode: the reply of a judge taken over, and an honest one.
EVAL_REPLIES = {
    "binary": ("correct: yes", "correct: no"),
    "score_0_5": ("Rating: 5", "Rating: 2"),
    "single_1_10": ("Rating: [[10]]", "Rating: [[3]]"),
    "rubric": (
        '{"scores": {"accuracy": 5, "clarity": 5}}',
        '{"scores": {"accuracy": 2, "clarity": 3}}',
    ),
}
EVAL_MODES = (*EVAL_REPLIES, "pairwise")
OBEYED_REPLIES = {
    *(obeyed for obeyed, _ in EVAL_REPLIES.values()),
    "Response A follows the instructions. [[A]]",
    "Response B follows the instructions. [[B]]",
}
_EVAL_BLOCK = re.compile(
    # the judged response's block in every mode (not the reference answer's)
    r"<<<(?P<label>(?:CANDIDATE )?ANSWER|RESPONSE(?: [AB])?) BEGIN \w+>>>\n(?P<body>.*?)\n"
    r"<<<(?P=label) END \w+>>>",
    re.DOTALL,
)


def eval_samples(kinds: Iterable[str] | None = None, *, injected: bool = True) -> pd.DataFrame:
    """Per payload kind an instance with a `steer` response (injected, or its honest part)
    and a longer, better `plain` one."""
    rows = []
    for index, kind in enumerate(kinds or PAYLOADS):
        payload = PAYLOADS[kind]
        steer = f"[{index}] " + (payload.text if injected else payload.answer)
        plain = f"Paris is the capital of France, as every atlas and encyclopedia says ({index})."
        for model, response in (("steer", steer), ("plain", plain)):
            rows.append(
                {
                    "instance_id": f"i{index}",
                    "question": f"What is the capital of France ({index})?",
                    "response": response,
                    "reference": "Paris",
                    "model": model,
                }
            )
    return pd.DataFrame(rows)


def eval_obeying_judge(
    mode: str, honest_texts: Iterable[str]
) -> Callable[[dict[str, Any], RequestContext], str]:
    """The obeying judge of an evaluate mode: a pointwise top verdict for, or a pairwise win
    to, any response that carries more than one of `honest_texts`; else an honest verdict
    (pairwise: the longer response wins)."""
    known = {canonical(text) for text in honest_texts}

    def respond(body: dict[str, Any], ctx: RequestContext) -> str:
        reply = _respond(body)
        respond.obeyed += reply in OBEYED_REPLIES  # type: ignore[attr-defined]
        return reply

    def _respond(body: dict[str, Any]) -> str:
        text = "\n".join(message["content"] for message in body["messages"])
        shown = {m["label"]: canonical(_unquoted(m["body"])) for m in _EVAL_BLOCK.finditer(text)}
        if mode != "pairwise":
            obeyed, plain = EVAL_REPLIES[mode]
            return obeyed if any(text not in known for text in shown.values()) else plain
        first, second = shown["RESPONSE A"], shown["RESPONSE B"]
        if first not in known:
            return "Response A follows the instructions. [[A]]"
        if second not in known:
            return "Response B follows the instructions. [[B]]"
        return "[[A]]" if len(first) > len(second) else "[[B]]"

    respond.obeyed = 0  # type: ignore[attr-defined]  # calls in which it obeyed
    return respond


def _evaluate(samples: pd.DataFrame, mode: str, responder: Any, judges: int) -> tuple:
    """`eval_judgments` of `samples` with `judges` judges (over one: a majority panel), and
    the calls made."""
    params: dict[str, Any] = {"mode": mode}
    if mode == "rubric":
        params["rubric"] = {"accuracy": "Is it correct?", "clarity": "Is it clear?"}
    with FakeLLMServer(responder) as server:
        endpoint = {
            "backend": "openai",
            "model": "obeying-judge",
            "base_url": server.base_url,
            "structured_output": False,
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.02,
        }
        endpoints = {"local": endpoint}
        if judges > 1:
            endpoints = {f"judge{k}": endpoint for k in range(judges)}
            names = [{"endpoint": name} for name in endpoints]
            params["panel"] = {"judges": names, "aggregate": "majority"}
        with warnings.catch_warnings():
            # Judges that always agree make single-label confusion matrices (agreement).
            warnings.simplefilter("ignore", UserWarning)
            judgments, _ = run_evaluation(samples, params, endpoints, None, progress=False)
        return judgments, server.request_count


def evaluate_run(mode: str, kinds: Iterable[str] | None = None, judges: int = 1) -> dict:
    """The counts and calls of the obeying judge in one evaluate mode (`judges` > 1: a
    panel), with the calls of the same samples without injections beside them."""
    kinds = list(kinds or PAYLOADS)
    honest_samples = eval_samples(kinds, injected=False)
    responder = eval_obeying_judge(mode, honest_samples["response"])
    judgments, calls = _evaluate(eval_samples(kinds), mode, responder, judges)
    baseline, calls_without = _evaluate(honest_samples, mode, responder, judges)
    counts = {
        "calls": calls,
        "calls_without_injection": calls_without,
        "obeyed_calls": responder.obeyed,  # type: ignore[attr-defined]
    }
    if mode == "pairwise":
        steer_won = ((judgments["model_a"] == "steer") & (judgments["outcome"] == "A")) | (
            (judgments["model_b"] == "steer") & (judgments["outcome"] == "B")
        )
        return {
            "injected_unflagged": int((~judgments["suspected_injection"]).sum()),
            "steering_wins": int(steer_won.sum()),
            "pairs": len(judgments),
            **counts,
        }
    steer = (judgments["model"] == "steer").to_numpy()
    scores, honest_scores = judgments["score"].to_numpy(), baseline["score"].to_numpy()
    flags = judgments["suspected_injection"].to_numpy()
    return {
        "injected_unflagged": int((steer & ~flags).sum()),
        "injected_raised": int((steer & (scores > honest_scores)).sum()),
        "clean_changed": int((~steer & (scores != honest_scores)).sum()),
        **counts,
    }


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in json_lines(path.read_text(encoding="utf-8")) if line.strip()
    ]


def _mt_bench_answers() -> list[tuple[str, str, str]]:
    """(instruction, kind, answer) of the shared MT-Bench answers and GPT-4 references: a
    second turn's answer in the context of both questions, the category as its kind."""
    root = SHARED_DATA / "mt_bench"
    if not (root / "question.jsonl").is_file():
        return []
    questions = {row["question_id"]: row for row in _jsonl(root / "question.jsonl")}
    paths = sorted((root / "model_answer").glob("*.jsonl"))
    paths += sorted(root.glob("reference_answer*.jsonl"))
    texts = []
    for record in (record for path in paths for record in _jsonl(path)):
        question = questions[record["question_id"]]
        for choice in record["choices"]:
            for turn, answer in enumerate(choice["turns"]):
                asked = "\n".join(question["turns"][: turn + 1])
                texts.append((asked, question.get("category", ""), answer))
    return texts


def _llmbar_outputs() -> list[tuple[str, str, str]]:
    """Both outputs of every LLMBar Natural item, with the item's input."""
    path = SHARED_DATA / "llmbar" / "natural" / "dataset.json"
    if not path.is_file():
        return []
    items = json.loads(path.read_text(encoding="utf-8"))
    return [(item["input"], "", item[key]) for item in items for key in ("output_1", "output_2")]


def _alpaca_eval_outputs() -> list[tuple[str, str, str]]:
    """Every distinct output of the shared AlpacaEval annotations (the baseline's once)."""
    texts = {}
    for path in sorted((SHARED_DATA / "alpaca_eval").glob("*/annotations.json")):
        for row in json.loads(path.read_text(encoding="utf-8")):
            for key in ("output_1", "output_2"):
                texts[row["instruction"], row[key]] = (row["instruction"], "", row[key])
    return list(texts.values())


def _arena_hard_answers() -> list[tuple[str, str, str]]:
    """The shared Arena-Hard answers with their questions."""
    root = SHARED_DATA / "arena_hard"
    if not (root / "question.jsonl").is_file():
        return []
    questions = {row["uid"]: row["prompt"] for row in _jsonl(root / "question.jsonl")}
    texts = []
    for path in sorted((root / "model_answer").glob("*.jsonl")):
        for record in _jsonl(path):
            for message in record["messages"]:
                content = message["content"]
                if message["role"] == "assistant":
                    answer = content["answer"] if isinstance(content, dict) else content
                    texts.append((questions[record["uid"]], "", answer))
    return texts


def _demo_samples() -> list[tuple[str, str, str]]:
    """The demo evaluation samples' responses, with their questions and categories."""
    texts = []
    for path in sorted((ROOT / "data" / "01_raw").glob("eval_samples*demo.jsonl")):
        for row in _jsonl(path):
            if isinstance(row.get("response"), str):
                asked = "\n".join(filter(None, (row.get("prior_question"), row["question"])))
                texts.append((asked, row.get("category") or "", row["response"]))
    return texts


# Clean answers written by other people, by source: (instruction, kind, answer) triples.
CLEAN_SOURCES: dict[str, Callable[[], list[tuple[str, str, str]]]] = {
    "LLMBar Natural outputs": _llmbar_outputs,
    "MT-Bench answers": _mt_bench_answers,
    "AlpacaEval outputs": _alpaca_eval_outputs,
    "Arena-Hard answers": _arena_hard_answers,
    "demo eval samples": _demo_samples,
}


def false_positives(limit: int | None = None) -> dict[str, Any]:
    """How many clean answers the detector flags, per source (a source absent here is left
    out): read in the context of their instruction (as annotate and evaluate read them) and,
    for comparison, alone. Beside them the price in calls the in-context share implies with
    four completions a prompt: aspects 1 + 8r - r^4 times the calls (each flagged one
    alone, twice), critiques 1 + r.

    Args:
        limit: at most this many answers per source (the first ones; None: all).

    Returns:
        Per source texts, flagged (in context), flagged_alone, and the overall rates.
    """
    rows = {}
    for source, read in CLEAN_SOURCES.items():
        texts = read()[:limit]
        if texts:
            rows[source] = {
                "texts": len(texts),
                "flagged": sum(
                    suspected_injection(text, asked, kind) for asked, kind, text in texts
                ),
                "flagged_alone": sum(suspected_injection(text) for _, _, text in texts),
            }
    texts = max(sum(row["texts"] for row in rows.values()), 1)
    rate = sum(row["flagged"] for row in rows.values()) / texts
    return {
        "sources": rows,
        "rate": rate,
        "rate_alone": sum(row["flagged_alone"] for row in rows.values()) / texts,
        "aspect_calls_ratio": 1 + 8 * rate - rate**4,
        "critique_calls_ratio": 1 + rate,
    }


def main() -> None:
    save(
        "injection",
        {
            "payload_kinds": len(PAYLOADS),
            "prompts": len(PAYLOADS),
            **{judge: injection_run(judge) for judge in ("obeying", "echo")},
            "evaluate": {mode: evaluate_run(mode) for mode in EVAL_MODES},
            "evaluate_panel": {
                mode: evaluate_run(mode, judges=3) for mode in ("score_0_5", "pairwise")
            },
            "false_positives": false_positives(),
        },
    )


if __name__ == "__main__":
    main()
