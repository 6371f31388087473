"""Metrics tables, preference pairs, figures and a readable report from the annotations."""

from llm_feedback.pipelines.report.pipeline import create_pipeline

__all__ = ["create_pipeline"]
