"""The query layer: every question asked of a report, one method each. All SQL of pva lives here.

`ProfileReader` inherits these methods; pva's object model and analyses call them and never
write SQL of their own. Changing a column touches schemas/profile.sql, this package and the
producers, nothing else.
"""

from __future__ import annotations

from .analysis import AnalysisQueries
from .compilation import CompilationQueries
from .execution import ExecutionQueries
from .export import ExportQueries
from .user_sql import UserSql

__all__ = ["AnalysisQueries", "CompilationQueries", "ExecutionQueries", "ExportQueries", "ReportQueries", "UserSql"]


class ReportQueries(CompilationQueries, ExecutionQueries, AnalysisQueries, ExportQueries, UserSql):
    """Every query of a profile report (a mixin of ProfileReader)."""
