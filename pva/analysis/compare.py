"""Comparison of two reports: what grew, what shrank, and which growth counts as a regression."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from formats.pop.reader import ProfileReader

from .report_source import query_layer

#: Sections in the order they are printed; in all of them a larger number is worse.
SECTIONS = (
    "report",
    "target",
    "memory",
    "memory by category",
    "memory by IPU",
    "liveness",
    "execution",
    "steps by program type",
    "compute set cycles",
    "contents",
)

#: Tables that every report has, whatever its source: left out of the "contents" section.
_FILE_TABLES = frozenset({"metadata", "matrices", "matrix_chunks", "extras"})


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
        change, a = self.change, self.a
        if change is None or not isinstance(a, (int, float)) or not a:
            return None
        return change / abs(a)

    def is_regression(self, threshold: float) -> bool:
        """Whether the figure grew by more than `threshold` (a fraction), or appeared from zero."""
        if self.section in ("report", "target") or self.change is None or self.change <= 0:
            return False
        rel = self.relative
        return rel is None or rel > threshold


def _report(reader: ProfileReader) -> dict[str, str]:
    """What a report says of itself: its source, producer, Poplar version, program and instrumentation."""
    meta = reader.metadata
    return {
        "source format": meta.get("source_format") or "profile.pop",
        "producer": " ".join(v for v in (meta.get("producer"), meta.get("producer_version")) if v),
        "Poplar version": meta.get("poplar_version") or "",
        "program": meta.get("program_name") or "",
        "instrumentation of compute": meta.get("instrumentation_compute") or "",
        "instrumentation of external exchange": meta.get("instrumentation_external_exchange") or "",
        "figures not recorded": ", ".join(sorted(reader.not_recorded())),
    }


def _contents(a: ProfileReader, b: ProfileReader) -> list[Difference]:
    """Tables and per-tile matrices that one report holds and the other has empty or lacks."""
    rows = []
    for kind, held_a, held_b in (
        ("table", a.table_counts(), b.table_counts()),
        ("matrix", {m[0]: m[1] for m in a.matrix_storage()}, {m[0]: m[1] for m in b.matrix_storage()}),
    ):
        for name in sorted(set(held_a) | set(held_b)):
            count_a, count_b = held_a.get(name) or 0, held_b.get(name) or 0
            if name not in _FILE_TABLES and bool(count_a) != bool(count_b):
                text_a, text_b = (f"{n:,} rows" if n else "none" for n in (count_a, count_b))
                rows.append(Difference("contents", f"{kind} {name}", text_a, text_b))
    return rows


def _target(reader: ProfileReader) -> dict[str, float | str]:
    t = reader.target
    return {
        k: t[k]
        for k in (
            "type",
            "architecture",
            "num_ipus",
            "tiles_per_ipu",
            "bytes_per_tile",
            "clock_frequency",
            "num_replicas",
        )
    }


def _memory(reader: ProfileReader) -> dict[str, int]:
    including, excluding, largest = reader.memory_totals()
    return {
        "total including gaps": including,
        "total excluding gaps": excluding,
        "largest tile including gaps": largest,
        "tiles out of memory": reader.tiles_over(reader.target["bytes_per_tile"]),
    }


def _memory_by_category(reader: ProfileReader) -> dict[str, int]:
    return {name: int(total) for name, total in reader.memory_by_category_name()}


def _memory_by_ipu(reader: ProfileReader) -> dict[str, int]:
    return {f"IPU {ipu}": int(total) for ipu, total in reader.memory_by_ipu(reader.target["tiles_per_ipu"])}


def _liveness(reader: ProfileReader) -> dict[str, int]:
    always = reader.always_live_bytes()
    peak = reader.peak_not_always_live_bytes()
    return {"always-live bytes": always, "peak not-always-live bytes": peak, "peak live bytes": always + peak}


def _execution(reader: ProfileReader) -> dict[str, int]:
    totals = reader.cycle_totals_by_kind()
    return {
        "total cycles": reader.total_run_cycles(),
        "compute tile-cycles": totals["compute"],
        "internal exchange tile-cycles": totals["internal_exchange"],
        "global exchange tile-cycles": totals["inter_ipu_exchange"],
        "host exchange tile-cycles": totals["stream_copy"],
        "sync tile-cycles": totals["sync"],
        "steps": reader.row_count("steps"),
    }


def _steps_by_type(reader: ProfileReader) -> dict[str, int]:
    result: dict[str, int] = {}
    for type_name, count, cycles in reader.steps_by_type():
        result[f"{type_name} steps"] = count
        result[f"{type_name} cycles"] = int(cycles)
    return result


def _compute_set_cycles(reader: ProfileReader) -> dict[str, int]:
    result: dict[str, int] = defaultdict(int)
    for name, estimated in reader.compute_set_estimated_max():
        result[f"{name} (estimated)"] += int(estimated)
    for name, measured in reader.measured_cycles_by_compute_set_name():
        result[f"{name} (measured)"] += int(measured or 0)
    return result


def _one_row_where_equal(rows: list[Difference]) -> list[Difference]:
    """A compute set whose estimate equals its measurement in both reports as one row, not two alike."""
    by_item = {d.item: d for d in rows}
    out = []
    for d in rows:
        name = d.item.removesuffix(" (estimated)")
        twin = by_item.get(f"{name} (measured)")
        if d.item.endswith(" (estimated)") and twin is not None and (twin.a, twin.b) == (d.a, d.b):
            out.append(dataclasses.replace(d, item=f"{name} (estimated = measured)"))
        elif not (d.item.endswith(" (measured)") and by_item.get(f"{d.item[: -len(' (measured)')]} (estimated)")):
            out.append(d)
        else:
            estimate = by_item[f"{d.item[: -len(' (measured)')]} (estimated)"]
            if (estimate.a, estimate.b) != (d.a, d.b):
                out.append(d)
    return out


_COLLECTORS = {
    "memory": (_memory, "B"),
    "memory by category": (_memory_by_category, "B"),
    "memory by IPU": (_memory_by_ipu, "B"),
    "liveness": (_liveness, "B"),
    "execution": (_execution, "cycles"),
    "steps by program type": (_steps_by_type, ""),
    "compute set cycles": (_compute_set_cycles, "cycles"),
}


def compare(a, b) -> list[Difference]:
    """Every compared figure of reports a and b, sections in order, each sorted by absolute change (largest first)."""
    a, b = query_layer(a), query_layer(b)
    result: list[Difference] = []
    ra, rb = _report(a), _report(b)
    result += [Difference("report", key, ra[key], rb[key]) for key in ra if ra[key] != rb[key]]
    ta, tb = _target(a), _target(b)
    result += [Difference("target", key, ta[key], tb[key]) for key in ta if ta[key] != tb[key]]
    for section, (collect, unit) in _COLLECTORS.items():
        va, vb = collect(a), collect(b)
        rows = [Difference(section, key, va.get(key, 0), vb.get(key, 0), unit) for key in sorted(set(va) | set(vb))]
        if section == "compute set cycles":
            rows = _one_row_where_equal(rows)
        rows.sort(key=lambda d: (-abs(d.change or 0), d.item))
        result += rows
    return result + _contents(a, b)
