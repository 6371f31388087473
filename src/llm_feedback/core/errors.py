"""Errors raised before any model is started or any paid call is made."""

import errno
import os
from collections.abc import Iterable
from typing import Any

# A write that failed for want of room or of permission to write there: the disk, not the data.
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
READ_ONLY = frozenset({errno.EROFS})


class InputError(ValueError):
    """Bad input data: names the file or dataset, the row and the column at fault."""


class ConfigError(ValueError):
    """A bad parameter or endpoint definition: names the parameter at fault."""


class RunLocked(ConfigError):
    """Another run holds the data root (its local lock file or its remote lock object)."""


class EndpointError(RuntimeError):
    """An endpoint that cannot do its job (down, wrong key, too many failed calls): names
    the endpoint, its URL and where its key comes from, never the key."""


def require_columns(frame: Any, columns: Iterable[str], dataset: str) -> None:
    """Fail with the dataset and column names when an input (a DataFrame, or a table on
    disk such as a `ParquetSource`: anything with `columns`) lacks expected columns.

    Args:
        frame: the input (anything with `columns`).
        columns: the columns it must have.
        dataset: its name, for the message.
    """
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise InputError(f"{dataset}: missing column(s) {', '.join(map(repr, missing))}")


class BatchPending(EndpointError):
    """Batches were submitted (`batch_wait: false`) and are not finished yet: a later run of
    the same command collects their answers without submitting them again."""


class OutputError(RuntimeError):
    """An output cannot be written (a full disk, a read-only file system): names the file;
    what was there before is kept."""


def output_error(path: str, error: BaseException, kept: str = "") -> OutputError | None:
    """The `OutputError` for a write of `path` that failed with `error`, or None when
    `error` is not a full or read-only disk (pyarrow's own errors may carry no errno: their
    text is matched too).

    Args:
        path: the file (or folder) being written.
        error: the error the write raised.
        kept: what is left as it was, for the message (default: "the previous one").

    Returns:
        The error to raise from `error`, or None.
    """
    if not isinstance(error, OSError):
        return None
    code = error.errno
    if code is None:
        text = str(error)
        code = next(
            (
                c
                for c in (*DISK_FULL, *READ_ONLY)
                if os.strerror(c) in text or f"Errno {c}]" in text
            ),
            None,
        )
    if code in DISK_FULL:
        what, hint = "the disk is full", "free space there or set data_root to another disk"
    elif code in READ_ONLY:
        what, hint = "the file system is read-only", "set data_root to a writable folder"
    else:
        return None
    return OutputError(
        f"{path}: cannot be written, {what} ({os.strerror(code)}); {kept or 'the previous one'} "
        f"is kept as it was; {hint}"
    )


class CacheError(RuntimeError):
    """The request cache cannot be read or written (a foreign, corrupt or read-only file, a
    lock held elsewhere, a full disk): names the cache file and the cause."""


# The CLI catches these two on every run: they live here, not in runs/plan.py, which imports
# every stage's request builders.
class PlanOnly(Exception):
    """The run was asked for its plan only (`plan_only: true`): nothing ran, nothing was
    paid. Carries the plan as text."""


class CostLimitExceeded(Exception):
    """The plan costs more than `max_cost_usd`: the run stops before its first call."""
