"""Every command in the documentation (README.md and docs/*.md) is exercised: the `kedro`
commands no other test runs are run here as written (plus only the data root and the test
server's endpoint), the others are mapped to the test or the `.ci/run` line that runs them,
and a few that cannot run here are listed with the reason. A new documented command that
nothing covers fails this test. The README stays a front page (under 200 lines), and every
relative link of the documentation leads to a file and heading that exist."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd

from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import (
    DOCUMENTATION,
    KEDRO_CLI_ENV,
    PROJECT_ROOT,
    documentation_text,
    markdown_headings,
)

README = PROJECT_ROOT / "README.md"
CI_SCRIPT = PROJECT_ROOT / ".ci" / "run"
COMMAND_WORDS = ("kedro", "make", "python", "pip", "jupyter", ".")
RUN_HERE = "tests/test_readme.py::test_the_readme_kedro_commands_run_as_written"

# The documentation's `kedro` commands, in the order this module runs them (the first one writes
# the data the others read).
KEDRO_COMMANDS = (
    "kedro run --params sample.max_prompts=null",
    "kedro run",
    "kedro run --pipelines annotate",
    "kedro run --pipelines report --load-versions overall_scores:2026-11-30T10.15.03.123Z",
    "kedro run --pipelines evaluate",
    "kedro run --pipelines evaluate --params evaluate.mode=single_1_10",
    "kedro run --pipelines evaluate --params evaluate.mode=score_0_5,evaluate.missing=exclude",
    "kedro run --params plan_only=true",
    "kedro run --params max_cost_usd=5",
    "kedro run --params annotate.judge.endpoint=openai",
    "kedro push-to-hub --dataset preference_pairs --repo-id you/my-feedback --dry-run",
)
COVERED_BY = {
    **dict.fromkeys(KEDRO_COMMANDS, RUN_HERE),
    "make run": ".ci/run",
    "make test": ".ci/run",
    "make lint": ".ci/run",
    "make format": ".ci/run",
    "make viz-build": ".ci/run",
    'pip install -e ".[hub]"': ".ci/run",
    ". .venv/bin/activate": ".ci/run",
    "kedro viz build --include-previews": (
        "tests/test_kedro_viz.py::test_viz_build_previews_tables_and_figures_of_a_report_run"
    ),
    # The built site served over HTTP (in process, by the same http.server handler).
    "python -m http.server -d build": (
        "tests/test_kedro_viz.py::test_viz_build_after_a_real_run_renders_in_a_browser"
    ),
    'kedro run --pipelines sample --params "sample.principle_weights.mt_bench.truthfulness=1"': (
        "tests/pipelines/test_ultrafeedback_parity.py::"
        "test_a_prompt_file_of_a_new_source_gets_its_weights_or_helpfulness"
    ),
    (
        'kedro run --pipelines evaluate --params "eval_samples_path=path/to/vision_samples.jsonl,'
        "evaluate.mode=single_1_10,evaluate.generate_with=vision,evaluate.judge.endpoint=vision"
        '"'
    ): "tests/test_multimodal_evaluation.py::test_the_readme_command_runs",
    (
        "kedro run --pipelines evaluate --params "
        "eval_samples_path=data/01_raw/eval_samples_levels_demo.jsonl,"
        "evaluate.evaluator=llm_feedback.evaluation.evaluators:NumericMatch"
    ): (
        "tests/pipelines/test_evaluate_metrics_pipeline.py::"
        "test_the_readme_categories_and_levels_command"
    ),
    (
        "kedro run --pipelines evaluate --params "
        "eval_samples_path=data/01_raw/eval_samples_code_demo.jsonl,"
        "evaluate.evaluator=llm_feedback.evaluation.evaluators:CodeTest,"
        "evaluate.evaluator_options.timeout_s=5"
    ): (
        "tests/pipelines/test_evaluate_metrics_pipeline.py::"
        "test_the_readme_custom_evaluators_command"
    ),
    (
        'kedro run --pipelines evaluate --params "evaluate.mode=single_1_10,'
        "evaluate.panel.judges.cold.endpoint=local,evaluate.panel.judges.warm.endpoint=local,"
        'evaluate.panel.judges.warm.temperature=0.7,evaluate.panel.aggregate=mean"'
    ): "tests/pipelines/test_judge_panels.py::test_the_readme_panel_command_runs",
    (
        "kedro run --pipelines sample,generate --params endpoints.local.backend=openai,"
        "endpoints.local.base_url=http://localhost:8000/v1,"
        "endpoints.local.model=Qwen/Qwen2.5-7B-Instruct,endpoints.local.workers=2"
    ): "tests/backends/test_workers.py::test_the_readme_workers_command",
    "kedro run --pipelines annotate --params annotate.judge.endpoint=openai_batch": (
        "tests/pipelines/test_batch_pipeline.py::test_the_readme_batch_endpoints_and_command"
    ),
    "kedro run --pipelines evaluate --params evaluate.judge.endpoint=cluster": (
        "tests/backends/test_ray_backend.py::test_the_readme_ray_cluster_runs_the_evaluate_command"
    ),
    (
        "kedro run --pipelines evaluate --params "
        "eval_samples_path=path/to/LLMBar/Natural/dataset.json,evaluate.mode=pairwise"
    ): (
        "tests/pipelines/test_evaluate_judge_validation.py::"
        "test_gpt4_vanilla_verdicts_replayed_give_llmbars_published_numbers"
    ),
    (
        "kedro run --pipelines evaluate --params eval_samples_path=path/to/pandalm_testset.json,"
        "evaluate.samples_format=pandalm,evaluate.mode=pairwise"
    ): (
        "tests/pipelines/test_evaluate_judge_validation.py::"
        "test_the_readme_pandalm_command_reads_three_annotators"
    ),
    (
        "kedro run --pipelines evaluate --params eval_samples_path=path/to/alpaca_eval/results,"
        "evaluate.mode=pairwise,evaluate.ranking.baseline=gpt4_1106_preview"
    ): (
        "tests/test_recorded_verdicts.py::"
        "test_alpaca_eval_annotations_as_published_give_its_leaderboard_rows"
    ),
    # `make -n`: the variables reach bench.py; quick sittings run in the test below.
    "make bench BENCH_REPS=5 BENCH_SCALE=16000,64000 BENCH_ONLY=throughput,annotate,scale "
    "BENCH_SCALE_REPS=1": (
        "tests/test_bench_report.py::test_the_readme_make_bench_options_reach_bench_py"
    ),
    "BENCH_QUICK=1 make bench": (
        "tests/test_bench_report.py::test_the_readme_make_bench_options_reach_bench_py"
    ),
    "python benchmarks/bench.py --quick --only throughput": (
        "tests/test_bench_report.py::test_the_readme_quick_sitting_writes_results_from_its_own_json"
    ),
    (
        "kedro run --params prompt_templates=conf/base/templates/ultrafeedback_layout,"
        "endpoints.local.structured_output=false"
    ): (
        "tests/pipelines/test_prompt_templates.py::"
        "test_ultrafeedback_layout_templates_run_end_to_end_and_every_rating_lands"
    ),
    (
        "kedro run --pipelines ultrafeedback_fix --params "
        "ultrafeedback_fix.records_path=ultrafeedback.parquet"
    ): (
        "tests/pipelines/test_ultrafeedback_fix.py::"
        "test_kedro_run_fixes_published_records_as_computed_by_hand"
    ),
    "kedro run --pipelines annotate --from-nodes fix_overall_scores": (
        "tests/pipelines/test_run_slices.py::test_every_slice_of_every_pipeline_runs"
    ),
    "kedro run --params data_root=s3://my-bucket/data": (
        "tests/deploy/test_remote_root.py::"
        "test_a_second_clone_with_an_empty_disk_reruns_on_the_bucket_sending_nothing"
    ),
    (
        "kedro run --params tracking.mlflow.enabled=true,"
        "tracking.mlflow.tracking_uri=sqlite:////tmp/mlruns.db"
    ): (
        "tests/deploy/test_mlflow_tracking.py::"
        "test_a_tracked_run_logs_headlines_tables_datasets_commit_and_no_secret"
    ),
    # The test serves the store with `mlflow server` (what `mlflow ui` starts) and reads the
    # run back over its REST API.
    "mlflow ui --backend-store-uri sqlite:////tmp/mlruns.db": (
        "tests/deploy/test_mlflow_tracking.py::"
        "test_a_tracked_run_logs_headlines_tables_datasets_commit_and_no_secret"
    ),
    # The command's name (docs/architecture.md); its documented dry run is run here.
    "kedro push-to-hub": RUN_HERE,
    # The project's test server as a process: what `serve_in_subprocess` starts.
    "python -m llm_feedback.testing.server": (
        "tests/testing/test_cli.py::test_subprocess_server_serves_reports_stats_and_is_terminated"
    ),
    # Interactive: the notebook it opens is executed headless.
    "jupyter lab": (
        "tests/test_notebook.py::"
        "test_exploration_notebook_compares_two_versions_and_draws_the_figures"
    ),
}
# Commands no test or CI line runs, and why.
NOT_RUN = {
    "pip install datasets": "datasets is pinned in the dev and hub extras that CI installs",
    'pip install -e ".[notebook]"': "installs JupyterLab, an interactive editor",
    'pip install -e ".[gpu]"': "vLLM with CUDA (GBs); checked by benchmarks/vllm_offline.py",
    "kedro viz run": "an interactive server; `kedro viz build` makes the same API offline",
    "make viz": "runs `kedro viz run` (see above)",
    "python benchmarks/before_after.py --before <commit>": "a benchmark of two commits",
    "python benchmarks/chaos.py": "a benchmark; its results are in benchmarks/RESULTS.md",
    "python benchmarks/embedded_judge_card.py": (
        "a benchmark (the embedded judge on LLMBar Natural, minutes on 2 cores); its results "
        "are in benchmarks/RESULTS.md"
    ),
    "python benchmarks/throughput.py --workers 2": "a benchmark; `make bench` runs it",
    "kedro run --pipelines annotate --params annotate.judge.endpoint=gpu": (
        "needs vLLM on a GPU; its endpoint block runs against the vLLM test double in "
        "tests/backends/test_vllm_backend.py"
    ),
    'pip install -e ".[ray]"': "`make test` installs the ray extra (Makefile: install-dev)",
    'pip install -e ".[s3]"': "`make test` installs the s3 extra (Makefile: install-dev)",
    'pip install -e ".[mlflow]"': "`make test` installs the mlflow extra (Makefile: install-dev)",
    'pip install -e ".[ppi]"': "`make test` installs the ppi extra (Makefile: install-dev)",
    'pip install -e ".[anthropic]"': "`make test` installs the SDK (the dev extra pins it)",
    'pip install -e ".[gemini]"': "`make test` installs the SDK (the dev extra pins it)",
    'pip install -e ".[ray-gpu]"': "Ray's vLLM processor for GPU nodes (vLLM with CUDA, GBs)",
    'pip install -e ".[style]"': (
        "`make test` installs the style extra (Makefile: install-dev); "
        "tests/test_recorded_verdicts.py checks its token lengths offline"
    ),
    "kedro run --pipelines <name>": (
        "a placeholder for a pipeline's name; tests/test_extending_doc.py checks every pipeline "
        "package is registered under its name, and other tests run each built-in one"
    ),
    "python -I": "not a command to type: how CodeTest runs the response's code",
    "make bench": "every benchmark at full size: hours, on a quiet machine",
    "python benchmarks/bench.py --render benchmarks/results/bench": (
        "needs a full sitting's JSON; tests/test_bench_report.py renders hand-made sittings"
    ),
}


def readme_commands() -> list[str]:
    """Each line of the documentation's bash blocks (comments dropped) and each inline code
    span that starts with a command."""
    text = documentation_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            command = re.split(r"\s+#", line)[0].strip()
            if command and not command.startswith("#"):
                commands.append(command)
    for span in re.findall(r"`([^`\n]+)`", text):
        if " " in span and span.split(" ")[0] in COMMAND_WORDS:
            commands.append(span)
    return list(dict.fromkeys(commands))


def test_every_readme_command_is_exercised_or_says_why_not():
    commands = readme_commands()
    assert "make run" in commands and "make test" in commands
    uncovered = [c for c in commands if c not in COVERED_BY and c not in NOT_RUN]
    assert not uncovered, f"documented commands that nothing runs: {uncovered}"
    ci_script = CI_SCRIPT.read_text()
    for command, where in COVERED_BY.items():
        assert command in commands, f"{command!r} is no longer documented: update this list"
        if where == ".ci/run":
            assert re.search(rf"^{re.escape(command)}$", ci_script, re.M), command
        else:
            path, name = where.split("::")
            assert f"def {name}(" in (PROJECT_ROOT / path).read_text(), where
    assert set(NOT_RUN) <= set(commands)


def with_test_settings(command: str, data_root: Path, url: str) -> list[str]:
    """The command as written, its outputs under data_root and `local` at the test server;
    the endpoint `openai` the documentation defines in conf/local points there too."""
    argv = shlex.split(command)
    settings = [f"data_root={data_root}"]
    if argv[1] == "run":
        settings += [
            "endpoints.local.backend=openai",
            f"endpoints.local.base_url={url}",
            "endpoints.local.model=fake",
            "endpoints.openai.backend=openai",
            f"endpoints.openai.base_url={url}",
            "endpoints.openai.model=gpt-4o-mini",
        ]
    if "--params" in argv:
        at = argv.index("--params") + 1
        argv[at] = ",".join([argv[at], *settings])
    else:
        argv += ["--params", ",".join(settings)]
    return [sys.executable, "-m", *argv]


def versions(data_root: Path, name: str) -> list[str]:
    return sorted(path.name for path in data_root.glob(f"*/{name}.parquet/*"))


def test_the_readme_kedro_commands_run_as_written(tmp_path):
    assert set(KEDRO_COMMANDS) <= set(readme_commands())
    data_root = tmp_path / "data"
    env = {**KEDRO_CLI_ENV, "HF_TOKEN": "hf_readme-test-token", "OPENAI_API_KEY": "sk-test"}
    outputs = {}
    with FakeLLMServer() as server:
        for command in KEDRO_COMMANDS:
            runnable = command
            if "--load-versions" in command:
                first = versions(data_root, "overall_scores")[0]  # an older one than latest
                runnable = re.sub(r"overall_scores:\S+", f"overall_scores:{first}", command)
            result = subprocess.run(
                with_test_settings(runnable, data_root, server.base_url),
                cwd=PROJECT_ROOT,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            assert result.returncode == 0, (command, result.stderr[-3000:])
            outputs[command] = result.stdout + result.stderr
            if "--load-versions" in command:  # report.md is rewritten by every later run
                report = (data_root / "08_reporting" / "report.md").read_text()
        judged_by = {body["model"] for body in server.requests if body.get("response_format")}

    every_prompt = versions(data_root, "completions")[0]  # sample.max_prompts=null
    completions = data_root / "03_primary" / "completions.parquet" / every_prompt
    assert len(pd.read_parquet(completions)) == 37 * 4
    assert f"| overall_scores | {first} |" in re.sub(r" {2,}", " ", report)
    assert "Run plan" in outputs["kedro run --params plan_only=true"]
    assert "within max_cost_usd" in outputs["kedro run --params max_cost_usd=5"]
    assert "gpt-4o-mini" in judged_by  # the judge moved to the `openai` endpoint
    assert len(versions(data_root, "eval_metrics")) == 3
    push = outputs[KEDRO_COMMANDS[-1]]
    assert "datasets/you/my-feedback (private)" in push and "nothing was sent" in push
    assert "hf_readme-test-token" not in "".join(outputs.values())


# --- the README is a front page, and the documentation's links lead somewhere -------------

LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")


def github_anchor(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, inline code marks and punctuation
    dropped (letters, digits, `_` and `-` kept), each space a `-`."""
    title = re.sub(r"[^\w\- ]", "", title.replace("`", "").lower())
    return title.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings (a repeated one numbered, as GitHub does)."""
    seen: dict[str, int] = {}
    for _, _, title in markdown_headings(path.read_text(encoding="utf-8")):
        anchor = github_anchor(title)
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        if count:
            seen[f"{anchor}-{count}"] = 1
    return set(seen)


def links(path: Path) -> list[str]:
    """The targets of a Markdown file's links, code blocks and inline code left out."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return LINK.findall(re.sub(r"`[^`\n]*`", "", text))


def test_the_readme_is_a_front_page_under_200_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 200, f"README.md has {len(lines)} lines: move sections into docs/"
    text = "\n".join(lines)
    for page in sorted((PROJECT_ROOT / "docs").glob("*.md")):  # a table of contents
        assert f"(docs/{page.name})" in text, f"README.md does not link docs/{page.name}"


def test_every_relative_link_of_the_documentation_resolves():
    assert len(DOCUMENTATION) > 5 and README in DOCUMENTATION
    broken = []
    for page in DOCUMENTATION:
        for target in links(page):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
                continue
            file_part, _, anchor = target.partition("#")
            linked = (page.parent / file_part).resolve() if file_part else page
            where = f"{page.relative_to(PROJECT_ROOT)}: ({target})"
            if not linked.exists():
                broken.append(f"{where}: no such file")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{where}: no heading #{anchor}")
    assert not broken, "\n".join(broken)


def test_the_anchor_rule_is_githubs():
    assert github_anchor("OpenAI / Azure Batch API") == "openai--azure-batch-api"
    assert github_anchor("How good is my judge?") == "how-good-is-my-judge"
    assert github_anchor("Evaluating answers against references (`evaluate`)") == (
        "evaluating-answers-against-references-evaluate"
    )
