"""Multimodal evaluation: images and audio from eval_samples to the model under test and the
judge, checked before any call; pre/post prompts; judge prompts per category."""

import base64
import hashlib
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.evaluation import prepare_samples
from llm_feedback.evaluation.attachments import SOURCE_DIR_ATTR
from llm_feedback.evaluation.run import run_evaluation
from llm_feedback.evaluation.sample_files import read_samples_file
from llm_feedback.judges import Judge
from llm_feedback.params import parse_evaluate
from tests.conftest import (
    KEDRO_CLI_ENV,
    PROJECT_ROOT,
    documentation_section,
    endpoints_via,
    kedro_cli,
    run_kedro_cli,
)
from tests.media_files import png_bytes, wav_bytes, write

PNG = png_bytes(4, 3, (10, 200, 30))
WAV = wav_bytes(320, 16000)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _samples_file(folder: Path, rows: list[dict]) -> Path:
    write(folder / "media" / "chart.png", PNG)
    write(folder / "media" / "hello.wav", WAV)
    path = folder / "samples.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


ROWS = [
    {
        "instance_id": "chart-1",
        "model": "vlm",
        "question": "Which bar is tallest?",
        "response": None,
        "reference": "March",
        "images": ["media/chart.png"],
    },
    {
        "instance_id": "clip-1",
        "model": "vlm",
        "question": "What word is spoken?",
        "response": None,
        "reference": "hello",
        "audio": "media/hello.wav",
    },
]


def _parts(body: dict) -> list[dict]:
    content = body["messages"][-1]["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _frame(folder: Path, rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    frame.attrs[SOURCE_DIR_ATTR] = str(folder)
    return frame


def _latest(data_root: Path, layer: str, name: str) -> pd.DataFrame:
    (version,) = (data_root / layer / f"{name}.parquet").iterdir()
    return pd.read_parquet(version / f"{name}.parquet")


def _check_round_trip(fake_llm, folder: Path, data_root: Path) -> None:
    """What the server received and what eval_judgments kept, after a run on ROWS."""
    generation = [b for b in fake_llm.requests if b["messages"][0]["role"] == "user"]
    judging = [b for b in fake_llm.requests if b["messages"][0]["role"] == "system"]
    assert len(generation) == 2 and len(judging) == 2
    by_question = {_parts(body)[0]["text"]: _parts(body)[1:] for body in generation}
    assert by_question == {
        "Which bar is tallest?": [
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{_b64(PNG)}"}}
        ],
        "What word is spoken?": [
            {"type": "input_audio", "input_audio": {"data": _b64(WAV), "format": "wav"}}
        ],
    }
    # The judge sees the chart with its question; audio is for the model under test only.
    image_judged = [b for b in judging if len(_parts(b)) == 2]
    assert len(image_judged) == 1
    notice, image = _parts(image_judged[0])
    assert notice["text"].startswith("[Attached images]\nThe user question comes with 1 image")
    assert "Which bar is tallest?" in notice["text"]
    assert base64.b64decode(image["image_url"]["url"].split(",", 1)[1]) == PNG

    judgments = _latest(data_root, "07_model_output", "eval_judgments").set_index("instance_id")
    assert list(judgments.loc["chart-1", "images"]) == [str(folder / "media" / "chart.png")]
    assert list(judgments.loc["chart-1", "image_sha256"]) == [hashlib.sha256(PNG).hexdigest()]
    assert list(judgments.loc["clip-1", "audio_sha256"]) == [hashlib.sha256(WAV).hexdigest()]
    assert list(judgments.loc["clip-1", "images"]) == []
    assert judgments["success"].all()
    text = judgments.astype(str).to_string()
    assert "base64" not in text and _b64(PNG)[:40] not in text


def test_kedro_run_sends_the_files_bytes_and_stores_paths_and_hashes(fake_llm, tmp_path):
    samples = _samples_file(tmp_path / "set", ROWS)
    command = kedro_cli(
        tmp_path / "data",
        fake_llm.base_url,
        f"eval_samples_path={samples}",
        "evaluate.mode=single_1_10",
        "evaluate.generate_with=local",
    )
    run_kedro_cli(command, "evaluate")
    _check_round_trip(fake_llm, tmp_path / "set", tmp_path / "data")


README_COMMAND = re.compile(
    r"^kedro run --pipelines evaluate --params \"eval_samples_path=.*$", re.M
)


def test_the_readme_command_runs(fake_llm, tmp_path):
    section = documentation_section("Multimodal evaluation")
    match = README_COMMAND.search(section)
    assert match, "documentation: no multimodal `kedro run --pipelines evaluate` command"
    args = shlex.split(match.group(0))
    samples = _samples_file(tmp_path / "set", ROWS)
    index = args.index("--params") + 1
    args[index] = ",".join(
        [
            args[index].replace("path/to/vision_samples.jsonl", str(samples)),
            f"data_root={tmp_path / 'data'}",
            "endpoints.vision.backend=openai",
            "endpoints.vision.model=vlm-server",
            f"endpoints.vision.base_url={fake_llm.base_url}",
        ]
    )
    subprocess.run(
        [sys.executable, "-m", *args],
        cwd=PROJECT_ROOT,
        env=KEDRO_CLI_ENV,
        check=True,
        capture_output=True,
    )
    _check_round_trip(fake_llm, tmp_path / "set", tmp_path / "data")


def _prepare(folder: Path, rows: list[dict], endpoints: dict, **evaluate) -> pd.DataFrame:
    config = parse_evaluate({"mode": "single_1_10", **evaluate}, endpoints)
    return prepare_samples(_frame(folder, rows), config)


@pytest.mark.parametrize(
    ("change", "column", "problem"),
    [
        ({"images": ["media/none.png"]}, "images", r"none.png: no such file"),
        ({"images": "media/hello.wav"}, "images", r"wav data \(by its content\)"),
        ({"audio": ["media/chart.png"]}, "audio", r"png data \(by its content\)"),
        ({"images": ["media/chart.png", 7]}, "images", r"item 1: must be a file path"),
        ({"images": {"a": 1}}, "images", r"must be a path, a list of paths or null"),
    ],
)
def test_bad_attachments_name_row_and_column_before_any_call(
    fake_llm, tmp_path, change, column, problem
):
    _samples_file(tmp_path, [])
    rows = [dict(ROWS[1]), {**ROWS[0], **change}]
    with pytest.raises(InputError, match=rf"row 1 \(instance_id 'chart-1'\), column '{column}': "):
        _prepare(tmp_path, rows, endpoints_via(fake_llm), generate_with="local")
    with pytest.raises(InputError, match=problem):
        _prepare(tmp_path, rows, endpoints_via(fake_llm), generate_with="local")
    assert fake_llm.request_count == 0


def test_each_receiving_endpoint_caps_the_file_size(fake_llm, tmp_path):
    _samples_file(tmp_path, [])
    endpoints = {
        **endpoints_via(fake_llm),
        "small": {"backend": "openai", "model": "m", "base_url": "http://x", "max_media_bytes": 64},
    }
    # The judge gets images: its cap applies even to a row whose response is given.
    rows = [{**ROWS[0], "response": "March"}]
    with pytest.raises(
        InputError, match=r"column 'images': .*over the endpoint's max_media_bytes 64"
    ):
        _prepare(tmp_path, rows, endpoints, judge={"endpoint": "small"})
    # Audio goes to the model under test only: a small judge cap does not matter.
    checked = _prepare(
        tmp_path, [ROWS[1]], endpoints, judge={"endpoint": "small"}, generate_with="local"
    )
    assert checked.loc[0, "audio"][0].sha256 == hashlib.sha256(WAV).hexdigest()
    with pytest.raises(InputError, match=r"column 'audio': .*max_media_bytes 64"):
        _prepare(tmp_path, [ROWS[1]], endpoints, generate_with="small")


def test_the_text_only_local_model_refuses_attachments_before_any_call(tmp_path):
    _samples_file(tmp_path, [])
    local = {"local": {"backend": "local", "model": "SmolLM2-135M-Instruct"}}
    with pytest.raises(
        InputError, match=r"row 0 .*column 'audio': endpoint 'local'.* reads text only"
    ):
        _prepare(tmp_path, [ROWS[1]], local, generate_with="local")
    with pytest.raises(
        InputError, match=r"row 0 .*column 'images': endpoint 'local'.* reads text only"
    ):
        _prepare(tmp_path, [{**ROWS[0], "response": "March"}], local)
    # Without attachments the same rows are fine.
    assert len(_prepare(tmp_path, [{**ROWS[0], "images": None}], local, generate_with="local")) == 1


def test_a_ray_endpoint_refuses_image_rows_before_any_call(fake_llm, tmp_path):
    # Its rows travel to the workers as JSON, which has no form for an image: before this
    # check the row reached ray_backend._request_json and failed with a TypeError.
    _samples_file(tmp_path, [])
    ray_endpoint = {"backend": "ray", "model": "m", "base_url": fake_llm.base_url}
    endpoints = {**endpoints_via(fake_llm), "cluster": ray_endpoint}
    with pytest.raises(
        InputError, match=r"row 0 .*column 'images': endpoint 'cluster'.* reads text only"
    ):
        _prepare(
            tmp_path, [{**ROWS[0], "response": "March"}], endpoints, judge={"endpoint": "cluster"}
        )
    with pytest.raises(InputError, match=r"column 'images': endpoint 'cluster'.* reads text only"):
        _prepare(tmp_path, [ROWS[0]], endpoints, generate_with="cluster")
    assert fake_llm.request_count == 0


def test_attachments_on_two_turn_rows_are_refused(fake_llm, tmp_path):
    _samples_file(tmp_path, [])
    row = {**ROWS[0], "prior_question": "Hi", "prior_response": "Hello"}
    with pytest.raises(
        InputError, match=r"column 'images': attachments go with one-turn rows only"
    ):
        _prepare(tmp_path, [row], endpoints_via(fake_llm), generate_with="local")


def test_pre_and_post_prompt_and_a_judge_prompt_per_category(fake_llm, tmp_path):
    _samples_file(tmp_path, [])
    template = tmp_path / "charts_judge.txt"
    template.write_text(
        "CHART JUDGE. Look at the picture.\n{question}\n{answer}\n{reference}\n"
        'Reply with JSON {{"rating": <1-10>, "explanation": "..."}}.',
        encoding="utf-8",
    )
    rows = [
        {**ROWS[0], "category": "charts"},
        {**ROWS[1], "category": "speech"},
        {**ROWS[1], "instance_id": "plain", "audio": None, "question": "2+2?", "reference": "4"},
    ]
    judgments, _ = run_evaluation(
        _frame(tmp_path, rows),
        {
            "mode": "single_1_10",
            "generate_with": "local",
            "pre_prompt": "Look carefully. ",
            "post_prompt": "\nAnswer in one word.",
            "judge_prompts": {
                "charts": str(template),
                "speech": "SPEECH JUDGE {question} {answer} {reference} [[N]]",
            },
        },
        endpoints_via(fake_llm),
        progress=False,
    )
    asked = [_parts(body)[0]["text"] for body in fake_llm.requests if len(body["messages"]) == 1]
    assert sorted(asked) == [
        "Look carefully. 2+2?\nAnswer in one word.",
        "Look carefully. What word is spoken?\nAnswer in one word.",
        "Look carefully. Which bar is tallest?\nAnswer in one word.",
    ]
    prompts = judgments.set_index("instance_id")["prompt"]
    assert "CHART JUDGE. Look at the picture." in prompts["chart-1"]
    assert prompts["clip-1"].startswith("SPEECH JUDGE")
    assert "CHART JUDGE" not in prompts["plain"] and "SPEECH JUDGE" not in prompts["plain"]
    # The judge sees the question as asked, not the model's pre/post prompt.
    assert re.search(
        r"QUESTION BEGIN \w+>>>\nWhich bar is tallest\?\n<<<QUESTION END", prompts["chart-1"]
    )


def test_a_judge_prompt_that_is_neither_template_nor_file_is_a_config_error(fake_llm):
    with pytest.raises(
        ConfigError, match=r"evaluate.judge_prompts.charts: 'charts.txt' is neither"
    ):
        parse_evaluate({"judge_prompts": {"charts": "charts.txt"}}, endpoints_via(fake_llm))


def test_the_judge_api_takes_images_in_single_rubric_and_comparative(fake_llm, tmp_path):
    image = write(tmp_path / "chart.png", PNG)
    endpoint = endpoints_via(fake_llm)["local"]
    with Judge(endpoint) as judge:
        single = judge.evaluate_single("Tallest bar?", "March", images=[str(image)])
        rubric = judge.evaluate_with_rubric(
            "Tallest bar?", "March", {"accuracy": "Right about the chart?"}, images=[str(image)]
        )
        pair = judge.evaluate_comparative_batch(
            ["Tallest bar?"], ["March"], ["May"], item_images=[[str(image)]]
        )[0]
        plain = judge.evaluate_single("Tallest bar?", "March")
    assert single["success"] and rubric["success"] and pair["success"] and plain["success"]
    sent = [_parts(body) for body in fake_llm.requests]
    assert [len(parts) for parts in sent] == [2, 2, 2, 2, 1]  # the pair: both orders
    for parts in sent[:4]:
        assert parts[1]["image_url"]["url"] == f"data:image/png;base64,{_b64(PNG)}"
    assert single["prompt"].startswith("[Attached images]")


@pytest.mark.parametrize("mode", ["single_1_10", "pairwise"])
def test_a_judge_prompt_missing_a_field_fails_before_generation_pays(fake_llm, tmp_path, mode):
    _samples_file(tmp_path, [])
    rows = [{**ROWS[0], "category": "charts"}, {**ROWS[0], "model": "other", "category": "charts"}]
    template = "{question} {answer} [[N]]" if mode == "single_1_10" else "{question} {response1}"
    with pytest.raises(ConfigError) as raised:
        run_evaluation(
            _frame(tmp_path, rows),
            {"mode": mode, "generate_with": "local", "judge_prompts": {"charts": template}},
            endpoints_via(fake_llm),
            progress=False,
        )
    assert str(raised.value).startswith("evaluate.judge_prompts.charts (eval_samples row 0): ")
    missing = {"single_1_10": "{reference}", "pairwise": "{response2}"}[mode]
    assert f"lacks the field {missing}" in str(raised.value)
    assert fake_llm.request_count == 0


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"pre_prompt": 3}, "evaluate.pre_prompt must be text, got 3"),
        ({"judge_prompts": ["a"]}, "evaluate.judge_prompts must map categories to templates"),
        (
            {"judge_prompts": {"charts": "{0} {question}"}},
            r"evaluate.judge_prompts.charts: .*\{0\}",
        ),
    ],
)
def test_bad_prompt_settings_name_the_parameter(fake_llm, setting, message):
    with pytest.raises(ConfigError, match=message):
        parse_evaluate(setting, endpoints_via(fake_llm))


def test_a_rerun_asks_again_for_an_edited_file_and_not_for_a_renamed_one(fake_llm, tmp_path):
    _samples_file(tmp_path, [])
    cache = tmp_path / "cache.sqlite"
    params = {"mode": "single_1_10", "generate_with": "local"}

    def run(rows):
        judgments, _ = run_evaluation(
            _frame(tmp_path, rows), params, endpoints_via(fake_llm), cache, progress=False
        )
        return judgments

    run([ROWS[0]])
    assert fake_llm.request_count == 2  # the answer and its judgment
    write(tmp_path / "media" / "chart.png", png_bytes(4, 3, (200, 10, 10)))
    edited = run([ROWS[0]])
    assert fake_llm.request_count == 4 and not edited["cached"].any()
    (tmp_path / "media" / "chart.png").rename(tmp_path / "media" / "moved.png")
    renamed = run([{**ROWS[0], "images": ["media/moved.png"]}])
    assert fake_llm.request_count == 4 and renamed["cached"].all()
    assert list(renamed.loc[0, "images"]) == [str(tmp_path / "media" / "moved.png")]


def _outside_references(tmp_path: Path) -> dict[str, str]:
    """Three ways out of the samples folder `tmp_path / "set"` to `private/secret.png`."""
    secret = write(tmp_path / "private" / "secret.png", PNG)
    link = tmp_path / "set" / "media" / "link.png"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(secret)
    return {"absolute": str(secret), "dotdot": "../private/secret.png", "symlink": "media/link.png"}


@pytest.mark.parametrize("way", ["absolute", "dotdot", "symlink"])
def test_a_media_file_outside_the_samples_folder_is_refused_before_any_call(
    fake_llm, tmp_path, way
):
    reference = _outside_references(tmp_path)[way]
    samples = _samples_file(tmp_path / "set", [{**ROWS[0], "images": [reference]}])
    config = parse_evaluate(
        {"mode": "single_1_10", "generate_with": "local"}, endpoints_via(fake_llm)
    )
    with pytest.raises(InputError) as refusal:
        prepare_samples(read_samples_file(samples), config)
    message = str(refusal.value)
    assert "row 0 (instance_id 'chart-1'), column 'images'" in message
    assert f"{reference}: resolves to {tmp_path / 'private' / 'secret.png'}" in message
    assert f"outside {tmp_path / 'set'}" in message and "allow_media_outside" in message
    assert fake_llm.request_count == 0


@pytest.mark.parametrize(
    "setting", [{"allow_media_outside": True}, {"media_root": "ROOT"}], ids=["allowed", "root"]
)
def test_media_outside_the_samples_folder_is_read_when_allowed(fake_llm, tmp_path, setting):
    references = list(_outside_references(tmp_path).values())
    samples = _samples_file(tmp_path / "set", [{**ROWS[0], "images": references}])
    setting = {key: str(tmp_path) if value == "ROOT" else value for key, value in setting.items()}
    config = parse_evaluate(
        {"mode": "single_1_10", "generate_with": "local", **setting}, endpoints_via(fake_llm)
    )
    (images,) = prepare_samples(read_samples_file(samples), config)["images"]
    secret = (tmp_path / "private" / "secret.png").resolve()
    assert [item.source for item in images] == [str(secret)] * 3
