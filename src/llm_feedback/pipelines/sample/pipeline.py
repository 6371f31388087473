from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.sample.nodes import combine_sources, sample

PARAMS = ["params:sample", "params:model_pool", "params:prompt_templates"]


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline(
        [
            node(
                combine_sources,
                ["raw_prompt_files", *PARAMS, "params:decontamination"],
                {
                    name: name
                    for name in ("raw_prompts", "prompt_contamination", "contamination_counts")
                },
                name="combine_prompt_sources",
            ),
            node(sample, ["raw_prompts", *PARAMS], "sampled_prompts", name="sample_prompts"),
        ],
        tags="sample",
    )
