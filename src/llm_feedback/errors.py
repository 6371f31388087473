"""Errors raised before any model is started or any paid call is made."""

from collections.abc import Iterable
from typing import Any


class InputError(ValueError):
    """Bad input data: names the file or dataset, the row and the column at fault."""


class ConfigError(ValueError):
    """A bad parameter or endpoint definition: names the parameter at fault."""


class EndpointError(RuntimeError):
    """An endpoint that cannot do its job (down, wrong key, too many failed calls): names
    the endpoint, its URL and where its key comes from, never the key."""


def require_columns(frame: Any, columns: Iterable[str], dataset: str) -> None:
    """Fail with the dataset and column names when an input (a DataFrame, or a table on
    disk such as a `ParquetSource`: anything with `columns`) lacks expected columns."""
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise InputError(f"{dataset}: missing column(s) {', '.join(map(repr, missing))}")


class BatchPending(EndpointError):
    """Batches were submitted (`batch_wait: false`) and are not finished yet: a later run of
    the same command collects their answers without submitting them again."""


class CacheError(RuntimeError):
    """The request cache cannot be read or written (a foreign, corrupt or read-only file, a
    lock held elsewhere, a full disk): names the cache file and the cause."""


# The CLI catches these two on every run: they live here, not in planning.py, which imports
# every stage's request builders.
class PlanOnly(Exception):
    """The run was asked for its plan only (`plan_only: true`): nothing ran, nothing was
    paid. Carries the plan as text."""


class CostLimitExceeded(Exception):
    """The plan costs more than `max_cost_usd`: the run stops before its first call."""
