"""Evaluators: scoring a response on 0-1 without an LLM, in place of the judge.

`evaluate.evaluator: package.module:function` names a function called as
`function(sample, response, **evaluator_options)`; `package.module:Class` names a class
built as `Class(**evaluator_options)` whose `evaluate_sample(sample, response)` scores.
`sample` is a dict of the row's `instance_id`, `turn`, `question`, `reference`,
`category`, `level`, `prior_question` and `prior_response` (None where empty). A scorer
returns a bool, a number in [0, 1] or an `EvaluatorResult` (a score with a detail); it
raises `InvalidReference` when the row's reference cannot be used (the row becomes
"invalid"), and any other exception fails that row alone.

Scores go through the request cache like judgments (keyed on the evaluator, its options,
the sample and the response; `overwrite_results` scores again), and then through the same
replicates, pass@k and metrics. Built in: `exact_match`, `NumericMatch`, `RegexMatch`,
`CodeTest`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import numbers
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.backends.cache import RequestCache
from llm_feedback.backends.contract import ChatResult
from llm_feedback.evaluation.config import EvaluateParams
from llm_feedback.evaluation.judging import (
    judgment_rows,
    judgment_without_call,
    sample_columns,
    text_or_none,
)
from llm_feedback.judges import Judgment, is_unknown_reference
from llm_feedback.judges import exact_match as answers_match
from llm_feedback.replies.status import CALL_FAILED, INVALID, NO_RESPONSE, OK, OUT_OF_RANGE
from llm_feedback.storage.schema import EVAL_JUDGMENTS_COLUMN_TYPES

logger = logging.getLogger(__name__)

# The row fields a scorer sees (and its cache key holds).
SAMPLE_FIELDS = (
    "instance_id",
    "turn",
    "question",
    "reference",
    "category",
    "level",
    "prior_question",
    "prior_response",
)


@dataclass(frozen=True)
class EvaluatorResult:
    """A score in [0, 1] and what led to it (stored in `raw_reply`)."""

    score: float
    detail: str | None = None


class InvalidReference(ValueError):
    """The row's reference cannot be scored against: the row is "invalid", not failed."""


class EvaluatorFailure(RuntimeError):
    """Not one response could be scored: the evaluator itself is broken."""


def _reference(sample: Mapping[str, Any]) -> str:
    reference = sample.get("reference")
    if is_unknown_reference(reference):
        raise InvalidReference(f"no usable reference ({reference!r})")
    return str(reference)


# --- built-in evaluators ----------------------------------------------------------------


def exact_match(sample: Mapping[str, Any], response: str) -> bool:
    """The response equals the reference once case, punctuation, articles and number
    notation are set aside (the judge's own exact-match rule).

    Args:
        sample: the sample, with its reference.
        response: the response.

    Returns:
        True on a match.
    """
    return answers_match(response, _reference(sample))


_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


class NumericMatch:
    """The last number in the response equals the reference number within `rel_tol` /
    `abs_tol` (math.isclose); thousands separators are ignored."""

    def __init__(self, rel_tol: float = 0.0, abs_tol: float = 1e-9) -> None:
        """Check and keep the tolerances.

        Args:
            rel_tol: the relative tolerance, >= 0.
            abs_tol: the absolute tolerance, >= 0.
        """
        for name, value in (("rel_tol", rel_tol), ("abs_tol", abs_tol)):
            if not isinstance(value, numbers.Real) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        self.rel_tol, self.abs_tol = float(rel_tol), float(abs_tol)

    def evaluate_sample(self, sample: Mapping[str, Any], response: str) -> EvaluatorResult:
        """Score one response.

        Args:
            sample: the sample, with its reference.
            response: the response.

        Returns:
            The score (1 on a match) and what led to it.
        """
        expected = _number(_reference(sample).strip())
        if expected is None:
            raise InvalidReference(f"reference {sample['reference']!r} is not a number")
        found = [value for value in map(_number, _NUMBER.findall(response)) if value is not None]
        if not found:
            return EvaluatorResult(0.0, "no number in the response")
        answer = found[-1]
        close = math.isclose(answer, expected, rel_tol=self.rel_tol, abs_tol=self.abs_tol)
        return EvaluatorResult(float(close), f"answer {answer:g}, reference {expected:g}")


class RegexMatch:
    """The response contains a match of `pattern` (the row's reference when no pattern is
    given); `ignore_case` as re.IGNORECASE."""

    def __init__(self, pattern: str | None = None, ignore_case: bool = False) -> None:
        """Compile the pattern, if given.

        Args:
            pattern: the regular expression (None: each row's reference).
            ignore_case: match without regard to case.
        """
        self.flags = re.IGNORECASE if ignore_case else 0
        self.pattern = None if pattern is None else self._compile(pattern, ValueError)

    def _compile(self, pattern: Any, error: type[ValueError]) -> re.Pattern[str]:
        try:
            return re.compile(str(pattern), self.flags)
        except re.error as problem:
            raise error(f"pattern {pattern!r} is not a regular expression: {problem}") from None

    def evaluate_sample(self, sample: Mapping[str, Any], response: str) -> EvaluatorResult:
        """Score one response.

        Args:
            sample: the sample, with its reference.
            response: the response.

        Returns:
            The score (1 on a match) and what led to it.
        """
        pattern = self.pattern or self._compile(_reference(sample), InvalidReference)
        found = pattern.search(response)
        return EvaluatorResult(
            float(found is not None), f"matched {found.group(0)!r}" if found else "no match"
        )


_FENCED_CODE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL)


class CodeTest:
    """Runs the response's code followed by a test snippet (`test`, else the row's
    reference) in a fresh `python -I` subprocess; it passes when the process exits 0
    within `timeout_s`. The code is the last ```python block of the response, or the
    whole response when it has none.

    NOT a sandbox: the code runs with this user's rights, files and network. Run untrusted
    responses only inside a container or VM made for it.
    """

    def __init__(self, timeout_s: float = 10.0, test: str | None = None) -> None:
        """Keep the settings.

        Args:
            timeout_s: how long the test may run.
            test: the test snippet (None: each row's reference).
        """
        if not isinstance(timeout_s, numbers.Real) or isinstance(timeout_s, bool) or timeout_s <= 0:
            raise ValueError(f"timeout_s must be a number > 0, got {timeout_s!r}")
        if test is not None and not isinstance(test, str):
            raise ValueError(f"test must be a code snippet (text), got {test!r}")
        self.timeout_s, self.test = float(timeout_s), test

    def evaluate_sample(self, sample: Mapping[str, Any], response: str) -> EvaluatorResult:
        """Run one response's code with the test.

        Args:
            sample: the sample, with its reference.
            response: the response.

        Returns:
            The score (1 when the process exits 0 in time) and what led to it.
        """
        test = self.test if self.test is not None else _reference(sample)
        blocks = _FENCED_CODE.findall(response)
        code = blocks[-1] if blocks else response
        with tempfile.TemporaryDirectory(prefix="llm_feedback_code_test_") as folder:
            script = Path(folder) / "solution_test.py"
            script.write_text(f"{code}\n\n{test}\n", encoding="utf-8")
            # Its own session, so that a timeout ends whatever the code started too.
            process = subprocess.Popen(
                [sys.executable, "-I", str(script)],
                cwd=folder,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            try:
                _, errors = process.communicate(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
                return EvaluatorResult(0.0, f"timed out after {self.timeout_s:g} s")
        if process.returncode == 0:
            return EvaluatorResult(1.0, "passed")
        last_lines = "\n".join(errors.strip().splitlines()[-5:])
        return EvaluatorResult(0.0, f"exit code {process.returncode}: {last_lines}")


# --- scoring eval_samples -----------------------------------------------------------------


def _score_of(value: Any) -> tuple[float | None, str | None, str]:
    """(score, detail, status) of what a scorer returned."""
    result = value if isinstance(value, EvaluatorResult) else EvaluatorResult(value)
    score = result.score
    if not isinstance(score, numbers.Real) or not math.isfinite(score):
        raise TypeError(
            f"returned {score!r}; expected a bool, a number in [0, 1] or an EvaluatorResult"
        )
    if not 0.0 <= score <= 1.0:
        return None, f"score {score} outside [0, 1]", OUT_OF_RANGE
    return float(score), result.detail, OK


def _cache_key(config: EvaluateParams, sample: Mapping[str, Any], response: str) -> str:
    payload = json.dumps(
        [config.evaluator, dict(config.evaluator_options), dict(sample), response],
        sort_keys=True,
        default=str,
    )
    return "evaluator:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _evaluate(
    scorer: Callable[[Mapping, str], Any], sample: Mapping[str, Any], response: str
) -> dict[str, Any]:
    try:
        score, detail, status = _score_of(scorer(sample, response))
    except InvalidReference as problem:
        return {"score": None, "detail": str(problem), "status": INVALID, "error": None}
    except Exception as problem:  # noqa: BLE001 - a broken scorer fails its row, not the run
        return {
            "score": None,
            "detail": None,
            "status": CALL_FAILED,
            "error": f"{type(problem).__name__}: {problem}",
        }
    return {"score": score, "detail": detail, "status": status, "error": None}


def score_samples(
    samples: pd.DataFrame,
    config: EvaluateParams,
    cache_path: str | Path | None,
    *,
    fail_loud: bool = False,
) -> pd.DataFrame:
    """`eval_judgments` from `config.evaluator`: one row per sample, scored on 0-1.

    `fail_loud`: raise `EvaluatorFailure` when responses were there to score and not one
    was scored (pipeline nodes do).

    Args:
        samples: the prepared samples, with responses.
        config: the evaluate parameters.
        cache_path: the request cache, which keeps the scores too (None: no cache).
        fail_loud: raise `EvaluatorFailure` when nothing could be scored.

    Returns:
        The eval_judgments rows.
    """
    scorer = config.scorer  # loaded once, when the parameters were checked
    cache = RequestCache(cache_path) if cache_path else None
    try:
        records = _score_rows(samples, config, scorer, cache)
    finally:
        if cache is not None:
            cache.close()
    judgments = pd.DataFrame(records, columns=list(EVAL_JUDGMENTS_COLUMN_TYPES)).astype(
        EVAL_JUDGMENTS_COLUMN_TYPES
    )
    statuses = judgments["parse_status"]
    tried = int((statuses != NO_RESPONSE).sum())
    failed = judgments.loc[statuses == CALL_FAILED, "error"]
    logger.info(
        "evaluate (%s): %d responses scored, %d cached, %d invalid, %d failed, %d without a "
        "response",
        config.evaluator,
        int((statuses == OK).sum()),
        int(judgments["cached"].sum()),
        int((statuses == INVALID).sum()),
        len(failed),
        int((statuses == NO_RESPONSE).sum()),
    )
    if fail_loud and tried and len(failed) == tried:
        raise EvaluatorFailure(
            f"evaluate.evaluator {config.evaluator!r} failed on every one of {tried} "
            f"responses; the first error: {failed.iloc[0]}"
        )
    return judgments


def _score_rows(
    samples: pd.DataFrame,
    config: EvaluateParams,
    scorer: Callable[[Mapping, str], Any],
    cache: RequestCache | None,
) -> list[dict[str, Any]]:
    rows = list(samples.itertuples())
    inputs: list[tuple[dict[str, Any], str, str] | None] = []
    for sample in rows:
        response = text_or_none(sample.response)
        if response is None:
            inputs.append(None)
            continue
        fields = {name: text_or_none(getattr(sample, name)) for name in SAMPLE_FIELDS}
        fields["turn"] = int(sample.turn)
        inputs.append((fields, response, _cache_key(config, fields, response)))
    stored: dict[str, ChatResult] = {}
    if cache is not None and not config.overwrite_results:
        stored = cache.get_many(item[2] for item in inputs if item is not None)
    scored: dict[str, dict[str, Any]] = {}  # replicates with the same response: scored once
    records: list[dict[str, Any]] = []
    for sample, item in zip(rows, inputs, strict=True):
        if item is None:
            without = judgment_without_call(sample, NO_RESPONSE, config)
            records += judgment_rows(sample, without, config, config.evaluator)
            continue
        fields, response, key = item
        cached = key in stored
        if cached:
            result = json.loads(stored[key].text)
        elif key in scored:
            result = scored[key]
        else:
            result = scored[key] = _evaluate(scorer, fields, response)
            if cache is not None and result["status"] != CALL_FAILED:
                cache.put(key, ChatResult(text=json.dumps(result), model=config.evaluator))
        score = result["score"]
        judgment = Judgment(
            value=score,
            status=result["status"],
            success=score is not None,
            raw_reply=result["detail"],
            error=result["error"],
            cached=cached,
        )
        records.append(
            {
                **sample_columns(sample, config, config.evaluator),
                **judgment.call_columns(),
                "criterion": None,
                "score": score,
                "correct": None if score is None else score >= config.passing_score,
            }
        )
    return records
