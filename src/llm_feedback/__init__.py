"""llm_feedback: UltraFeedback-style feedback data and LLM-as-judge evaluation."""

__version__ = "0.1.0"
