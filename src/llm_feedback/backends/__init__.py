"""Model backends behind one request/response contract.

The built-in backends are registered here, so that every endpoint definition can name them
as soon as any part of the package is imported; `register_backend` adds more.
"""

from llm_feedback.backends.anthropic_backend import AnthropicBackend  # SDK loads on use
from llm_feedback.backends.base import (
    BACKENDS,
    Backend,
    BatchBackend,
    EndpointConfig,
    RequestBackend,
    RetryableError,
    StreamingBatchBackend,
    endpoint_from_env,
    make_backend,
    register_backend,
    register_credentials,
)
from llm_feedback.backends.client import ClientStats, LLMClient
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.backends.gemini_backend import GeminiBackend  # SDK loads on use
from llm_feedback.backends.lean import LeanAzureBackend, LeanOpenAIBackend
from llm_feedback.backends.local import LocalModelBackend, stop_local_servers
from llm_feedback.backends.openai_backend import OpenAICompatibleBackend
from llm_feedback.backends.ray_backend import RayBackend  # ray itself loads on open()
from llm_feedback.backends.vllm_backend import VLLMBackend  # vllm itself loads on open()

register_backend("local", LocalModelBackend)
register_backend("openai", LeanOpenAIBackend)
register_backend("azure", LeanAzureBackend)
register_backend("vllm", VLLMBackend)
register_backend("ray", RayBackend)
register_backend("anthropic", AnthropicBackend)
register_backend("gemini", GeminiBackend)

__all__ = [
    "AnthropicBackend",
    "BACKENDS",
    "Backend",
    "BatchBackend",
    "ChatRequest",
    "ChatResult",
    "ClientStats",
    "EndpointConfig",
    "GeminiBackend",
    "LLMClient",
    "LeanAzureBackend",
    "LeanOpenAIBackend",
    "OpenAICompatibleBackend",
    "RayBackend",
    "RequestBackend",
    "RetryableError",
    "StreamingBatchBackend",
    "endpoint_from_env",
    "make_backend",
    "register_backend",
    "register_credentials",
    "stop_local_servers",
]
