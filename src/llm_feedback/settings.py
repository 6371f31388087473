"""Kedro project settings."""

from llm_feedback.config_loader import BoundedOmegaConfigLoader
from llm_feedback.hooks import (
    FigureSetHooks,
    ModelEndpointHooks,
    ReportProvenanceHooks,
    RunGuardHooks,
    RunInputsHooks,
)
from llm_feedback.pipelines.run_record_hooks import RunRecordHooks
from llm_feedback.pipelines.stage_times import StageTimesHooks
from llm_feedback.pipelines.tracking_hooks import MlflowTrackingHooks
from llm_feedback.storage.remote_root import local_root

# Pluggy calls the last registered first: MLflow tracking checks its settings (and that
# MLflow is installed) before RunGuardHooks pays for a preflight call.
HOOKS = (
    ModelEndpointHooks(),
    FigureSetHooks(),
    RunGuardHooks(),
    ReportProvenanceHooks(),
    RunInputsHooks(),  # before ReportProvenanceHooks reads its inputs' versions
    StageTimesHooks(),
    MlflowTrackingHooks(),
    RunRecordHooks(),
)

# OmegaConfigLoader, with YAML alias expansion limited (a "billion laughs" file is refused).
CONFIG_LOADER_CLASS = BoundedOmegaConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    # conf/local adds to conf/base key by key: an `endpoints:` block there adds endpoints
    # instead of replacing the whole map (a `model_pool:` replaces the base pool:
    # config_loader.REPLACED_BLOCKS).
    "merge_strategy": {"parameters": "soft"},
    # `${local_root:<data root>}`: the root itself when local, else its local mirror folder
    # (the request cache is SQLite: it needs a local file; llm_feedback/storage/remote_root.py).
    "custom_resolvers": {"local_root": local_root},
}
