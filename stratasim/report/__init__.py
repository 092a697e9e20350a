"""What a study produced, for people and tools: the report (text, JSON), its operator table, Chrome traces, plots."""

from stratasim.report.report import Report

__all__ = ["Report"]
