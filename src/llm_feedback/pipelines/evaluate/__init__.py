"""Reference-based LLM-as-judge evaluation of `eval_samples`."""

from llm_feedback.pipelines.evaluate.pipeline import create_pipeline

__all__ = ["create_pipeline"]
