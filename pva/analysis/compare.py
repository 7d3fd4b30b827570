"""Comparison of two reports: what grew, what shrank, and which growth counts as a regression."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from formats.errors import DATA_ERRORS, PvaError, corrupt_values
from formats.profile_reader import ProfileReader

#: Sections in the order they are printed; in all of them a larger number is worse.
SECTIONS = ("target", "memory", "memory by category", "memory by IPU", "liveness", "execution",
            "steps by program type", "compute set cycles")


@dataclasses.dataclass(frozen=True)
class Difference:
    """One compared figure of two reports."""

    section: str
    item: str
    a: float | str | None
    b: float | str | None
    unit: str = ""

    @property
    def change(self) -> float | None:
        """b - a, for numbers present in both reports."""
        if isinstance(self.a, (int, float)) and isinstance(self.b, (int, float)):
            return self.b - self.a
        return None

    @property
    def relative(self) -> float | None:
        """(b - a) / a, or None when a is 0 or not a number."""
        change = self.change
        if change is None or not self.a:
            return None
        return change / abs(self.a)

    def is_regression(self, threshold: float) -> bool:
        """Whether the figure grew by more than `threshold` (a fraction), or appeared from zero."""
        if self.section == "target" or self.change is None or self.change <= 0:
            return False
        rel = self.relative
        return rel is None or rel > threshold


def _target(reader: ProfileReader) -> dict[str, object]:
    t = reader.target
    return {k: t[k] for k in ("type", "architecture", "num_ipus", "tiles_per_ipu", "bytes_per_tile",
                              "clock_frequency", "num_replicas")}


def _memory(reader: ProfileReader) -> dict[str, int]:
    row = reader.query_one(
        "SELECT coalesce(sum(total_including_gaps), 0), coalesce(sum(total), 0), coalesce(max(total_including_gaps), 0), "
        "coalesce(sum(always_live_bytes), 0) FROM memory_by_tile"
    )
    oom = reader.query_one("SELECT count(*) FROM memory_by_tile WHERE total_including_gaps > ?",
                           (reader.target["bytes_per_tile"],))[0]
    return {"total including gaps": row[0], "total excluding gaps": row[1], "largest tile including gaps": row[2],
            "tiles out of memory": oom}


def _memory_by_category(reader: ProfileReader) -> dict[str, int]:
    return {name: int(total) for name, total in reader.query(
        "SELECT c.name, sum(m.total) FROM memory_by_category m JOIN var_categories c ON c.id = m.category "
        "GROUP BY c.name")}


def _memory_by_ipu(reader: ProfileReader) -> dict[str, int]:
    per_ipu = reader.target["tiles_per_ipu"]
    return {f"IPU {ipu}": int(total) for ipu, total in reader.query(
        "SELECT tile / ?, sum(total_including_gaps) FROM memory_by_tile GROUP BY tile / ?", (per_ipu, per_ipu))}


def _liveness(reader: ProfileReader) -> dict[str, int]:
    always = reader.query_one("SELECT coalesce(sum(always_live_bytes), 0) FROM memory_by_tile")[0]
    peak = reader.query_one("SELECT coalesce(max(not_always_live_bytes), 0) FROM liveness_steps")[0]
    return {"always-live bytes": always, "peak not-always-live bytes": peak, "peak live bytes": always + peak}


def _execution(reader: ProfileReader) -> dict[str, int]:
    total = reader.query_one(
        'SELECT coalesce(sum(length), 0) FROM (SELECT run, max("end" - start) AS length FROM run_cycles_by_ipu '
        "GROUP BY run)")[0]
    row = reader.query_one(
        "SELECT coalesce(sum(compute), 0), coalesce(sum(internal_exchange), 0), coalesce(sum(inter_ipu_exchange), 0), "
        "coalesce(sum(stream_copy_begin + stream_copy + stream_copy_end), 0), coalesce(sum(sync), 0) FROM cycle_totals")
    return {"total cycles": total, "compute tile-cycles": row[0], "internal exchange tile-cycles": row[1],
            "global exchange tile-cycles": row[2], "host exchange tile-cycles": row[3], "sync tile-cycles": row[4],
            "steps": reader.query_one("SELECT count(*) FROM steps")[0]}


def _steps_by_type(reader: ProfileReader) -> dict[str, int]:
    result: dict[str, int] = {}
    for type_name, count, cycles in reader.query(
        "SELECT s.type, count(DISTINCT s.id), coalesce(sum(b.tile_cycles_max), 0) FROM steps s "
        "LEFT JOIN steps_by_ipu b ON b.step_id = s.id GROUP BY s.type"
    ):
        result[f"{type_name} steps"] = count
        result[f"{type_name} cycles"] = int(cycles)
    return result


def _compute_set_cycles(reader: ProfileReader) -> dict[str, int]:
    result: dict[str, int] = defaultdict(int)
    for name, estimated in reader.query(
        "SELECT name, coalesce(estimated_cycles_max, 0) FROM compute_sets"
    ):
        result[f"{name} (estimated)"] += int(estimated)
    for name, measured in reader.query(
        "SELECT cs.name, sum(b.tile_cycles_max) FROM steps s JOIN compute_sets cs ON cs.compute_set = s.compute_set "
        "JOIN steps_by_ipu b ON b.step_id = s.id GROUP BY cs.name"
    ):
        result[f"{name} (measured)"] += int(measured or 0)
    return result


_COLLECTORS = {
    "memory": (_memory, "B"),
    "memory by category": (_memory_by_category, "B"),
    "memory by IPU": (_memory_by_ipu, "B"),
    "liveness": (_liveness, "B"),
    "execution": (_execution, "cycles"),
    "steps by program type": (_steps_by_type, ""),
    "compute set cycles": (_compute_set_cycles, "cycles"),
}


def compare(a: ProfileReader, b: ProfileReader) -> list[Difference]:
    """Every compared figure, sections in order, each sorted by absolute change (largest first)."""
    for reader in (a, b):
        try:
            for collect, _unit in _COLLECTORS.values():
                collect(reader)
        except PvaError:
            raise
        except DATA_ERRORS as exc:
            raise corrupt_values(reader.path, exc) from None
    return _compare(a, b)


def _compare(a: ProfileReader, b: ProfileReader) -> list[Difference]:
    result: list[Difference] = []
    ta, tb = _target(a), _target(b)
    result += [Difference("target", key, ta[key], tb[key]) for key in ta if ta[key] != tb[key]]
    for section, (collect, unit) in _COLLECTORS.items():
        va, vb = collect(a), collect(b)
        rows = [Difference(section, key, va.get(key, 0), vb.get(key, 0), unit) for key in sorted(set(va) | set(vb))]
        rows.sort(key=lambda d: (-abs(d.change or 0), d.item))
        result += rows
    return result
