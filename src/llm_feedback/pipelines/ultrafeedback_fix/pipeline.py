from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.ultrafeedback_fix.nodes import (
    export_records,
    fix_scores,
    read_params,
    read_records,
    recritique,
    rejudge_aspects,
)

TABLES = ["uf_completions", "uf_aspect_annotations", "uf_critiques"]


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline(
        [
            node(
                read_params,
                [
                    "params:ultrafeedback_fix",
                    "params:annotate",
                    "params:endpoints",
                    "params:prompt_templates",
                ],
                "uf_fix_params",
                name="read_ultrafeedback_fix_params",
                tags="params",
            ),
            node(
                read_records,
                "uf_fix_params",
                ["uf_completions", "uf_published_annotations", "uf_published_critiques"],
                name="read_ultrafeedback_records",
            ),
            node(
                rejudge_aspects,
                [
                    "uf_completions",
                    "uf_published_annotations",
                    "uf_fix_params",
                    "params:request_cache",
                ],
                "uf_aspect_annotations",
                name="rejudge_ultrafeedback_aspects",
            ),
            node(
                recritique,
                [
                    "uf_completions",
                    "uf_published_critiques",
                    "uf_fix_params",
                    "params:request_cache",
                ],
                "uf_critiques",
                name="recritique_ultrafeedback",
            ),
            node(
                fix_scores,
                [*TABLES, "uf_fix_params", "params:request_cache"],
                "uf_overall_scores",
                name="fix_ultrafeedback_scores",
            ),
            node(
                export_records,
                [*TABLES, "uf_overall_scores"],
                "ultrafeedback_fixed",
                name="export_fixed_ultrafeedback",
            ),
        ],
        tags="ultrafeedback_fix",
    )
