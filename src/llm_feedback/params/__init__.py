"""Every pipeline's parameters, read once per run into typed objects.

One module per pipeline (`sample`, `generate`, `annotate`, `evaluate`, `report`); each
`parse_<pipeline>` rejects unknown keys, checks every type and range with the dotted name
of the parameter in its message, and takes every default from its dataclass. Each pipeline
starts with a node that calls its parser, so the typed object is a dataset that the other
nodes read, and a bad parameter stops the run before any model is called.

The names below are imported from their module when first used: a run imports only its own
pipelines' parsers and the libraries behind them (evaluate's and report's import scipy,
statsmodels and matplotlib, seconds of a `kedro run --pipelines annotate` start-up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_feedback.core.lazy import lazy_exports

if TYPE_CHECKING:
    from llm_feedback.params.annotate import AnnotateParams, ScoreFixParams, parse_annotate
    from llm_feedback.params.evaluate import EvaluateParams, parse_evaluate
    from llm_feedback.params.generate import GenerateParams, parse_generate
    from llm_feedback.params.judge import JudgeParams, parse_judge
    from llm_feedback.params.report import (
        IntervalParams,
        PairParams,
        RankingParams,
        ReportParams,
        parse_report,
    )
    from llm_feedback.params.sample import SampleParams, parse_sample

_MODULE_OF = {
    "AnnotateParams": "annotate",
    "ScoreFixParams": "annotate",
    "parse_annotate": "annotate",
    "EvaluateParams": "evaluate",
    "parse_evaluate": "evaluate",
    "GenerateParams": "generate",
    "parse_generate": "generate",
    "JudgeParams": "judge",
    "parse_judge": "judge",
    "IntervalParams": "report",
    "PairParams": "report",
    "RankingParams": "report",
    "ReportParams": "report",
    "parse_report": "report",
    "SampleParams": "sample",
    "parse_sample": "sample",
}

__all__ = [
    "AnnotateParams",
    "EvaluateParams",
    "GenerateParams",
    "JudgeParams",
    "IntervalParams",
    "PairParams",
    "RankingParams",
    "ReportParams",
    "SampleParams",
    "ScoreFixParams",
    "parse_annotate",
    "parse_evaluate",
    "parse_generate",
    "parse_judge",
    "parse_report",
    "parse_sample",
]


__getattr__, __dir__ = lazy_exports(__name__, _MODULE_OF)
