"""Model backends behind one request/response contract."""

from llm_feedback.backends.client import ClientStats, LLMClient
from llm_feedback.backends.config import EndpointConfig, endpoint_from_env, register_credentials
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.backends.local import stop_local_servers

__all__ = [
    "ChatRequest",
    "ChatResult",
    "ClientStats",
    "EndpointConfig",
    "LLMClient",
    "endpoint_from_env",
    "register_credentials",
    "stop_local_servers",
]
