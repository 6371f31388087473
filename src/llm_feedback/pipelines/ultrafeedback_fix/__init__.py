"""`kedro run --pipelines ultrafeedback_fix`: the score fix on published UltraFeedback records."""

from llm_feedback.pipelines.ultrafeedback_fix.pipeline import create_pipeline

__all__ = ["create_pipeline"]
