from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.evaluate.nodes import generate, judge, prepare, summarise


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline(
        [
            node(prepare, ["eval_samples", "params:evaluate", "params:endpoints"],
                 "eval_samples_checked", name="check_eval_samples"),
            node(generate, ["eval_samples_checked", "params:evaluate", "params:endpoints",
                            "params:request_cache"],
                 "eval_samples_answered", name="generate_missing_responses"),
            node(judge, ["eval_samples_answered", "params:evaluate", "params:endpoints",
                         "params:request_cache"],
                 "eval_judgments", name="judge_eval_samples"),
            node(summarise, ["eval_judgments", "params:evaluate"], "eval_metrics",
                 name="compute_eval_metrics"),
        ]
    )
