"""Kedro project settings."""

from kedro.config import OmegaConfigLoader

from llm_feedback.hooks import ModelEndpointHooks, ReportProvenanceHooks

HOOKS = (ModelEndpointHooks(), ReportProvenanceHooks())

CONFIG_LOADER_CLASS = OmegaConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
}
