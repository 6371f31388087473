from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.annotate.nodes import (
    critique,
    export_ultrafeedback,
    fix_scores,
    rate_aspects,
    read_params,
)

JUDGE_INPUTS = ["annotate_params", "params:request_cache"]


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline(
        [
            node(
                read_params,
                ["params:annotate", "params:endpoints", "params:prompt_templates"],
                "annotate_params",
                name="read_annotate_params",
                tags="params",
            ),
            node(
                rate_aspects,
                ["completions", *JUDGE_INPUTS],
                "aspect_annotations",
                name="rate_aspects",
            ),
            node(critique, ["completions", *JUDGE_INPUTS], "critiques", name="critique"),
            node(
                fix_scores,
                ["completions", "aspect_annotations", "critiques", *JUDGE_INPUTS],
                "overall_scores",
                name="fix_overall_scores",
            ),
            node(
                export_ultrafeedback,
                [
                    "completions",
                    "aspect_annotations",
                    "critiques",
                    "overall_scores",
                    "annotate_params",
                ],
                "ultrafeedback",
                name="export_ultrafeedback",
            ),
        ],
        tags="annotate",
    )
