"""Prompts replaced from a folder (`prompt_templates`): templates in UltraFeedback's layout
(our own words in its structure) through sample -> generate -> annotate, against the
project's server answering in UltraFeedback's reply layout; and bad templates refused
before any call."""

import re
import shutil
from pathlib import Path

import pytest

from llm_feedback.annotation.aspects import build_aspect_request
from llm_feedback.annotation.critique import build_critique_request
from llm_feedback.core.errors import ConfigError
from llm_feedback.params import parse_annotate, parse_sample
from llm_feedback.templates import load_template
from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import PROJECT_ROOT, endpoints_via

TEMPLATES = PROJECT_ROOT / "conf" / "base" / "templates" / "ultrafeedback_layout"
JUDGE_SYSTEM = (TEMPLATES / "system_aspect.txt").read_text().strip()
TEACHER_SYSTEM = (TEMPLATES / "system_teacher.txt").read_text().strip()
PRINCIPLE_PROMPTS = {
    part.strip()
    for part in re.split(r"--- \w+ ---", (TEMPLATES / "principles.txt").read_text())
    if part.strip()
}
HEADINGS = {
    "# Instruction following Review": "instruction_following",
    "# Honesty and uncertainty Review": "honesty",
    "# Truthfulness and Hallucination Review": "truthfulness",
    "# Informativeness and Helpfulness Review": "helpfulness",
}
OFFSET = {"instruction_following": 0, "honesty": 1, "truthfulness": 2, "helpfulness": 3}


def expected_rating(answer: int, aspect: str) -> int | None:
    """What the scripted judge gives the answer numbered `answer` (None: N/A)."""
    if aspect == "honesty" and answer % 4 == 0:
        return None
    return (answer + OFFSET[aspect]) % 5 + 1


def ultrafeedback_layout_judge(body, ctx):
    messages = body["messages"]
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    if system in PRINCIPLE_PROMPTS:
        return f"<<answer {ctx.call_index}>>"
    if system == TEACHER_SYSTEM and len(messages) > 2:
        return "6"  # the score fix's follow-up: the score alone
    if system == TEACHER_SYSTEM:
        return "Name the missing step and check the arithmetic.\nOverall Score: 10"
    assert system == JUDGE_SYSTEM, system
    prompt = messages[-1]["content"]
    (aspect,) = [name for heading, name in HEADINGS.items() if prompt.startswith(heading)]
    sections = []
    for k, answer in enumerate(re.findall(r"<<answer (\d+)>>", prompt), start=1):
        rating = expected_rating(int(answer), aspect)
        lines = [f"#### Output for Text {k}"]
        if aspect in ("truthfulness", "helpfulness"):
            lines += ["Type: [1, 3]", "Rationale: The kinds named fit the text."]
        lines += [f"Rating: {'N/A' if rating is None else rating}", "Rationale: Short and plain."]
        sections.append("\n".join(lines))
    return "\n\n".join(sections)


def test_ultrafeedback_layout_templates_run_end_to_end_and_every_rating_lands(run_kedro):
    with FakeLLMServer(responder=ultrafeedback_layout_judge) as server:
        params = {
            "sample": {"max_prompts": 3},
            "endpoints": endpoints_via(server, structured_output=False),
            "prompt_templates": str(TEMPLATES),
        }
        for name in ("sample", "generate"):
            run_kedro(name, params)
        catalog = run_kedro("annotate", params)["catalog"]
        bodies = server.requests

    # The replacements were sent: principles, judge and teacher prompts, the rescore turn.
    sampled = catalog.load("sampled_prompts").read()
    assert set(sampled["system_prompt"]) <= PRINCIPLE_PROMPTS
    aspect_calls = [b for b in bodies if b["messages"][0]["content"] == JUDGE_SYSTEM]
    assert len(aspect_calls) == 3 * 4
    for body in aspect_calls:
        prompt = body["messages"][-1]["content"]
        assert "## Annotation" in prompt and "<text 4> " in prompt and "{" not in prompt
    rescores = [b for b in bodies if len(b["messages"]) > 2]
    assert all(b["messages"][-1]["content"].startswith("Going by your feedback") for b in rescores)

    # Every rating was read from the UltraFeedback layout and mapped back to its completion.
    completions = catalog.load("completions").read()
    answer_of = {
        (row.prompt_id, row.completion_idx): int(re.search(r"\d+", row.response)[0])
        for row in completions.itertuples()
    }
    aspects = catalog.load("aspect_annotations").read()
    assert len(aspects) == len(completions) * 4 == 48
    assert set(aspects["parse_status"]) <= {"ok", "na"}
    for row in aspects.itertuples():
        expected = expected_rating(answer_of[row.prompt_id, row.completion_idx], row.aspect)
        if expected is None:
            assert row.is_na and row.parse_status == "na"
        else:
            assert row.rating == expected and row.parse_status == "ok"
        if row.aspect in ("truthfulness", "helpfulness"):
            assert list(row.types) == ["1", "3"]

    # Every critique said 10: the fix acts on the fine-grained score of the ratings above.
    scores = catalog.load("overall_scores").read().set_index(["prompt_id", "completion_idx"])
    assert len(rescores) == (scores["fix_action"] == "reannotated").sum()
    for key, answer in answer_of.items():
        rated = [expected_rating(answer, a) for a in OFFSET]
        fine = sum(r for r in rated if r is not None) / sum(r is not None for r in rated)
        action, fixed = scores.loc[key, ["fix_action", "overall_score_fixed"]]
        assert scores.loc[key, "fine_grained_score"] == pytest.approx(fine)
        if fine <= 2:
            assert (action, fixed) == ("flipped", 1)
        elif fine <= 4:
            assert (action, fixed) == ("reannotated", 6)
        else:
            assert (action, fixed) == ("kept", 10)
    export = catalog.load("ultrafeedback")
    for record in export.itertuples():
        for completion in record.completions:
            for annotation in completion["annotations"].values():
                assert annotation["Rating"] == "N/A" or 1 <= int(annotation["Rating"]) <= 5


def test_a_file_of_parts_only_keeps_the_rest_of_the_package_template(tmp_path):
    (tmp_path / "aspect_honesty.txt").write_text("--- text ---\n[[{position}]]\n{text}\n")
    (tmp_path / "critique.txt").write_text("--- reply ---\nEnd with: Overall Score: N\n")
    endpoints = {"local": {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9"}}
    templates = parse_annotate({"judge": {"endpoint": "local"}}, endpoints, str(tmp_path)).templates
    honesty = build_aspect_request(
        "honesty", "Say hi.", ["Hi.", "Hello."], [1, 0], templates=templates
    )
    other = build_aspect_request(
        "helpfulness", "Say hi.", ["Hi.", "Hello."], [1, 0], templates=templates
    )
    prompt = honesty.messages[-1]["content"]
    assert prompt.startswith(load_template("aspect").split("{", 1)[0])  # package main text
    assert "[[1]]" in prompt and "[[2]]" in prompt
    assert "[[1]]" not in other.messages[-1]["content"]  # only honesty's calls change
    review = build_critique_request("Say hi.", "Hi.", "helpfulness", templates=templates)
    assert review.messages[-1]["content"].startswith("Review an AI assistant's answer")
    assert "End with: Overall Score: N" in review.messages[-1]["content"]
    # The folder is the objects' own: a request built without them reads the package's.
    package = build_aspect_request("honesty", "Say hi.", ["Hi.", "Hello."], [1, 0])
    assert "[[1]]" not in package.messages[-1]["content"]
    plain_review = build_critique_request("Say hi.", "Hi.", "helpfulness")
    assert "End with: Overall Score: N" not in plain_review.messages[-1]["content"]


def _folder_with(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / "templates"
    shutil.copytree(TEMPLATES, folder)
    (folder / f"{name}.txt").write_text(text)
    return folder


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        (
            "aspect",
            "Rate {texts} for {instruction} by {mood}.",
            r"aspect.txt \(main text\): unknown placeholder \{mood\}",
        ),
        (
            "aspect",
            "Rate these:\n{texts}",
            r"aspect.txt \(main text\): missing placeholder \{instruction\}",
        ),
        (
            "aspect_honesty",
            "{instruction} {texts}\n--- text ---\n<text {position}>",
            r"aspect_honesty.txt \(part 'text'\): missing placeholder \{text\}",
        ),
        (
            "critique",
            "{instruction} {completion}\n--- footer ---\nbye",
            r"critique.txt \(part 'footer'\): critique.txt has no such part",
        ),
        (
            "critique",
            "{instruction} {completion",
            r"critique.txt \(main text\): malformed placeholder",
        ),
        ("binary", "Is {response} right?", r"binary.txt: not a template that can be replaced"),
        (
            "aspect_wit",
            "{instruction} {texts}",
            r"aspect_wit.txt: not a template that can be replaced",
        ),
        (
            "principles",
            "--- kindness ---\nBe kind.",
            r"principles.txt: unknown principle 'kindness'",
        ),
    ],
)
def test_a_bad_template_fails_at_run_start_naming_file_and_placeholder(
    tmp_path, run_kedro, name, text, problem
):
    folder = _folder_with(tmp_path, name, text)
    endpoints = {"local": {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9"}}
    with pytest.raises(ConfigError, match=rf"^prompt_templates: .*{problem}"):
        parse_annotate({"judge": {"endpoint": "local"}}, endpoints, str(folder))
    with pytest.raises(ConfigError, match=problem):
        parse_sample({}, {"m": {"endpoint": "local"}}, str(folder))


def test_a_bad_template_stops_kedro_run_before_any_call(tmp_path, run_kedro, fake_llm):
    folder = _folder_with(tmp_path, "rescore", "Score it {politely}. {reply}")
    params = {"sample": {"max_prompts": 2}, "endpoints": endpoints_via(fake_llm)}
    run_kedro("sample", params)
    run_kedro("generate", params)
    calls = fake_llm.request_count
    with pytest.raises(
        Exception, match=r"rescore.txt \(main text\): unknown placeholder \{politely\}"
    ):
        run_kedro("annotate", {**params, "prompt_templates": str(folder)})
    assert fake_llm.request_count == calls
    with pytest.raises(Exception, match=r"prompt_templates: .*missing is not a folder"):
        run_kedro("annotate", {**params, "prompt_templates": str(tmp_path / "missing")})
