"""Aggregates for the analyses: summary, comparison, operator times, estimates, charts."""

from __future__ import annotations


class AnalysisQueries:
    """Whole-report aggregates (a mixin of ProfileReader; uses `self.file`)."""
