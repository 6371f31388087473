from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.ultrafeedback_fix.nodes import (
    export_records,
    fix_scores,
    read_records,
    recritique,
    rejudge_aspects,
)

TABLES = ["uf_completions", "uf_aspect_annotations", "uf_critiques"]
PARAMS = [
    "params:ultrafeedback_fix",
    "params:annotate",
    "params:endpoints",
    "params:prompt_templates",
]


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline(
        [
            node(
                read_records,
                PARAMS,
                ["uf_completions", "uf_published_annotations", "uf_published_critiques"],
                name="read_ultrafeedback_records",
            ),
            node(
                rejudge_aspects,
                [
                    "uf_completions",
                    "uf_published_annotations",
                    *PARAMS,
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
                    *PARAMS,
                    "params:request_cache",
                ],
                "uf_critiques",
                name="recritique_ultrafeedback",
            ),
            node(
                fix_scores,
                [*TABLES, *PARAMS, "params:request_cache"],
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
