"""Draw models and principles for every raw prompt."""

from llm_feedback.pipelines.sample.pipeline import create_pipeline

__all__ = ["create_pipeline"]
