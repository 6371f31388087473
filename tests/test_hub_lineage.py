"""The dataset card is built from the data's own lineage: `kedro push-to-hub` describes the
run that wrote the pushed version (its judge and settings, from `run_record`), never the
configuration current at push time."""

from __future__ import annotations

import subprocess
from pathlib import Path

from huggingface_hub import DatasetCard

from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import KEDRO_CLI_ENV, PROJECT_ROOT, kedro_cli, run_kedro_cli
from tests.test_hub import push_to_hub_cli

SECRET = "s3cret-judge-password"
JUDGE_X = [
    "endpoints.judgex.backend=openai",
    "endpoints.judgex.model=judgeX",
    "endpoints.judgex.max_concurrent=4",
    "annotate.judge.endpoint=judgex",
    "annotate.n_shuffles=2",
    "sample.max_prompts=4",
    "sample.n_completions=2",
]


def printed_card(data_root: Path, name: str) -> str:
    result = push_to_hub_cli(data_root, "--dataset", name, "--repo-id", "someone/f", "--dry-run")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return DatasetCard(output.split("dataset card (README.md):\n", 1)[1].split("dry run:")[0]).text


def latest(data_root: Path, layer: str, name: str) -> str:
    versions = sorted((data_root / layer / name).iterdir())
    return (versions[-1] / name).read_text(encoding="utf-8")


def test_a_dry_run_push_prints_the_judge_and_settings_of_the_run_that_wrote_the_data(
    tmp_path: Path,
) -> None:
    data_root = tmp_path / "data"
    with FakeLLMServer() as server:
        # The judge's URL as a user may write it, with a password: never shown.
        host = server.base_url.split("://", 1)[1]
        judge_x = [*JUDGE_X, f"endpoints.judgex.base_url=http://me:pw-{SECRET}@{host}"]
        run_kedro_cli(kedro_cli(data_root, server.base_url, *judge_x), "sample,generate,annotate")
        # The report runs later with the configuration as it is now: `fake` at the local
        # endpoint, one shuffle; so does the export's card, written again alone.
        run_kedro_cli(kedro_cli(data_root, server.base_url), "report")
        subprocess.run(
            [*kedro_cli(data_root, server.base_url), "--nodes", "write_ultrafeedback_card"],
            cwd=PROJECT_ROOT,
            env=KEDRO_CLI_ENV,
            capture_output=True,
            check=True,
        )

    # The report's judge is judgeX as the annotate run recorded it, URL without password.
    report = (data_root / "08_reporting" / "report.md").read_text(encoding="utf-8")
    screen = report.split("## Headline", 1)[0]
    assert f"Rated by judgeX at endpoint `judgex` (openai backend, http://{host}" in screen
    assert "**Judge not validated**: no card measures judgeX at judgex" in screen
    assert "fake" not in screen and SECRET not in report and "me:" not in report
    # Both export cards, the annotate run's and the one written alone now, name judgeX.
    cards = sorted((data_root / "07_model_output" / "ultrafeedback_card.md").iterdir())
    assert len(cards) == 2
    for folder in cards:
        card = DatasetCard((folder / "ultrafeedback_card.md").read_text(encoding="utf-8")).text
        assert "- judge: judgeX (openai backend)" in card
        assert "- judge endpoint: `judgex` (backend openai; sampling `{" in card
        assert "n_shuffles: 2" in card and "n_shuffles: 1" not in card
        assert "fake (openai" not in card and host not in card and SECRET not in card

    for name in ("ultrafeedback", "preference_pairs"):
        card = printed_card(data_root, name)
        assert "- judge: judgeX (openai backend)" in card, name
        assert "- judge endpoint: `judgex` (backend openai;" in card, name
        assert "SmolLM2" not in card and "fake (openai" not in card, name
        assert "n_shuffles: 2" in card and "max_prompts: 4" in card, name
        assert "n_completions: 2" in card, name
        assert "n_shuffles: 1" not in card and "max_prompts: 6" not in card, name
        # Which run wrote each stage: the pairs' report run read the annotate run's ratings.
        assert "written_by:" in card, name
    pairs = printed_card(data_root, "preference_pairs")
    assert "preference_pairs:" in pairs  # the report run's own pair settings
    assert "base_url" not in pairs and "127.0.0.1" not in pairs  # endpoints stay home


def test_data_without_a_run_record_is_carded_not_recorded_not_from_the_configuration(
    tmp_path: Path,
) -> None:
    from tests.test_hub import preference_pairs, write_version

    data_root = tmp_path / "data"
    write_version(data_root, "07_model_output", "preference_pairs", preference_pairs())
    card = printed_card(data_root, "preference_pairs")
    assert "- judge: not recorded" in card
    assert "lineage: 'not recorded: no run record at version" in card
    assert "SmolLM2" not in card and "n_shuffles" not in card


def test_a_plan_only_run_writes_no_run_record(tmp_path: Path) -> None:
    data_root = tmp_path / "data"
    with FakeLLMServer() as server:
        command = kedro_cli(data_root, server.base_url, "plan_only=true", "sample.max_prompts=2")
        subprocess.run(
            [*command, "--pipelines", "sample,generate"],
            cwd=PROJECT_ROOT,
            env=KEDRO_CLI_ENV,
            capture_output=True,
            check=False,
        )
        assert (data_root / "08_reporting" / "run_plan.parquet").exists()  # it did plan
        assert not (data_root / "02_intermediate" / "run_record.json").exists()
        run_kedro_cli(kedro_cli(data_root, server.base_url, "sample.max_prompts=2"), "sample")
    (version,) = (data_root / "02_intermediate" / "run_record.json").iterdir()
    (sampled,) = (data_root / "02_intermediate" / "sampled_prompts.parquet").iterdir()
    assert version.name == sampled.name  # the record is saved under the run's version


def test_the_card_shows_the_annotate_judges_agreement_with_reviewers_labels(
    tmp_path: Path,
) -> None:
    """The card of data whose judge has no card from reviewers' labels says "not
    validated"; once the report has filed one (annotate_judge_validation, from
    `report.labels.path`) under the judge's identity, the card shows its figures with
    their intervals."""
    import json

    from llm_feedback.publishing.dataset_card import ANNOTATE_NOT_VALIDATED
    from llm_feedback.validation.annotate_labels import annotate_card
    from tests.test_hub import write_version
    from tests.validation.test_annotate_labels import frames_and_labels

    data_root = tmp_path / "data"
    with FakeLLMServer() as server:
        judge_x = [*JUDGE_X, f"endpoints.judgex.base_url={server.base_url}"]
        run_kedro_cli(kedro_cli(data_root, server.base_url, *judge_x), "sample,generate,annotate")
    card = printed_card(data_root, "ultrafeedback")
    assert ANNOTATE_NOT_VALIDATED.split(".")[0] in card
    assert "**Judge not validated**" in card

    (record_file,) = (data_root / "02_intermediate" / "run_record.json").glob("*/run_record.json")
    identity = json.loads(record_file.read_text())["stages"]["annotate"]["judge_identity"]
    (tmp_path / "labels").mkdir()
    _, match = frames_and_labels(tmp_path / "labels", flip_every=3)
    labelled = annotate_card(
        match, identity, "review/labels.jsonl", created_at="2026-12-01", resamples=100
    )
    write_version(data_root, "08_reporting", "annotate_judge_validation", labelled)
    card = printed_card(data_root, "ultrafeedback")
    assert "Agreement with human labels: **not validated**" not in card
    assert "**Judge not validated**" not in card
    assert "Agreement of the judge that rated this data with human labels" in card
    judged = labelled[(labelled["kind"] == "judge") & labelled["category"].isna()]
    for _, row in judged[judged["ci_low"].notna()].iterrows():
        figures = f"| {row['metric']} | {row['value']:.3f} | [{row['ci_low']:.3f}, "
        assert figures in card, row["metric"]
    assert "| within_1_agreement | 1.000 | [1.000, 1.000] | 30 |" in card
    assert "| review/labels.jsonl | 2026-12-01 |" in card
