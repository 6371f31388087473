"""Answer every sampled prompt with its drawn model."""

from llm_feedback.pipelines.generate.pipeline import create_pipeline

__all__ = ["create_pipeline"]
