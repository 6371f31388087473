"""Kedro's OmegaConfigLoader, refusing YAML whose aliases expand beyond reason.

PyYAML builds an alias as a reference to its anchor, so a "billion laughs" file (anchors
of anchors, each used ten times) is small as text and as parsed YAML; OmegaConf then copies
every reference into its own tree, which takes minutes and gigabytes, even for keys no
pipeline reads. Each configuration file is composed first (cheap: one node per node of
the text) and the size it would expand to counted; beyond `MAX_CONFIG_VALUES` it is
refused with a `ConfigError` naming the file.

The parameters it returns hold no URL password: `base_url: https://user:pw@host` reads as
`https://user:***@host` (what `kedro viz build`, logs and reports show) and the endpoint
layer asks `reveal_url` for the real one (backends/secrets.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kedro.config import OmegaConfigLoader

from llm_feedback.backends.secrets import hide_url_passwords
from llm_feedback.errors import ConfigError

# Far above any real configuration file (the project's largest has a few hundred values).
MAX_CONFIG_VALUES = 100_000
# libyaml's composer where PyYAML has it: every `kedro run` composes each file twice or more,
# and the pure-Python one takes ~25x longer.
_COMPOSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def expanded_size(node: yaml.Node, sizes: dict[int, int] | None = None) -> int:
    """How many nodes `node` becomes once every alias is copied out (shared nodes counted
    each time they are used, computed once each)."""
    sizes = {} if sizes is None else sizes
    if id(node) in sizes:
        return sizes[id(node)]
    sizes[id(node)] = 1  # a node met again while being counted (a recursive alias)
    if isinstance(node, yaml.MappingNode):
        children = [child for pair in node.value for child in pair]
    elif isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    else:
        children = []
    total = 1 + sum(expanded_size(child, sizes) for child in children)
    sizes[id(node)] = total
    return total


def check_alias_expansion(text: str, source: str, limit: int = MAX_CONFIG_VALUES) -> None:
    """Raise `ConfigError` when the YAML `text` would expand to more than `limit` values."""
    try:
        nodes = list(yaml.compose_all(text, Loader=_COMPOSER))
    except yaml.YAMLError:
        return  # Kedro's own reading reports malformed YAML with its line and position
    size = sum(expanded_size(node) for node in nodes if node is not None)
    if size > limit:
        raise ConfigError(
            f"{source}: its YAML anchors and aliases expand to {size:,} values, over the "
            f"limit of {limit:,} (an alias bomb?); write the values out, or use OmegaConf "
            "interpolation (${...}) instead of anchors"
        )


class BoundedOmegaConfigLoader(OmegaConfigLoader):
    """`OmegaConfigLoader` (the same arguments) that checks each file's alias expansion
    before OmegaConf reads it, and hides URL passwords in the parameters."""

    def __getitem__(self, key: str) -> dict[str, Any]:
        config = super().__getitem__(key)
        return hide_url_passwords(config) if key == "parameters" else config

    def _is_valid_config_path(self, path: Path) -> bool:
        valid = super()._is_valid_config_path(path)
        if valid and path.suffix in {".yml", ".yaml"}:
            with self._fs.open(str(path.as_posix())) as handle:
                check_alias_expansion(handle.read().decode("utf8"), path.as_posix())
        return valid
