"""Whether the dataset versions a report reads come from one consistent history.

Kedro saves every output of one run under the run's timestamp, and timestamps sort in time
order. A table can then never be older than a table it is computed from, unless the two
come from different runs: an annotate run that failed part-way leaves new aspect ratings
beside the old run's overall scores; a generate rerun leaves the old annotations of other
completions. `mixed_runs` names every such pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StaleInput:
    """`dataset` (at `version`) is older than `source` (at `source_version`), which it is
    computed from."""

    dataset: str
    version: str
    source: str
    source_version: str

    def describe(self) -> str:
        return (
            f"{self.dataset} {self.version} is older than {self.source} "
            f"{self.source_version}, which it is computed from"
        )


def mixed_runs(
    versions: Mapping[str, str], computed_from: Mapping[str, Sequence[str]]
) -> list[StaleInput]:
    """Each dataset in `versions` older than one of its sources (direct or through tables
    not in `versions`) that is in `versions` too. `computed_from` maps a dataset to the
    datasets its producing node reads.

    Args:
        versions: dataset -> the version (run) read.
        computed_from: dataset -> the datasets its producing node reads.

    Returns:
        The stale inputs.
    """
    stale = []
    for dataset, version in versions.items():
        seen: set[str] = set()
        todo = list(computed_from.get(dataset, ()))
        while todo:
            source = todo.pop()
            if source in seen:
                continue
            seen.add(source)
            if source in versions:
                if versions[source] > version:
                    stale.append(StaleInput(dataset, version, source, versions[source]))
                continue  # its own sources are checked against it
            todo.extend(computed_from.get(source, ()))
    return stale


def describe_mixed_runs(stale: Sequence[StaleInput], allow_parameter: str) -> str:
    """The error message for inputs from different runs, with what to do about it.

    Args:
        stale: the stale inputs (`mixed_runs`).
        allow_parameter: the parameter that allows mixed runs.

    Returns:
        The message.
    """
    return (
        "the inputs of the report (or export) come from different runs (a run that failed "
        "part-way, or a "
        "stage rerun alone): "
        + "; ".join(item.describe() for item in stale)
        + ". Rerun the pipeline from the stage that wrote the older table, pick one run's "
        f"versions with --load-versions, or set {allow_parameter}: true to report them anyway"
    )
