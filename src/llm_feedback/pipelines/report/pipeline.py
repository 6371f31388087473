from kedro.framework.hooks import hook_impl
from kedro.io import AbstractVersionedDataset, CatalogProtocol, MemoryDataset
from kedro.pipeline import Pipeline, node, pipeline

from llm_feedback.pipelines.report.nodes import (
    estimate_costs,
    preference_pairs,
    render_report,
)
from llm_feedback.reporting import (
    aspect_heatmap_figure,
    judge_health,
    model_aspect_metrics,
    model_score_metrics,
    position_bias_figure,
    position_consistency,
    rating_by_position,
    rating_distribution_figure,
    score_scatter_figure,
)

# Filled by ReportProvenanceHooks; catalog_report.yml declares it empty so that the
# pipeline still runs (saying "no versions recorded") where the hook is not registered.
INPUT_VERSIONS = "report_input_versions"
UNVERSIONED = "unversioned"

# Tables the report renders; each is also a versioned Parquet dataset of the same name.
REPORT_TABLES = (
    "model_aspect_metrics",
    "model_score_metrics",
    "judge_health",
    "position_consistency",
    "rating_by_position",
    "cost_table",
    "preference_pairs",
    "pair_drops",
)


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline(
        [
            node(
                model_aspect_metrics,
                ["aspect_annotations", "completions"],
                "model_aspect_metrics",
                name="compute_model_aspect_metrics",
            ),
            node(model_score_metrics, "feedback", "model_score_metrics",
                 name="compute_model_score_metrics"),
            node(
                judge_health,
                ["aspect_annotations", "critiques", "feedback"],
                "judge_health",
                name="compute_judge_health",
            ),
            node(position_consistency, "aspect_annotations", "position_consistency",
                 name="compute_position_consistency"),
            node(rating_by_position, "aspect_annotations", "rating_by_position",
                 name="compute_rating_by_position"),
            node(
                estimate_costs,
                ["completions", "aspect_annotations", "critiques", "params:report.prices",
                 "params:annotate", "params:endpoints"],
                "cost_table",
                name="estimate_costs",
            ),
            node(
                preference_pairs,
                ["completions", "feedback", "aspect_annotations", "decontamination_questions",
                 "params:report.pairs"],
                ["preference_pairs", "pair_drops"],
                name="binarize_preference_pairs",
            ),
            node(
                rating_distribution_figure,
                ["aspect_annotations", "completions"],
                "rating_distribution_figure",
                name="plot_rating_distribution",
            ),
            node(aspect_heatmap_figure, "model_aspect_metrics", "aspect_heatmap_figure",
                 name="plot_aspect_heatmap"),
            node(score_scatter_figure, "feedback", "score_scatter_figure",
                 name="plot_score_scatter"),
            node(position_bias_figure, "aspect_annotations", "position_bias_figure",
                 name="plot_position_bias"),
            node(
                render_report,
                {
                    "input_versions": INPUT_VERSIONS,
                    "pairs": "params:report.pairs",
                    **{table: table for table in REPORT_TABLES},
                },
                "report",
                name="render_report",
            ),
        ]
    )


class ReportProvenanceHooks:
    """Tell the report which version of each dataset it was built from.

    A node sees data, not versions; this hook sees the catalog before the run starts: a
    dataset that the run writes gets the run's save version, any other the version the
    catalog will load (`--load-versions`, else the latest on disk).
    """

    @hook_impl
    def before_pipeline_run(self, pipeline: Pipeline, catalog: CatalogProtocol) -> None:
        consumers = [n.name for n in pipeline.nodes if INPUT_VERSIONS in n.inputs]
        if not consumers:
            return
        upstream = pipeline.to_nodes(*consumers)
        produced = upstream.all_outputs()
        # Read before written (stable sort keeps the nodes' order within each group).
        names = sorted(
            dict.fromkeys(name for n in upstream.nodes for name in n.inputs),
            key=lambda name: name in produced,
        )
        versions = {}
        for name in names:
            dataset = catalog.get(name)
            if dataset is None or isinstance(dataset, MemoryDataset):  # parameters, in memory
                continue
            # A versioned dataset always has a save version: the run's.
            save_version = (
                dataset.resolve_save_version()
                if isinstance(dataset, AbstractVersionedDataset)
                else None
            )
            if save_version is None:
                versions[name] = UNVERSIONED
            elif name in produced:
                versions[name] = save_version
            else:
                versions[name] = dataset.resolve_load_version()
        catalog.save(INPUT_VERSIONS, versions)
