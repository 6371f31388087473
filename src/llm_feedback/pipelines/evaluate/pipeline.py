from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.evaluate.nodes import (
    generate,
    judge,
    prepare,
    read_params,
    summarise,
)


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
                summarise,
                ["eval_judgments", "evaluate_params"],
                "eval_metrics",
                name="compute_eval_metrics",
            ),
        ],
        tags="evaluate",
    )
