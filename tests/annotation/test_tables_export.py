import re

import pandas as pd
import pyarrow.parquet as pq
import pytest

from llm_feedback.annotation import (
    ASPECTS,
    DEFAULT_ASPECTS,
    AspectJudgement,
    AspectSpec,
    CritiqueJudgement,
    apply_reannotated_scores,
    aspect_annotations_frame,
    collect_scores,
    critiques_frame,
    export,
    parse_aspect_reply,
    parse_critique_reply,
    plan_score_fix,
    shuffle_orders,
    to_ultrafeedback_records,
    ultrafeedback_export,
    ultrafeedback_frame,
)
from llm_feedback.annotation.export import to_public
from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.storage.parquet_source import ParquetSource
from llm_feedback.storage.schema import (
    ASPECT_ANNOTATIONS_COLUMN_TYPES,
    CRITIQUES_COLUMN_TYPES,
    ULTRAFEEDBACK_ARROW_SCHEMA,
    ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA,
    ultrafeedback_arrow_schema,
)

# Prompt "a": completion 1 failed to generate, so only 0 and 2 are judged.
COMPLETIONS = pd.DataFrame(
    {
        "prompt_id": ["a", "a", "a", "b", "b"],
        "completion_idx": [0, 1, 2, 0, 1],
        "source": ["flan"] * 3 + ["sharegpt"] * 2,
        "instruction": ["Add 2 and 2."] * 3 + ["Write a haiku."] * 2,
        "correct_answers": [["4", "four"]] * 3 + [[]] * 2,
        "incorrect_answers": [["5"]] * 3 + [[]] * 2,
        "world_knowledge": ["4"] * 3 + [""] * 2,
        "model": ["m1", "m2", "m3", "m1", "m4"],
        "principle": ["helpfulness", "honesty", "truthfulness", "helpfulness", "harmlessness"],
        "system_prompt": ["Be helpful.", "Be honest.", "", "Be helpful.", "Be safe."],
        "response": ["4", None, "5", "Leaves fall softly", "Snow on the pine"],
    }
)

# Ratings per (prompt, completion_idx), in DEFAULT_ASPECTS order, as the judge writes them.
VERDICTS = {
    key: dict(zip(DEFAULT_ASPECTS, ratings, strict=True))
    for key, ratings in {
        ("a", 0): ("5", "5", "5", "4"),
        ("a", 2): ("2", "1", "1", "1"),
        ("b", 0): ("4", "N/A", "5", "4"),
        ("b", 1): ("3", "N/A", "4", "3"),
    }.items()
}


def judge_reply(prompt_id: str, completion_ids: list[int], order: list[int], aspect: str) -> str:
    sections = []
    for position, shown in enumerate(order, start=1):
        rating = VERDICTS[(prompt_id, completion_ids[shown])][aspect]
        lines = [f"### Text {position}"]
        if aspect in ("truthfulness", "helpfulness"):
            lines += ["Type: 1, 3" if rating != "5" else "Type: None", "Type rationale: types"]
        lines += [f"Rating: {rating}", f"Rationale: rated {rating}"]
        sections.append("\n".join(lines))
    return "\n\n".join(sections)


def judge_everything() -> list[AspectJudgement]:
    judgements = []
    for prompt_id, completion_ids, n_shuffles in (("a", [0, 2], 2), ("b", [0, 1], 1)):
        for shuffle_idx, order in enumerate(
            shuffle_orders(prompt_id, len(completion_ids), n_shuffles, seed=0)
        ):
            for aspect in DEFAULT_ASPECTS:
                reply = judge_reply(prompt_id, completion_ids, order, aspect)
                judgements.append(
                    AspectJudgement(
                        prompt_id=prompt_id,
                        aspect=aspect,
                        shuffle_idx=shuffle_idx,
                        order=order,
                        ratings=parse_aspect_reply(aspect, reply, len(order), False),
                        judge_model="judge",
                        raw_reply=reply,
                        completion_ids=completion_ids,
                    )
                )
    # One failed call: shuffle 1 of prompt "a" on honesty never came back.
    failed = next(
        index
        for index, judgement in enumerate(judgements)
        if (judgement.prompt_id, judgement.aspect, judgement.shuffle_idx) == ("a", "honesty", 1)
    )
    judgements[failed] = AspectJudgement(
        prompt_id="a",
        aspect="honesty",
        shuffle_idx=1,
        order=judgements[failed].order,
        ratings=[],
        judge_model="judge",
        call_error="timeout",
        completion_ids=[0, 2],
    )
    return judgements


def critique_table() -> pd.DataFrame:
    replies = {
        ("a", 0): "Correct and brief.\nOverall score: 9",
        ("a", 2): "Wrong sum.\nOverall score: 10",  # the bug the fix catches
        ("b", 0): "Nice imagery.\nOverall score: 10",
        ("b", 1): None,
    }
    return critiques_frame(
        CritiqueJudgement(
            prompt_id=prompt_id,
            completion_idx=idx,
            parsed=None if reply is None else parse_critique_reply(reply, False),
            judge_model="judge",
            raw_reply=reply,
            call_error="HTTP 500" if reply is None else None,
        )
        for (prompt_id, idx), reply in replies.items()
    )


def test_aspect_frame_maps_positions_back_to_completions() -> None:
    frame = aspect_annotations_frame(judge_everything())
    assert frame.dtypes.astype(str).to_dict() == {
        column: str(pd.Series(dtype=dtype).dtype)
        for column, dtype in ASPECT_ANNOTATIONS_COLUMN_TYPES.items()
    }
    assert len(frame) == (2 * 2 + 2) * 4
    ok = frame[frame["parse_status"] == "ok"]
    for row in ok.itertuples():
        assert row.rating == float(VERDICTS[(row.prompt_id, row.completion_idx)][row.aspect])
    na = frame[frame["parse_status"] == "na"]
    assert na["is_na"].all() and na["rating"].isna().all() and len(na) == 2
    failed = frame[frame["parse_status"] == "call_failed"]
    assert sorted(failed["completion_idx"]) == [0, 2]
    assert failed["rating"].isna().all() and (failed["parse_error"] == "timeout").all()
    assert set(frame.loc[frame["prompt_id"] == "a", "completion_idx"]) == {0, 2}
    typed = frame[(frame["aspect"] == "truthfulness") & (frame["shuffle_idx"] == 0)]
    typed = typed.set_index(["prompt_id", "completion_idx"])
    assert list(typed.loc[("a", 0), "types"]) == ["0"]
    assert list(typed.loc[("b", 1), "types"]) == ["1", "3"]


def test_aspect_frame_rejects_mismatched_results() -> None:
    judgement = AspectJudgement(
        prompt_id="p",
        aspect="honesty",
        shuffle_idx=0,
        order=[1, 0],
        ratings=parse_aspect_reply("honesty", "Rating: 3", 1, False),
    )
    with pytest.raises(InputError):
        aspect_annotations_frame([judgement])


def test_critiques_frame() -> None:
    frame = critique_table()
    assert list(frame.columns) == list(CRITIQUES_COLUMN_TYPES)
    assert frame["overall_score"].tolist() == [9.0, 10.0, 10.0, pd.NA]
    assert frame["parse_status"].tolist() == ["ok", "ok", "ok", "call_failed"]
    assert frame["critique"].tolist()[:2] == ["Correct and brief.", "Wrong sum."]


def full_run() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    aspects = aspect_annotations_frame(judge_everything())
    critiques = critique_table()
    plan = plan_score_fix(collect_scores(COMPLETIONS, aspects, critiques))
    overall_scores = apply_reannotated_scores(plan, {})  # nothing between 2 and 4 scored 10
    return COMPLETIONS, aspects, critiques, overall_scores


def test_overall_scores_for_the_whole_run() -> None:
    _, _, _, overall_scores = full_run()
    by_key = overall_scores.set_index(["prompt_id", "completion_idx"])
    assert by_key.loc[("a", 2), "fix_action"] == "flipped"  # 10 with fine-grained 1.25
    assert by_key.loc[("a", 2), "overall_score_fixed"] == 1.0
    assert by_key.loc[("b", 0), "fix_action"] == "kept"  # 10 with fine-grained 4.33
    assert by_key.loc[("b", 0), "fine_grained_score"] == pytest.approx(13 / 3)
    assert by_key.loc[("a", 1), "fix_action"] == "no_overall_score"
    assert bool(by_key.loc[("a", 1), "no_fine_grained"])


def test_ultrafeedback_records_shape() -> None:
    records = to_ultrafeedback_records(*full_run())
    assert [record["prompt_id"] for record in records] == ["a", "b"]
    first = records[0]
    assert (first["source"], first["instruction"]) == ("flan", "Add 2 and 2.")
    assert first["models"] == ["m1", "m2", "m3"]
    assert (first["correct_answers"], first["incorrect_answers"]) == (["4", "four"], ["5"])
    assert (records[1]["correct_answers"], records[1]["incorrect_answers"]) == ([], [])
    completion = first["completions"][0]
    assert set(completion) == {
        "model",
        "principle",
        "custom_system_prompt",
        "response",
        "annotations",
        "critique",
        "overall_score",
        "fine-grained_score",
    }
    assert completion["annotations"]["instruction_following"] == {
        "Rating": "5",
        "Rationale": "rated 5",
    }
    assert completion["annotations"]["truthfulness"] == {
        "Rating": "5",
        "Rationale": "types",
        "Rationale For Rating": "rated 5",
        "Type": ["0"],
    }
    assert completion["overall_score"] == 9.0
    # Each aspect averages its shuffles (honesty only has shuffle 0), then the aspects:
    # the mean of the four ratings the record shows.
    assert completion["fine-grained_score"] == pytest.approx(19 / 4)
    # Only the aspects rated: no field for harmlessness, which this run did not annotate.
    assert first["annotation_status"][0] == dict.fromkeys(DEFAULT_ASPECTS, "ok")
    assert "extra_annotations" not in first
    failed_generation = first["completions"][1]
    assert failed_generation["response"] is None
    assert failed_generation["annotations"]["helpfulness"]["Rating"] is None
    assert failed_generation["overall_score"] is None
    assert failed_generation["fine-grained_score"] is None
    assert set(first["annotation_status"][1].values()) == {None}  # never judged
    # The honesty call of shuffle 1 failed; shuffle 0 still supplies the rating.
    assert first["completions"][2]["annotations"]["honesty"]["Rating"] == "1"
    assert first["annotation_status"][2]["honesty"] == "ok"
    assert first["completions"][2]["overall_score"] == 1.0
    haiku = records[1]["completions"][0]
    assert haiku["annotations"]["honesty"]["Rating"] == "N/A"
    assert records[1]["annotation_status"][0]["honesty"] == "na"
    assert haiku["fine-grained_score"] == pytest.approx(13 / 3)  # N/A is no failure
    assert haiku["annotations"]["helpfulness"]["Type"] == ["1", "3"]
    assert records[1]["completions"][1]["critique"] is None


def test_export_round_trips_through_parquet(tmp_path) -> None:
    completions, aspects, critiques, overall_scores = full_run()
    records = to_ultrafeedback_records(completions, aspects, critiques, overall_scores)
    path = tmp_path / "ultrafeedback.parquet"
    ultrafeedback_frame(records).to_parquet(path)
    written = pq.read_schema(path)
    assert written.names == ULTRAFEEDBACK_ARROW_SCHEMA.names
    for field in ULTRAFEEDBACK_ARROW_SCHEMA:  # the explicit schema, field by field
        assert written.field(field.name).type == field.type, field.name
    restored = pq.read_table(path).to_pylist()
    assert restored == records

    # The long tables round-trip too, and the export reads them back as they come from disk.
    tables = {
        "completions": completions,
        "aspects": aspects,
        "critiques": critiques,
        "overall_scores": overall_scores,
    }
    for name, frame in tables.items():
        frame.to_parquet(tmp_path / f"{name}.parquet")
    reread = [pd.read_parquet(tmp_path / f"{name}.parquet") for name in tables]
    pd.testing.assert_frame_equal(reread[2], critiques)
    assert to_ultrafeedback_records(*reread) == records
    # and so does the export itself, into the public columns and types
    public = to_public(pd.read_parquet(path))
    assert public.schema.equals(ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA)
    assert public.to_pylist() == [
        {name: record[name] for name in ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA.names}
        for record in records
    ]


def test_export_built_in_chunks_writes_what_the_records_write(tmp_path, monkeypatch) -> None:
    """`ultrafeedback_export` builds a chunk of prompts at a time into Arrow: the same file as
    `ultrafeedback_frame` of the records (failed calls, N/A, a missing critique, shuffles
    that disagree), whatever the chunk size and the order of the judges' tables."""
    completions, aspects, critiques, overall_scores = full_run()
    disputed = (
        (aspects["prompt_id"] == "a")
        & (aspects["completion_idx"] == 0)
        & (aspects["aspect"] == "helpfulness")
        & (aspects["shuffle_idx"] == 1)
    )
    aspects.loc[disputed, "rating"] = 1
    records = to_ultrafeedback_records(completions, aspects, critiques, overall_scores)
    assert records[0]["shuffle_ratings"][0]["helpfulness"] == ["4", "1"]
    ultrafeedback_frame(records).to_parquet(tmp_path / "records.parquet")

    monkeypatch.setattr(export, "_PROMPTS_PER_CHUNK", 1)
    judged = [frame.iloc[::-1] for frame in (aspects, critiques, overall_scores)]
    assert to_ultrafeedback_records(completions, *judged) == records
    ultrafeedback_export(completions, *judged).to_parquet(tmp_path / "export.parquet")
    written = pq.read_table(tmp_path / "export.parquet")
    # pandas' metadata too: read_parquet gives back the frame of Python values
    assert written.equals(pq.read_table(tmp_path / "records.parquet"), check_metadata=True)
    assert written.schema.equals(ULTRAFEEDBACK_ARROW_SCHEMA)
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "export.parquet"), pd.read_parquet(tmp_path / "records.parquet")
    )

    # The judge tables on disk (small row groups, rows in any order): each chunk of prompts
    # reads its rows from the files, and the export is the same file.
    sources = []
    for name, frame in (("aspects", judged[0]), ("critiques", judged[1])):
        frame.to_parquet(tmp_path / f"{name}.parquet", row_group_size=2)
        sources.append(ParquetSource(str(tmp_path / f"{name}.parquet")))
    ultrafeedback_export(completions, *sources, judged[2]).to_parquet(tmp_path / "lazy.parquet")
    assert pq.read_table(tmp_path / "lazy.parquet").equals(written, check_metadata=True)


def test_a_parquet_source_reads_the_rows_of_some_keys_in_file_order(tmp_path) -> None:
    frame = pd.DataFrame(
        {
            "prompt_id": [f"p{i % 7}" for i in range(40)],
            "n": range(40),
            "text": [f"text {i}" for i in range(40)],
        }
    )
    frame.to_parquet(tmp_path / "t.parquet", row_group_size=6)
    source = ParquetSource(str(tmp_path / "t.parquet"))
    assert source.columns == ["prompt_id", "n", "text"]
    rows = source.rows_of("prompt_id", ["p2", "p5", "p9"], ["n", "prompt_id", "missing"])
    expected = frame.loc[frame["prompt_id"].isin(["p2", "p5"]), ["n", "prompt_id"]]
    pd.testing.assert_frame_equal(rows, expected.reset_index(drop=True))
    assert source.rows_of("prompt_id", ["p9"]).columns.tolist() == ["prompt_id", "n", "text"]
    assert source.rows_of("prompt_id", ["p9"]).empty
    pd.testing.assert_frame_equal(source.read(["text", "n"]), frame[["text", "n"]])
    pd.testing.assert_frame_equal(source.read(), pd.read_parquet(tmp_path / "t.parquet"))


def test_a_failed_judgment_is_marked_and_voids_the_fine_grained_score() -> None:
    completions, aspects, critiques, overall_scores = full_run()
    # Every shuffle of the haiku's second completion lost its helpfulness call.
    lost = (
        (aspects["prompt_id"] == "b")
        & (aspects["completion_idx"] == 1)
        & (aspects["aspect"] == "helpfulness")
    )
    aspects.loc[lost, ["rating", "rationale", "parse_status"]] = [pd.NA, pd.NA, "call_failed"]
    overall_scores = plan_score_fix(collect_scores(completions, aspects, critiques))

    records = to_ultrafeedback_records(completions, aspects, critiques, overall_scores)
    haiku = records[1]
    failed = haiku["completions"][1]
    assert failed["annotations"]["helpfulness"]["Rating"] is None
    assert haiku["annotation_status"][1]["helpfulness"] == "call_failed"
    assert haiku["annotation_status"][1]["truthfulness"] == "ok"
    # overall_scores still averages what came back; the export does not pass that off as
    # the fine-grained score.
    assert overall_scores.set_index(["prompt_id", "completion_idx"]).loc[
        ("b", 1), "fine_grained_score"
    ] == pytest.approx(3.5)
    assert failed["fine-grained_score"] is None
    assert haiku["completions"][0]["fine-grained_score"] == pytest.approx(13 / 3)


def test_shuffles_that_disagree_show_the_first_rating_as_an_integer_and_keep_each() -> None:
    completions, aspects, critiques, _ = full_run()
    second = (
        (aspects["prompt_id"] == "a")
        & (aspects["completion_idx"] == 0)
        & (aspects["aspect"] == "helpfulness")
        & (aspects["shuffle_idx"] == 1)
    )
    aspects.loc[second, ["rating", "rationale"]] = [1.0, "misses the point"]
    overall_scores = plan_score_fix(collect_scores(completions, aspects, critiques))

    record = to_ultrafeedback_records(completions, aspects, critiques, overall_scores)[0]
    completion = record["completions"][0]
    helpfulness = completion["annotations"]["helpfulness"]
    # UltraFeedback's readers call int(Rating): the first shuffle's rating and its rationale.
    assert helpfulness["Rating"] == "4"
    assert helpfulness["Rationale For Rating"] == "rated 4"
    assert all(int(a["Rating"]) for a in completion["annotations"].values())
    # Every shuffle's rating, in shuffle order, beside the public fields.
    assert record["shuffle_ratings"][0]["helpfulness"] == ["4", "1"]
    assert record["shuffle_ratings"][0]["honesty"] == ["5", None]  # shuffle 1's call failed
    # The fine-grained score still averages every shuffle: (5 + 5 + 5 + 2.5) / 4.
    assert completion["fine-grained_score"] == pytest.approx(17.5 / 4)


def test_a_rating_beside_an_n_a_shows_the_rating_and_keeps_the_n_a() -> None:
    completions, aspects, critiques, _ = full_run()
    second = (
        (aspects["prompt_id"] == "a")
        & (aspects["completion_idx"] == 0)
        & (aspects["aspect"] == "instruction_following")
        & (aspects["shuffle_idx"] == 0)
    )
    aspects.loc[second, ["rating", "is_na", "parse_status", "rationale"]] = [
        pd.NA,
        True,
        "na",
        "nothing to follow",
    ]
    overall_scores = plan_score_fix(collect_scores(completions, aspects, critiques))
    records = to_ultrafeedback_records(completions, aspects, critiques, overall_scores)
    annotation = records[0]["completions"][0]["annotations"]["instruction_following"]
    assert annotation == {"Rating": "5", "Rationale": "rated 5"}
    assert records[0]["shuffle_ratings"][0]["instruction_following"] == ["N/A", "5"]


def test_answer_lists_are_empty_when_completions_lack_them() -> None:
    completions, aspects, critiques, overall_scores = full_run()
    bare = completions.drop(columns=["correct_answers", "incorrect_answers"])
    for record in to_ultrafeedback_records(bare, aspects, critiques, overall_scores):
        assert (record["correct_answers"], record["incorrect_answers"]) == ([], [])


def test_an_extra_aspect_goes_beside_the_public_annotations(tmp_path) -> None:
    completions, aspects, critiques, overall_scores = full_run()
    harmless = aspects[aspects["aspect"] == "honesty"].assign(
        aspect="harmlessness", rating=5.0, is_na=False, parse_status="ok"
    )
    records = to_ultrafeedback_records(
        completions, pd.concat([aspects, harmless]), critiques, overall_scores
    )
    first = records[0]
    assert set(first["completions"][0]["annotations"]) == set(DEFAULT_ASPECTS)
    assert first["extra_annotations"][0]["harmlessness"]["Rating"] == "5"
    assert first["annotation_status"][0]["harmlessness"] == "ok"
    # harmlessness is not one of the aspects the fine-grained score averages
    assert first["completions"][0]["fine-grained_score"] == pytest.approx(19 / 4)
    # The schema grows by the aspect rated, and by it only.
    path = tmp_path / "ultrafeedback.parquet"
    ultrafeedback_frame(records).to_parquet(path)
    written = pq.read_schema(path).remove_metadata()
    assert written.equals(ultrafeedback_arrow_schema({"harmlessness": False}))
    assert written.equals(export.export_schema([*DEFAULT_ASPECTS, "harmlessness"]))
    assert pq.read_table(path).to_pylist() == records
    assert to_public(pq.read_table(path)).schema.equals(ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA)


@pytest.mark.parametrize(
    ("key", "spec", "problem"),
    [
        # a public aspect's field has its shape: honesty has no type codes
        (
            "honesty",
            AspectSpec("honesty", "H", "f", {1: "a"}, type_question="q", type_codes={"0": "x"}),
            "aspect 'honesty' has type codes, but the public UltraFeedback field honesty has none",
        ),
        ("brevity", AspectSpec("concise", "C", "f", {1: "a"}), "registered under another name"),
        ("Brevity!", AspectSpec("Brevity!", "C", "f", {1: "a"}), "needs a lower-case word"),
    ],
)
def test_an_aspect_the_export_cannot_hold_is_named(monkeypatch, key, spec, problem) -> None:
    monkeypatch.setitem(ASPECTS, key, spec)
    assert problem in export.export_problem(key)
    with pytest.raises(ConfigError, match=rf"^annotate.aspects: .*{re.escape(problem)}"):
        export.check_exportable(["helpfulness", key])
    assert export.export_problem("helpfulness") is None
    assert export.export_problem("harmlessness") is None


def test_an_export_without_one_rating_still_has_every_aspect_field(tmp_path) -> None:
    """No judge call answered: the records still carry the configured aspects, all null,
    so Parquet has a schema to write (a struct without fields cannot be written)."""
    completions, aspects, critiques, overall_scores = full_run()
    records = to_ultrafeedback_records(
        completions,
        aspects.iloc[0:0],
        critiques.iloc[0:0],
        overall_scores.iloc[0:0],
        aspects=DEFAULT_ASPECTS,
    )
    path = tmp_path / "ultrafeedback.parquet"
    ultrafeedback_frame(records).to_parquet(path)
    assert path.stat().st_size > 0
    assert pq.read_schema(path).remove_metadata().equals(ULTRAFEEDBACK_ARROW_SCHEMA)
    restored = pq.read_table(path).to_pylist()
    annotations = restored[0]["completions"][0]["annotations"]
    assert set(annotations) == set(DEFAULT_ASPECTS)
    assert annotations["helpfulness"]["Rating"] is None
    assert restored[0]["annotation_status"][0] == dict.fromkeys(DEFAULT_ASPECTS)
    assert restored[0]["completions"][0]["fine-grained_score"] is None


def test_export_names_missing_columns() -> None:
    completions, aspects, critiques, overall_scores = full_run()
    with pytest.raises(InputError, match="principle"):
        to_ultrafeedback_records(
            completions.drop(columns="principle"), aspects, critiques, overall_scores
        )


def test_a_table_built_from_rows_in_any_order_equals_the_one_built_in_order(monkeypatch, tmp_path):
    from llm_feedback.storage.spool import SpooledTable, TableBuilder

    monkeypatch.setattr(TableBuilder, "CHUNK_ROWS", 3)  # rows cross several spooled chunks
    monkeypatch.setattr(SpooledTable, "GROUP_ROWS", 4)  # and several row groups
    dtypes = {
        "id": "string",
        "n": "int64",
        "score": "Float64",
        "share": "float64",
        "flag": "bool",
        "types": "object",
        "reply": "category",
    }
    rows = [
        {
            "id": f"p{i}",
            "n": i,
            "score": None if i % 4 == 0 else i / 2,
            "share": i / 3,
            "flag": i % 2 == 0,
            "types": [str(i % 3)] if i % 2 else [],
            "reply": None if i == 5 else f"reply of call {i // 3}",
        }  # 3 rows share a call's reply
        for i in range(11)
    ]
    in_order, shuffled = TableBuilder(dtypes), TableBuilder(dtypes)
    for key, row in enumerate(rows):
        in_order.add(key, row)
    for key in [7, 2, 10, 0, 5, 9, 1, 4, 8, 3, 6]:
        shuffled.add(key, rows[key])
    expected = in_order.frame()
    frame = shuffled.frame()
    pd.testing.assert_frame_equal(frame, expected)
    assert frame["id"].tolist() == [f"p{i}" for i in range(11)]
    assert frame["score"].isna().tolist() == [i % 4 == 0 for i in range(11)]
    assert frame["types"].tolist() == [row["types"] for row in rows]
    # Each distinct reply once, and a Parquet round trip gives every row its reply back.
    assert sorted(frame["reply"].cat.categories) == [f"reply of call {c}" for c in range(4)]
    frame.to_parquet(tmp_path / "t.parquet")
    back = pd.read_parquet(tmp_path / "t.parquet")
    assert back["reply"].isna().tolist() == [i == 5 for i in range(11)]
    assert back["reply"].dropna().tolist() == [rows[i]["reply"] for i in range(11) if i != 5]
    assert {name: str(dtype) for name, dtype in frame.dtypes.items()} == dtypes

    # Written from the spool a row group at a time, the file reads back as the frame's does.
    spooled = TableBuilder(dtypes)
    for key in [3, 9, 0, 10, 6, 1, 4, 8, 2, 5, 7]:
        spooled.add(key, rows[key])
    spooled.finish().to_parquet(tmp_path / "spooled.parquet")
    assert pq.ParquetFile(tmp_path / "spooled.parquet").num_row_groups == 3
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "spooled.parquet"), back)
    written, expected_schema = (
        pq.read_schema(tmp_path / name) for name in ("spooled.parquet", "t.parquet")
    )
    assert written.names == expected_schema.names
    for field in expected_schema:
        if field.name != "reply":  # a dictionary's index width follows its size
            assert written.field(field.name).type == field.type, field.name


def test_a_reply_seen_again_beyond_the_recent_texts_is_still_one_category(monkeypatch, tmp_path):
    """The builder remembers only its last RECENT_TEXTS texts (flat memory at millions of
    replies); a text that comes back later is spooled twice, yet every row group and the
    frame hold it once, and each row reads its own text back."""
    from llm_feedback.storage.spool import SpooledTable, TableBuilder

    monkeypatch.setattr(TableBuilder, "RECENT_TEXTS", 2)
    monkeypatch.setattr(TableBuilder, "CHUNK_ROWS", 3)
    monkeypatch.setattr(SpooledTable, "GROUP_ROWS", 5)
    replies = ["a", "b", "c", "a", "d", "b", "a", None, "c", "a", "e", "a"]
    builder = TableBuilder({"n": "int64", "reply": "category"})
    for n, reply in enumerate(replies):
        builder.add(n, {"n": n, "reply": reply})
    table = builder.finish()
    frame = table.frame()
    assert frame["reply"].tolist()[:7] == replies[:7] and pd.isna(frame["reply"][7])
    assert frame["reply"].tolist()[8:] == replies[8:]
    assert sorted(frame["reply"].cat.categories) == ["a", "b", "c", "d", "e"]
    for group in table.arrow_chunks():
        dictionary = group["reply"].chunk(0).dictionary.to_pylist()
        assert len(dictionary) == len(set(dictionary))
    table.to_parquet(tmp_path / "t.parquet")
    back = pd.read_parquet(tmp_path / "t.parquet")["reply"]
    assert back.astype(object).where(back.notna(), None).tolist() == replies


def test_an_empty_spooled_table_writes_a_typed_file(tmp_path):
    from llm_feedback.storage.spool import TableBuilder

    table = TableBuilder(ASPECT_ANNOTATIONS_COLUMN_TYPES).finish()
    table.to_parquet(tmp_path / "empty.parquet")
    back = pd.read_parquet(tmp_path / "empty.parquet")
    assert back.empty
    assert list(back.columns) == list(ASPECT_ANNOTATIONS_COLUMN_TYPES)
    # An empty category column reads back with untyped categories: pandas' own behaviour.
    assert back["raw_reply"].dtype == "category"
    pd.testing.assert_frame_equal(
        back.drop(columns="raw_reply"),
        table.frame().drop(columns="raw_reply"),
        check_index_type=False,
    )
