"""Project hooks: hand credentials to the endpoint layer, stop local model servers, and
tell the report which dataset versions it was built from."""

from typing import Any

from kedro.config import MissingConfigException
from kedro.framework.hooks import hook_impl
from kedro.io import AbstractVersionedDataset, CatalogProtocol, MemoryDataset
from kedro.pipeline import Pipeline

from llm_feedback.backends import register_credentials, stop_local_servers
from llm_feedback.pipelines.report.pipeline import INPUT_VERSIONS

# What the report shows for an input that is not a versioned dataset.
UNVERSIONED = "unversioned"


class ModelEndpointHooks:
    @hook_impl
    def after_context_created(self, context: Any) -> None:
        # Keys go straight from conf/local/credentials.yml to the clients: never into
        # parameters, so never into kedro-viz, logs or datasets.
        try:
            credentials = context.config_loader["credentials"]
        except MissingConfigException:  # no conf/local/credentials.yml: env vars only
            credentials = {}
        register_credentials(credentials)

    @hook_impl
    def after_pipeline_run(self) -> None:
        stop_local_servers()

    @hook_impl
    def on_pipeline_error(self) -> None:
        stop_local_servers()


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
