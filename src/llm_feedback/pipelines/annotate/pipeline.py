from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.annotate.nodes import (
    card_of_export,
    export_ultrafeedback,
    fix_scores,
    judge_completions,
)

PARAMS = ["params:annotate", "params:endpoints", "params:prompt_templates"]
JUDGE_INPUTS = [*PARAMS, "params:request_cache"]


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline(
        [
            # Both judge stages in one node: their calls share the judge's one queue, so
            # neither stage's tail (nor a save between nodes) leaves the judge idle.
            node(
                judge_completions,
                ["completions", *JUDGE_INPUTS],
                ["aspect_annotations", "critiques"],
                name="judge_completions",
            ),
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
                    *PARAMS,
                ],
                "ultrafeedback",
                name="export_ultrafeedback",
            ),
            node(
                card_of_export,
                # The judge and settings of the data's own lineage (RunRecordHooks).
                ["completions", "run_lineage", "contamination_counts"],
                "ultrafeedback_card",
                name="write_ultrafeedback_card",
            ),
        ],
        tags="annotate",
    )
