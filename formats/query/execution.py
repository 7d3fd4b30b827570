"""Queries of the execution report: runs, steps, cycles and per-tile matrices."""

from __future__ import annotations


class ExecutionQueries:
    """Questions about what ran (a mixin of ProfileReader; uses `self.file`)."""
