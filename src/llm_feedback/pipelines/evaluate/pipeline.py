from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.evaluate.nodes import (
    generate,
    judge,
    prepare,
    read_params,
    summarise,
    validate_judge,
)
from llm_feedback.pipelines.evaluate.ranking_nodes import rank_models


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline(
        [
            node(
                read_params,
                ["params:evaluate", "params:endpoints"],
                "evaluate_params",
                name="read_evaluate_params",
                tags="params",
            ),
            node(
                prepare,
                ["eval_samples", "evaluate_params"],
                "eval_samples_checked",
                name="check_eval_samples",
            ),
            node(
                generate,
                ["eval_samples_checked", "evaluate_params", "params:request_cache"],
                "eval_samples_answered",
                name="generate_missing_responses",
            ),
            node(
                judge,
                ["eval_samples_answered", "evaluate_params", "params:request_cache"],
                ["eval_judgments", "eval_panel_judgments"],
                name="judge_eval_samples",
            ),
            node(
                validate_judge,
                [
                    "eval_judgments",
                    "eval_samples_answered",
                    "evaluate_params",
                    "judge_validation_history",
                    "eval_samples",
                ],
                [
                    "judge_validation",
                    "eval_annotator_agreement",
                    "eval_judge_validation_metrics",
                    "eval_judge_card",
                    "judge_accuracy_figure",
                ],
                name="validate_judge",
            ),
            node(
                summarise,
                ["eval_judgments", "evaluate_params", "eval_judge_validation_metrics"],
                "eval_metrics",
                name="compute_eval_metrics",
            ),
            node(
                rank_models,
                ["eval_judgments", "eval_samples_answered", "evaluate_params"],
                ["eval_model_ranking", "eval_model_ranking_figure"],
                name="rank_eval_models",
            ),
        ],
        tags="evaluate",
    )
