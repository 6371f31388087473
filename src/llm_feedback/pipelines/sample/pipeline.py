from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.sample.nodes import combine_sources, read_params, sample


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline(
        [
            node(
                read_params,
                ["params:sample", "params:model_pool", "params:prompt_templates"],
                "sample_params",
                name="read_sample_params",
                tags="params",
            ),
            node(
                combine_sources,
                ["raw_prompt_files", "sample_params"],
                "raw_prompts",
                name="combine_prompt_sources",
            ),
            node(
                sample, ["raw_prompts", "sample_params"], "sampled_prompts", name="sample_prompts"
            ),
        ],
        tags="sample",
    )
