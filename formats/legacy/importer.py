"""Writing legacy v1 graph and execution profiles into profile.pop through the ProfileWriter.

Each documented section maps to tables (the README section "Formats: converting in, exporting
out" lists them); values the format has no column for, and keys the schemas do not describe, go to table ``extras`` with
their exact JSON location, so nothing is lost and the legacy exporter can restore them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from ..json_values import plain
from ..pop.schema import profile_schema
from ..pop.writer import ProfileWriter
from ..streaming.runs import Run, run_slice
from ..streaming.tree import json_path, location
from . import mapping as M

#: Rows of a per-tile matrix gathered before they are appended.
ROW_BATCH = 64
#: Tiles per block when transposing memory.byCategory into memory_category_by_tile.
TILE_BLOCK = 4096
#: A target may declare this many tiles whatever the input size; more need a bigger input.
FREE_TILES = 1 << 20


class Extras:
    """Values kept verbatim in table extras, by source and exact JSON location."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], str] = {}
        self.unknown = 0

    def keep(self, source: str, parts: Sequence[str | int], value: Any, *, unknown: bool = False) -> None:
        self.rows[(source, json_path(parts))] = json.dumps(plain(value), allow_nan=False, separators=(",", ":"))
        if unknown:
            self.unknown += 1

    def write(self, writer: ProfileWriter) -> None:
        writer.insert("extras", ("source", "path", "value"), [(s, p, v) for (s, p), v in sorted(self.rows.items())])


def ints(value: Any) -> np.ndarray:
    """An array of numbers (a Run or a short list, already schema-checked) as int64/uint64."""
    if isinstance(value, Run):
        array = value.array()
    else:
        array = np.asarray(
            value if value else [], dtype=np.float64 if any(isinstance(v, float) for v in value or ()) else np.int64
        )
    if array.dtype.kind == "f":
        array = array.astype(np.uint64 if array.size and array.min() >= 0 else np.int64)
    return array


def as_int(value: Any, default: int = 0) -> int:
    """A schema-checked integer (JSON may write 3 as 3.0)."""
    if value is None:
        return default
    return int(value)


class LegacyImporter:
    """Maps one graph profile (and optionally its execution profile) into a ProfileWriter."""

    def __init__(
        self,
        writer: ProfileWriter,
        graph: dict,
        execution: dict | None,
        *,
        graph_name: str,
        execution_name: str | None,
        extras: Extras,
        input_bytes: int,
    ) -> None:
        self.w = writer
        self.g = graph
        self.x = execution
        self.gname = graph_name
        self.xname = execution_name
        self.extras = extras
        self.input_bytes = input_bytes
        self.num_tiles = 0
        self.num_cs = 0
        self.num_vt = 0
        self.num_programs = 0
        self.program_types: list[str] = []
        self.program_exchange: list[int | None] = []
        self.function_programs: list[int] = []
        self.exchange_rows: dict[tuple[str, int], dict[str, tuple[int, int, int, int]]] = {}
        self.exchange_counts: dict[str, int] = {}
        self.cs_cycles_by_tile: list | None = None
        self.not_recorded: list[str] = []
        self.step_runs: np.ndarray | None = None
        self.run_starts: dict[tuple[int, int], int] = {}

    # -- helpers --------------------------------------------------------------------------

    def fail(self, parts: Sequence[str | int], message: str, execution: bool = False) -> InvalidInputError:
        name = self.xname if execution else self.gname
        return InvalidInputError(f"{name!r}: {location(parts)}: {message}", name)

    def keep(self, parts: Sequence[str | int], value: Any, execution: bool = False) -> None:
        self.extras.keep(M.SOURCE_EXECUTION if execution else M.SOURCE_GRAPH, parts, value)

    def section(self, doc: dict | None, key: str) -> dict:
        value = (doc or {}).get(key)
        return value if isinstance(value, dict) else {}

    def _num_ipus(self) -> int:
        """IPUs of the target, which is written before anything per IPU."""
        target = self.w.target
        assert target is not None, "the target is written before anything per IPU"
        return int(target["num_ipus"])

    def check_length(
        self, value: Any, expected: int, parts: Sequence[str | int], what: str, execution: bool = False
    ) -> None:
        count = len(value)
        if count != expected:
            raise self.fail(parts, f"expected {expected:,} values ({what}), found {count:,}", execution)

    def matrix_rows(
        self, rows: list, parts: list, width: int, what: str, execution: bool = False
    ) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, block) of a 2-D array of per-tile rows, checked and batched."""
        for first in range(0, len(rows), ROW_BATCH):
            batch = rows[first : first + ROW_BATCH]
            block = np.zeros((len(batch), width), dtype=np.uint64)
            for offset, row in enumerate(batch):
                where = parts + [first + offset]
                self.check_length(row, width, where, what, execution)
                if width:
                    block[offset] = ints(row)
            yield first, block

    def append_matrix(
        self, name: str, rows: list, parts: list, what: str, execution: bool = False
    ) -> list[tuple[int, int, int, int]]:
        """Append a 2-D per-tile array to a matrix; (row, total, min, max) of each row."""
        out: list[tuple[int, int, int, int]] = []
        matrix = self.w.matrix(name)
        for _first, block in self.matrix_rows(rows, parts, self.num_tiles, what, execution):
            start = matrix.append(block)
            totals = block.sum(axis=1, dtype=np.uint64)
            lows = block.min(axis=1) if self.num_tiles else np.zeros(len(block), dtype=np.uint64)
            highs = block.max(axis=1) if self.num_tiles else np.zeros(len(block), dtype=np.uint64)
            out.extend((start + i, int(totals[i]), int(lows[i]), int(highs[i])) for i in range(len(block)))
        return out

    # -- the whole conversion -------------------------------------------------------------

    def run(self) -> None:
        self.target()
        self.optimization_info()
        self.vertex_types()
        self.compute_sets()
        self.graph_counts()
        self.exchanges()
        self.programs()
        self.memory()
        if self.x is not None:
            self.execution()
        self.carried_graph()
        self.w.set_metadata(not_recorded=json.dumps(self.not_recorded))

    # -- what pva's export carries in $.pva -----------------------------------------------

    def carried_graph(self) -> None:
        """The metadata and always-live variables of $.pva, checked against the graph profile."""
        carried = self.section(self.g, "pva")
        metadata = self.section(carried, "metadata")
        known = {k: str(v) for k, v in metadata.items() if k in M.CARRIED_METADATA}
        if known:
            self.w.set_metadata(**known)
        live = carried.get("alwaysLiveVariables")
        if not isinstance(live, dict):
            return
        parts = ["pva", "alwaysLiveVariables"]
        ids, names = ints(live["ids"]), live["names"]
        self.check_length(names, ids.size, parts + ["names"], "one name per id")
        if np.unique(ids).size != ids.size:
            raise self.fail(parts + ["ids"], "expected distinct variable ids, found repeats")
        var, tile, size = ints(live["var"]), ints(live["tile"]), ints(live["bytes"])
        self.check_length(live["tile"], var.size, parts + ["tile"], "one tile per entry of var")
        self.check_length(live["bytes"], var.size, parts + ["bytes"], "one size per entry of var")
        listed = np.isin(var, ids)
        if not listed.all():
            bad = int(np.argmax(~listed))
            raise self.fail(parts + ["var", bad], f"expected a variable of ids, found {int(var[bad])}")
        if tile.size and int(tile.max()) >= self.num_tiles:
            bad = int(np.argmax(tile >= self.num_tiles))
            raise self.fail(parts + ["tile", bad], f"expected a tile below {self.num_tiles:,}, found {int(tile[bad])}")
        pairs = var.astype(np.uint64) * np.uint64(max(1, self.num_tiles)) + tile.astype(np.uint64)
        if np.unique(pairs).size != pairs.size:
            raise self.fail(parts, "expected one entry per variable and tile, found repeats")
        self.w.insert("variables", ("id", "name"), zip(ids.tolist(), names))
        self.w.insert("always_live_vars", ("var", "tile", "bytes"), zip(var.tolist(), tile.tolist(), size.tolist()))

    def carried_cycle_totals(self, num_runs: int) -> list[tuple] | None:
        """cycle_totals rows of the execution profile's $.pva, one per run and IPU at most."""
        totals = self.section(self.x, "pva").get("cycleTotals")
        if not isinstance(totals, dict):
            return None
        columns = [ints(totals[k]) for k in ("run", "ipu", *M.CYCLE_TOTAL_COLUMNS)]
        for key in ("ipu", *M.CYCLE_TOTAL_COLUMNS):
            self.check_length(totals[key], columns[0].size, ["pva", "cycleTotals", key], "one per entry of run", True)
        run, ipu = columns[0], columns[1]
        if run.size and (int(run.max()) >= num_runs or int(ipu.max()) >= self._num_ipus()):
            raise self.fail(
                ["pva", "cycleTotals"], f"expected runs below {num_runs} and IPUs below {self._num_ipus()}", True
            )
        if np.unique(run.astype(np.uint64) * np.uint64(1 << 20) + ipu.astype(np.uint64)).size != run.size:
            raise self.fail(["pva", "cycleTotals"], "expected one entry per run and IPU, found repeats", True)
        return list(zip(*(c.tolist() for c in columns)))

    def carried_runs(self, num_steps: int) -> tuple[list[tuple], list[tuple]] | None:
        """(runs rows, run_cycles_by_ipu rows) of the execution profile's $.pva, checked against its steps."""
        carried = self.section(self.x, "pva")
        runs, cycles = carried.get("runs"), carried.get("runCycles")
        if not isinstance(runs, dict) or not isinstance(cycles, dict):
            return None
        parts: list[str | int] = ["pva", "runs"]
        first, count = ints(runs["firstStep"]), ints(runs["numSteps"])
        starts, ends = ints(runs["microsecondsStart"]), ints(runs["microsecondsEnd"])
        for key in ("names", "microsecondsStart", "microsecondsEnd", "numSteps"):
            self.check_length(runs[key], first.size, parts + [key], "one per run", True)
        expected = np.concatenate([[0], np.cumsum(count)[:-1]]) if count.size else count
        if not np.array_equal(first, expected) or int(count.sum()) != num_steps:
            raise self.fail(parts, f"expected runs that take the {num_steps:,} steps in order, one after another", True)
        where: list[str | int] = ["pva", "runCycles"]
        run, ipu, lo, hi = (ints(cycles[k]) for k in ("run", "ipu", "start", "end"))
        for key in ("ipu", "start", "end"):
            self.check_length(cycles[key], run.size, where + [key], "one per entry of run", True)
        if run.size and (int(run.max()) >= first.size or int(ipu.max()) >= self._num_ipus()):
            raise self.fail(where, f"expected runs below {first.size} and IPUs below {self._num_ipus()}", True)
        if np.unique(run.astype(np.uint64) * np.uint64(1 << 20) + ipu.astype(np.uint64)).size != run.size:
            raise self.fail(where, "expected one entry per run and IPU, found repeats", True)
        if self._num_ipus() > 1 and run.size:
            # A v1 step's span is device-wide: so is each run's, on every IPU.
            lows = np.full(first.size, np.iinfo(np.int64).max, dtype=np.int64)
            highs = np.zeros(first.size, dtype=np.int64)
            np.minimum.at(lows, run, lo.astype(np.int64))
            np.maximum.at(highs, run, hi.astype(np.int64))
            lo, hi = lows[run], highs[run]
        names = [str(n) for n in runs["names"]]
        run_rows = list(zip(range(first.size), names, starts.tolist(), ends.tolist(), first.tolist(), count.tolist()))
        return run_rows, list(zip(run.tolist(), ipu.tolist(), lo.tolist(), hi.tolist()))

    # -- graph profile --------------------------------------------------------------------

    def target(self) -> None:
        t = self.g["target"]
        num_ipus = as_int(t["numIPUs"])
        if "tilesPerIPU" in t:
            tiles_per_ipu = as_int(t["tilesPerIPU"])
        else:
            total = as_int(t["numTiles"])
            if total % num_ipus:
                raise self.fail(["target", "numTiles"], f"expected a multiple of numIPUs ({num_ipus}), found {total}")
            tiles_per_ipu = total // num_ipus
        num_tiles = num_ipus * tiles_per_ipu
        if "numTiles" in t and as_int(t["numTiles"]) != num_tiles:
            raise self.fail(
                ["target", "numTiles"],
                f"expected numIPUs * tilesPerIPU = {num_tiles:,}, found {as_int(t['numTiles']):,}",
            )
        if num_tiles > 1 << 24:
            raise self.fail(["target"], f"expected at most {1 << 24:,} tiles, found {num_tiles:,}")
        if num_tiles > FREE_TILES and num_tiles > self.input_bytes:
            raise self.fail(
                ["target", "tilesPerIPU"],
                f"declares {num_tiles:,} tiles, more than the input could describe ({self.input_bytes:,} bytes)",
            )
        bytes_per_tile = as_int(t.get("bytesPerTile"))
        clock = float(t.get("clockFrequency", 0.0))
        if "bytesPerTile" not in t:
            self.not_recorded += [
                "target.bytes_per_tile",
                "target.bytes_per_ipu",
                "target.total_memory",
                "target.memory_per_replica",
            ]
        if "clockFrequency" not in t:
            self.not_recorded.append("target.clock_frequency")
        if "minSyncDelay" not in t:
            self.not_recorded.append("target.min_sync_delay")
        kind = M.TARGET_TYPES.get(t.get("type"), "Unknown")
        delays = t.get("relativeSyncDelayByTile")
        per_ipu = None
        if delays is not None:
            array = ints(delays)
            if array.size == tiles_per_ipu:
                per_ipu = array
            elif array.size == num_tiles and num_tiles:
                per_ipu = array[:tiles_per_ipu]
                self.keep(["target", "relativeSyncDelayByTile"], delays)
            else:
                raise self.fail(
                    ["target", "relativeSyncDelayByTile"],
                    f"expected {tiles_per_ipu:,} values (one per tile of an IPU), found {array.size:,}",
                )
        self.w.set_target(
            num_ipus=num_ipus,
            tiles_per_ipu=tiles_per_ipu,
            bytes_per_tile=bytes_per_tile,
            clock_frequency=clock,
            type=kind,
            architecture=M.guess_architecture(tiles_per_ipu, bytes_per_tile, clock),
            relative_sync_delay_by_tile=None if per_ipu is None else [int(v) for v in per_ipu],
            min_sync_delay=as_int(t.get("minSyncDelay")),
        )
        self.num_tiles = num_tiles
        if "bytesPerIPU" in t and as_int(t["bytesPerIPU"]) != bytes_per_tile * tiles_per_ipu:
            self.keep(["target", "bytesPerIPU"], t["bytesPerIPU"])
        if "totalMemory" in t and as_int(t["totalMemory"]) != bytes_per_tile * num_tiles:
            self.keep(["target", "totalMemory"], t["totalMemory"])

    def graph_counts(self) -> None:
        """The graph counts; a missing compute-set count is the number of compute sets the profile lists."""
        graph = dict(self.section(self.g, "graph"))
        if "numComputeSets" not in graph:
            graph["numComputeSets"] = self.compute_set_count
        self.not_recorded += [
            f"graph.{column}"
            for key, column in (("numEdges", "num_edges"), ("numVars", "num_vars"), ("numVertices", "num_vertices"))
            if key not in graph
        ]
        self.w.set_graph(
            **{
                column: as_int(graph.get(key))
                for key, column in (
                    ("numComputeSets", "num_compute_sets"),
                    ("numEdges", "num_edges"),
                    ("numVars", "num_vars"),
                    ("numVertices", "num_vertices"),
                )
            }
        )

    def optimization_info(self) -> None:
        info = self.section(self.g, "optimizationInfo")
        self.w.insert("optimisation_metrics", ("name", "value"), [(k, float(v)) for k, v in info.items()])

    def vertex_types(self) -> None:
        section = self.section(self.g, "vertexTypes")
        names = section.get("names") or []
        sizes = section.get("sizes")
        if sizes is not None:
            self.check_length(sizes, len(names), ["vertexTypes", "sizes"], "one per vertex type name")
            sizes = ints(sizes).tolist()
        else:
            sizes = [0] * len(names)
        self.num_vt = len(names)
        self.w.insert(
            "vertex_types", ("id", "name", "size"), [(i, n, int(s)) for i, (n, s) in enumerate(zip(names, sizes))]
        )

    def compute_sets(self) -> None:
        section = self.section(self.g, "computeSets")
        names = section.get("names")
        counts = section.get("vertexCounts")
        types = section.get("vertexTypes")
        estimates = self.section(section, "cycleEstimates")
        cycles = estimates.get("cyclesByTile")
        active = estimates.get("activeCyclesByTile")
        by_type = estimates.get("activeCyclesByVertexType")
        lengths = [len(v) for v in (names, counts, types, cycles, active, by_type) if v is not None]
        num_cs = len(names) if names is not None else max(lengths, default=0)
        self.num_cs = num_cs
        base = ["computeSets"]
        for _key, value, parts in (
            ("vertexCounts", counts, base + ["vertexCounts"]),
            ("vertexTypes", types, base + ["vertexTypes"]),
            ("cyclesByTile", cycles, base + ["cycleEstimates", "cyclesByTile"]),
            ("activeCyclesByTile", active, base + ["cycleEstimates", "activeCyclesByTile"]),
            ("activeCyclesByVertexType", by_type, base + ["cycleEstimates", "activeCyclesByVertexType"]),
        ):
            if value is not None and len(value) != num_cs:
                raise self.fail(parts, f"expected {num_cs:,} rows (one per compute set), found {len(value):,}")
        if (counts is None) != (types is None):
            raise self.fail(base, "vertexCounts and vertexTypes come together; found only one of them")
        estimate_rows = (
            self.append_matrix(
                "compute_set_estimated_cycles_by_tile",
                cycles,
                base + ["cycleEstimates", "cyclesByTile"],
                "one per tile",
            )
            if cycles is not None
            else None
        )
        active_rows = (
            self.append_matrix(
                "compute_set_active_cycles_by_tile",
                active,
                base + ["cycleEstimates", "activeCyclesByTile"],
                "one per tile",
            )
            if active is not None
            else None
        )
        cs_rows = []
        vertex_rows: list[tuple[int, int, int, int, int]] = []
        for cs in range(num_cs):
            num_vertices = 0
            if counts is not None and types is not None:  # both or neither, checked above
                c = ints(counts[cs])
                vt = ints(types[cs])
                if c.size != vt.size:
                    raise self.fail(
                        base + ["vertexTypes", cs],
                        f"expected {c.size:,} values (one per entry of vertexCounts[{cs}]), found {vt.size:,}",
                    )
                if vt.size and self.num_vt and int(vt.max()) >= self.num_vt:
                    bad = int(np.argmax(vt >= self.num_vt))
                    raise self.fail(
                        base + ["vertexTypes", cs, bad],
                        f"expected a vertex type index below {self.num_vt}, found {int(vt[bad])}",
                    )
                dense = None
                if by_type is not None:
                    dense = ints(by_type[cs])
                    if dense.size != self.num_vt:
                        raise self.fail(
                            base + ["cycleEstimates", "activeCyclesByVertexType", cs],
                            f"expected {self.num_vt:,} values (one per vertex type), found {dense.size:,}",
                        )
                    present = np.zeros(self.num_vt, dtype=bool)
                    present[vt] = True
                    if dense[~present].any():
                        self.keep(base + ["cycleEstimates", "activeCyclesByVertexType", cs], by_type[cs])
                for k in range(c.size):
                    estimate = int(dense[vt[k]]) if dense is not None else 0
                    vertex_rows.append((len(vertex_rows), cs, int(vt[k]), int(c[k]), estimate))
                num_vertices = int(c.sum())
            elif by_type is not None:
                self.keep(base + ["cycleEstimates", "activeCyclesByVertexType", cs], by_type[cs])
            er = estimate_rows[cs] if estimate_rows is not None else None
            ar = active_rows[cs] if active_rows is not None else None
            cs_rows.append(
                (
                    cs,
                    names[cs] if names is not None else "",
                    num_vertices,
                    None if er is None else er[0],
                    None if ar is None else ar[0],
                    None if er is None else er[3],
                    None if er is None else er[1],
                )
            )
        declared = self.section(self.g, "graph").get("numComputeSets")
        if cs_rows and declared is not None and as_int(declared) != len(cs_rows):
            raise self.fail(
                ["graph", "numComputeSets"],
                f"expected {len(cs_rows)} (the compute sets the profile lists), found {declared!r}",
            )
        self.compute_set_count = len(cs_rows)
        self.w.insert(
            "compute_sets",
            (
                "compute_set",
                "name",
                "num_vertices",
                "estimated_cycles_row",
                "active_cycles_row",
                "estimated_cycles_max",
                "estimated_cycles_total",
            ),
            cs_rows,
        )
        self.w.insert(
            "compute_set_vertices", ("id", "compute_set", "vertex_type", "count", "estimated_cycles"), vertex_rows
        )
        if counts is None and by_type is not None and num_cs == 0:
            self.keep(base + ["cycleEstimates", "activeCyclesByVertexType"], by_type)

    def exchanges(self) -> None:
        for family, (key, arrays) in M.EXCHANGE_SECTIONS.items():
            section = self.section(self.g, key)
            count = 0
            for array_key, kind in arrays.items():
                rows = section.get(array_key)
                if rows is None:
                    continue
                self._exchange_matrix(family, kind, rows, [key, array_key], execution=False)
                count = max(count, len(rows))
            self.exchange_counts[family] = count
        if self.x is not None:
            for family, key in M.EXCHANGE_CYCLES.items():
                rows = self.x.get(key)
                if rows is not None:
                    self._exchange_matrix(family, "exchange_cycles", rows, [key], execution=True)
                    self.exchange_counts[family] = max(self.exchange_counts[family], len(rows))

    def _exchange_matrix(self, family: str, kind: str, rows: list, parts: list, execution: bool) -> None:
        stored = self.append_matrix(f"program_{kind}_by_tile", rows, parts, "one per tile", execution)
        table = []
        for exchange, summary in enumerate(stored):
            self.exchange_rows.setdefault((family, exchange), {})[kind] = summary
            table.append((family, exchange, kind, summary[0]))
        self.w.insert("exchanges", ("family", "exchange", "kind", "row"), table)

    def programs(self) -> None:
        programs = self.g.get("programs") or []
        count = len(programs)
        self.num_programs = count
        control = ints(self.g.get("controlPrograms") or [])
        functions = ints(self.g.get("functionPrograms") or [])
        for key, values in (("controlPrograms", control), ("functionPrograms", functions)):
            if values.size and int(values.max()) >= count:
                bad = int(np.argmax(values >= count))
                raise self.fail([key, bad], f"expected a program index below {count}, found {int(values[bad])}")
        self.function_programs = [int(v) for v in functions]
        rows: list[tuple] = []
        children_rows: list[tuple[int, int, int]] = []
        vectors: list[tuple] = []
        children_of: list[np.ndarray] = []
        for index, program in enumerate(programs):
            parts: list[str | int] = ["programs", index]
            legacy_type = program["type"]
            pva_type = M.PROGRAM_TYPES.get(legacy_type)
            if pva_type is None:
                pva_type = legacy_type if legacy_type in M.PVA_PROGRAM_TYPES else "Unknown"
            if M.PROGRAM_TYPES_BACK.get(pva_type, pva_type) != legacy_type:
                self.keep(parts + ["type"], legacy_type)
            name = program.get("name", "")
            if "name" in program and name == "":
                self.keep(parts + ["name"], "")
            cs = program.get("computeSet")
            if cs is not None:
                cs = as_int(cs)
                if cs >= self.num_cs:
                    raise self.fail(
                        parts + ["computeSet"], f"expected a compute set index below {self.num_cs}, found {cs}"
                    )
            exchange = program.get("exchange")
            if exchange is not None:
                exchange = as_int(exchange)
                family = M.EXCHANGE_FAMILY.get(pva_type)
                if family is not None:
                    available = self.exchange_counts.get(family, 0)
                    if available and exchange >= available:
                        raise self.fail(
                            parts + ["exchange"],
                            f"expected an index below {available} into {M.EXCHANGE_SECTIONS[family][0]}, "
                            f"found {exchange}",
                        )
                    for kind, (row, total, low, high) in sorted(self.exchange_rows.get((family, exchange), {}).items()):
                        vectors.append((index, kind, row, total, low, high))
            call_target = None
            if "target" in program:
                position = as_int(program["target"])
                if position >= len(self.function_programs):
                    raise self.fail(
                        parts + ["target"],
                        f"expected an index below {len(self.function_programs)} into functionPrograms, "
                        f"found {position}",
                    )
                call_target = self.function_programs[position]
                if self.function_programs.index(call_target) != position:
                    self.keep(parts + ["target"], position)
            if "children" in program and not len(program["children"]):
                self.keep(parts + ["children"], [])
            kids = ints(program.get("children") or [])
            if kids.size and int(kids.max()) >= count:
                bad = int(np.argmax(kids >= count))
                raise self.fail(
                    parts + ["children", bad], f"expected a program index below {count}, found {int(kids[bad])}"
                )
            children_of.append(kids)
            children_rows.extend((index, position, int(child)) for position, child in enumerate(kids))
            if "memoryByInstruction" in program:
                self.keep(parts + ["memoryByInstruction"], program["memoryByInstruction"])
            rows.append((index, pva_type, name, cs, exchange, call_target))
            self.program_types.append(pva_type)
            self.program_exchange.append(exchange)
        self._check_acyclic(children_of)
        self.w.insert("programs", ("id", "type", "name", "compute_set", "exchange", "call_target"), rows)
        self.w.insert("program_children", ("parent", "position", "child"), children_rows)
        self.w.insert("control_programs", ("position", "program"), [(i, int(p)) for i, p in enumerate(control)])
        self.w.insert("function_programs", ("position", "program"), [(i, int(p)) for i, p in enumerate(functions)])
        self.w.insert("program_vectors", ("program", "kind", "row", "total", "min", "max"), vectors)

    def _check_acyclic(self, children_of: list[np.ndarray]) -> None:
        """Programs form a DAG: no program may contain itself (which would make visitors loop)."""
        state = bytearray(len(children_of))  # 0 new, 1 on the current path, 2 done
        for root in range(len(children_of)):
            if state[root]:
                continue
            stack = [(root, 0)]
            state[root] = 1
            while stack:
                node, position = stack[-1]
                kids = children_of[node]
                if position < kids.size:
                    stack[-1] = (node, position + 1)
                    child = int(kids[position])
                    if state[child] == 1:
                        raise self.fail(
                            ["programs", node, "children", position],
                            f"program {child} contains itself (a cycle through program {node})",
                        )
                    if state[child] == 0:
                        state[child] = 1
                        stack.append((child, 0))
                else:
                    state[node] = 2
                    stack.pop()

    def memory(self) -> None:
        memory = self.section(self.g, "memory")
        categories = list(M.CATEGORIES)
        by_category = self.section(memory, "byCategory")
        categories += [name for name in by_category if name not in M.CATEGORIES]
        self.w.insert("var_categories", ("id", "name"), list(enumerate(categories)))
        self._memory_by_tile(memory)
        if by_category:
            self._memory_by_category(by_category, categories)
        for key, table, limit, what in (
            ("byComputeSet", "compute_set_memory", self.num_cs, "compute set"),
            ("byVertexType", "vertex_memory", self.num_vt, "vertex type"),
        ):
            section = self.section(memory, key)
            if section:
                self._vertex_memory(section, ["memory", key], table, limit, what)
        liveness = self.section(memory, "liveness")
        nodes = self.section(liveness, "notAlwaysLive").get("byProgram")
        if nodes is not None:
            self._liveness(nodes)

    def _memory_by_tile(self, memory: dict) -> None:
        by_tile = self.section(memory, "byTile")
        liveness = self.section(memory, "liveness")
        arrays = {column: (by_tile.get(key), ["memory", "byTile", key]) for key, column in M.BY_TILE.items()}
        arrays["always_live_bytes"] = (
            self.section(liveness, "alwaysLive").get("bytesByTile"),
            ["memory", "liveness", "alwaysLive", "bytesByTile"],
        )
        arrays["not_always_live_bytes"] = (
            self.section(liveness, "notAlwaysLive").get("maxBytesByTile"),
            ["memory", "liveness", "notAlwaysLive", "maxBytesByTile"],
        )
        if all(value is None for value, _ in arrays.values()):
            return
        columns = []
        for _column, (value, parts) in arrays.items():
            if value is None:
                columns.append(np.zeros(self.num_tiles, dtype=np.uint64))
            else:
                self.check_length(value, self.num_tiles, parts, "one per tile")
                columns.append(ints(value))
        names = ["tile", *arrays]
        tiles = np.arange(self.num_tiles)
        self.w.insert("memory_by_tile", names, zip(tiles.tolist(), *(c.tolist() for c in columns)))

    def _memory_by_category(self, by_category: dict, categories: list[str]) -> None:
        index = {name: i for i, name in enumerate(categories)}
        present: list[tuple[int, int, int, Any, list]] = []  # (category, region, overlap, value, parts)
        totals: dict[int, tuple[Any, list]] = {}
        for name, category in by_category.items():
            c = index[name]
            for ri, region in enumerate(M.REGIONS):
                section = category.get(region)
                if not isinstance(section, dict):
                    continue
                for oi, overlap in enumerate(M.OVERLAPS):
                    value = section.get(overlap)
                    if value is None:
                        continue
                    parts = ["memory", "byCategory", name, region, overlap]
                    self.check_length(value, self.num_tiles, parts, "one per tile")
                    present.append((c, ri, oi, value, parts))
            if category.get("total") is not None:
                parts = ["memory", "byCategory", name, "total"]
                self.check_length(category["total"], self.num_tiles, parts, "one per tile")
                totals[c] = (category["total"], parts)
        width = 6 * len(categories)
        matrix = self.w.matrix("memory_category_by_tile")
        summary: dict[tuple[int, int, int], list[int]] = {(c, ri, oi): [0, 0] for c, ri, oi, _v, _p in present}
        total_mismatch: set[int] = set()
        for start in range(0, self.num_tiles, TILE_BLOCK):
            stop = min(self.num_tiles, start + TILE_BLOCK)
            block = np.zeros((stop - start, width), dtype=np.uint64)
            for c, ri, oi, value, _parts in present:
                column = self._slice(value, start, stop)
                block[:, 6 * c + 2 * ri + oi] = column
                entry = summary[(c, ri, oi)]
                entry[0] += int(column.sum(dtype=np.uint64))
                entry[1] = max(entry[1], int(column.max()) if column.size else 0)
            for c, (value, _parts) in totals.items():
                derived = block[:, 6 * c : 6 * c + 6].sum(axis=1, dtype=np.uint64)
                if not np.array_equal(derived, self._slice(value, start, stop)):
                    total_mismatch.add(c)
            matrix.append(block)
        for c in total_mismatch:
            value, parts = totals[c]
            self.keep(parts, value)
        self.w.insert(
            "memory_by_category",
            ("category", "region", "overlapped", "total", "max"),
            [(c, M.REGIONS[ri], oi, s[0], s[1]) for (c, ri, oi), s in sorted(summary.items())],
        )

    @staticmethod
    def _slice(value: Any, start: int, stop: int) -> np.ndarray:
        if isinstance(value, Run):
            piece = run_slice(value, start, stop)
        else:
            piece = ints(value[start:stop])
        if piece.dtype.kind == "f":
            piece = piece.astype(np.uint64)
        return piece

    def _vertex_memory(self, section: dict, base: list, table: str, limit: int, what: str) -> None:
        kinds = [(key, column) for key, column in M.VERTEX_MEMORY.items() if section.get(key) is not None]
        num_rows = max([len(section[key]) for key, _c in kinds] + [len(section.get("totalBytes") or [])])
        if num_rows > limit:
            raise self.fail(base, f"expected at most {limit:,} rows (one per {what}), found {num_rows:,}")
        first_column = "compute_set" if table == "compute_set_memory" else "vertex_type"
        columns = (first_column, "tile", *(column for _k, column in M.VERTEX_MEMORY.items()))
        totals = section.get("totalBytes")
        for first in range(0, num_rows, ROW_BATCH):
            stop = min(num_rows, first + ROW_BATCH)
            rows: list[tuple] = []
            for r in range(first, stop):
                stack = np.zeros((len(M.VERTEX_MEMORY), self.num_tiles), dtype=np.uint64)
                for k, (key, _column) in enumerate(M.VERTEX_MEMORY.items()):
                    value = section.get(key)
                    if value is None or r >= len(value):
                        continue
                    self.check_length(value[r], self.num_tiles, base + [key, r], "one per tile")
                    stack[k] = ints(value[r])
                if totals is not None and r < len(totals):
                    self.check_length(totals[r], self.num_tiles, base + ["totalBytes", r], "one per tile")
                    if not np.array_equal(stack.sum(axis=0, dtype=np.uint64), ints(totals[r]).astype(np.uint64)):
                        self.keep(base + ["totalBytes", r], totals[r])
                nonzero = np.flatnonzero(stack.any(axis=0))
                if nonzero.size:
                    values = stack[:, nonzero].T.tolist()
                    rows.extend((r, int(t), *v) for t, v in zip(nonzero.tolist(), values))
            if table == "vertex_memory":
                self.w.insert(table, ("vertex_type", "tile", *columns[2:]), rows)
            else:
                self.w.insert(table, columns, rows)
        if totals is not None and len(totals) != num_rows:
            self.keep(base + ["totalBytes"], totals)

    def _liveness(self, nodes: list) -> None:
        """Liveness trees become liveness_steps when every node names its program; else they are kept."""
        rows: list[tuple[int, int, int | None, int, int]] = []
        stack: list[tuple[dict, int | None, int]] = [(node, None, 0) for node in reversed(nodes)]
        while stack:
            node, parent, depth = stack.pop()
            program = node.get("program")
            if program is None or "bytes" not in node or as_int(program) >= self.num_programs:
                self.keep(["memory", "liveness", "notAlwaysLive", "byProgram"], nodes)
                return
            step = len(rows)
            rows.append((step, as_int(program), parent, depth, as_int(node["bytes"])))
            stack.extend((child, step, depth + 1) for child in reversed(node.get("children") or []))
        self.w.insert("liveness_steps", ("id", "program", "parent", "depth", "not_always_live_bytes"), rows)

    # -- execution profile ----------------------------------------------------------------

    def execution(self) -> None:
        x = self.x
        assert x is not None, "run() imports the execution profile only when there is one"
        mode = x["profilerMode"]
        compute, external = M.PROFILER_MODES[mode]
        self.w.set_metadata(
            instrumentation_compute=compute, instrumentation_external_exchange=external, legacy_profiler_mode=mode
        )
        cycles_by_tile = x.get("computeSetCyclesByTile")
        if cycles_by_tile is not None:
            if len(cycles_by_tile) > self.num_cs:
                raise self.fail(
                    ["computeSetCyclesByTile"],
                    f"expected at most {self.num_cs:,} rows (one per compute set), found {len(cycles_by_tile):,}",
                    True,
                )
            self.append_matrix(
                "compute_set_cycles_by_tile", cycles_by_tile, ["computeSetCyclesByTile"], "one per tile", True
            )
            self.cs_cycles_by_tile = cycles_by_tile
        measured = x.get("computeSetCycles")
        if measured is not None:
            values = ints(measured)
            if values.size > self.num_cs:
                raise self.fail(
                    ["computeSetCycles"],
                    f"expected at most {self.num_cs:,} values (one per compute set), found {values.size:,}",
                    True,
                )
            for cs, value in enumerate(values.tolist()):
                self.w.execute("UPDATE compute_sets SET measured_cycles = ? WHERE compute_set = ?", (int(value), cs))
        self._vertex_cycles(x)
        if "programTrace" in x:
            trace = ints(x["programTrace"])
            if trace.size and int(trace.max()) >= self.num_programs:
                bad = int(np.argmax(trace >= self.num_programs))
                raise self.fail(
                    ["programTrace", bad],
                    f"expected a program index below {self.num_programs}, found {int(trace[bad])}",
                    True,
                )
            self.keep(["programTrace"], x["programTrace"], True)
        simulation = x.get("simulation")
        if isinstance(simulation, dict):
            self._simulation(simulation)

    def _vertex_cycles(self, x: dict) -> None:
        keys = ("vertexCycles", "vertexComputeSet", "vertexType")
        present = [k for k in keys if x.get(k) is not None]
        if not present:
            return
        arrays = {k: ints(x[k]) for k in present}
        sizes = {a.size for a in arrays.values()}
        if len(present) < 3 or len(sizes) != 1:
            for k in present:
                self.keep([k], x[k], True)
            return
        cs, vt = arrays["vertexComputeSet"], arrays["vertexType"]
        for key, values, limit, what in (
            ("vertexComputeSet", cs, self.num_cs, "compute set"),
            ("vertexType", vt, self.num_vt, "vertex type"),
        ):
            if values.size and int(values.max()) >= limit:
                bad = int(np.argmax(values >= limit))
                raise self.fail([key, bad], f"expected a {what} index below {limit}, found {int(values[bad])}", True)
        rows = zip(range(cs.size), cs.tolist(), vt.tolist(), arrays["vertexCycles"].tolist())
        self.w.insert("vertex_cycles", ("vertex", "compute_set", "vertex_type", "cycles"), rows)

    def _simulation(self, simulation: dict) -> None:
        steps = simulation.get("steps") or []
        num_ipus = self._num_ipus()
        total = as_int(simulation.get("cycles"))
        carried = self.carried_runs(len(steps))
        if carried is None:
            self.w.insert("runs", ("id", "name", "first_step", "num_steps"), [(0, "", 0, len(steps))])
            cycles = [(0, ipu, 0, total) for ipu in range(num_ipus)]
        else:
            columns = ("id", "name", "microseconds_start", "microseconds_end", "first_step", "num_steps")
            self.w.insert("runs", columns, carried[0])
            cycles = carried[1]
            self.step_runs = np.repeat(np.arange(len(carried[0])), [row[5] for row in carried[0]])
            self.run_starts = {(run, ipu): start for run, ipu, start, _end in cycles}
        self.w.insert("run_cycles_by_ipu", ("run", "ipu", "start", "end"), cycles)
        tile_cycles = simulation.get("tileCycles")
        if isinstance(tile_cycles, dict):
            values = {column: as_int(tile_cycles.get(key)) for key, column in M.TILE_CYCLES.items()}
            self.not_recorded += [
                f"cycle_totals.{column}" for key, column in M.TILE_CYCLES.items() if key not in tile_cycles
            ]
            shared = as_int(tile_cycles.get("copySharedStructure"))
            if "copySharedStructure" in tile_cycles:
                self.keep(["simulation", "tileCycles", "copySharedStructure"], tile_cycles["copySharedStructure"], True)
            total_cycles = (
                values["compute"]
                + values["internal_exchange"]
                + values["inter_ipu_exchange"]
                + values["stream_copy"]
                + values["sync"]
                + shared
            )
        by_type = self._steps(steps)
        totals = self.carried_cycle_totals(len(carried[0])) if carried is not None else None
        if totals is not None:
            self.w.insert("cycle_totals", ("run", "ipu", *M.CYCLE_TOTAL_COLUMNS), totals)
        elif isinstance(tile_cycles, dict):
            self._cycle_totals(values, shared, total_cycles, by_type, num_ipus)

    def _cycle_totals(
        self, values: dict[str, int], shared: int, total: int, by_type: dict[tuple[int, str], int], num_ipus: int
    ) -> None:
        """cycle_totals from tileCycles: per IPU when the steps split it exactly, else device-wide on IPU 0."""
        columns = {
            "OnTileExecute": "compute",
            "DoExchange": "internal_exchange",
            "GlobalExchange": "inter_ipu_exchange",
            "StreamCopyBegin": "stream_copy_begin",
            "StreamCopyMid": "stream_copy",
            "StreamCopyEnd": "stream_copy_end",
            "Sync": "sync",
        }
        per_ipu = [dict.fromkeys(columns.values(), 0) for _ in range(num_ipus)]
        unmatched = 0
        for (ipu, kind), cycles in by_type.items():
            if kind in columns:
                per_ipu[ipu][columns[kind]] += cycles
            else:
                unmatched += cycles
        device = {c: sum(row[c] for row in per_ipu) for c in columns.values()}
        stream = device["stream_copy_begin"] + device["stream_copy"] + device["stream_copy_end"]
        exact = (
            not unmatched
            and not shared
            and stream == values["stream_copy"]
            and all(device[c] == values[c] for c in ("compute", "internal_exchange", "inter_ipu_exchange", "sync"))
        )
        if num_ipus > 1 and exact and any(ipu for ipu, _kind in by_type):
            # activeCompute has no per-step figure: it is shared in proportion to compute cycles.
            shares = _shares(values["active_compute"], [row["compute"] for row in per_ipu])
            rows = [
                dict(row, run=0, ipu=ipu, active_compute=shares[ipu], total=sum(row.values()))
                for ipu, row in enumerate(per_ipu)
            ]
        else:
            row = dict(values, run=0, ipu=0, stream_copy_begin=0, stream_copy_end=0, total=total)
            # tileCycles.streamCopy is begin + mid + end; the steps say how it splits when they add up to it.
            if (device["stream_copy_begin"] + device["stream_copy_end"]) and stream == values["stream_copy"]:
                row.update(
                    stream_copy_begin=device["stream_copy_begin"],
                    stream_copy=device["stream_copy"],
                    stream_copy_end=device["stream_copy_end"],
                )
            rows = [row]
        names = list(rows[0])
        self.w.insert("cycle_totals", names, [tuple(r[n] for n in names) for r in rows])

    def _steps(self, steps: list) -> dict[tuple[int, str], int]:
        """Write the steps; their cycles summed over tiles, by IPU and step type.

        Steps with per-tile cycles (global tile ids) are split per IPU; without them the step's
        device-wide figures go to IPU 0 and the other IPUs are marked not profiled. In COMPUTE_SETS
        mode without per-step tiles, the OnTileExecute steps of a compute set share its measured
        computeSetCyclesByTile row (see `_measured_share`).
        """
        by_type: dict[tuple[int, str], int] = {}
        num_ipus = self._num_ipus()
        tiles_per_ipu = self.num_tiles // num_ipus if num_ipus else 0
        canonical = {t.lower(): t for t in M.STEP_TYPES}
        step_rows, ipu_rows = [], []
        own_tiles = any("cyclesByTile" in s for s in steps)
        measured = self.cs_cycles_by_tile if not own_tiles else None
        executions: dict[int, int] = {}
        if measured is not None:
            for step in steps:
                cs = step.get("computeSet")
                if step["type"].lower() == "ontileexecute" and cs is not None and as_int(cs) < len(measured):
                    executions[as_int(cs)] = executions.get(as_int(cs), 0) + 1
            if executions:
                self.w.set_metadata(legacy_step_cycles_by_tile="computeSetCyclesByTile")
        seen: dict[int, int] = {}
        untimed_sync = False
        has_tiles = own_tiles or bool(executions)
        matrix = self.w.matrix("step_cycles_by_tile") if has_tiles else None
        pending: list[np.ndarray] = []
        for index, step in enumerate(steps):
            parts: list[str | int] = ["simulation", "steps", index]
            legacy_type = step["type"]
            tag = canonical.get(legacy_type.lower(), legacy_type)
            pva_type = M.PROGRAM_TYPES.get(tag)
            if pva_type is None:
                pva_type = tag if tag in M.PVA_PROGRAM_TYPES else "Unknown"
            if M.PROGRAM_TYPES_BACK.get(pva_type, pva_type) != legacy_type:
                self.keep(parts + ["type"], legacy_type, True)
            program = step.get("program")
            if program is not None:
                program = as_int(program)
                if program >= self.num_programs:
                    raise self.fail(
                        parts + ["program"],
                        f"expected a program index below {self.num_programs}, found {program}",
                        True,
                    )
            cs = step.get("computeSet")
            if cs is not None:
                cs = as_int(cs)
                if cs >= self.num_cs:
                    raise self.fail(
                        parts + ["computeSet"], f"expected a compute set index below {self.num_cs}, found {cs}", True
                    )
            name = step.get("name", "")
            if "name" in step and name == "":
                self.keep(parts + ["name"], "", True)
            expected_exchange = self.program_exchange[program] if program is not None else None
            expected_family = M.EXCHANGE_FAMILY.get(self.program_types[program]) if program is not None else None
            for family, key in M.STEP_EXCHANGE_FIELD.items():
                if key in step:
                    value = as_int(step[key])
                    if family != expected_family or value != expected_exchange:
                        self.keep(parts + [key], step[key], True)
            if pva_type == "Sync" and "cycles" not in step and "cyclesTo" not in step and not untimed_sync:
                # Poplar's Sync steps hold only syncType: their cycles are in tileCycles.sync alone.
                untimed_sync = True
                self.not_recorded.append("steps_by_ipu.cycles[Sync]")
            run = int(self.step_runs[index]) if self.step_runs is not None else 0
            step_rows.append(
                (index, run, pva_type, program, cs, name, step.get("syncType"), as_int(step.get("cyclesOverlapped")))
            )
            cycles = as_int(step.get("cycles"))
            first = as_int(step.get("cyclesFrom"))
            last = as_int(step.get("cyclesTo"))
            data = as_int(step.get("totalData"))
            vector = step.get("cyclesByTile") if matrix is not None else None
            if vector is not None:
                self.check_length(vector, self.num_tiles, parts + ["cyclesByTile"], "one per tile", True)
                vector = ints(vector).astype(np.uint64)
                tile_cycles = int(vector.sum())
            elif measured is not None and pva_type == "OnTileExecute" and cs in executions:
                vector = _measured_share(ints(measured[cs]).astype(np.uint64), executions[cs], seen.get(cs, 0))
                seen[cs] = seen.get(cs, 0) + 1
                tile_cycles = int(vector.sum())
            else:
                # Ipu.cycles sums the step's cycles over tiles; the legacy step has the longest tile's
                # cycles and tileBalance = (sum over tiles) / (cycles * tiles), which gives the sum.
                tile_cycles = round(float(step.get("tileBalance", 0.0)) * cycles * self.num_tiles)
            thread = float(step.get("threadBalance", 0.0))
            data_balance = float(step.get("dataBalance", 0.0))
            if num_ipus > 1 and vector is not None:
                # Cycles, longest tile and active tiles per IPU from the IPU's tiles; the span and the
                # balances are the step's device-wide figures, and its totalData goes to IPU 0 (the
                # legacy step does not split them).
                per_tile = vector.reshape(num_ipus, tiles_per_ipu)
                if "activeTiles" in step and as_int(step["activeTiles"]) != int(np.count_nonzero(vector)):
                    self.keep(parts + ["activeTiles"], step["activeTiles"], True)
                if "cycles" in step and cycles != int(vector.max(initial=0)):
                    self.keep(parts + ["cycles"], step["cycles"], True)
                balances = (thread, float(step.get("tileBalance", 0.0)), float(step.get("activeTileBalance", 0.0)))
                for ipu in range(num_ipus):
                    row = per_tile[ipu]
                    total, top, active = int(row.sum()), int(row.max()), int(np.count_nonzero(row))
                    type_key = (ipu, pva_type)
                    by_type[type_key] = by_type.get(type_key, 0) + total
                    ipu_rows.append(
                        (
                            index,
                            ipu,
                            1,
                            total,
                            active,
                            *self._spans(run, ipu, first, last),
                            top,
                            *balances,
                            data if ipu == 0 else 0,
                            data if ipu == 0 else 0,
                            data_balance,
                        )
                    )
            else:
                type_key = (0, pva_type)
                by_type[type_key] = by_type.get(type_key, 0) + tile_cycles
                ipu_rows.append(
                    (
                        index,
                        0,
                        1,
                        tile_cycles,
                        as_int(step.get("activeTiles")),
                        *self._spans(run, 0, first, last),
                        cycles,
                        thread,
                        float(step.get("tileBalance", 0.0)),
                        float(step.get("activeTileBalance", 0.0)),
                        data,
                        data,
                        data_balance,
                    )
                )
                ipu_rows.extend((index, ipu, 0) + (0,) * 16 + (0.0, 0.0, 0.0, 0, 0, 0.0) for ipu in range(1, num_ipus))
            if matrix is not None:
                pending.append(np.zeros(self.num_tiles, dtype=np.uint64) if vector is None else vector)
                if len(pending) >= ROW_BATCH:
                    matrix.append(np.vstack(pending))
                    pending.clear()
            if len(step_rows) >= 4096:
                self._flush_steps(step_rows, ipu_rows)
        if matrix is not None and pending:
            matrix.append(np.vstack(pending))
        self._flush_steps(step_rows, ipu_rows)
        return by_type

    def _spans(self, run: int, ipu: int, first: int, last: int) -> tuple[int, ...]:
        """cycles_base and the step's from/to columns: cycles from the start of its run on the IPU."""
        base = self.run_starts.get((run, ipu), 0)
        first, last = first - base, last - base
        return (base, first, first, first, last, last, last, first, first, first, last, last, last)

    def _flush_steps(self, step_rows: list, ipu_rows: list) -> None:
        self.w.insert(
            "steps",
            ("id", "run", "type", "program", "compute_set", "name", "sync_type", "cycles_overlapped"),
            step_rows,
        )
        self.w.insert(
            "steps_by_ipu",
            profile_schema().tables["steps_by_ipu"].column_names,
            ipu_rows,
        )
        step_rows.clear()
        ipu_rows.clear()


def _shares(total: int, weights: list[int]) -> list[int]:
    """`total` split in proportion to `weights` (largest remainders), adding up to `total` exactly."""
    whole = sum(weights)
    if not whole:
        return [total] + [0] * (len(weights) - 1)
    exact = [total * w / whole for w in weights]
    out = [int(e) for e in exact]
    for i in sorted(range(len(weights)), key=lambda i: out[i] - exact[i])[: total - sum(out)]:
        out[i] += 1
    return out


def _measured_share(row: np.ndarray, executions: int, index: int) -> np.ndarray:
    """Execution `index` of a compute set's share of its measured per-tile cycles.

    computeSetCyclesByTile holds the total over every execution of the compute set; the profile
    does not say how it splits, so each of the `executions` steps gets an equal share per tile
    (the remainder to the earliest), and the steps add up to the measured totals exactly.
    """
    base, remainder = np.divmod(row, np.uint64(executions))
    return base + (remainder > np.uint64(index)).astype(np.uint64)


def input_size(paths: Sequence[str | os.PathLike[str]]) -> int:
    """Total bytes of the input files."""
    return sum(os.path.getsize(p) for p in paths)
