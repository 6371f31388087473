"""Reference-based LLM-as-judge evaluation of given (or generated) responses.

The library behind the `evaluate` pipeline; from a notebook, `run_evaluation` does it all:

    config = parse_evaluate({"mode": "binary", "judge": {"endpoint": "local"}}, endpoints)
    samples = prepare_samples(frame, config)        # every check before any call
    samples = generate_responses(samples, config, cache_path)
    judge = Judge(config.judge.endpoint, cache_path, sampling=config.judge.sampling,
                  top_logprobs=config.judge_top_logprobs_asked)  # evaluate.judge_logprobs
    with judge:
        judgments = judge_samples(samples, config, judge)
    metrics = compute_metrics(judgments, config)

Modes: `binary` (correct or not against the reference: an exact match after
normalisation skips the call, an unknown reference is "invalid" with no call),
`score_0_5` (0-5 against the reference, "invalid" without one), `single_1_10` (MT-Bench
`[[N]]`, with the reference where there is one), `rubric` (a score per criterion) and
`pairwise` (every two models' responses to the same instance and replicate, judged in
both orders; orders that disagree make a tie). `evaluate.evaluator` scores responses
without an LLM instead (`evaluators`: exact match, numeric tolerance, regex, code tests).
Any mode can be judged by a panel of judges (`evaluate.panel`), and `eval_metrics` then
measures their agreement, as it does with recorded judgments given as `recorded_score`.

The modes are the judge kinds of `llm_feedback.judges.kinds` (a kind of your own: `mode:
package.module:KIND`). The typed configuration is `config` (`EvaluateParams`, which
`llm_feedback.params.evaluate` maps the YAML onto), the tables' columns and dtypes
`llm_feedback.storage.schema`. Modules: `samples` (the input checks), `generation`, `judging`
(replicates, re-asks), `evaluators`, `panel` (judge panels, agreement metrics), `metrics`
(also per category and level), `run`, `adaptor` (genlm.eval's runner: `await
run_evaluation(dataset, model, evaluator, output_dir)` over a model adaptor),
`sample_files` (the samples file in any format: native rows or gold-labelled samples as
published), `recorded` (pairwise verdicts recorded elsewhere: AlpacaEval's annotations,
Arena-Hard's judgments, our JSONL with a preference; judged without a call), `ranking`
(the model ranking and the anchors' own figures) and `judge_validation` (the judge's card
from gold-labelled samples).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_feedback.core.lazy import lazy_exports

if TYPE_CHECKING:
    from llm_feedback.evaluation.adaptor import (
        EvaluationResult,
        ModelOutput,
        ModelResponse,
        evaluate_instances,
    )
    from llm_feedback.evaluation.generation import generate_responses
    from llm_feedback.evaluation.judge_validation import (
        EvaluationValidation,
        evaluation_judge_key,
        validate_evaluation,
        validation_set_name,
    )
    from llm_feedback.evaluation.judging import (
        EXACT_MATCH,
        INVALID,
        NO_RESPONSE,
        judge_samples,
        open_judge,
    )
    from llm_feedback.evaluation.metrics import compute_metrics
    from llm_feedback.evaluation.panel import (
        aggregate_panel,
        agreement_metrics,
        judge_all,
        metrics_with_agreement,
    )
    from llm_feedback.evaluation.run import run_evaluation
    from llm_feedback.evaluation.sample_files import (
        SAMPLES_PATH_ATTR,
        read_samples_file,
        samples_from_file,
    )
    from llm_feedback.evaluation.samples import (
        prepare_samples,
        select_samples,
        validate_samples,
    )

# Each name is imported from its module when first used (llm_feedback/core/lazy.py).
_MODULE_OF = {
    "EvaluationResult": "adaptor",
    "ModelOutput": "adaptor",
    "ModelResponse": "adaptor",
    "evaluate_instances": "adaptor",
    "generate_responses": "generation",
    "EvaluationValidation": "judge_validation",
    "evaluation_judge_key": "judge_validation",
    "validate_evaluation": "judge_validation",
    "validation_set_name": "judge_validation",
    "EXACT_MATCH": "judging",
    "INVALID": "judging",
    "NO_RESPONSE": "judging",
    "judge_samples": "judging",
    "open_judge": "judging",
    "compute_metrics": "metrics",
    "aggregate_panel": "panel",
    "agreement_metrics": "panel",
    "judge_all": "panel",
    "metrics_with_agreement": "panel",
    "run_evaluation": "run",
    "SAMPLES_PATH_ATTR": "sample_files",
    "read_samples_file": "sample_files",
    "samples_from_file": "sample_files",
    "prepare_samples": "samples",
    "select_samples": "samples",
    "validate_samples": "samples",
}

__all__ = [
    "EXACT_MATCH",
    "SAMPLES_PATH_ATTR",
    "EvaluationResult",
    "EvaluationValidation",
    "INVALID",
    "ModelOutput",
    "ModelResponse",
    "NO_RESPONSE",
    "aggregate_panel",
    "agreement_metrics",
    "compute_metrics",
    "evaluate_instances",
    "evaluation_judge_key",
    "generate_responses",
    "judge_all",
    "judge_samples",
    "metrics_with_agreement",
    "open_judge",
    "prepare_samples",
    "read_samples_file",
    "run_evaluation",
    "samples_from_file",
    "select_samples",
    "validate_evaluation",
    "validate_samples",
    "validation_set_name",
]


__getattr__, __dir__ = lazy_exports(__name__, _MODULE_OF)
