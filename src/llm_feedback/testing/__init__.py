"""The project's own OpenAI-compatible server for tests and benchmarks; callers import it
from `llm_feedback.testing.server` (see its docstring for the modules behind it)."""
