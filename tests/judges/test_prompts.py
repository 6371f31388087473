"""Prompt builders: rendered content, judge sampling defaults, custom template checks."""

import os
import re

import pytest

from llm_feedback import judges as prompts
from llm_feedback.backends.contract import ChatRequest
from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.replies.fencing import fenced_block
from llm_feedback.templates import load_template, render, template_names


def _user(request: ChatRequest) -> str:
    return request.messages[-1]["content"]


def _nonce(text: str) -> str:
    """The code on the marker lines of a rendered prompt."""
    match = re.search(r"<<<[A-Z][A-Z ]*?\d* BEGIN ([0-9a-f]{12})>>>", text)
    assert match is not None, text
    return match[1]


def test_binary_request_shows_all_inputs_and_asks_for_the_chosen_format() -> None:
    request = prompts.build_binary_request("Capital of Peru?", "Lima", "It is Lima.")
    assert isinstance(request, ChatRequest)
    assert [message["role"] for message in request.messages] == ["system", "user"]
    assert request.temperature == 0.0
    assert request.json_schema is None
    text = _user(request)
    for shown in ("Capital of Peru?", "Lima", "It is Lima."):
        assert shown in text
    assert "1 if the candidate answer is correct, 0" in text
    assert "yes if the candidate" in _user(
        prompts.build_binary_request("q", "r", "p", output_format="yes/no")
    )


def test_binary_rejects_an_unknown_output_format() -> None:
    with pytest.raises(ConfigError, match="output_format"):
        prompts.build_binary_request("q", "r", "p", output_format="true/false")


def test_sampling_overrides_and_no_system_message() -> None:
    request = prompts.build_score_0_5_request("q", "r", "p", system=None, max_tokens=64, seed=3)
    assert [message["role"] for message in request.messages] == ["user"]
    assert (request.max_tokens, request.seed, request.temperature) == (64, 3, 0.0)


def test_reference_grading_asks_for_the_four_fields() -> None:
    text = _user(prompts.build_reference_grading_request("q", "r", "p"))
    for field in ("extracted_final_answer:", "reasoning:", "correct:", "confidence:"):
        assert f"\n{field}" in text


def test_score_0_5_describes_the_whole_scale() -> None:
    text = _user(prompts.build_score_0_5_request("q", "r", "p"))
    assert all(f"\n{level} - " in text for level in range(6))
    assert "Rating: N" in text


def test_single_rating_with_and_without_reference() -> None:
    plain = _user(prompts.build_single_rating_request("Why is the sky blue?", "Rayleigh."))
    assert "[[6]]" in plain and "Reference" not in plain
    graded = _user(
        prompts.build_single_rating_request("2+2?", "5", reference="4", structured=False)
    )
    nonce = _nonce(graded)
    reference = fenced_block("REFERENCE ANSWER", "4", nonce)
    assert f"[Reference answer - start]\n{reference}\n[Reference answer - end]" in graded
    assert f"[Assistant's reply - start]\n{fenced_block('ANSWER', '5', nonce)}\n" in graded


def test_multi_turn_rating_grades_the_second_turn() -> None:
    request = prompts.build_multi_turn_rating_request(
        ["First question", "Second question"],
        ["First answer", "Second answer"],
        references=["Ref one", "Ref two"],
    )
    text = _user(request)
    assert text.index("First answer") < text.index("Second question") < text.index("Second answer")
    assert "second user message" in text and "Ref two" in text
    with pytest.raises(InputError, match="two turns"):
        prompts.build_multi_turn_rating_request(["only one"], ["a", "b"])


def test_rubric_lists_criteria_and_structured_mode_sets_a_schema() -> None:
    criteria = {"clarity": "Is it easy to follow?", "accuracy": "Are the facts right?"}
    request = prompts.build_rubric_request(
        "q",
        "resp",
        criteria,
        score_range=(0, 3),
        context="Background {not a field}",
        structured=True,
    )
    text = _user(request)
    assert "- clarity: Is it easy to follow?" in text
    assert "Background {not a field}" in text  # values are never parsed as templates
    assert "from 0 (worst) to 3 (best)" in text
    scores = request.json_schema["properties"]["scores"]
    assert scores["required"] == ["clarity", "accuracy"]
    assert scores["properties"]["accuracy"] == {"type": "integer", "minimum": 0, "maximum": 3}
    assert prompts.build_rubric_request("q", "r", criteria).json_schema is None


@pytest.mark.parametrize("criteria", [{}, {"": "empty name"}, ["clarity"]])
def test_rubric_rejects_bad_criteria(criteria: object) -> None:
    with pytest.raises(ConfigError, match="criteri"):
        prompts.build_rubric_request("q", "r", criteria)  # type: ignore[arg-type]


def test_pairwise_outputs_and_swapped_orders() -> None:
    both = _user(prompts.build_pairwise_request("q", "first", "second", score_range=(0, 5)))
    assert "Score A: <whole number from 0 to 5>" in both and "[[C]] for a tie" in both
    verdict_only = _user(prompts.build_pairwise_request("q", "x", "y", output="verdict"))
    assert "Score A" not in verdict_only and "[[B]]" in verdict_only
    forward, backward = prompts.build_pairwise_requests_both_orders("q", "first", "second")
    assert _user(forward).index("first") < _user(forward).index("second")
    assert _user(backward).index("second") < _user(backward).index("first")
    structured = prompts.build_pairwise_request("q", "x", "y", structured=True, output="scores")
    assert set(structured.json_schema["properties"]) == {"score_a", "score_b", "explanation"}
    with pytest.raises(ConfigError, match="score_range"):
        prompts.build_pairwise_request("q", "x", "y", score_range=(5, 1))
    with pytest.raises(ConfigError, match="output"):
        prompts.build_pairwise_request("q", "x", "y", output="ranking")


def test_custom_prompt_is_rendered_with_synonyms() -> None:
    template = "Q: {question}\nGold: {answer}\nModel: {prediction}\nSay 1 or 0. {{literal}}"
    request = prompts.build_binary_request("q?", "gold", "pred", custom_prompt=template)
    text = _user(request)
    nonce = _nonce(text)
    # Values are shown fenced, like in the built-in templates; {answer} is the gold answer.
    assert text == (
        f"Q: {fenced_block('QUESTION', 'q?', nonce)}\n"
        f"Gold: {fenced_block('REFERENCE ANSWER', 'gold', nonce)}\n"
        f"Model: {fenced_block('CANDIDATE ANSWER', 'pred', nonce)}\n"
        "Say 1 or 0. {literal}"
    )
    pairwise = prompts.build_pairwise_request(
        "q",
        "one",
        "two",
        context="ctx",
        custom_prompt="{question} {context} | {response1} vs {response2} ({low}-{high})",
    )
    text = _user(pairwise)
    nonce = _nonce(text)
    assert text == (
        f"{fenced_block('QUESTION', 'q', nonce)} {fenced_block('CONTEXT', 'ctx', nonce)} | "
        f"{fenced_block('RESPONSE A', 'one', nonce)} vs {fenced_block('RESPONSE B', 'two', nonce)}"
        " (1-10)"
    )


def test_custom_prompt_may_explain_the_marker_lines() -> None:
    template = "{fencing_notice}\n\n{question}\n{reference}\n{prediction}"
    text = _user(prompts.build_score_0_5_request("q", "r", "p", custom_prompt=template))
    notice = render("fencing_notice", nonce=_nonce(text), task="evaluate")
    assert text.startswith(f"{notice}\n\n<<<QUESTION BEGIN ")


@pytest.mark.parametrize(
    "build",
    [
        lambda: prompts.build_binary_request("q", "r", "p"),
        lambda: prompts.build_reference_grading_request("q", "r", "p", structured=True),
        lambda: prompts.build_score_0_5_request("q", "r", "p"),
        lambda: prompts.build_single_rating_request("q", "a", reference="r"),
        lambda: prompts.build_multi_turn_rating_request(["q1", "q2"], ["a1", "a2"]),
        lambda: prompts.build_rubric_request("q", "r", {"c": "d"}, context="c"),
        lambda: prompts.build_pairwise_request("q", "a", "b", output="verdict"),
    ],
)
def test_built_in_prompts_explain_the_marker_lines_before_the_first_block(build) -> None:
    text = _user(build())
    nonce = _nonce(text)
    notice = render("fencing_notice", nonce=nonce, task="evaluate")
    assert text.count(notice) == 1
    assert text.index(notice) < text.index(f" BEGIN {nonce}>>>")
    # Every field filled in, every doubled brace of the template undone.
    assert re.search(r"\{[a-z_0-9]*\}|\{\{|\}\}", text) is None, text


def test_templates_load_from_the_package() -> None:
    names = template_names()
    for kind in (
        "binary",
        "reference_grading",
        "score_0_5",
        "single_1_10",
        "single_1_10_reference",
        "multi_turn",
        "multi_turn_reference",
        "rubric",
        "pairwise",
        "aspect",
        "critique",
        "rescore",
        "fencing_notice",
    ):
        assert kind in names
        assert load_template(kind) and load_template(kind) is load_template(kind)  # cached
    assert prompts.JUDGE_SYSTEM_PROMPT == load_template("system_judge")
    assert load_template("pairwise", "reply_verdict").startswith("Explain your comparison")
    with pytest.raises(LookupError, match="no part"):
        load_template("binary", "reply_true_false")
    with pytest.raises(LookupError):
        load_template("../pyproject")


@pytest.mark.parametrize(
    ("template", "field"),
    [
        ("{question} {reference} {prediction} {colour}", "{colour}"),  # unknown
        ("{question} {prediction}", "{reference}"),  # missing, synonym named too
        ("{reference} {prediction}", "{question}"),
        ("{question} {reference} {prediction} {}", "{}"),  # positional
        ("{question} {reference} {prediction.upper}", "{prediction.upper}"),
    ],
)
def test_custom_prompt_errors_name_the_field(template: str, field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        prompts.build_score_0_5_request("q", "r", "p", custom_prompt=template)
    assert field in str(raised.value)


def test_custom_prompt_must_use_every_supplied_input() -> None:
    with pytest.raises(ConfigError, match=r"\{context\}"):
        prompts.build_pairwise_request(
            "q", "a", "b", context="given", custom_prompt="{question} {response1} {response2}"
        )
    with pytest.raises(ConfigError, match=r"unknown field \{reference\}"):
        prompts.build_single_rating_request(
            "q", "a", custom_prompt="{question} {answer} {reference}"
        )
    with pytest.raises(ConfigError, match=r"\{criteria\}"):
        prompts.build_rubric_request("q", "r", {"c": "d"}, custom_prompt="{question} {response}")


def test_malformed_template_and_non_text_input() -> None:
    with pytest.raises(ConfigError, match="not a valid"):
        prompts.build_binary_request("q", "r", "p", custom_prompt="{question")
    with pytest.raises(InputError, match="prediction"):
        prompts.build_binary_request("q", "r", float("nan"))  # type: ignore[arg-type]


def test_structured_requests_carry_schemas_their_parsers_read() -> None:
    from llm_feedback.judges import parse_binary, parse_rating, parse_reference_grading

    binary = prompts.build_binary_request("q", "r", "p", output_format="yes/no", structured=True)
    assert binary.json_schema["properties"]["correct"]["enum"] == ["yes", "no"]
    assert parse_binary('{"correct": "yes"}', "yes/no").value == 1
    rating = prompts.build_single_rating_request("q", "a", structured=True)
    assert list(rating.json_schema["properties"]) == ["rating", "explanation"]
    assert parse_rating('{"rating": 7, "explanation": "good"}', 1, 10).value == 7
    grading = prompts.build_reference_grading_request("q", "r", "p", structured=True)
    assert set(grading.json_schema["required"]) == {
        "extracted_final_answer",
        "reasoning",
        "correct",
        "confidence",
    }
    assert "JSON object with these four keys" in _user(grading)
    assert parse_reference_grading('{"correct": "yes", "confidence": 70}').status == "partial"


SHARED_PREFIX_BUILDERS = {
    "binary": lambda q: prompts.build_binary_request(q, "Lima", "It is Lima."),
    "reference_grading": lambda q: prompts.build_reference_grading_request(q, "Lima", "Lima."),
    "score_0_5": lambda q: prompts.build_score_0_5_request(q, "Lima", "It is Lima."),
    "single_1_10": lambda q: prompts.build_single_rating_request(q, "Lima."),
    "single_1_10_reference": lambda q: prompts.build_single_rating_request(
        q, "Lima.", reference="Lima"
    ),
    "multi_turn": lambda q: prompts.build_multi_turn_rating_request([q, "Why?"], ["A.", "B."]),
    "rubric": lambda q: prompts.build_rubric_request(q, "Lima.", {"accuracy": "Is it right?"}),
    "pairwise": lambda q: prompts.build_pairwise_request(q, "Lima.", "Quito."),
}


@pytest.mark.parametrize("kind", SHARED_PREFIX_BUILDERS)
def test_judge_calls_share_everything_up_to_the_material(kind: str) -> None:
    """A server's prompt cache serves the shared prefix: the task, the scale and the answer
    format come before the question and the answers, which vary from call to call."""
    build = SHARED_PREFIX_BUILDERS[kind]
    first, second = _user(build("Capital of Peru?")), _user(build("Largest ocean?"))
    shared = os.path.commonprefix([first, second])
    assert shared.endswith("opens and closes with a marker line containing the code ")
    reminder = "Now give your judgement in the format given above."
    assert first.rstrip().endswith(reminder) and second.rstrip().endswith(reminder)
