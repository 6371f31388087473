"""Checking and selecting `eval_samples`, every check before any call.

Input, one row per response to judge: `instance_id`, `question`, `response` (null: generate
it with `generate_with`), `model`, and optionally `reference` (nullable; required column
in the reference modes), `replicate` (default 0), `ensemble_member` (default 0: several
weighted responses of one replicate, genlm-style), `weight` (non-negative; a null weight
counts as 1), `category` and `level` (text or integer; metrics are also given per value;
`category` also picks the judge prompt of `evaluate.judge_prompts`), `runtime_s` (seconds
the response took to generate), `images` / `audio` (attachments, see `attachments.py`),
`recorded_score` (a judgment of the response recorded elsewhere, e.g. GPT-4's, on the
mode's scale, that the metrics measure agreement with; modes binary, score_0_5 and
single_1_10; `gold_score` is the same column under the name the gold-labelled formats
give it) and `prior_question` / `prior_response` / `prior_reference`: the first
exchange of a two-turn conversation, which makes the row turn 2 of its instance (graded
MT-Bench multi-turn style, in mode `single_1_10`).

Pairwise samples (mode `pairwise`) are two rows per instance: the first row's response is
"A", the second's "B". They may carry a human label: `gold` ("A", "B" or "tie", the same
on both rows; null on both where only a slice of the pairs is labelled), `gold_labels` and
`gold_annotators` (each annotator's label and name), as `validation.formats` reads them
from the published files. Any other column is kept through
to `eval_judgments` (pairwise: as `<column>_a` / `<column>_b`, the gold columns as they
are); a column whose name eval_judgments already uses is refused by name.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import pandas as pd

from llm_feedback.core.errors import InputError
from llm_feedback.evaluation.attachments import MEDIA_COLUMNS, check_attachments, samples_dir
from llm_feedback.evaluation.config import EvaluateParams
from llm_feedback.evaluation.judging import carried_column_names, check_judge_prompts
from llm_feedback.judges import get_kind, kind_names
from llm_feedback.storage.schema import (
    EVAL_INSTANCE_COLUMNS,
    EVAL_JUDGMENTS_COLUMN_TYPES,
    EVAL_PAIRWISE_JUDGMENTS_COLUMN_TYPES,
    EVAL_SAMPLE_KEY,
    EVAL_SAMPLES_COLUMN_TYPES,
    EVAL_SAMPLES_PRIOR_COLUMNS,
    EVAL_SAMPLES_REQUIRED_COLUMNS,
)
from llm_feedback.validation.verdicts import VERDICTS

GOLD_SCORE = "gold_score"  # the gold formats' name of `recorded_score`


def _values(frame: pd.DataFrame, column: str) -> list[Any]:
    """A column as Python objects, None for every kind of missing value."""
    if column not in frame.columns:
        return [None] * len(frame)
    series = frame[column].astype(object)
    return series.where(series.notna(), None).tolist()


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_whole(value: Any) -> bool:
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and float(value).is_integer()
    )


class _RowChecker:
    """Checks columns value by value; `fail` makes the InputError naming row and column."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self._instance_ids = _values(frame, "instance_id")

    def fail(self, row: int, column: str, problem: str) -> InputError:
        instance = self._instance_ids[row]
        where = f"eval_samples row {row}" + (f" (instance_id {instance!r})" if instance else "")
        return InputError(f"{where}, column {column!r}: {problem}")

    def text(self, values: list[Any], column: str, *, required: bool) -> list[str | None]:
        for row, value in enumerate(values):
            if value is None:
                if required:
                    raise self.fail(row, column, "is empty")
            elif not isinstance(value, str):
                raise self.fail(row, column, f"must be text, got {type(value).__name__}")
            elif required and not value.strip():
                raise self.fail(row, column, "is empty")
        return values

    def instance_ids(self, values: list[Any]) -> list[str]:
        for row, value in enumerate(values):
            if not (_is_int(value) or (isinstance(value, str) and value.strip())):
                raise self.fail(
                    row, "instance_id", f"must be a non-empty string or an integer, got {value!r}"
                )
        return [str(value) for value in values]

    def counts(self, values: list[Any], present: bool, column: str) -> list[int]:
        if not present:
            return [0] * len(values)
        checked = []
        for row, value in enumerate(values):
            # JSON readers turn an integer column with a gap into floats: accept 1.0.
            if not _is_whole(value) or value < 0:
                raise self.fail(row, column, f"must be an integer >= 0, got {value!r}")
            checked.append(int(value))
        return checked

    def amounts(self, values: list[Any], column: str) -> list[float]:
        checked = []
        for row, value in enumerate(values):
            if value is None:
                checked.append(math.nan)
                continue
            if (
                not isinstance(value, numbers.Real)
                or isinstance(value, bool)
                or not math.isfinite(value)
                or value < 0
            ):
                raise self.fail(row, column, f"must be a number >= 0, got {value!r}")
            checked.append(float(value))
        return checked

    def labels(self, values: list[Any], column: str) -> list[str | None]:
        """Optional group labels (a category, a level): text or an integer, kept as text."""
        checked: list[str | None] = []
        for row, value in enumerate(values):
            if value is None or (isinstance(value, str) and value.strip()):
                checked.append(value)
            # JSON readers turn an integer column with a gap into floats: accept 1.0.
            elif _is_whole(value):
                checked.append(str(int(value)))
            else:
                raise self.fail(
                    row, column, f"must be a non-empty string or an integer, got {value!r}"
                )
        return checked

    def recorded_scores(self, values: list[Any], config: EvaluateParams) -> list[float]:
        """Numbers on the mode's scale (one of its values for a categorical kind: 0 or 1 in
        binary), or missing."""
        kind = config.kind
        low, high = config.scale
        checked = []
        for row, value in enumerate(values):
            if value is None:
                checked.append(math.nan)
                continue
            if not kind.recorded_scores:
                accepting = [name for name in kind_names() if get_kind(name).recorded_scores]
                raise self.fail(
                    row,
                    "recorded_score",
                    f"mode {config.mode} gives no single score per row to compare it with; "
                    f"recorded scores work in modes {', '.join(accepting)}",
                )
            if (
                not isinstance(value, numbers.Real)
                or isinstance(value, bool)
                or not low <= value <= high
                or (kind.categorical and not _is_whole(value))
            ):
                scale = (
                    " or ".join(map(str, range(low, high + 1)))
                    if kind.categorical
                    else f"a number in [{low}, {high}]"
                )
                raise self.fail(row, "recorded_score", f"must be {scale}, got {value!r}")
            checked.append(float(value))
        return checked


def validate_samples(frame: pd.DataFrame, config: EvaluateParams) -> pd.DataFrame:
    """The checked samples with the columns of `EVAL_SAMPLES_COLUMN_TYPES` and a `turn`.

    The index is the input's row number, which every later error names.

    Args:
        frame: the samples as read.
        config: the evaluate parameters.

    Returns:
        The checked samples.
    """
    if not isinstance(frame, pd.DataFrame):
        raise InputError(f"eval_samples must be a DataFrame, got {type(frame).__name__}")
    if "gold" in frame.columns and not config.kind.compares:
        raise InputError(
            f"eval_samples, column 'gold': a pairwise label (A, B or tie) cannot be compared "
            f"with {config.mode} judgments: set evaluate.mode=pairwise"
        )
    required = list(EVAL_SAMPLES_REQUIRED_COLUMNS) + (
        ["reference"] if config.kind.needs_reference else []
    )
    missing = [column for column in required if column not in frame.columns]
    if missing:
        raise InputError(f"eval_samples: missing column(s) {missing}; it has {list(frame.columns)}")
    if frame.empty:
        raise InputError("eval_samples has no rows")
    base_dir = samples_dir(frame)
    frame = _with_recorded_score(frame.reset_index(drop=True))
    check = _RowChecker(frame)
    carried = carried_columns(frame, config)
    prior = {column: _values(frame, column) for column in EVAL_SAMPLES_PRIOR_COLUMNS}
    samples = pd.DataFrame(
        {
            "instance_id": check.instance_ids(_values(frame, "instance_id")),
            "model": check.text(_values(frame, "model"), "model", required=True),
            "replicate": check.counts(
                _values(frame, "replicate"), "replicate" in frame.columns, "replicate"
            ),
            "ensemble_member": check.counts(
                _values(frame, "ensemble_member"),
                "ensemble_member" in frame.columns,
                "ensemble_member",
            ),
            "weight": check.amounts(_values(frame, "weight"), "weight"),
            "category": check.labels(_values(frame, "category"), "category"),
            "level": check.labels(_values(frame, "level"), "level"),
            "runtime_s": check.amounts(_values(frame, "runtime_s"), "runtime_s"),
            "question": check.text(_values(frame, "question"), "question", required=True),
            "response": check.text(_values(frame, "response"), "response", required=False),
            "reference": check.text(_values(frame, "reference"), "reference", required=False),
            "recorded_score": check.recorded_scores(_values(frame, "recorded_score"), config),
            **{
                column: check.text(values, column, required=False)
                for column, values in prior.items()
            },
        }
    )
    samples["turn"] = [1 if question is None else 2 for question in prior["prior_question"]]
    for row, (question, response) in enumerate(
        zip(prior["prior_question"], prior["prior_response"], strict=True)
    ):
        if (question is None) != (response is None):
            column = "prior_response" if response is None else "prior_question"
            raise check.fail(row, column, "prior_question and prior_response go together")
        if question is not None and not config.kind.two_turn:
            two_turn = [name for name in kind_names() if get_kind(name).two_turn]
            raise check.fail(
                row,
                "prior_question",
                f"two-turn rows are judged in mode {' or '.join(two_turn)} only, not {config.mode}",
            )
    samples = samples.assign(
        **check_attachments(
            {column: _values(frame, column) for column in MEDIA_COLUMNS},
            samples,
            config,
            base_dir,
            check.fail,
        )
    )
    _check_ensembles(samples, config, check)
    _check_unique_keys(samples, check)
    _check_same_question(samples, check)
    samples = samples[list(EVAL_SAMPLES_COLUMN_TYPES)].astype(EVAL_SAMPLES_COLUMN_TYPES)
    if "gold" in carried:
        _check_gold(frame, samples, check)
    return samples.assign(**{column: frame[column].astype(object) for column in carried})


def _with_recorded_score(frame: pd.DataFrame) -> pd.DataFrame:
    """`gold_score` (the gold formats' name) as `recorded_score`."""
    if GOLD_SCORE not in frame.columns:
        return frame
    if "recorded_score" in frame.columns:
        raise InputError(
            "eval_samples: columns 'recorded_score' and 'gold_score' are the same column; "
            "give one of them"
        )
    return frame.rename(columns={GOLD_SCORE: "recorded_score"})


def carried_columns(frame: pd.DataFrame, config: EvaluateParams) -> list[str]:
    """The user's columns beyond eval_samples' own, kept through to eval_judgments;
    InputError for one whose name (or `_a` / `_b` form, pairwise) eval_judgments uses.

    Args:
        frame: the samples as read.
        config: the evaluate parameters.

    Returns:
        The carried columns' names.
    """
    carried = carried_column_names(frame.columns)
    pairwise = config.kind.compares
    table = EVAL_PAIRWISE_JUDGMENTS_COLUMN_TYPES if pairwise else EVAL_JUDGMENTS_COLUMN_TYPES
    taken = set(table) | set(config.kind.extra_columns)
    for column in carried:
        names = (
            [column]
            if not pairwise or column in EVAL_INSTANCE_COLUMNS
            else [
                f"{column}_a",
                f"{column}_b",
            ]
        )
        clash = next((name for name in names if name in taken), None)
        if clash is not None:
            raise InputError(
                f"eval_samples, column {column!r}: eval_judgments has a column {clash!r} of "
                "its own; rename or drop this column"
            )
    return carried


def _check_gold(frame: pd.DataFrame, samples: pd.DataFrame, check: _RowChecker) -> None:
    """Gold labels are pairwise verdicts, one per instance, on its two rows; an instance
    may have none (a slice of the pairs labelled), on both rows."""
    gold = _values(frame, "gold")
    for row, value in enumerate(gold):
        if value is not None and value not in VERDICTS:
            raise check.fail(row, "gold", f"must be A, B or tie, got {value!r}")
    firsts = samples.assign(gold=gold).drop_duplicates(["instance_id", "turn", "model"])
    for instance_id, group in firsts.groupby(["instance_id", "turn"], sort=False):
        if group["model"].nunique() != 2:
            raise check.fail(
                int(group.index[0]),
                "model",
                f"a labelled pair has two responses (the first A, the second B); instance "
                f"{instance_id[0]!r} has {group['model'].nunique()}",
            )
        if group["gold"].nunique(dropna=False) != 1:
            raise check.fail(int(group.index[1]), "gold", "differs from the instance's first row")


def _check_unique_keys(samples: pd.DataFrame, check: _RowChecker) -> None:
    keys = list(EVAL_SAMPLE_KEY)
    repeated = samples.duplicated(keys, keep=False)
    if repeated.any():
        rows = samples.index[repeated]
        first = samples.loc[rows[0], keys].tolist()
        twins = [row for row in rows if samples.loc[row, keys].tolist() == first]
        raise check.fail(
            int(twins[1]),
            "instance_id",
            f"({', '.join(keys)}) = ({', '.join(map(str, first))}) repeats row {twins[0]}",
        )


def _check_ensembles(samples: pd.DataFrame, config: EvaluateParams, check: _RowChecker) -> None:
    """Ensemble members beyond the first are given responses: generating them would ask the
    same request again, and a pairwise comparison is between single responses."""
    for row, member, response in zip(
        samples.index, samples["ensemble_member"], samples["response"], strict=True
    ):
        if member == 0:
            continue
        if config.kind.compares:
            raise check.fail(
                row, "ensemble_member", f"{config.mode} mode compares single responses"
            )
        if pd.isna(response):
            raise check.fail(row, "response", "an ensemble member other than 0 needs a response")


def _check_same_question(samples: pd.DataFrame, check: _RowChecker) -> None:
    for _, group in samples.groupby(["instance_id", "turn"], sort=False):
        differing = group.index[group["question"] != group["question"].iloc[0]]
        if len(differing):
            raise check.fail(
                int(differing[0]),
                "question",
                f"differs from row {group.index[0]} of the same instance and turn",
            )


def select_samples(samples: pd.DataFrame, config: EvaluateParams) -> pd.DataFrame:
    """`max_instances` first instances; replicates 0..n_replicates-1 of each response.

    A missing replicate becomes a row to generate, which needs `generate_with`.

    Args:
        samples: the checked samples.
        config: the evaluate parameters.

    Returns:
        The selected rows.
    """
    if config.max_instances is not None:
        kept = samples["instance_id"].drop_duplicates().iloc[: config.max_instances]
        samples = samples[samples["instance_id"].isin(kept)]
    if config.n_replicates is None:
        return samples
    samples = samples[samples["replicate"] < config.n_replicates]
    added = []
    for (instance_id, turn, model), group in samples.groupby(
        ["instance_id", "turn", "model"], sort=False
    ):
        absent = sorted(set(range(config.n_replicates)) - set(group["replicate"]))
        if absent and config.generator_for(model) is None:
            raise InputError(
                f"eval_samples: instance_id {instance_id!r} turn {turn} model {model!r} has "
                f"replicates {sorted(group['replicate'])} but evaluate.n_replicates is "
                f"{config.n_replicates}: set evaluate.generate_with to generate the others"
            )
        for replicate in absent:
            # A generated replicate has no recorded judgment.
            added.append(
                {
                    **group.iloc[0].to_dict(),
                    "replicate": replicate,
                    "ensemble_member": 0,
                    "response": None,
                    "runtime_s": math.nan,
                    "recorded_score": None,
                }
            )
    if not added:
        return samples
    start = int(samples.index.max()) + 1
    extra = pd.DataFrame(added, index=range(start, start + len(added))).astype(
        EVAL_SAMPLES_COLUMN_TYPES
    )
    return pd.concat([samples, extra])


def prepare_samples(frame: pd.DataFrame, config: EvaluateParams) -> pd.DataFrame:
    """Validate and select the samples; every row without a response must be generable,
    and every custom judge prompt must render for the rows it judges.

    Args:
        frame: the samples as read.
        config: the evaluate parameters.

    Returns:
        The samples to judge.
    """
    samples = select_samples(validate_samples(frame, config), config)
    for row, response, model in zip(
        samples.index, samples["response"], samples["model"], strict=True
    ):
        if pd.isna(response) and config.generator_for(model) is None:
            raise InputError(
                f"eval_samples row {row} (instance_id {samples.at[row, 'instance_id']!r}), "
                f"column 'response': is empty and evaluate.generate_with names no endpoint "
                f"for model {model!r}"
            )
    check_judge_prompts(samples, config)
    return samples
