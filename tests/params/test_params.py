"""Every pipeline's parameters: read once, unknown keys and bad values named by their path."""

import re
from pathlib import Path

import pytest
import yaml

from llm_feedback.backends.contract import SAMPLING_KEYS, check_sampling
from llm_feedback.backends.endpoints import resolve_endpoint
from llm_feedback.core.errors import ConfigError
from llm_feedback.params import (
    AnnotateParams,
    ReportParams,
    SampleParams,
    parse_annotate,
    parse_evaluate,
    parse_generate,
    parse_report,
    parse_sample,
)

CONF = Path(__file__).resolve().parents[2] / "conf" / "base"
ENDPOINTS = {"local": {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}}
POOL = {"a": {"endpoint": "local"}, "b": {"endpoint": "local", "temperature": 0.5}}


def base(name: str, key: str | None = None) -> dict:
    return yaml.safe_load((CONF / f"parameters_{name}.yml").read_text())[key or name]


def test_the_shipped_parameters_parse():
    shipped = yaml.safe_load((CONF / "parameters.yml").read_text())
    endpoints, pool = shipped["endpoints"], shipped["model_pool"]
    assert parse_sample(base("sample"), pool).models == tuple(pool)
    generate = parse_generate(endpoints, pool, base("generate", "generation"))
    assert set(generate.pool) == set(pool)
    annotate = parse_annotate(base("annotate"), endpoints)
    assert annotate.endpoint.name == "local" and annotate.aspect_sampling["top_p"] == 0.6
    assert annotate.critique_sampling["max_tokens"] == base("annotate")["critique"]["max_tokens"]
    assert parse_evaluate(base("evaluate"), endpoints).judge.endpoint.name == "local"
    assert parse_report(base("report")).pairs.strategy == "random_lower"


def test_defaults_come_from_the_dataclasses():
    assert parse_sample({}, POOL) == SampleParams(models=("a", "b"))
    assert parse_report({}) == ReportParams()
    cache = {
        "cached_prompt_per_1k": 0.1,
        "batch_cached_prompt_per_1k": 0.05,
        "cache_write_per_1k": 2,
    }
    entry = {"prompt_per_1k": 1, "completion_per_1k": 1, **cache}
    assert parse_report({"prices": {"x": entry}}).prices == {"x": entry}
    annotate = parse_annotate({"judge": {"endpoint": "local"}}, ENDPOINTS)
    defaults = AnnotateParams(judge=annotate.judge)
    assert (annotate.aspects, annotate.n_shuffles, annotate.max_reasks, annotate.score_fix) == (
        defaults.aspects,
        defaults.n_shuffles,
        defaults.max_reasks,
        defaults.score_fix,
    )
    assert annotate.aspect_orders == defaults.aspect_orders == "independent"


@pytest.mark.parametrize(
    ("parse", "message"),
    [
        (lambda: parse_sample({"n_completion": 4}, POOL), "sample.n_completion: unknown setting"),
        (
            lambda: parse_sample({"n_completions": "4"}, POOL),
            "sample.n_completions must be an integer >= 1",
        ),
        (lambda: parse_sample({"max_prompts": 0}, POOL), "sample.max_prompts must be an integer"),
        (
            lambda: parse_sample({"verbalized_calibration_rate": 2}, POOL),
            "sample.verbalized_calibration_rate",
        ),
        (lambda: parse_sample({}, {}), "model_pool must map model names"),
        (
            lambda: parse_generate(ENDPOINTS, POOL, {"temperature": "hot"}),
            "generation.temperature must be a number >= 0",
        ),
        (
            lambda: parse_generate(ENDPOINTS, {"a": {"endpoint": "local", "top_k": 5}}, {}),
            "model_pool.a.top_k: unknown",
        ),
        (
            lambda: parse_generate(ENDPOINTS, {"a": {"endpoint": "nowhere"}}, {}),
            "model_pool.a.endpoint: 'nowhere' is not defined",
        ),
        (
            lambda: parse_annotate({"judge": {"endpoint": "local"}, "n_shufles": 2}, ENDPOINTS),
            "annotate.n_shufles: unknown setting",
        ),
        (
            lambda: parse_annotate({"judge": {"endpoint": "gpt"}}, ENDPOINTS),
            "annotate.judge.endpoint: 'gpt' is not defined",
        ),
        (
            lambda: parse_annotate(
                {"judge": {"endpoint": "local", "max_tokens": "abc"}}, ENDPOINTS
            ),
            "annotate.judge.max_tokens must be an integer >= 1",
        ),
        (
            lambda: parse_annotate({"judge": {"endpoint": "local"}, "n_shuffles": 0}, ENDPOINTS),
            "annotate.n_shuffles must be an integer >= 1",
        ),
        (
            lambda: parse_annotate({"judge": {"endpoint": "local"}, "aspects": ["wit"]}, ENDPOINTS),
            "unknown aspect 'wit'",
        ),
        (
            lambda: parse_annotate(
                {"judge": {"endpoint": "local"}, "aspect_orders": "per_prompt"}, ENDPOINTS
            ),
            "annotate.aspect_orders must be one of independent, shared, got 'per_prompt'",
        ),
        (
            lambda: parse_annotate(
                {"judge": {"endpoint": "local"}, "score_fix": {"flip_treshold": 2}}, ENDPOINTS
            ),
            "annotate.score_fix.flip_treshold: unknown setting",
        ),
        (
            lambda: parse_annotate(
                {"judge": {"endpoint": "local"}, "critique": {"top_p": 3}}, ENDPOINTS
            ),
            "annotate.critique.top_p must be a number between 0 and 1",
        ),
        (
            lambda: parse_report({"intervals": {"n_resamples": 5}}),
            "report.intervals.n_resamples must be an integer >= 10, got 5",
        ),
        (
            lambda: parse_report({"intervals": {"confidence": 95}}),
            "report.intervals.confidence must be a number >= 0.5 and <= 0.999, got 95",
        ),
        (
            lambda: parse_report({"ranking": {"baseline": 3}}),
            "report.ranking.baseline must be a string, got 3",
        ),
        (
            lambda: parse_report({"pairs": {"strategy": "best"}}),
            "report.pairs.strategy must be one of random_lower, all_pairs",
        ),
        (
            lambda: parse_report({"prices": {"x": {"prompt_per_1k": -1, "completion_per_1k": 0}}}),
            "report.prices.x.prompt_per_1k must be a number >= 0",
        ),
        (
            lambda: parse_report(
                {"prices": {"x": {"prompt_per_1k": 1, "completion_per_1k": 1, "batch_per_1k": 1}}}
            ),
            "report.prices.x must be {prompt_per_1k: ..., completion_per_1k: ...}, optionally",
        ),
        (
            lambda: parse_report(
                {
                    "prices": {
                        "x": {"prompt_per_1k": 1, "completion_per_1k": 1, "batch_prompt_per_1k": -1}
                    }
                }
            ),
            "report.prices.x.batch_prompt_per_1k must be a number >= 0",
        ),
        (
            lambda: parse_report(
                {
                    "prices": {
                        "x": {"prompt_per_1k": 1, "completion_per_1k": 1, "cache_write_per_1k": "a"}
                    }
                }
            ),
            "report.prices.x.cache_write_per_1k must be a number >= 0",
        ),
        (
            lambda: parse_evaluate({"judge": {"endpoint": "local"}, "mode": "vibes"}, ENDPOINTS),
            "evaluate.mode must be one of",
        ),
    ],
)
def test_a_bad_parameter_is_named_by_its_dotted_path(parse, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse()


def test_one_sampling_checker_for_every_block():
    assert set(SAMPLING_KEYS) == {"temperature", "top_p", "max_tokens", "stop", "seed"}
    assert check_sampling({"stop": "###", "temperature": 1}, "x") == {
        "stop": ["###"],
        "temperature": 1.0,
    }
    with pytest.raises(ConfigError, match=r"x\.seed must be an integer or null"):
        check_sampling({"seed": 1.5}, "x")


def test_one_endpoint_resolver(monkeypatch):
    assert resolve_endpoint("local", ENDPOINTS).model == "m"
    assert resolve_endpoint({"backend": "openai", "model": "inline"}, ENDPOINTS).model == "inline"
    monkeypatch.setenv("MODEL_VERSION", "from-env")
    monkeypatch.setenv("API_TYPE", "openai")
    assert resolve_endpoint("env", ENDPOINTS).model == "from-env"
    assert resolve_endpoint(None, ENDPOINTS).model == "from-env"
    # An endpoint that is called `env` wins over the environment.
    named_env = {"env": {"backend": "openai", "model": "named"}}
    assert resolve_endpoint("env", named_env).model == "named"
    with pytest.raises(ConfigError, match=r"where: 'x' is not defined in 'endpoints' \(local\)"):
        resolve_endpoint("x", ENDPOINTS, "where")


def test_the_published_records_are_a_file_or_a_folder_that_exists(tmp_path):
    from llm_feedback.params.ultrafeedback_fix import parse_ultrafeedback_fix

    def parse(path):
        block = {"records_path": str(path)}
        return parse_ultrafeedback_fix(block, {"judge": {"endpoint": "local"}}, ENDPOINTS, None)

    with pytest.raises(ConfigError, match=r"records_path: .*missing\.parquet does not exist"):
        parse(tmp_path / "missing.parquet")
    with pytest.raises(ConfigError, match="records_path is required"):
        parse_ultrafeedback_fix({}, {"judge": {"endpoint": "local"}}, ENDPOINTS, None)
    (tmp_path / "shards").mkdir()
    assert parse(tmp_path / "shards").records_path == str(tmp_path / "shards")
    (tmp_path / "records.jsonl").write_text("")
    assert parse(tmp_path / "records.jsonl").records_path == str(tmp_path / "records.jsonl")


def test_a_judge_preset_sets_sampling_and_timeout_and_the_block_overrides_its_sampling():
    from llm_feedback.judges.config import JUDGE_PRESETS  # noqa: PLC0415
    from llm_feedback.params.judge import parse_judge  # noqa: PLC0415

    endpoints = {"j": {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}}
    preset = JUDGE_PRESETS["lmms_eval"]
    judge = parse_judge({"endpoint": "j", "preset": "lmms_eval"}, "evaluate.judge", endpoints)
    assert dict(judge.sampling) == dict(preset.sampling)
    assert judge.endpoint.timeout_s == preset.timeout_s
    own = parse_judge(
        {"endpoint": "j", "preset": "lmms_eval", "temperature": 0}, "evaluate.judge", endpoints
    )
    assert own.sampling["temperature"] == 0 and own.sampling["top_p"] == preset.sampling["top_p"]
