"""A judge's identity: what determines its answers, and the key its cards are filed under.

A judge is its endpoint, model, the weights behind the model name (`judge_model_file`: the
local GGUF's SHA-256, the Azure deployment; `validation.model_file`), prompt template,
sampling (the decoding settings) and task (the stage or evaluate mode, scale, reply
format). `judge_key` hashes them all (the endpoint without any password or query string,
the template by its SHA-256), so a changed prompt, temperature or GGUF file is another
judge. Kept apart from the card (`validation.card`) because a run's lineage records its
judge's identity at start-up, where the card's plotting and statistics are not needed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit


def endpoint_name(endpoint: Any) -> str:
    """What names an endpoint in a judge key: its configured name, else URL, else backend
    (a port that changes between runs of a test server does not make another judge).

    Args:
        endpoint: the judge's endpoint.

    Returns:
        The name.
    """
    return endpoint.name or endpoint.base_url or endpoint.backend


def public_endpoint(endpoint: str) -> str:
    """An endpoint name or URL without a user, password, query string or fragment.

    Args:
        endpoint: an endpoint name or URL.

    Returns:
        What may be shown of it.
    """
    if "://" not in endpoint:
        return endpoint
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def judge_identity(
    endpoint: str,
    model: str,
    prompt_template: str,
    sampling: Mapping[str, Any] | None,
    *,
    model_file: str = "",
    task: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The identity columns of a judge, `judge_key` a hash of the others.

    Args:
        endpoint: the endpoint's name or URL (a URL's password and query are dropped).
        model: the model name sent to the endpoint.
        prompt_template: the full text of the judge's prompt templates.
        sampling: the decoding settings (temperature, top_p, max_tokens, ...).
        model_file: the weights behind the name (`model_file.model_file_identity`).
        task: what the judge is asked (stage, mode, scale, reply format).

    Returns:
        judge_key and the identity columns of JUDGE_IDENTITY_COLUMNS.
    """
    identity = {
        "judge_endpoint": public_endpoint(endpoint),
        "judge_model": model,
        "judge_model_file": model_file,
        "prompt_template_sha256": hashlib.sha256(prompt_template.encode("utf-8")).hexdigest(),
        "sampling": _json(sampling),
        "task": _json(task),
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()
    return {"judge_key": digest[:16], **identity}


def _json(settings: Mapping[str, Any] | None) -> str:
    return json.dumps(dict(settings or {}), sort_keys=True, default=str)


def judge_key(
    endpoint: str,
    model: str,
    prompt_template: str,
    sampling: Mapping[str, Any] | None,
    **identity: Any,
) -> str:
    """The key a judge's card is filed under (16 hex digits); `identity` as
    `judge_identity`'s keyword arguments.

    Args:
        endpoint: the endpoint's name or URL.
        model: the model name sent to the endpoint.
        prompt_template: the full text of the judge's prompt templates.
        sampling: the decoding settings.
        **identity: `judge_identity`'s keyword arguments (model_file, task).

    Returns:
        The key.
    """
    return judge_identity(endpoint, model, prompt_template, sampling, **identity)["judge_key"]
