"""Bounds of one query over many reports (`pva query`, `pva dataset`): time, memory, threads and the size
of the query itself (its text, and the plan its common table expressions expand to)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from ..errors import InvalidInputError

#: Defaults of `pva query`: seconds, DuckDB memory limit.
DEFAULT_TIMEOUT = 300.0
DEFAULT_MEMORY = "4GB"
#: Longest query text accepted [bytes].
DEFAULT_MAX_QUERY_BYTES = 64 << 10
#: Most query nodes (selects, set operations, table references) a query may expand to once every common
#: table expression is inlined where it is referenced.
DEFAULT_MAX_PLAN_NODES = 100_000
#: Time after an interrupt within which the engine must stop before the query is called stuck [s].
STUCK_GRACE = 1.0

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|KIB|MB|MIB|GB|GIB|TB|TIB)?\s*$", re.IGNORECASE)
_UNITS = {
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "KIB": 1 << 10,
    "MIB": 1 << 20,
    "GIB": 1 << 30,
    "TIB": 1 << 40,
}


class QueryLimitError(InvalidInputError):
    """A query ran past its time or memory limit, or is larger than a query may be."""


@dataclass(frozen=True)
class Limits:
    """Bounds of one query: wall time in seconds (None: unbounded), DuckDB's memory limit, and the size of
    the query. `on_stuck` is called (with the reason) when the engine ignores an interrupt past its
    time or memory limit for STUCK_GRACE seconds: a command line ends its process there."""

    timeout: float | None = DEFAULT_TIMEOUT
    memory: str = DEFAULT_MEMORY
    threads: int | None = None
    max_query_bytes: int = DEFAULT_MAX_QUERY_BYTES
    max_plan_nodes: int = DEFAULT_MAX_PLAN_NODES
    on_stuck: Callable[[str], None] | None = None

    def memory_bytes(self) -> int | None:
        """The memory limit in bytes (DuckDB's units: KB = 1000, KiB = 1024), or None if it is not a size."""
        match = _SIZE.match(self.memory)
        if match is None:
            return None
        return int(float(match.group(1)) * _UNITS[(match.group(2) or "B").upper()])


DEFAULT_LIMITS = Limits()


def end_process(message: str, status: int = 2) -> NoReturn:
    """Write `message` to standard error and end the process at once: what a command line does when the
    engine holds the main thread past a limit and ignores the interrupt (`Limits.on_stuck`)."""
    sys.stdout.flush()
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    os._exit(status)
