"""Bounds of one query over many reports (`pva query`, `pva dataset`): time, memory and threads."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidInputError

#: Defaults of `pva query`: seconds, DuckDB memory limit.
DEFAULT_TIMEOUT = 300.0
DEFAULT_MEMORY = "4GB"


class QueryLimitError(InvalidInputError):
    """A query ran past its time or memory limit."""


@dataclass(frozen=True)
class Limits:
    """Bounds of one query: wall time in seconds (None: unbounded) and DuckDB's memory limit."""

    timeout: float | None = DEFAULT_TIMEOUT
    memory: str = DEFAULT_MEMORY
    threads: int | None = None


DEFAULT_LIMITS = Limits()
