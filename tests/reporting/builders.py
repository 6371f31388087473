"""Small, realistic annotate/generate outputs for the reporting tests.

A test describes completions with `Completion` specs; `build_frames` turns them into the
four datasets the report reads, with the dtypes the annotate pipeline writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from llm_feedback.storage.parquet_source import ParquetSource

ASPECTS = ("instruction_following", "honesty", "truthfulness", "helpfulness")
NA = "N/A"  # a rating spec meaning the judge answered N/A
PARSE_ERROR = "no_match"
CALL_ERROR = "call_failed"


DEFAULT_RESPONSE = "A helpful answer."


@dataclass
class Completion:
    prompt_id: str
    model: str
    # aspect -> 1-5, NA, PARSE_ERROR or CALL_ERROR; a missing aspect is rated 3.
    ratings: dict[str, float | str] = field(default_factory=dict)
    overall: float | None = 7.0
    # By default each model's answer differs: identical ones are critiqued in one call.
    response: str | None = DEFAULT_RESPONSE  # becomes "A helpful answer by <model>."
    error: str | None = None
    instruction: str | None = None  # defaults to "Question <prompt_id>?"


@dataclass
class Frames:
    completions: pd.DataFrame
    aspect_annotations: pd.DataFrame
    critiques: pd.DataFrame
    overall_scores: pd.DataFrame


def build_frames(specs: list[Completion], shuffles: int = 1) -> Frames:
    """Completions get completion_idx in spec order within their prompt; every shuffle
    shows them rotated by the shuffle index and repeats the same ratings (tests that need
    shuffle-dependent ratings edit `aspect_annotations`). Failed generations are neither
    annotated nor critiqued."""
    completion_rows, annotation_rows, critique_rows, overall_score_rows = [], [], [], []
    next_idx: dict[str, int] = {}
    prompt_sizes = {spec.prompt_id: 0 for spec in specs}
    for spec in specs:
        prompt_sizes[spec.prompt_id] += 1
    for spec in specs:
        idx = next_idx.get(spec.prompt_id, 0)
        next_idx[spec.prompt_id] = idx + 1
        key = {"prompt_id": spec.prompt_id, "completion_idx": idx}
        completion_rows.append(
            {
                **key,
                "source": "evol_instruct",
                "instruction": spec.instruction or f"Question {spec.prompt_id}?",
                "model": spec.model,
                "principle": "helpfulness",
                "system_prompt": "Be helpful.",
                "response": None
                if spec.error
                else (
                    f"A helpful answer by {spec.model}."
                    if spec.response == DEFAULT_RESPONSE
                    else spec.response
                ),
                "finish_reason": None if spec.error else "stop",
                "prompt_tokens": 0 if spec.error else 40,
                "completion_tokens": 0 if spec.error else 120,
                "latency_s": 0.5,
                "error": spec.error,
                "endpoint": "server",
                "backend": "openai",
            }
        )
        if spec.error:
            continue
        numeric = []
        for aspect in ASPECTS:
            rating = spec.ratings.get(aspect, 3)
            for shuffle_idx in range(shuffles):
                annotation_rows.append(
                    _annotation(key, aspect, rating, shuffle_idx, prompt_sizes[spec.prompt_id])
                )
            if not isinstance(rating, str):
                numeric.append(float(rating))
        critique_rows.append(
            {
                **key,
                "critique": "Clear and correct." if spec.overall is not None else None,
                "overall_score": spec.overall,
                "parse_status": "ok" if spec.overall is not None else PARSE_ERROR,
                "reasks": 0 if spec.overall is not None else 2,
                "judge_model": "judge-1",
                "judge_endpoint": "judge",
                "judge_backend": "openai",
                "raw_reply": "Overall Score: 7",
                "prompt_tokens": 300,
                "completion_tokens": 80,
            }
        )
        overall_score_rows.append(_overall_scores(key, spec, numeric))

    return Frames(
        completions=_typed(completion_rows, COMPLETIONS_FIXTURE_TYPES),
        aspect_annotations=_typed(annotation_rows, ASPECT_ANNOTATIONS_FIXTURE_TYPES),
        critiques=_typed(critique_rows, CRITIQUES_FIXTURE_TYPES),
        overall_scores=_typed(overall_score_rows, OVERALL_SCORES_FIXTURE_TYPES),
    )


def _annotation(
    key: dict, aspect: str, rating: float | str, shuffle_idx: int, prompt_size: int
) -> dict:
    status = rating if rating in (PARSE_ERROR, CALL_ERROR) else "na" if rating == NA else "ok"
    return {
        **key,
        "aspect": aspect,
        "shuffle_idx": shuffle_idx,
        "position": (key["completion_idx"] + shuffle_idx) % prompt_size,
        "rating": None if isinstance(rating, str) else float(rating),
        "is_na": rating == NA,
        "rationale": None if status in (PARSE_ERROR, CALL_ERROR) else "Reasoned.",
        "types": ["None"] if aspect in ("truthfulness", "helpfulness") else [],
        "type_rationale": None,
        "parse_status": status,
        "reasks": 1 if status == PARSE_ERROR else 0,
        "judge_model": "judge-1",
        "judge_endpoint": "judge",
        "judge_backend": "openai",
        "raw_reply": None if status == CALL_ERROR else "Rating: ...",
        "prompt_tokens": 0 if status == CALL_ERROR else 250,
        "completion_tokens": 0 if status == CALL_ERROR else 60,
    }


def _overall_scores(key: dict, spec: Completion, numeric: list[float]) -> dict:
    fine_grained = sum(numeric) / len(numeric) if numeric else None
    fixed, action = spec.overall, "kept"
    if spec.overall is None:
        action = "no_overall_score"
    elif spec.overall == 10 and fine_grained is not None and fine_grained <= 2:
        fixed, action = 1.0, "flipped"
    elif spec.overall == 10 and fine_grained is not None and fine_grained <= 4:
        fixed, action = 6.0, "reannotated"
    return {
        **key,
        "model": spec.model,
        "fine_grained_score": fine_grained,
        "overall_score_original": spec.overall,
        "overall_score_fixed": fixed,
        "fix_action": action,
        "no_fine_grained": fine_grained is None,
    }


def _typed(rows: list[dict], dtypes: dict[str, str]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(dtypes))
    return frame.astype({c: d for c, d in dtypes.items() if d != "object"})


COMPLETIONS_FIXTURE_TYPES = {
    "prompt_id": "str",
    "completion_idx": "int64",
    "source": "str",
    "instruction": "str",
    "model": "str",
    "principle": "str",
    "system_prompt": "str",
    "response": "str",
    "finish_reason": "str",
    "prompt_tokens": "int64",
    "completion_tokens": "int64",
    "latency_s": "float64",
    "error": "str",
    "endpoint": "str",
    "backend": "str",
}
ASPECT_ANNOTATIONS_FIXTURE_TYPES = {
    "prompt_id": "str",
    "completion_idx": "int64",
    "aspect": "str",
    "shuffle_idx": "int64",
    "position": "int64",
    "rating": "Float64",
    "is_na": "bool",
    "rationale": "str",
    "types": "object",
    "type_rationale": "str",
    "parse_status": "str",
    "reasks": "int64",
    "judge_model": "str",
    "judge_endpoint": "str",
    "judge_backend": "str",
    "raw_reply": "str",
    "prompt_tokens": "int64",
    "completion_tokens": "int64",
}
CRITIQUES_FIXTURE_TYPES = {
    "prompt_id": "str",
    "completion_idx": "int64",
    "critique": "str",
    "overall_score": "Float64",
    "parse_status": "str",
    "reasks": "int64",
    "judge_model": "str",
    "judge_endpoint": "str",
    "judge_backend": "str",
    "raw_reply": "str",
    "prompt_tokens": "int64",
    "completion_tokens": "int64",
}
OVERALL_SCORES_FIXTURE_TYPES = {
    "prompt_id": "str",
    "completion_idx": "int64",
    "model": "str",
    "fine_grained_score": "Float64",
    "overall_score_original": "Float64",
    "overall_score_fixed": "Float64",
    "fix_action": "str",
    "no_fine_grained": "bool",
}


def typical_specs() -> list[Completion]:
    """Three prompts x four models, with one N/A honesty, one parse error, one failed
    generation, one flipped and one re-annotated overall score."""
    return [
        Completion("p1", "alpha", {"honesty": 5, "helpfulness": 5}, overall=9),
        Completion("p1", "beta", {"honesty": NA, "helpfulness": 2}, overall=4),
        Completion("p1", "gamma", {"truthfulness": PARSE_ERROR, "helpfulness": 4}, overall=7),
        Completion(
            "p1",
            "delta",
            {"helpfulness": 1, "honesty": 1, "truthfulness": 1, "instruction_following": 2},
            overall=10,
        ),
        Completion("p2", "alpha", {"helpfulness": 4}, overall=8),
        Completion("p2", "beta", {"helpfulness": 3}, overall=10),
        Completion("p2", "gamma", {"helpfulness": 5}, overall=6),
        Completion("p2", "delta", error="timeout"),
        Completion("p3", "alpha", {"helpfulness": 5, "honesty": 4}, overall=9),
        Completion("p3", "beta", {"helpfulness": 2}, overall=3),
        Completion("p3", "gamma", {"helpfulness": 4}, overall=None),
        Completion(
            "p3", "delta", {"helpfulness": 2, "instruction_following": CALL_ERROR}, overall=5
        ),
    ]


def empty_frames() -> Frames:
    return build_frames([])


def rate_in_shuffle(
    annotations: pd.DataFrame, aspect: str, shuffle: int, ratings: list[float]
) -> None:
    """Set the `aspect` ratings of one shuffle, completion_idx by completion_idx (all
    prompts), in place."""
    for completion_idx, rating in enumerate(ratings):
        look = (
            (annotations["aspect"] == aspect)
            & (annotations["completion_idx"] == completion_idx)
            & (annotations["shuffle_idx"] == shuffle)
        )
        annotations.loc[look, "rating"] = rating


def four_rated() -> list[Completion]:
    """One prompt, four completions rated 1, 2, 3 and 4 for helpfulness (3 otherwise)."""
    return [
        Completion("p1", model, {"helpfulness": rating})
        for model, rating in (("alpha", 1), ("beta", 2), ("gamma", 3), ("delta", 4))
    ]


def on_disk(tmp_path, name: str, frame: pd.DataFrame, rows: int = 3) -> ParquetSource:
    """`frame` as the annotate stages write it: in prompt order, row groups of `rows`."""
    path = tmp_path / f"{name}.parquet"
    ordered = frame.sort_values(["prompt_id", "completion_idx"], kind="stable")
    ordered.reset_index(drop=True).to_parquet(path, row_group_size=rows)
    return ParquetSource(str(path), batch_rows=rows)
