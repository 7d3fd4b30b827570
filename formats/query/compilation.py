"""Queries of the compilation report: target, graph, programs, variables, memory, liveness, debug."""

from __future__ import annotations


class CompilationQueries:
    """Questions about what was compiled (a mixin of ProfileReader; uses `self.file`)."""
