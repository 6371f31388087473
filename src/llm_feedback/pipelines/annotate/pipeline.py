from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.annotate.nodes import (
    critique,
    export_ultrafeedback,
    fix_scores,
    rate_aspects,
)

JUDGE_PARAMS = ["params:annotate", "params:endpoints", "params:request_cache"]


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline(
        [
            node(rate_aspects, ["completions", *JUDGE_PARAMS], "aspect_annotations",
                 name="rate_aspects"),
            node(critique, ["completions", *JUDGE_PARAMS], "critiques", name="critique"),
            node(
                fix_scores,
                ["completions", "aspect_annotations", "critiques", *JUDGE_PARAMS],
                "feedback",
                name="fix_overall_scores",
            ),
            node(
                export_ultrafeedback,
                ["completions", "aspect_annotations", "critiques", "feedback"],
                "ultrafeedback",
                name="export_ultrafeedback",
            ),
        ]
    )
