"""Judge kinds: the registry, a kind of one's own run through `kedro run --pipelines
evaluate`, and the architecture table's claim that a kind is one module plus its template."""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from llm_feedback.core.errors import ConfigError
from llm_feedback.judges import (
    Asking,
    Judge,
    JudgeItem,
    JudgeKind,
    Judgment,
    KindOptions,
    get_kind,
    kind_names,
    load_kind,
    reference_scale_kind,
    register_kind,
)
from llm_feedback.judges.kinds import binary as binary_kind
from llm_feedback.params import parse_evaluate
from llm_feedback.testing.server import FakeLLMServer, RequestContext
from tests.conftest import PROJECT_ROOT, kedro_cli, run_kedro_cli
from tests.fixtures import likert_1_7, yes_no_confidence

ENDPOINTS = {"local": {"backend": "openai", "model": "judge", "base_url": "http://127.0.0.1:9/v1"}}

TOY = "tests.fixtures.yes_no_confidence:KIND"
TOY_MODULE = Path(yes_no_confidence.__file__)
ASKED = (KindOptions((1, 7)), Asking())
KINDS_DIR = PROJECT_ROOT / "src" / "llm_feedback" / "judges" / "kinds"
TEMPLATES_DIR = PROJECT_ROOT / "src" / "llm_feedback" / "templates"


def test_the_built_in_kinds_are_registered_under_the_names_yaml_uses():
    assert set(kind_names()) >= {"binary", "score_0_5", "single_1_10", "rubric", "pairwise"}
    assert get_kind("binary").needs_reference and get_kind("binary").categorical
    assert get_kind("pairwise").value_column == "outcome"
    assert get_kind("score_0_5").default_scale == (0, 5) and get_kind("score_0_5").fixed_scale
    assert not get_kind("rubric").fixed_scale and get_kind("rubric").uses_criteria


def test_names_outside_the_one_vocabulary_are_refused_with_the_known_ones():
    for old_name in ("comparative", "with_rubric", "single"):
        with pytest.raises(ConfigError, match=r"evaluate\.mode must be one of .*binary"):
            parse_evaluate({"mode": old_name}, ENDPOINTS)


def test_a_second_kind_under_a_taken_name_is_refused():
    impostor = JudgeKind(
        name="binary", ask=binary_kind.ask, template="binary", default_scale=(0, 1)
    )
    with pytest.raises(ConfigError, match="'binary' is registered already"):
        register_kind(impostor)
    assert register_kind(binary_kind.KIND) is binary_kind.KIND  # the same kind again: no-op


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("no_such_package.kinds:KIND", "cannot import module 'no_such_package.kinds'"),
        ("tests.fixtures.yes_no_confidence:TEMPLATE", "is not a JudgeKind"),
        ("tests.fixtures.yes_no_confidence:MISSING", "is not a JudgeKind"),
    ],
)
def test_an_external_kind_that_cannot_be_loaded_names_the_setting(spec, problem):
    with pytest.raises(ConfigError, match=re.escape("evaluate.mode: ") + ".*" + re.escape(problem)):
        parse_evaluate({"mode": spec}, ENDPOINTS)


def test_the_mode_of_an_external_kind_is_its_name_once_loaded():
    params = parse_evaluate({"mode": TOY}, ENDPOINTS)
    assert params.mode == "yes_no_confidence" and params.kind is load_kind(TOY)
    assert params.passing_score == 1.0 and params.scale == (0, 1)


def test_a_task_of_any_kind_comes_back_as_a_typed_judgment():
    kind = load_kind(TOY)
    server_endpoint = {"backend": "openai", "model": "judge-x", "structured_output": False}
    with (
        FakeLLMServer(lambda body, ctx: "Verdict: yes\nConfidence: 70") as server,
        Judge({**server_endpoint, "base_url": server.base_url}) as judge,
    ):
        (judgment,) = judge.run([judge.task(kind, JudgeItem("Capital of France?", "Paris"))])
    assert isinstance(judgment, Judgment)
    assert judgment.value == 1 and judgment.success and judgment.status == "ok"
    assert judgment.details == {"stated_confidence": 70.0} and judgment.model == "judge-x"
    assert "Capital of France?" in judgment.prompt
    assert (
        judgment.call_columns()["raw_reply"] == judgment.raw_reply == "Verdict: yes\nConfidence: 70"
    )
    assert judgment.as_dict()["raw_response"] == judgment.raw_reply  # the seed's key


def judge_with_confidence(body: dict[str, Any], ctx: RequestContext) -> str:
    """Right answers say "Paris"; the judge is surer of its yeses."""
    text = body["messages"][-1]["content"]
    answer = text.split("Answer:", 1)[1]
    return "Verdict: yes\nConfidence: 90" if "Paris" in answer else "Verdict: no\nConfidence: 60"


def test_a_kind_of_ones_own_runs_through_kedro_run_evaluate(tmp_path):
    samples = tmp_path / "samples.jsonl"
    rows = [
        {
            "instance_id": f"i{n}",
            "question": "Capital of France?",
            "response": answer,
            "model": model,
            "replicate": replicate,
        }
        for n, (model, answer) in enumerate(
            [("m1", "Paris"), ("m2", "Lyon"), ("m2", "It is Paris.")]
        )
        for replicate in (0, 1)
    ]
    samples.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    data_root = tmp_path / "data"
    with FakeLLMServer(judge_with_confidence) as server:
        command = kedro_cli(
            data_root,
            server.base_url,
            f"eval_samples_path={samples}",
            f"evaluate.mode={TOY}",
            "evaluate.judge.endpoint=local",
        )
        run_kedro_cli(command, "evaluate")
        assert server.request_count == 6
    judgments = latest(data_root, "eval_judgments")
    metrics = latest(data_root, "eval_metrics")
    assert set(judgments["mode"]) == {"yes_no_confidence"}
    assert judgments.sort_values(["instance_id", "replicate"])["score"].tolist() == [
        1,
        1,
        0,
        0,
        1,
        1,
    ]
    assert set(judgments["stated_confidence"]) == {90.0, 60.0}  # the kind's own column
    assert judgments["raw_reply"].str.startswith("Verdict:").all()
    overall = metrics[metrics["category"].isna() & metrics["level"].isna()]
    by_metric = overall.set_index(["model", "metric", overall["k"].fillna(0)])["value"]
    assert by_metric[("m1", "mean", 0)] == 1.0 and by_metric[("m2", "mean", 0)] == 0.5
    assert by_metric[("m2", "pass_at_k", 1)] == pytest.approx(0.5)  # the kind's passing score
    assert by_metric[("m1", "mean_stated_confidence", 0)] == 90.0  # the kind's own metric
    assert by_metric[("m2", "mean_stated_confidence", 0)] == 75.0


def latest(data_root: Path, name: str) -> pd.DataFrame:
    (path,) = data_root.glob(f"*/{name}.parquet/*/{name}.parquet")
    return pd.read_parquet(path)


# --- the architecture table's "judge kind" row, checked against the code ------------------


def judge_kind_row() -> str:
    table = (PROJECT_ROOT / "docs" / "architecture.md").read_text().split("## Where to add", 1)[1]
    (row,) = [line for line in table.splitlines() if line.startswith("| a judge kind |")]
    return row


def test_the_toy_kind_touches_only_its_own_module():
    """One module, importing public names of `llm_feedback.judges` only; no file of the
    project names it, so registering it needed no change anywhere else."""
    tree = ast.parse(TOY_MODULE.read_text(encoding="utf-8"))
    project_imports = [
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("llm_feedback")
    ]
    assert project_imports == ["llm_feedback.judges"]
    assert not any(
        isinstance(node, ast.Import) and "llm_feedback" in ast.dump(node) for node in ast.walk(tree)
    )
    named_in = [
        path
        for folder in ("src", "conf")
        for path in (PROJECT_ROOT / folder).rglob("*")
        if path.is_file()
        and path.suffix in {".py", ".yml", ".txt"}
        and "yes_no_confidence" in path.read_text(encoding="utf-8", errors="ignore")
    ]
    assert named_in == []


def built_in_kinds() -> dict[str, JudgeKind]:
    """Each module of judges/kinds/ that defines a `KIND`, by module name: derived from the
    package, never a list written down."""
    found = {}
    for info in pkgutil.iter_modules([str(KINDS_DIR)]):
        kind = getattr(
            importlib.import_module(f"llm_feedback.judges.kinds.{info.name}"), "KIND", None
        )
        if isinstance(kind, JudgeKind):
            found[info.name] = kind
    return found


def test_the_where_to_add_row_for_a_judge_kind_is_what_the_built_in_kinds_are():
    """The row names two files, the kind's module and its template; each built-in kind is
    exactly that: one module of judges/kinds/ defining its KIND, registered under the
    module's name, and its template."""
    row = judge_kind_row()
    files = re.findall(r"`((?:judges|templates)/[^`]*<kind>[^`]*)`", row)
    assert files == ["judges/kinds/<kind>.py", "templates/<kind>.txt"], row
    assert "evaluate.mode: package.module:KIND" in row
    built_in = built_in_kinds()
    assert built_in, "no module of judges/kinds/ defines a KIND"
    for module, kind in built_in.items():
        assert kind.name == module and get_kind(module) is kind, module
        assert (TEMPLATES_DIR / f"{kind.template}.txt").is_file(), module
    assert set(built_in) <= set(kind_names())


def test_score_0_5_is_a_reference_scale_kind_of_one_line():
    """The factory builds `score_0_5` from its name, scale and template."""
    source = (KINDS_DIR / "score_0_5.py").read_text(encoding="utf-8")
    assert 'ReferenceScale("score_0_5", SCALE, "score_0_5")' in source
    kind = get_kind("score_0_5")
    assert (kind.default_scale, kind.needs_reference, kind.recorded_scores) == ((0, 5), True, True)
    assert kind.logprob_labels(KindOptions(kind.default_scale)) == tuple("012345")


def test_a_reference_scale_kind_reads_its_scale_and_may_report_on_0_100():
    likert = likert_1_7.KIND
    request, read = likert.ask(JudgeItem("Q?", "It is Lima.", reference="Lima"), *ASKED)
    prompt = request.messages[-1]["content"]
    assert "whole number from 1 to 7" in prompt and "Lima" in prompt
    assert read("Fine.\nRating: 6").value == 6 and read("Rating: 9").value is None
    assert likert.default_scale == (1, 7) and likert.fixed_scale
    assert likert.logprob_labels(KindOptions((1, 7))) == tuple("1234567")

    percent = reference_scale_kind("likert_pct", (1, 7), likert_1_7.TEMPLATE, to_0_100=True)
    _, read_percent = percent.ask(JudgeItem("Q?", "A.", reference="A."), *ASKED)
    assert read_percent("Rating: 7").value == 100.0 and read_percent("Rating: 4").value == 50.0
    assert read_percent("Rating: 1").value == 0.0 and read_percent("no rating").value is None
    assert percent.default_scale == (0, 100) and percent.logprob_labels is None
    structured, _ = percent.ask(
        JudgeItem("Q?", "A.", reference="A."), KindOptions((0, 100)), Asking(True)
    )
    rating = structured.json_schema["properties"]["rating"]
    assert (rating["minimum"], rating["maximum"]) == (1, 7)  # asked on its own scale

    with pytest.raises(ConfigError, match="score_range needs low < high"):
        reference_scale_kind("backwards", (7, 1), likert_1_7.TEMPLATE)
    with pytest.raises(LookupError, match="no prompt template 'likert'"):
        reference_scale_kind("likert", (1, 7), "likert")
