"""Model backends behind one request/response contract."""

from llm_feedback.backends.contract import ChatRequest, ChatResult

__all__ = ["ChatRequest", "ChatResult"]
