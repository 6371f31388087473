"""Kedro project settings."""

from kedro.config import OmegaConfigLoader

from llm_feedback.hooks import (
    ModelEndpointHooks,
    ReportProvenanceHooks,
    RunGuardHooks,
    StageTimesHooks,
)

HOOKS = (ModelEndpointHooks(), RunGuardHooks(), ReportProvenanceHooks(), StageTimesHooks())

CONFIG_LOADER_CLASS = OmegaConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    # conf/local adds to conf/base key by key: an `endpoints:` block there adds endpoints
    # instead of replacing the whole map.
    "merge_strategy": {"parameters": "soft"},
}
