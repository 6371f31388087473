"""Judging with one judge or a panel, and the agreement metrics of `eval_metrics`.

A panel's judges each judge every sample (at the same time, each on its own endpoint and
client, all through the request cache), and their verdicts are combined per judgment row:
`mean` averages scores (pairwise outcomes as A = +1, tie = 0, B = -1, the sign deciding)
and `majority` takes the value most judges gave, none ("split") when the most given ones
tie. A judge without a usable value abstains. The combined row keeps each judge's value in
a column of its own (`score_<name>`, pairwise `outcome_<name>`); every judge's full
judgment (reply, prompt, status) is in `eval_panel_judgments`, one row per judge.

Agreement (`agreement_metrics`) is measured over the rows the judges were asked about (no
exact matches, invalid references or missing responses): between the panel's judges, and
between a `recorded_score` given with the samples and each judge (and the panel).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from llm_feedback.evaluation.agreement_intervals import agreement_interval
from llm_feedback.evaluation.config import LONE_JUDGE, PANEL, RECORDED, EvaluateParams
from llm_feedback.evaluation.corrected import corrected_metrics
from llm_feedback.evaluation.evaluators import score_samples
from llm_feedback.evaluation.judging import (
    judge_samples,
    judgment_column_types,
    judgment_table,
    open_judge,
    with_carried_columns,
)
from llm_feedback.evaluation.metric_intervals import interval_fields
from llm_feedback.evaluation.metrics import compute_metrics
from llm_feedback.evaluation.recorded import has_recorded_verdicts, recorded_judgments
from llm_feedback.judges import JudgeKind
from llm_feedback.replies.status import OK, SPLIT, WITHOUT_CALL
from llm_feedback.storage.schema import EVAL_METRICS_COLUMN_TYPES, EVAL_SAMPLE_KEY
from llm_feedback.validation.agreement import agreement_rows

logger = logging.getLogger(__name__)

_PAIRWISE_SIGN = {"A": 1.0, "tie": 0.0, "B": -1.0}
# Columns every judge keeps to itself in a panel: its replies and prompts.
_CALL_OWN_PREFIXES = ("raw_reply", "prompt")


def _key_columns(kind: JudgeKind) -> list[str]:
    if kind.compares:
        return ["instance_id", "turn", "replicate", "model_a", "model_b"]
    return [*EVAL_SAMPLE_KEY, "criterion"]


def judge_all(
    samples: pd.DataFrame,
    config: EvaluateParams,
    cache_path: str | Path | None,
    *,
    progress: bool = True,
    fail_loud: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(`eval_judgments`, `eval_panel_judgments`) of the samples; eval_judgments keeps the
    samples' own further columns (gold labels among them: `with_carried_columns`).

    With one judge, or an `evaluator` scoring in place of the judges, the second table is
    empty. A panel's judges run at the same time, each
    in a thread of its own. When one fails (or on Ctrl-C) the panel stops at once: closing
    the judges cancels the calls still in flight, and every answer received is cached.

    Args:
        samples: the prepared samples, with responses.
        config: the evaluate parameters.
        cache_path: the request cache (None: no cache).
        progress: show progress bars.
        fail_loud: raise when too many calls fail.

    Returns:
        (eval_judgments, eval_panel_judgments).
    """
    judgments, panel = _judge_all(samples, config, cache_path, progress, fail_loud)
    return with_carried_columns(judgments, samples, config), panel


def _judge_all(
    samples: pd.DataFrame,
    config: EvaluateParams,
    cache_path: str | Path | None,
    progress: bool,
    fail_loud: bool,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    if config.kind.compares and has_recorded_verdicts(samples):  # judged already: no call
        records = recorded_judgments(samples, config)
        return judgment_table(records, config.kind), panel_judgments({}, config.kind)
    if config.evaluator is not None:  # scores in place of any judge
        no_panel = panel_judgments({}, config.kind)
        return score_samples(samples, config, cache_path, fail_loud=fail_loud), no_panel
    if config.panel is None:
        with open_judge(config, cache_path, progress=progress, fail_loud=fail_loud) as judge:
            return judge_samples(samples, config, judge), panel_judgments({}, config.kind)
    pool = ThreadPoolExecutor(len(config.panel.judges), thread_name_prefix="panel-judge")
    try:
        with ExitStack() as stack:  # closed before the pool waits for its threads
            futures = {
                name: pool.submit(
                    judge_samples,
                    samples,
                    config,
                    stack.enter_context(
                        open_judge(
                            config, cache_path, progress=progress, fail_loud=fail_loud, judge=judge
                        )
                    ),
                )
                for name, judge in config.panel.judges.items()
            }
            finished, _ = wait(futures.values(), return_when=FIRST_EXCEPTION)
            for future in finished:
                future.result()  # the first failure, if any
            per_judge = {name: future.result() for name, future in futures.items()}
    finally:
        pool.shutdown(wait=True)
    return aggregate_panel(per_judge, config), panel_judgments(per_judge, config.kind)


def panel_judgments(per_judge: Mapping[str, pd.DataFrame], kind: JudgeKind) -> pd.DataFrame:
    """Every judge's judgments, one row per judge and judgment, `judge` naming the judge.

    Args:
        per_judge: each judge's judgment rows, by name.
        kind: the judge kind.

    Returns:
        The rows of every judge.
    """
    types = {"judge": "string", **judgment_column_types(kind)}
    frames = [frame.assign(judge=name) for name, frame in per_judge.items()]
    stacked = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(types))
    return stacked[list(types)].astype(types)


def _combine(values: Sequence[Any], aggregate: str, kind: JudgeKind) -> tuple[Any, bool]:
    """The panel's value from the judges' values (None: abstained) and whether it split."""
    given = [value for value in values if value is not None]
    if not given:
        return None, False
    if aggregate == "mean":
        if not kind.compares:
            return math.fsum(given) / len(given), False
        mean = math.fsum(_PAIRWISE_SIGN[value] for value in given) / len(given)
        return ("A" if mean > 0 else "B" if mean < 0 else "tie"), False
    ranked = Counter(given).most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return None, True
    return ranked[0][0], False


def _status(statuses: Sequence[str], value: Any, split: bool) -> str:
    if split:
        return SPLIT
    if len(set(statuses)) == 1:  # all read, or all the same no-call or failure status
        return statuses[0]
    if value is not None:
        return OK
    return next(status for status in statuses if status != OK)


def _as_objects(series: pd.Series) -> list[Any]:
    return series.astype(object).where(series.notna(), None).tolist()


def _by_row(frames: Sequence[pd.DataFrame], column: str) -> list[tuple[Any, ...]]:
    """The judges' values of `column`, one tuple per row (None for missing)."""
    return list(zip(*(_as_objects(frame[column]) for frame in frames), strict=True))


def aggregate_panel(per_judge: Mapping[str, pd.DataFrame], config: EvaluateParams) -> pd.DataFrame:
    """One judgment row per sample (pairwise: per pair) from every judge's rows.

    The judges judged the same samples in the same order, so their rows align by position.

    Args:
        per_judge: each judge's judgment rows, by name.
        config: the evaluate parameters.

    Returns:
        The panel's judgment rows.
    """
    names = list(per_judge)
    frames = list(per_judge.values())
    kind = config.kind
    keys = _key_columns(kind)
    for name, frame in per_judge.items():
        if not frame[keys].equals(frames[0][keys]):
            raise RuntimeError(
                f"evaluate panel: judge {name!r} judged other rows than {names[0]!r}"
            )
    value = kind.value_column
    votes = _by_row(frames, value)
    combined = [_combine(row, config.panel.aggregate, kind) for row in votes]
    panel = frames[0].copy()
    panel[value] = [result for result, _ in combined]
    panel["parse_status"] = [
        _status(statuses, result, split)
        for statuses, (result, split) in zip(_by_row(frames, "parse_status"), combined, strict=True)
    ]
    panel["success"] = panel[value].notna()
    panel["judge_model"] = "+".join(dict.fromkeys(frame["judge_model"].iloc[0] for frame in frames))
    panel["cached"] = np.logical_and.reduce([frame["cached"].to_numpy() for frame in frames])
    panel["reasks"] = sum(frame["reasks"].to_numpy() for frame in frames)
    panel["error"] = [
        next((error for error in row if error), None) for row in _by_row(frames, "error")
    ]
    # Replies, prompts and what they said beyond the verdict stay with each judge.
    own = [
        column
        for column in panel.columns
        if column.startswith(_CALL_OWN_PREFIXES) or column in kind.judge_own_columns
    ]
    panel[own] = None
    if kind.panel_columns is not None:
        kind.panel_columns(panel, frames)
    types = judgment_column_types(kind)
    panel = panel[list(types)].astype(types)
    for name, frame in zip(names, frames, strict=True):
        panel[f"{value}_{name}"] = frame[value].array
    _log_panel(panel, names, config)
    return panel


def _log_panel(panel: pd.DataFrame, names: list[str], config: EvaluateParams) -> None:
    logger.info(
        "evaluate panel (%s, %s of %s): %d judgments, %d with a panel verdict, %d split",
        config.mode,
        config.panel.aggregate,
        ", ".join(names),
        len(panel),
        int(panel["success"].sum()),
        int((panel["parse_status"] == SPLIT).sum()),
    )


def _with_intervals(
    found: list[dict[str, Any]],
    ratings: pd.DataFrame,
    part: pd.DataFrame,
    criterion: str | None,
    config: EvaluateParams,
) -> list[dict[str, Any]]:
    return [
        {
            **row,
            "criterion": criterion,
            "asked": len(part),
            "interval": agreement_interval(row, ratings, part["instance_id"], config.intervals),
        }
        for row in found
    ]


def agreement_metrics(judgments: pd.DataFrame, config: EvaluateParams) -> pd.DataFrame:
    """Agreement rows of `eval_metrics` (`model` null: over all models; per criterion in
    rubric mode), over the judgments the judges were asked for.

    Between a panel's judges: Cohen's kappa of each two (Fleiss' kappa of all, with three
    or more) for binary and pairwise verdicts, Spearman's rho for scores, and the
    exact-match share. With `recorded_score`s: the same between the recording and each
    judge, and the panel. `n` counts the compared items, `n_missing` the asked ones left
    out because a rater gave no value.

    Args:
        judgments: eval_judgments rows, with each judge's column.
        config: the evaluate parameters.

    Returns:
        The agreement rows.
    """
    kind = config.kind
    value = kind.value_column
    categorical = kind.categorical
    asked = judgments[~judgments["parse_status"].isin(WITHOUT_CALL)]
    parts = [(None, asked)]
    if kind.uses_criteria:
        parts = [(name, asked[asked["criterion"] == name]) for name in config.rubric]
    rows = []
    for criterion, part in parts:
        if config.panel is None:
            ratings = pd.DataFrame({LONE_JUDGE: part[value]})
            judges = [LONE_JUDGE]
        else:
            judges = list(config.panel.judges)
            ratings = pd.DataFrame({name: part[f"{value}_{name}"] for name in judges})
            ratings[PANEL] = part[value]
            found = agreement_rows(ratings, judges, categorical=categorical)
            rows += _with_intervals(found, ratings, part, criterion, config)
            judges.append(PANEL)
        if "recorded_score" in part and part["recorded_score"].notna().any():
            ratings[RECORDED] = part["recorded_score"]
            for name in judges:
                found = agreement_rows(ratings, [RECORDED, name], categorical=categorical)
                rows += _with_intervals(found, ratings, part, criterion, config)
    for row in rows:
        logger.info(
            "evaluate agreement %s%s: %s = %.3f over %d judgments",
            row["raters"],
            "" if row["criterion"] is None else f" [{row['criterion']}]",
            row["statistic"],
            row["value"],
            row["n"],
        )
    metrics = pd.DataFrame(
        [
            {
                "mode": config.mode,
                "model": None,
                "metric": row["statistic"],
                "raters": row["raters"],
                "criterion": row["criterion"],
                "k": None,
                "value": row["value"],
                "n": row["n"],
                "n_missing": row["asked"] - row["n"],
                **interval_fields(row["interval"]),
            }
            for row in rows
        ],
        columns=list(EVAL_METRICS_COLUMN_TYPES),
    )
    return metrics.astype(EVAL_METRICS_COLUMN_TYPES)


def metrics_with_agreement(judgments: pd.DataFrame, config: EvaluateParams) -> pd.DataFrame:
    """`eval_metrics`: `compute_metrics`' rows, the means and win rates corrected by a
    slice of gold labels (`corrected`), then the agreement rows.

    Args:
        judgments: eval_judgments rows.
        config: the evaluate parameters.

    Returns:
        The eval_metrics rows.
    """
    parts = [
        compute_metrics(judgments, config),
        corrected_metrics(judgments, config),
        agreement_metrics(judgments, config),
    ]
    metrics = pd.concat([part for part in parts if len(part)] or parts[:1], ignore_index=True)
    return metrics.astype(EVAL_METRICS_COLUMN_TYPES)
