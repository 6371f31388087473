from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.generate.nodes import generate, read_params


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline(
        [
            node(
                read_params,
                ["params:endpoints", "params:model_pool", "params:generation"],
                "generate_params",
                name="read_generate_params",
                tags="params",
            ),
            node(
                generate,
                ["sampled_prompts", "generate_params", "params:request_cache"],
                "completions",
                name="generate_completions",
            ),
        ],
        tags="generate",
    )
