"""Metrics tables, preference pairs, figures and a readable report from the annotations."""

from llm_feedback.pipelines.report.pipeline import ReportProvenanceHooks, create_pipeline

__all__ = ["ReportProvenanceHooks", "create_pipeline"]
