"""The viewer's labels.jsonl read as gold, written here exactly as the page writes it
(viewer.js: one stored label per key "p|<instance>|<ident a>|<ident b>" or
"s|<instance>|<ident>", a later click on a key replacing the earlier one, the annotator set
last, lines in sorted key order, JSON.stringify's compact form): pairs and scores mixed,
several pairs per prompt, either order, several reviewers' downloads concatenated."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from llm_feedback.core.errors import InputError
from llm_feedback.evaluation.sample_files import read_samples_file, samples_from_file
from llm_feedback.validation.formats import read_samples, read_viewer_labels
from llm_feedback.viewer.labels import PAIRWISE_FIELDS, POINTWISE_FIELDS

QUESTION = "Name a prime number."
COMPLETIONS = {  # completion_idx -> (model, response), as an annotate run's prompt has them
    0: ("alpha", "2"),
    1: ("beta", "Nine."),
    2: ("gamma", "7 is prime"),
}


class ViewerSession:
    """One browser's label store, as viewer.js keeps it (`saveLabel`, `labelsJsonl`)."""

    def __init__(self) -> None:
        self.labels: dict[str, dict] = {}
        self.annotator = "anonymous"

    def pair(self, instance: str, x: int, y: int, verdict: str) -> None:
        (model_a, response_a), (model_b, response_b) = COMPLETIONS[x], COMPLETIONS[y]
        label = {
            "instance_id": instance,
            "question": QUESTION,
            "response_a": response_a,
            "response_b": response_b,
            "model_a": model_a,
            "model_b": model_b,
            "label": verdict,
        }
        self._save(f"p|{instance}|{x}|{y}", label)

    def score(self, instance: str, ident: int, value: str, aspect: str = "") -> None:
        model, response = COMPLETIONS[ident]
        # Number(input.value): JSON.stringify writes 7 for "7" and 6.5 for "6.5".
        number = float(value)
        label = {
            "instance_id": instance,
            "question": QUESTION,
            "response": response,
            "model": model,
            "gold_score": int(number) if number.is_integer() else number,
        }
        key = f"s|{instance}|{ident}"
        if aspect:  # an annotate page's rating of one aspect
            label["aspect"] = aspect
            key += f"|{aspect}"
        self._save(key, label)

    def _save(self, key: str, label: dict) -> None:
        label["annotator"] = self.annotator
        self.labels[key] = label

    def download(self) -> str:
        lines = [
            json.dumps(self.labels[key], ensure_ascii=False, separators=(",", ":"))
            for key in sorted(self.labels)
        ]
        return "\n".join(lines) + ("\n" if lines else "")


def two_reviewers(path: Path) -> Path:
    """Two reviewers' downloads of one annotate run, concatenated."""
    first = ViewerSession()
    first.annotator = "rev-1"
    first.pair("p1", 2, 1, "A")  # gamma vs beta
    first.pair("p1", 0, 1, "B")  # then changed below: a later click replaces it
    first.pair("p1", 0, 1, "A")
    first.pair("p1", 0, 2, "tie")
    first.pair("p2", 0, 1, "B")
    first.score("p1", 0, "7")
    first.score("p1", 1, "2.5")
    second = ViewerSession()
    second.annotator = "rev-2"
    second.pair("p1", 1, 2, "B")  # the same pair as rev-1's first, shown the other way round
    second.score("p1", 0, "6")
    path.write_text(first.download() + second.download(), encoding="utf-8")
    return path


def test_a_session_download_has_the_shapes_the_viewer_documents(tmp_path: Path) -> None:
    lines = two_reviewers(tmp_path / "labels.jsonl").read_text().splitlines()
    shapes = {tuple(json.loads(line)) for line in lines}
    assert shapes == {PAIRWISE_FIELDS, POINTWISE_FIELDS}
    # Pairs first (key "p|..."), then scores: the mix that was refused at the first score.
    assert [len(json.loads(line)) for line in lines[:5]] == [len(PAIRWISE_FIELDS)] * 4 + [
        len(POINTWISE_FIELDS)
    ]


def test_mixed_labels_of_several_reviewers_read_as_gold(tmp_path: Path) -> None:
    labels = read_viewer_labels(two_reviewers(tmp_path / "labels.jsonl"))
    pairs = labels.pairs
    # p1 has three pairs (one per two completions): one item each, named by its models.
    items = pairs.drop_duplicates("instance_id").set_index("instance_id")
    assert sorted(items.index) == [
        "p1:alpha~beta",
        "p1:alpha~gamma",
        "p1:gamma~beta",
        "p2",
    ]
    assert set(pairs["labelled_id"]) == {"p1", "p2"}
    assert pairs.groupby("instance_id").size().eq(2).all()
    # rev-2 chose beta over gamma with beta shown as A: flipped to the item's order (gamma A).
    gamma_beta = items.loc["p1:gamma~beta"]
    assert gamma_beta["gold_labels"] == ["A", "A"]
    assert gamma_beta["gold_annotators"] == ["rev-1", "rev-2"]
    assert gamma_beta["gold"] == "A"
    assert items.loc["p1:alpha~beta", "gold_labels"] == ["A"]  # the later click kept
    assert items.loc["p1:alpha~gamma", "gold"] == "tie"
    first_rows = pairs[pairs["instance_id"] == "p1:gamma~beta"]
    assert first_rows["model"].tolist() == ["gamma", "beta"]
    assert first_rows["response"].tolist() == ["7 is prime", "Nine."]
    scores = labels.scores.set_index("model")
    assert scores.loc["alpha", "gold_labels"] == [7.0, 6.0]
    assert scores.loc["alpha", "gold_score"] == pytest.approx(6.5)
    assert scores.loc["alpha", "gold_annotators"] == ["rev-1", "rev-2"]
    assert scores.loc["beta", "gold_score"] == pytest.approx(2.5)


def test_the_judge_kind_picks_its_labels_and_says_what_was_left_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = two_reviewers(tmp_path / "labels.jsonl")
    with caplog.at_level(logging.INFO):
        pairs = read_samples(path)
    assert pairs.attrs["samples_format"] == "viewer"
    assert "detected as viewer" in caplog.text
    assert "3 score labels left out" in caplog.text
    assert pairs["instance_id"].nunique() == 4
    scores = read_samples(path, pairwise=False)
    assert "gold" not in scores.columns
    assert len(scores) == 2
    # evaluate's reader: the file as the catalog loads it, the kind from the judge.
    frame = read_samples_file(path)
    assert samples_from_file(frame, "auto", pairwise=True)["instance_id"].nunique() == 4
    assert samples_from_file(frame, "viewer", pairwise=False)["gold_score"].tolist() == [6.5, 2.5]


def test_a_repeated_download_counts_once_and_a_changed_mind_twice(tmp_path: Path) -> None:
    session = ViewerSession()
    session.annotator = "rev-1"
    session.pair("p1", 0, 1, "A")
    once = session.download()
    session.pair("p1", 1, 0, "A")  # the same reviewer, the other order, the other answer
    path = tmp_path / "labels.jsonl"
    path.write_text(once + once + session.download(), encoding="utf-8")
    item = read_viewer_labels(path).pairs.iloc[0]
    assert item["gold_labels"] == ["A", "B"]
    assert item["gold_annotators"] == ["rev-1", "rev-1#2"]
    assert item["gold"] == "tie"


def test_score_labels_alone_and_per_aspect(tmp_path: Path) -> None:
    session = ViewerSession()
    session.score("p1", 0, "4")
    session.score("p1", 2, "5")
    session.score("p1", 0, "2", aspect="honesty")
    path = tmp_path / "labels.jsonl"
    path.write_text(session.download(), encoding="utf-8")
    scores = read_samples(path)
    assert scores.attrs["samples_format"] == "viewer"
    assert scores["aspect"].isna().tolist() == [True, False, True]
    assert scores["aspect"].iloc[1] == "honesty"
    assert scores["gold_score"].tolist() == [4.0, 2.0, 5.0]
    assert scores["gold_annotators"].iloc[0] == ["anonymous"]
    with pytest.raises(InputError, match="no pair labels .* a pairwise judge needs pair"):
        read_samples(path, pairwise=True)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"label": "C"}, r"line 1, field 'label': labels are A, B or tie, got 'C'"),
        ({"gold_score": "7"}, r"line 1, field 'gold_score': scores are numbers"),
        ({"instance_id": ""}, r"line 1, field 'instance_id': is empty"),
        ({"question": 3}, r"line 1, field 'question': expected text"),
    ],
)
def test_a_bad_line_is_named(tmp_path: Path, change: dict, message: str) -> None:
    session = ViewerSession()
    if "gold_score" in change:
        session.score("p1", 0, "7")
    else:
        session.pair("p1", 0, 1, "A")
    line = dict(json.loads(session.download()), **change)
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=message):
        read_samples(path, "viewer")
