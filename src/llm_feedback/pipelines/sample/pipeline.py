from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.sample.nodes import combine_sources, sample


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline(
        [
            node(combine_sources, "raw_prompt_files", "raw_prompts", name="combine_prompt_sources"),
            node(
                sample,
                ["raw_prompts", "params:sample", "params:model_pool"],
                "sampled_prompts",
                name="sample_prompts",
            ),
        ],
        tags="sample",
    )
