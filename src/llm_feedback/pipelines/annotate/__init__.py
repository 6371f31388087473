"""Rate completions per aspect, critique them and fix the overall scores."""

from llm_feedback.pipelines.annotate.pipeline import create_pipeline

__all__ = ["create_pipeline"]
