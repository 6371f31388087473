"""Kedro's OmegaConfigLoader, refusing YAML whose aliases expand beyond reason.

PyYAML builds an alias as a reference to its anchor, so a "billion laughs" file (anchors
of anchors, each used ten times) is small as text and as parsed YAML; OmegaConf then copies
every reference into its own tree, which takes minutes and gigabytes, even for keys no
pipeline reads. Each configuration file is composed first (cheap: one node per node of
the text) and the size it would expand to counted; beyond `MAX_CONFIG_VALUES` it is
refused with a `ConfigError` naming the file.

Parameters merge key by key (conf/local adds endpoints to conf/base's), except the blocks
in `REPLACED_BLOCKS`: a `model_pool:` in conf/local (or the run's environment) is the whole
pool, in place of conf/base's. `--params model_pool.<name>.<key>=...` edits the pool in use
key by key, and an entry set to null (`--params model_pool.<name>=null`, or `<name>: null`
in a file) removes that model.

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
from llm_feedback.core.errors import ConfigError

# Far above any real configuration file (the project's largest has a few hundred values).
MAX_CONFIG_VALUES = 100_000
# libyaml's composer where PyYAML has it: every `kedro run` composes each file twice or more,
# and the pure-Python one takes ~25x longer.
_COMPOSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Parameter blocks that a later configuration source replaces whole instead of merging: a
# user's pool of models must not keep the embedded model's five settings beside it.
REPLACED_BLOCKS = ("model_pool",)


def expanded_size(node: yaml.Node, sizes: dict[int, int] | None = None) -> int:
    """How many nodes `node` becomes once every alias is copied out (shared nodes counted
    each time they are used, computed once each).

    Args:
        node: a composed YAML node.
        sizes: sizes already computed, by node id.

    Returns:
        The node count.
    """
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
    """Raise `ConfigError` when the YAML `text` would expand to more than `limit` values.

    Args:
        text: the YAML text.
        source: its file, named in the message.
        limit: the most values allowed.
    """
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


def without_removed_entries(parameters: dict[str, Any]) -> dict[str, Any]:
    """`parameters` without the entries of `REPLACED_BLOCKS` set to null (removed models).

    Args:
        parameters: the merged parameters.

    Returns:
        The same parameters, each replaced block without its null entries.
    """
    for block in REPLACED_BLOCKS:
        entries = parameters.get(block)
        if isinstance(entries, dict) and None in entries.values():
            parameters[block] = {k: v for k, v in entries.items() if v is not None}
    return parameters


class BoundedOmegaConfigLoader(OmegaConfigLoader):
    """`OmegaConfigLoader` (the same arguments) that checks each file's alias expansion
    before OmegaConf reads it, replaces `REPLACED_BLOCKS` instead of merging them, and
    hides URL passwords in the parameters."""

    def __getitem__(self, key: str) -> dict[str, Any]:
        config = super().__getitem__(key)
        if key != "parameters":
            return config
        return hide_url_passwords(without_removed_entries(config))

    def _resolve_from_raw_config(
        self, key: str, base_configs: dict, env_configs: dict, *args: Any
    ) -> dict[str, Any]:
        # Runtime params are merged into the environment's parameters too: only a block
        # written in one of its files replaces the base one.
        self._replaced = {
            block
            for block in REPLACED_BLOCKS
            if key == "parameters" and any(block in conf for conf in env_configs.values())
        }
        return super()._resolve_from_raw_config(key, base_configs, env_configs, *args)

    def _merge_configs(
        self, config: dict[str, Any], env_config: dict[str, Any], key: str, env_path: str
    ) -> Any:
        merged = super()._merge_configs(config, env_config, key, env_path)
        for block in getattr(self, "_replaced", ()):
            merged[block] = env_config[block]  # with the runtime params' edits in it
        return merged

    def _is_valid_config_path(self, path: Path) -> bool:
        valid = super()._is_valid_config_path(path)
        if valid and path.suffix in {".yml", ".yaml"}:
            with self._fs.open(str(path.as_posix())) as handle:
                check_alias_expansion(handle.read().decode("utf8"), path.as_posix())
        return valid
