import math

import pytest

from llm_feedback.completions.principles import (
    DEFAULT_PRINCIPLE_WEIGHTS,
    DEFAULT_VERBALIZED_CALIBRATION_RATE,
    PRINCIPLES,
    SOURCES,
    SYSTEM_PROMPTS,
    validate_calibration_rate,
    validate_principle_weights,
)
from llm_feedback.core.errors import ConfigError


def test_every_principle_has_three_or_four_distinct_system_prompts():
    assert set(SYSTEM_PROMPTS) == set(PRINCIPLES)
    assert len(PRINCIPLES) == 5
    for principle, variants in SYSTEM_PROMPTS.items():
        assert 3 <= len(variants) <= 4, principle
        assert len(set(variants)) == len(variants), principle
        assert all(isinstance(text, str) and len(text.split()) >= 10 for text in variants)


def test_calibration_prompts_ask_for_a_stated_confidence():
    for text in SYSTEM_PROMPTS["verbalized_calibration"]:
        assert "%" in text


def test_default_table_is_the_ultrafeedback_recipe():
    weights = validate_principle_weights(None)
    assert set(weights) == set(SOURCES)
    assert weights["sharegpt"] == pytest.approx(
        {"helpfulness": 0.6, "truthfulness": 0.2, "honesty": 0.2}
    )
    assert weights["ultrachat"] == weights["sharegpt"]
    assert weights["flan"] == pytest.approx({"helpfulness": 0.8, "verbalized_calibration": 0.2})
    assert weights["evol_instruct"] == {"helpfulness": 1.0}
    assert weights["truthful_qa"] == pytest.approx({"honesty": 0.5, "truthfulness": 0.5})
    assert weights["false_qa"] == weights["truthful_qa"]
    assert DEFAULT_VERBALIZED_CALIBRATION_RATE == 0.1


def test_defaults_cannot_be_mutated_by_accident():
    with pytest.raises(TypeError):
        DEFAULT_PRINCIPLE_WEIGHTS["flan"]["helpfulness"] = 0.0  # type: ignore[index]


def test_relative_weights_are_normalised_per_source():
    weights = validate_principle_weights(
        {"mt_bench": {"helpfulness": 3, "honesty": 1, "harmlessness": 1}}
    )
    assert weights == {
        "mt_bench": pytest.approx({"helpfulness": 0.6, "honesty": 0.2, "harmlessness": 0.2})
    }


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({"flan": {"helpfullness": 1.0}}, r"\['flan'\]\['helpfullness'\]: unknown principle"),
        ({"flan": {"helpfulness": -0.5}}, r"\['flan'\]\['helpfulness'\]: .*>= 0"),
        ({"flan": {"helpfulness": math.nan}}, r"\['flan'\]\['helpfulness'\]: .*finite"),
        ({"flan": {"helpfulness": "high"}}, r"\['flan'\]\['helpfulness'\]: .*number"),
        ({"flan": {"helpfulness": True}}, r"\['flan'\]\['helpfulness'\]: .*number"),
        ({"flan": {"helpfulness": 0, "honesty": 0.0}}, r"\['flan'\]: all weights are zero"),
        ({"flan": {}}, r"\['flan'\] must be a non-empty mapping"),
        ({"": {"helpfulness": 1}}, "source names must be non-empty"),
        ({}, "non-empty mapping"),
    ],
)
def test_bad_weight_tables_name_the_source_and_principle(table, expected):
    with pytest.raises(ConfigError, match=expected) as raised:
        validate_principle_weights(table)
    assert str(raised.value).startswith("principle_weights")


@pytest.mark.parametrize("rate", [-0.1, 1.5, "0.1", None, True])
def test_calibration_rate_must_be_a_probability(rate):
    with pytest.raises(ConfigError, match="verbalized_calibration_rate"):
        validate_calibration_rate(rate)


def test_calibration_rate_bounds_are_allowed():
    assert validate_calibration_rate(0) == 0.0
    assert validate_calibration_rate(1) == 1.0
