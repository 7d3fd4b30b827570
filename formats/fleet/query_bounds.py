"""Checks a query against its bounds before DuckDB plans it, and a watchdog that holds its time and memory
limits while it is planned and run (DuckDB's own memory limit does not cover its planner)."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time

from .limits import STUCK_GRACE, Limits, QueryLimitError


def check_query_size(con, sql: str, where: str, limits: Limits) -> None:
    """Refuse a query longer than its bound, or one whose common table expressions expand (inlined where
    they are referenced) to more nodes than its bound: the plan DuckDB would build doubles with each
    level of a CTE referenced twice."""
    size = len(sql.encode("utf-8", "surrogatepass"))
    if size > limits.max_query_bytes:
        raise QueryLimitError(
            f"{where!r}: the query is {size:,} bytes long; expected at most {limits.max_query_bytes:,}", where
        )
    [(text,)] = con.execute("SELECT json_serialize_sql($sql)", {"sql": sql}).fetchall()
    try:
        _Expansion(limits.max_plan_nodes).count(json.loads(text))
    except RecursionError:
        raise QueryLimitError(f"{where!r}: the query is nested too deeply", where) from None
    except _TooLargeError:
        raise QueryLimitError(
            f"{where!r}: the query expands to more than {limits.max_plan_nodes:,} query nodes once its common "
            f"table expressions are inlined where they are referenced; materialize them "
            f"(AS MATERIALIZED) or simplify the query",
            where,
        ) from None


class _TooLargeError(Exception):
    pass


class _Expansion:
    """Counts the nodes of a serialized query with every non-materialized CTE reference replaced by the
    CTE's own expansion (memoised per CTE, so the count itself is linear in the query's size)."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.memo: dict[int, int] = {}
        self.active: set[int] = set()

    def count(self, node, scope: dict | None = None) -> int:
        scope = dict(scope or {})
        if isinstance(node, list):
            return self._check(sum(self.count(item, scope) for item in node))
        if not isinstance(node, dict):
            return 0
        for entry in (node.get("cte_map") or {}).get("map", []) if isinstance(node.get("cte_map"), dict) else []:
            value = entry.get("value") if isinstance(entry, dict) else None
            if isinstance(value, dict) and value.get("materialized") != "CTE_MATERIALIZE_ALWAYS":
                scope[entry.get("key")] = (value.get("query_node"), dict(scope))
        total = 1 if "type" in node else 0
        if node.get("type") == "BASE_TABLE" and node.get("table_name") in scope and not node.get("schema_name"):
            body, outer = scope[node["table_name"]]
            total += self._cte(body, outer, node["table_name"])
        for key, value in node.items():
            if key != "cte_map" and isinstance(value, (dict, list)):
                total += self.count(value, scope)
        for entry in (node.get("cte_map") or {}).get("map", []) if isinstance(node.get("cte_map"), dict) else []:
            value = entry.get("value") if isinstance(entry, dict) else None
            if isinstance(value, dict):  # each CTE's body once, as written
                total += self._cte(value.get("query_node"), scope, entry.get("key"))
        return self._check(total)

    def _cte(self, body, scope: dict, name) -> int:
        key = id(body)
        if key in self.memo:
            return self.memo[key]
        if key in self.active:  # a recursive CTE refers to itself: one reference
            return 1
        self.active.add(key)
        try:
            inner = {k: v for k, v in scope.items() if k != name or v[0] is not body}
            size = self.count(body, inner)
        finally:
            self.active.discard(key)
        self.memo[key] = size
        return size

    def _check(self, total: int) -> int:
        if total > self.bound:
            raise _TooLargeError
        return total


def _rss() -> int:
    """Resident memory of this process [bytes] (Linux), 0 where unknown."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class Watchdog:
    """Interrupts a DuckDB connection past the query's time limit, or when the process grows by more than
    the memory limit (with room for DuckDB's own accounting) while the query is planned and run; calls
    `limits.on_stuck` if the engine has not stopped STUCK_GRACE seconds later."""

    POLL = 0.02

    def __init__(self, con, limits: Limits) -> None:
        self.con = con
        self.limits = limits
        self.reason: str | None = None  # "time" or "memory", once interrupted
        self._stop = threading.Event()
        self._started = time.monotonic()
        limit = limits.memory_bytes()
        self._rss_bound = None if limit is None else _rss() + limit + limit // 4 + (64 << 20)
        self._thread: threading.Thread | None = None
        if limits.timeout is not None or self._rss_bound is not None:
            self._thread = threading.Thread(target=self._watch, name="pva-query-watchdog", daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        interrupted_at = None
        while not self._stop.wait(self.POLL):
            now = time.monotonic()
            if interrupted_at is None:
                if self.limits.timeout is not None and now - self._started > self.limits.timeout:
                    self.reason = "time"
                elif self._rss_bound is not None and _rss() > self._rss_bound:
                    self.reason = "memory"
                if self.reason is not None:
                    interrupted_at = now
                    with contextlib.suppress(Exception):
                        self.con.interrupt()
            elif now - interrupted_at > STUCK_GRACE:
                if self.limits.on_stuck is not None:
                    self.limits.on_stuck(self.reason or "time")
                return

    def stop(self) -> None:
        """Stop watching (the query finished, failed or was closed)."""
        self._stop.set()
