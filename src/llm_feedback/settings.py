"""Kedro project settings."""

from llm_feedback.config_loader import BoundedOmegaConfigLoader
from llm_feedback.hooks import (
    ModelEndpointHooks,
    ReportProvenanceHooks,
    RunGuardHooks,
    StageTimesHooks,
)

HOOKS = (ModelEndpointHooks(), RunGuardHooks(), ReportProvenanceHooks(), StageTimesHooks())

# OmegaConfigLoader, with YAML alias expansion limited (a "billion laughs" file is refused).
CONFIG_LOADER_CLASS = BoundedOmegaConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    # conf/local adds to conf/base key by key: an `endpoints:` block there adds endpoints
    # instead of replacing the whole map.
    "merge_strategy": {"parameters": "soft"},
}
