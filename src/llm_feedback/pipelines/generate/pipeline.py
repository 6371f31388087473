from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.generate.nodes import generate


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline(
        [
            node(
                generate,
                [
                    "sampled_prompts",
                    "params:endpoints",
                    "params:model_pool",
                    "params:generation",
                    "params:request_cache",
                ],
                "completions",
                name="generate_completions",
            ),
        ],
        tags="generate",
    )
