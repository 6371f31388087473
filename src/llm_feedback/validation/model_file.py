"""Which weights answer behind an endpoint, for a judge's identity (`identity.judge_identity`).

A model name does not always say which weights answer: the `local` backend serves whatever
GGUF `model_path` names (the embedded SmolLM2 file by default), and an Azure endpoint serves
the deployment named by `model`, whatever model that deployment holds. The identity names
the local file by its SHA-256 and the Azure deployment by its resource and name; any other
backend's model name is the identity (""), as the provider serves it.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

from llm_feedback.core.errors import ConfigError
from llm_feedback.validation.identity import public_endpoint

# (path, size, mtime_ns) -> digest: a run asks once per stage, the file is hashed once.
_DIGESTS: dict[tuple[str, int, int], str] = {}
_LOCK = threading.Lock()
_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """The SHA-256 of `path` in hex, remembered while its size and modification time hold.

    Args:
        path: the file to hash.

    Returns:
        The hex digest.
    """
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _LOCK:
        if key in _DIGESTS:
            return _DIGESTS[key]
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    with _LOCK:
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def model_file_identity(endpoint: Any) -> str:
    """What names the weights behind `endpoint` (an `EndpointConfig`) beyond its model name.

    Args:
        endpoint: the judge's endpoint configuration.

    Returns:
        "sha256:<hex>" of the local backend's GGUF file ("missing file <name>" when it is
        not there), "azure deployment <model> at <resource>" for Azure, else "".
    """
    if endpoint.backend == "local":
        from llm_feedback.backends.local import embedded_model_path  # noqa: PLC0415 - local only

        try:
            path = Path(endpoint.options.model_path or embedded_model_path())
        except ConfigError:  # the package is missing: the run itself says so
            return "missing file (embedded model not installed)"
        return f"sha256:{file_sha256(path)}" if path.is_file() else f"missing file {path.name}"
    if endpoint.backend == "azure":
        resource = endpoint.options.public_url() or ""
        return f"azure deployment {endpoint.model} at {public_endpoint(resource)}"
    return ""
