"""What the cost table counts of each judgement: only requests actually sent, and a usage
estimate where the server sent none.

- Identical requests are sent once (the client answers the copies from the first), but each
  copy's row records the call's tokens: `cost_tally.usage_totals` counts the first of each
  identical critique and of each identical aspect call (`critique_identities`,
  `aspect_call_identities`).
- The score fix's re-score calls are recorded in `overall_scores` (`rescore_usage`).
- A reply without `usage` records 0 tokens; `estimate_missing_usage` fills in the
  project's token estimate (`ChatRequest.estimated_input_tokens`, ~3 characters a token)
  from the request rebuilt from the data and from the reply, and marks those rows
  `usage_estimated`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from llm_feedback.annotation.aspects import build_aspect_request
from llm_feedback.annotation.critique import build_critique_request
from llm_feedback.storage.schema import CACHE_TOKEN_COLUMN_TYPES, COMPLETION_KEY
from llm_feedback.templates import PACKAGE_TEMPLATES, Templates

TOKEN_COLUMNS = ["prompt_tokens", "completion_tokens"]
CHARS_PER_TOKEN = 3  # ChatRequest.estimated_input_tokens' rule, for replies too
_REQUEST_TEXT = ["instruction", "response", "principle", "system_prompt", "world_knowledge"]


def request_texts(completions: pd.DataFrame) -> pd.DataFrame:
    """The request texts of each completion.

    Args:
        completions: The completions.

    Returns:
        Their texts, indexed by (prompt_id, completion_idx).
    """
    columns = [c for c in _REQUEST_TEXT if c in completions.columns]
    texts = completions.loc[:, ["prompt_id", "completion_idx", *columns]].copy()
    for column in _REQUEST_TEXT:
        texts[column] = texts[column].fillna("").astype(str) if column in texts else ""
    return texts.set_index(["prompt_id", "completion_idx"])


def _with_texts(frame: pd.DataFrame, texts: pd.DataFrame) -> pd.DataFrame:
    keys = pd.MultiIndex.from_frame(frame[["prompt_id", "completion_idx"]])
    found = texts.reindex(keys)
    found.index = frame.index
    return frame.join(found.fillna(""))


def _aspect_calls(frame: pd.DataFrame) -> np.ndarray:
    """A call code per aspect row (0, 1, ... in order of first row): a call is a prompt,
    aspect and shuffle, and a prompt's completions suspected of injection are rated alone
    (`annotation.stages.judged_together`), each in a call of its own."""
    flags = frame["suspected_injection"] if "suspected_injection" in frame else False
    alone = pd.Series(flags, index=frame.index).fillna(False).astype(bool).to_numpy()
    calls = pd.DataFrame(
        {
            "prompt_id": frame["prompt_id"].to_numpy(),
            "aspect": frame["aspect"].to_numpy(),
            "shuffle_idx": frame["shuffle_idx"].to_numpy(),
            "alone": np.where(alone, frame["completion_idx"].to_numpy(dtype="int64"), -1),
        }
    )
    return pd.factorize(pd.util.hash_pandas_object(calls, index=False))[0]


def _reply_tokens(reply: object) -> int:
    return -(-len(str(reply)) // CHARS_PER_TOKEN) if isinstance(reply, str) else 0


def _missing(frame: pd.DataFrame) -> pd.Series:
    """Rows of an answered call whose reply carried no usage."""
    answered = frame["raw_reply"].notna() if "raw_reply" in frame else pd.Series(False, frame.index)
    no_usage = frame[TOKEN_COLUMNS].fillna(0).eq(0).all(axis=1)
    return answered & no_usage


def estimate_missing_usage(
    stage: str,
    frame: pd.DataFrame,
    completions: pd.DataFrame,
    templates: Templates = PACKAGE_TEMPLATES,
) -> pd.DataFrame:
    """`frame` with float token columns, estimated (and `usage_estimated`) where missing.
    For `generate`, `frame` holds some columns of `completions` (the same index); the judge
    requests are rebuilt from `templates` (the run's `prompt_templates`).

    Args:
        stage: "generate", "annotate" or "critique".
        frame: The stage's rows.
        completions: The completions the judge requests show.
        templates: The prompt templates.

    Returns:
        The rows with float token columns and `usage_estimated`.
    """
    frame = frame.copy()
    for column in TOKEN_COLUMNS:
        frame[column] = frame[column].astype("float64").fillna(0.0)
    missing = _missing(frame) if stage != "generate" else _missing_generation(completions)
    frame["usage_estimated"] = missing.to_numpy()
    if not missing.any():
        return frame
    rows = None
    if stage != "generate":
        rows = _with_texts(frame.loc[missing], request_texts(completions))
    if stage == "critique":
        for index, row in rows.iterrows():
            request = build_critique_request(
                row["instruction"],
                row["response"],
                row["principle"] or "helpfulness",
                row["system_prompt"],
                templates=templates,
            )
            frame.loc[index, TOKEN_COLUMNS] = [
                request.estimated_input_tokens(),
                _reply_tokens(row["raw_reply"]),
            ]
    elif stage == "annotate":
        rows = rows.assign(call=_aspect_calls(rows))
        for _, call in rows.sort_values("position").groupby("call", sort=False):
            request = build_aspect_request(
                str(call["aspect"].iloc[0]),
                str(call["instruction"].iloc[0]),
                call["response"].tolist(),
                list(range(len(call))),
                world_knowledge=str(call["world_knowledge"].iloc[0]),
                templates=templates,
            )
            share = len(call)
            frame.loc[call.index, "prompt_tokens"] = request.estimated_input_tokens() / share
            frame.loc[call.index, "completion_tokens"] = (
                _reply_tokens(call["raw_reply"].iloc[0]) / share
            )
    else:
        prompts = completions.loc[missing, "instruction"].fillna("").astype(str)
        frame.loc[missing, "prompt_tokens"] = prompts.map(_reply_tokens) + 8
        frame.loc[missing, "completion_tokens"] = completions.loc[missing, "response"].map(
            _reply_tokens
        )
    return frame


def _missing_generation(frame: pd.DataFrame) -> pd.Series:
    if "response" not in frame or "instruction" not in frame:
        return pd.Series(False, index=frame.index)
    answered = frame["response"].notna()
    if "error" in frame:
        answered &= frame["error"].isna()
    return answered & frame[TOKEN_COLUMNS].fillna(0).eq(0).all(axis=1)


UNKNOWN_JUDGE = "unknown (critique not among the inputs)"


def rescore_usage(
    overall_scores: pd.DataFrame | None, critiques: pd.DataFrame
) -> pd.DataFrame | None:
    """The re-score calls' usage rows, priced by their critique's judge.

    Args:
        overall_scores: The score fix's table (None: none).
        critiques: The critiques, whose judge columns the re-scores take.

    Returns:
        The usage rows, or None when no re-score was sent.
    """
    columns = ["prompt_tokens", "completion_tokens"]
    if overall_scores is None or not set(columns) <= set(overall_scores.columns):
        return None
    cache = [c for c in CACHE_TOKEN_COLUMN_TYPES if c in overall_scores.columns]
    calls = overall_scores.loc[
        overall_scores[columns].fillna(0).sum(axis=1) > 0, [*COMPLETION_KEY, *columns, *cache]
    ]
    if calls.empty:
        return None
    judge_columns = ["judge_model", "judge_endpoint", "judge_backend", "judge_via_batch"]
    judges = critiques.loc[
        :, [*COMPLETION_KEY, *(c for c in judge_columns if c in critiques.columns)]
    ].drop_duplicates(list(COMPLETION_KEY))
    joined = calls.merge(judges, on=list(COMPLETION_KEY), how="left")
    # A re-score whose critique is not in `critiques` (inputs of two runs, chosen with
    # --load-versions) still costs: it is counted under an unknown judge, not dropped.
    who = joined.reindex(columns=["judge_endpoint", "judge_backend", "judge_model"])
    who = who.astype(object).where(who.notna(), UNKNOWN_JUDGE)
    return pd.DataFrame(
        {
            "endpoint": who["judge_endpoint"],
            "backend": who["judge_backend"],
            "model": who["judge_model"],
            "prompt_tokens": joined["prompt_tokens"].astype("float64"),
            "completion_tokens": joined["completion_tokens"].astype("float64"),
            **{column: joined[column].astype("float64") for column in cache},
            "usage_estimated": False,
            "stage": "critique",
            # The score fix sends through its critique's client: the same mode.
            "mode": np.where(
                joined.get("judge_via_batch", pd.Series(False, joined.index))
                .fillna(False)
                .astype(bool),
                "batch",
                "online",
            ),
        }
    )


# What identifies a critique request (the request is built from these alone).
_CRITIQUE_IDENTITY = [
    "judge_endpoint",
    "judge_model",
    "instruction",
    "response",
    "principle",
    "system_prompt",
]
_ASPECT_CALL_IDENTITY = [
    "judge_endpoint",
    "judge_model",
    "aspect",
    "instruction",
    "world_knowledge",
]
# Mixes a shown response's hash with its position before the call's are added up.
_POSITION_MIX = np.uint64(0x9E3779B97F4A7C15)


def critique_identities(critiques: pd.DataFrame, texts: pd.DataFrame) -> np.ndarray:
    """A 64-bit hash per critique row of what its request shows the judge (equal hashes:
    identical requests, sent once).

    Args:
        critiques: Critique rows.
        texts: `request_texts` of their completions.

    Returns:
        One hash per row.
    """
    shown = _with_texts(critiques, texts)
    return pd.util.hash_pandas_object(shown[_CRITIQUE_IDENTITY], index=False).to_numpy()


def aspect_call_identities(
    aspects: pd.DataFrame, texts: pd.DataFrame
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(call code per row, first row of each call, a 64-bit hash per call of what its
    request shows: the judge, aspect, instruction, world knowledge and each position's
    response).

    Args:
        aspects: Aspect annotation rows.
        texts: `request_texts` of their completions.

    Returns:
        The call code per row, the first row of each call and the hash per call.
    """
    rows = _with_texts(aspects, texts)
    codes = _aspect_calls(rows)
    _, first = np.unique(codes, return_index=True)
    shown = np.zeros(len(first), dtype="uint64")
    responses = pd.util.hash_pandas_object(rows["response"], index=False).to_numpy()
    positions = rows["position"].to_numpy(dtype="uint64") + np.uint64(1)
    with np.errstate(over="ignore"):  # the hashes wrap around by design
        np.add.at(shown, codes, responses ^ (positions * _POSITION_MIX))
    head = rows[_ASPECT_CALL_IDENTITY].iloc[first]
    call = pd.util.hash_pandas_object(head, index=False).to_numpy()
    both = pd.DataFrame({"call": call, "shown": shown})
    return codes, first, pd.util.hash_pandas_object(both, index=False).to_numpy()
