import logging

import pandas as pd
import pyarrow.parquet as pq
import pytest

from llm_feedback.core.errors import ConfigError
from llm_feedback.params import parse_report
from llm_feedback.reporting import binarize, normalise_instruction
from llm_feedback.storage.schema import (
    PAIR_DROPS_COLUMN_TYPES,
    PREFERENCE_PAIRS_ARROW_SCHEMA,
    PREFERENCE_PAIRS_ARROW_SCHEMAS,
    PREFERENCE_PAIRS_H4_ARROW_SCHEMA,
    pandas_dtypes,
)

from .builders import (
    NA,
    PARSE_ERROR,
    Completion,
    build_frames,
    empty_frames,
    on_disk,
    typical_specs,
)

pytestmark = pytest.mark.filterwarnings("error")


def run(frames, **options):
    return binarize(frames.completions, frames.overall_scores, frames.aspect_annotations, **options)


def drop_counts(dropped: pd.DataFrame) -> dict[str, int]:
    return dict(zip(dropped["reason"], dropped["n_prompts"], strict=True))


def assert_schema(frame: pd.DataFrame, schema: dict[str, str]) -> None:
    assert {column: str(dtype) for column, dtype in frame.dtypes.items()} == schema


def assert_pairs_schema(pairs: pd.DataFrame, layout: str = "trl") -> None:
    """The pandas dtypes follow the layout's Arrow schema, which `to_parquet` writes."""
    schema = PREFERENCE_PAIRS_ARROW_SCHEMAS[layout]
    assert_schema(pairs, pandas_dtypes(schema))
    assert pairs.arrow_schema.equals(schema)


def test_random_lower_pairs_the_best_with_a_strictly_lower_completion():
    frames = build_frames(typical_specs())
    pairs, dropped = run(frames)

    assert_pairs_schema(pairs)
    assert_schema(dropped, PAIR_DROPS_COLUMN_TYPES)
    assert list(pairs["prompt_id"]) == ["p1", "p2", "p3"]
    assert (pairs["model_chosen"] == "alpha").all()  # 9, 8 (beta's 10 was re-annotated to 6), 9
    assert (pairs["score_rejected"] < pairs["score_chosen"]).all()
    assert (pairs["score_kind"] == "overall").all()
    # Neither delta's failed generation (p2) nor gamma's unscored p3 completion may be used.
    p2, p3 = pairs.iloc[1], pairs.iloc[2]
    assert p2["model_rejected"] != "delta"
    assert p3["model_rejected"] != "gamma"
    assert drop_counts(dropped) == {
        "decontaminated": 0,
        "fewer_than_two_scored": 0,
        "all_scores_tied": 0,
    }


def two_answers():
    return build_frames(
        [
            Completion("p1", "alpha", overall=9, response="Good answer.", instruction="Why?"),
            Completion("p1", "beta", overall=2, response="Bad answer.", instruction="Why?"),
        ]
    )


def test_trl_layout_has_a_user_prompt_and_assistant_answers():
    pair = run(two_answers()).pairs.iloc[0]

    assert pair["prompt"] == [{"role": "user", "content": "Why?"}]
    assert pair["chosen"] == [{"role": "assistant", "content": "Good answer."}]
    assert pair["rejected"] == [{"role": "assistant", "content": "Bad answer."}]
    # What a trainer concatenates is the whole conversation.
    assert [m["role"] for m in pair["prompt"] + pair["chosen"]] == ["user", "assistant"]
    assert (pair["prompt_id"], pair["source"]) == ("p1", "evol_instruct")
    assert (pair["score_chosen"], pair["score_rejected"]) == (9.0, 2.0)
    assert (pair["completion_idx_chosen"], pair["completion_idx_rejected"]) == (0, 1)
    assert (pair["model_chosen"], pair["model_rejected"]) == ("alpha", "beta")


def test_h4_layout_has_exactly_the_ultrafeedback_binarized_columns():
    pairs = run(two_answers(), layout="h4").pairs
    assert_pairs_schema(pairs, "h4")
    assert list(pairs.columns) == [
        "prompt",
        "prompt_id",
        "chosen",
        "rejected",
        "messages",
        "score_chosen",
        "score_rejected",
    ]
    pair = pairs.iloc[0]
    assert pair["prompt"] == "Why?"
    assert pair["chosen"] == [
        {"role": "user", "content": "Why?"},
        {"role": "assistant", "content": "Good answer."},
    ]
    assert pair["rejected"][1] == {"role": "assistant", "content": "Bad answer."}
    assert pair["messages"] == pair["chosen"]
    assert (pair["prompt_id"], pair["score_chosen"], pair["score_rejected"]) == ("p1", 9.0, 2.0)


def test_both_layouts_pick_the_same_pairs():
    frames = build_frames(many_prompts(8))
    trl, h4 = run(frames, seed=3).pairs, run(frames, seed=3, layout="h4").pairs
    assert list(trl["prompt_id"]) == list(h4["prompt_id"])
    for (_, one), (_, other) in zip(trl.iterrows(), h4.iterrows(), strict=True):
        assert one["prompt"] + one["chosen"] == other["chosen"]
        assert one["prompt"] + one["rejected"] == other["rejected"]
        assert (one["score_chosen"], one["score_rejected"]) == (
            other["score_chosen"],
            other["score_rejected"],
        )


def test_layout_parameter_defaults_to_trl_and_is_checked():
    assert parse_report({}).pairs.layout == "trl"
    assert parse_report({"pairs": {"layout": "h4"}}).pairs.layout == "h4"
    with pytest.raises(ConfigError, match=r"report\.pairs\.layout"):
        parse_report({"pairs": {"layout": "zephyr"}})


def many_prompts(n_prompts: int) -> list[Completion]:
    return [
        Completion(f"p{i}", model, overall=score)
        for i in range(n_prompts)
        for model, score in (("alpha", 9), ("beta", 9), ("gamma", 5), ("delta", 3), ("eps", 2))
    ]


def test_draws_are_seeded_and_stable_per_prompt():
    frames = build_frames(many_prompts(30))
    first = run(frames, seed=7).pairs
    again = run(frames, seed=7).pairs
    pd.testing.assert_frame_equal(first, again)

    # A prompt's pair does not depend on which other prompts are present.
    subset = build_frames([spec for spec in many_prompts(30) if spec.prompt_id in {"p3", "p17"}])
    subset_pairs = run(subset, seed=7).pairs
    expected = first[first["prompt_id"].isin(["p3", "p17"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(subset_pairs, expected)

    # Both tied best completions get chosen somewhere, and the seed matters.
    assert set(first["model_chosen"]) == {"alpha", "beta"}
    assert not run(frames, seed=8).pairs.equals(first)


def test_input_row_order_does_not_change_the_pairs():
    frames = build_frames(many_prompts(10))
    shuffled = build_frames(many_prompts(10))
    shuffled.completions = shuffled.completions.sample(frac=1, random_state=0)
    shuffled.overall_scores = shuffled.overall_scores.sample(frac=1, random_state=1)
    pd.testing.assert_frame_equal(run(frames).pairs, run(shuffled).pairs)


def test_ties_at_the_top_with_nothing_lower_drop_the_prompt():
    frames = build_frames(
        [
            Completion("tied", "alpha", overall=8),
            Completion("tied", "beta", overall=8),
            Completion("ok", "alpha", overall=8),
            Completion("ok", "beta", overall=8),
            Completion("ok", "gamma", overall=2),
        ]
    )
    pairs, dropped = run(frames)
    assert list(pairs["prompt_id"]) == ["ok"]
    assert pairs["model_rejected"].iloc[0] == "gamma"
    assert drop_counts(dropped)["all_scores_tied"] == 1


def test_single_completion_per_prompt_gives_no_pairs_and_says_why():
    frames = build_frames([Completion("p1", "alpha"), Completion("p2", "beta")])
    pairs, dropped = run(frames)
    assert pairs.empty
    assert_pairs_schema(pairs)
    assert drop_counts(dropped)["fewer_than_two_scored"] == 2


def test_unusable_completions_never_enter_a_pair():
    frames = build_frames(
        [
            Completion("p1", "good", overall=9),
            Completion("p1", "errored", error="timeout"),
            Completion("p1", "null", overall=5, response=None),
            Completion("p1", "blank", overall=5, response="   "),
            Completion("p1", "unscored", overall=None),
        ]
    )
    pairs, dropped = run(frames)
    assert pairs.empty
    assert drop_counts(dropped)["fewer_than_two_scored"] == 1


def test_decontamination_compares_normalised_instructions():
    frames = build_frames(typical_specs())
    pairs, dropped = run(frames, decontaminate=["  question   P1? "])
    assert "p1" not in set(pairs["prompt_id"])
    assert drop_counts(dropped)["decontaminated"] == 1


def test_normalise_instruction():
    assert normalise_instruction("  Ｗhat\tis\n\nIT? ") == "what is it?"


def test_mean_aspects_score_ignores_na_and_failed_ratings():
    ratings = {
        "instruction_following": 5,
        "honesty": NA,
        "truthfulness": PARSE_ERROR,
        "helpfulness": 4,
    }
    frames = build_frames(
        [
            Completion("p1", "alpha", ratings, overall=1),
            Completion("p1", "beta", {aspect: 2 for aspect in ratings}, overall=10),
        ]
    )
    pair = run(frames, score="mean_aspects").pairs.iloc[0]
    assert pair["model_chosen"] == "alpha"
    assert pair["score_chosen"] == pytest.approx(4.5)
    assert pair["score_rejected"] == pytest.approx(2.0)
    assert pair["score_kind"] == "mean_aspects"


def test_all_pairs_lists_every_strictly_ordered_pair():
    frames = build_frames(
        [
            Completion("p1", "alpha", overall=9),
            Completion("p1", "beta", overall=9),
            Completion("p1", "gamma", overall=5),
            Completion("p1", "delta", overall=3),
        ]
    )
    pairs = run(frames, strategy="all_pairs").pairs
    assert list(zip(pairs["model_chosen"], pairs["model_rejected"], strict=True)) == [
        ("alpha", "gamma"),
        ("alpha", "delta"),
        ("beta", "gamma"),
        ("beta", "delta"),
        ("gamma", "delta"),
    ]


@pytest.mark.parametrize(
    ("option", "value"), [("score", "median"), ("strategy", "best_worst"), ("layout", "zephyr")]
)
def test_unknown_options_are_config_errors(option, value):
    with pytest.raises(ConfigError, match=option):
        run(build_frames(typical_specs()), **{option: value})


@pytest.mark.parametrize("layout", ["trl", "h4"])
@pytest.mark.parametrize("score", ["overall", "mean_aspects"])
def test_empty_inputs(score, layout, tmp_path):
    pairs, dropped = run(empty_frames(), score=score, layout=layout)
    assert pairs.empty
    assert_pairs_schema(pairs, layout)
    pairs.to_parquet(tmp_path / "pairs.parquet")  # no `null` columns for want of values
    schema = pq.read_schema(tmp_path / "pairs.parquet")
    assert schema.remove_metadata().equals(PREFERENCE_PAIRS_ARROW_SCHEMAS[layout])
    assert drop_counts(dropped) == dict.fromkeys(
        ["decontaminated", "fewer_than_two_scored", "all_scores_tied"], 0
    )


def test_counts_are_logged(caplog):
    with caplog.at_level(logging.INFO, logger="llm_feedback.reporting.pairs"):
        run(build_frames([Completion("p1", "alpha")]))
    assert "fewer_than_two_scored=1" in caplog.text


@pytest.mark.parametrize(
    ("layout", "schema"),
    [("trl", PREFERENCE_PAIRS_ARROW_SCHEMA), ("h4", PREFERENCE_PAIRS_H4_ARROW_SCHEMA)],
)
def test_pairs_round_trip_through_parquet_with_the_explicit_schema(layout, schema, tmp_path):
    pairs = run(build_frames(typical_specs()), layout=layout).pairs
    path = tmp_path / "pairs.parquet"
    pairs.to_parquet(path)

    written = pq.read_schema(path)
    for field in schema:  # `string`, never pandas' `large_string`
        assert written.field(field.name).type == field.type, field.name
    assert written.names == schema.names
    loaded = pd.read_parquet(path)
    assert [[dict(m) for m in messages] for messages in loaded["chosen"]] == list(pairs["chosen"])
    assert loaded["score_chosen"].tolist() == pairs["score_chosen"].tolist()
    # Anything derived from the pairs is a plain DataFrame again.
    assert type(pairs.head(1)) is pd.DataFrame


def test_a_completion_suspected_of_injection_enters_no_pair_unless_asked():
    frames = build_frames(
        [
            Completion("p1", "injector", overall=10),
            Completion("p1", "honest", overall=6),
            Completion("p1", "weak", overall=2),
        ]
    )
    annotations = frames.aspect_annotations.copy()
    annotations["suspected_injection"] = annotations["completion_idx"].eq(0)
    frames.aspect_annotations = annotations

    pairs, _ = run(frames)
    assert list(pairs["model_chosen"]) == ["honest"]
    assert "injector" not in set(pairs["model_rejected"])

    included, _ = run(frames, include_suspected=True)
    assert list(included["model_chosen"]) == ["injector"]


@pytest.mark.parametrize(
    ("layout", "strategy", "score"),
    [("trl", "random_lower", "overall"), ("h4", "all_pairs", "mean_aspects")],
)
def test_pairs_written_from_files_a_prompt_at_a_time_are_the_file_of_the_frame(
    tmp_path, layout, strategy, score
):
    """The node's path: the tables on disk read a chunk of one prompt at a time, the pairs
    built as they are written, give the very file (schema, pandas metadata, rows) that the
    frame of the whole tables writes, and the same drops."""
    from llm_feedback.reporting.pairs import binarize_export

    frames = build_frames(typical_specs(), shuffles=2)
    options = {"layout": layout, "strategy": strategy, "score": score, "decontaminate": []}
    whole = run(frames, **options)
    whole.pairs.to_parquet(tmp_path / "whole.parquet")
    sources = [
        on_disk(tmp_path, name, getattr(frames, name))
        for name in ("completions", "overall_scores", "aspect_annotations")
    ]
    export = binarize_export(*sources, **options, prompts_per_chunk=1)
    assert len(export.pairs) == len(whole.pairs) > 0
    pd.testing.assert_frame_equal(export.dropped, whole.dropped)
    export.pairs.to_parquet(tmp_path / "streamed.parquet")
    written, expected = (pq.read_table(tmp_path / f"{n}.parquet") for n in ("streamed", "whole"))
    assert written.equals(expected, check_metadata=True)
    assert pq.ParquetFile(tmp_path / "streamed.parquet").num_row_groups == 3  # one a prompt
