"""Project hooks: hand credentials to the endpoint layer, stop local model servers."""

from typing import Any

from kedro.config import MissingConfigException
from kedro.framework.hooks import hook_impl

from llm_feedback.backends import register_credentials, stop_local_servers


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
