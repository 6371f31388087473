"""`evaluate.panel`: several judges whose verdicts are combined into one.

    panel:
      judges:                     # a list; names default to the endpoint's name
        - {endpoint: openai}
        - {endpoint: local, name: local_warm, temperature: 0.7}
      aggregate: majority         # or mean

`judges` may also map names to judge blocks (`judges: {gpt: {endpoint: openai}, ...}`),
which is the shape `--params evaluate.panel.judges.gpt.endpoint=openai` builds. A judge
block is `evaluate.judge`'s shape (endpoint and sampling settings) plus its `name`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from llm_feedback.core.errors import ConfigError
from llm_feedback.evaluation.config import (
    AGGREGATES,
    LONE_JUDGE,
    PANEL,
    RECORDED,
    RESERVED_NAMES,
    PanelParams,
)
from llm_feedback.judges.config import JudgeParams
from llm_feedback.params.judge import parse_judge
from llm_feedback.params.reader import Block

__all__ = ["AGGREGATES", "LONE_JUDGE", "PANEL", "RECORDED", "PanelParams", "parse_panel"]

_NAME = re.compile(r"[A-Za-z0-9_-]+")


def _named_blocks(judges: Any, path: str) -> list[tuple[str, Any, str]]:
    """(name, judge block, dotted path) of each judge, from a list or a {name: block} map."""
    if isinstance(judges, Mapping):
        return [(str(name), block, f"{path}.{name}") for name, block in judges.items()]
    if isinstance(judges, str) or not isinstance(judges, list | tuple):
        raise ConfigError(
            f"{path} must list the judges ([{{endpoint: ...}}, ...]) or map names to them, "
            f"got {judges!r}"
        )
    named = []
    for index, entry in enumerate(judges):
        where = f"{path}[{index}]"
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where} must be a mapping {{endpoint: ..., name: ...}}")
        block = {key: value for key, value in entry.items() if key != "name"}
        name = entry.get("name")
        if name is None:
            if not isinstance(block.get("endpoint"), str):
                raise ConfigError(
                    f"{where}.name: an inline endpoint has no name to go by; give the judge one"
                )
            name = block["endpoint"]
        named.append((name, block, where))
    return named


def parse_panel(block: Any, path: str, endpoints: Mapping[str, Any] | None) -> PanelParams:
    """`block` is `{judges: [...] or {name: ...}, aggregate: mean | majority}`.

    Args:
        block: the panel's block.
        path: its dotted name, for messages.
        endpoints: the `endpoints` block (None: none defined).

    Returns:
        The panel's parameters.
    """
    panel = Block(block, path, ("judges", "aggregate"), {})
    judges: dict[str, JudgeParams] = {}
    for name, judge_block, where in _named_blocks(panel.raw("judges"), f"{path}.judges"):
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ConfigError(
                f"{where}.name: {name!r} must be letters, digits, '_' or '-' (it names columns)"
            )
        if name in RESERVED_NAMES:
            raise ConfigError(f"{where}.name: {name!r} is reserved; choose another name")
        if name in judges:
            raise ConfigError(f"{where}.name: two judges are named {name!r}")
        judge = parse_judge(judge_block, where, endpoints)
        twin = next(
            (
                other
                for other, known in judges.items()
                if known.endpoint == judge.endpoint and dict(known.sampling) == dict(judge.sampling)
            ),
            None,
        )
        if twin is not None:
            raise ConfigError(
                f"{where}: the same endpoint and settings as judge {twin!r}; it would repeat "
                "that judge's (cached) answers. Change a setting or drop it"
            )
        judges[name] = judge
    if len(judges) < 2:
        raise ConfigError(f"{path}.judges: a panel needs two judges or more, got {len(judges)}")
    return PanelParams(judges=judges, aggregate=panel.raw("aggregate"))
