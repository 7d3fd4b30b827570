"""Writing what the simulator knows: profile.pop (through formats), debug.cbor and the host trace.

Layout of ``autoReport.directory`` (as Poplar lays it out): ``profile.pop`` and ``debug.cbor``
side by side, plus a libpvti-style ``<date>_<pid>.pvti`` host trace. Compilation tables are
written when the first run starts (or at close); execution steps are streamed to the writer as
the engine runs; everything appears under its real name only when the engine is closed.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Protocol, cast

import numpy as np

from formats import __version__
from formats.atomic import commit_together
from formats.debug.debug_cbor import read_debug_id, stage_debug_info
from formats.errors import OutputError
from formats.pop.schema import profile_schema
from formats.pop.writer import MEMORY_REGIONS, ProfileWriter

from .compiler.memory import CATEGORIES, DESCRIPTIONS
from .compiler.regions import Sparse
from .hosttrace import trace_file_name

if TYPE_CHECKING:
    import datetime

    from .compiler import Executable
    from .compiler.memory import LoweredVars
    from .graph import Graph, GraphState
    from .hosttrace import HostTrace
    from .options import EngineOptions
    from .steps import StepTemplate
    from .target import Target


class ProfiledRun(Protocol):
    """What the reports are written from: a compiled and run engine (simulator.engine.Engine)."""

    exe: Executable
    graph: Graph
    options: EngineOptions
    trace: HostTrace
    timestamp: datetime.datetime
    program_name: str | None
    num_ipus: int
    tiles_per_ipu: int
    replicas: int


#: The Poplar version string the simulator reports (major.minor.point and a package tag).
POPLAR_VERSION = "3.1.0 (simulator)"
PRODUCER = "pva simulator"

#: The figures of steps_by_ipu on a replica that was not profiled.
_UNPROFILED = dict.fromkeys(profile_schema().tables["steps_by_ipu"].column_names[2:], 0)
#: The activities cycle_totals sums per run and IPU: its columns between the run and IPU and the total.
_ACTIVITIES = profile_schema().tables["cycle_totals"].column_names[2:-1]
_FLUSH_STEPS = 512


class ExecutionSink:
    """Streams execution steps into the profile writer."""

    def __init__(self, session: ReportSession) -> None:
        engine = session.engine
        self.session = session
        assert session.writer is not None, "execution steps go to the profile writer"
        self.writer = session.writer
        self.engine = engine
        self.n = engine.exe.n_tiles
        self.num_ipus = engine.num_ipus
        self.tiles_per_ipu = engine.tiles_per_ipu
        self.replicas = engine.replicas
        self.total_tiles = self.n * self.replicas
        replica = engine.options.replica_to_profile
        if replica is not None and replica >= self.replicas:
            from .errors import OptionError

            raise OptionError(f"profiler.replicaToProfile is {replica} but the graph has {self.replicas} replica(s)")
        self.profiled = [replica is None or r == replica for r in range(self.replicas)]
        self.level = engine.options.compute
        self.step_id = 0
        self.run_id = 0
        self.runs: list[dict] = []
        self.run_cycles: list[tuple] = []
        self.run_params: list[tuple] = []
        self.totals: list[dict] = []
        self._steps: list[dict] = []
        self._by_ipu: list[dict] = []
        self._cs_rows: list[tuple] = []
        self._vertex_rows: list[dict] = []
        self._matrix = np.zeros((_FLUSH_STEPS, self.total_tiles), dtype=np.int64)
        self._fill = 0
        self._microseconds = 0
        self._activity: dict[str, np.ndarray] = {}  # set by begin_run
        self._base = np.zeros(0, dtype=np.int64)  # set by begin_run
        self._run_first = 0

    def begin_run(self, name: str, program: int, clock: np.ndarray) -> None:
        self._base = clock.copy()
        self._run_first = self.step_id
        self._run_name = name
        self._program = program
        self._activity = {a: np.zeros(self.num_ipus, dtype=np.int64) for a in _ACTIVITIES}
        self.run_params.append((self.run_id, "programIndex", str(program)))
        self.run_params.append((self.run_id, "debug.computeInstrumentationLevel", self.level))

    def step(self, tpl: StepTemplate, overlap: int, clock: np.ndarray, wait: np.ndarray | None) -> None:
        stats = tpl.stats
        T = self.tiles_per_ipu
        span = stats["span"]
        sums = stats["sum"]
        mins, means = stats["min"], stats["mean"]
        active, act_min, act_mean = stats["active"], stats["act_min"], stats["act_mean"]
        if wait is not None:
            span = span + wait
            sums = sums + wait * T
            mins, means = mins + wait, means + wait
            act_min, act_mean = act_min + wait, act_mean + wait
            active = np.full(self.num_ipus, T)
        ov = np.minimum(overlap, span)
        frm = clock - self._base - ov
        # the measured per-tile row of one replica
        row = np.zeros(self.n, dtype=np.int64)
        cyc = tpl.cycles
        row[cyc.idx] = cyc.val
        if wait is not None:
            row += np.repeat(wait, T)
        measured_sums, measured_active, measured_max = sums, active, span
        if tpl.type == "OnTileExecute" and self.level in ("Device", "Ipu"):
            per_ipu = row.reshape(self.num_ipus, T).max(axis=1)
            row[:] = 0
            if self.level == "Device":
                row[0] = int(per_ipu.max())
            else:
                row[np.arange(self.num_ipus) * T] = per_ipu
            measured_sums = row.reshape(self.num_ipus, T).sum(axis=1)
            measured_active = (row.reshape(self.num_ipus, T) > 0).sum(axis=1)
            measured_max = row.reshape(self.num_ipus, T).max(axis=1)
        sid = self.step_id
        self._steps.append(
            {
                "id": sid,
                "run": self.run_id,
                "type": tpl.type,
                "program": tpl.program,
                "compute_set": tpl.cs,
                "name": tpl.name,
                "sync_type": tpl.sync if tpl.type == "Sync" else None,
                "cycles_overlapped": int(overlap),
            }
        )
        is_compute = tpl.type == "OnTileExecute"
        lows = {"all": mins, "all_mean": means, "active": act_min, "active_mean": act_mean}
        self._ipu_rows(sid, span, frm, measured_sums, measured_active, measured_max, lows, active, stats, is_compute)
        for r in range(self.replicas):
            if self.profiled[r]:
                self._matrix[self._fill, r * self.n : (r + 1) * self.n] = row
            else:
                self._matrix[self._fill, r * self.n : (r + 1) * self.n] = 0
        self._fill += 1
        if is_compute:
            self._cs_rows.append((sid, 0, tpl.cs, None))
            if self.level == "Vertex":
                for type_id, count, cycles in tpl.vertex_rows:
                    self._vertex_rows.append(
                        {
                            "step_id": sid,
                            "compute_set": tpl.cs,
                            "vertex_type": type_id,
                            "count": count,
                            "cycles": cycles,
                        }
                    )
            self._activity["active_compute"] += stats.get("active_sum", 0)
        activity = _ACTIVITY_OF[tpl.type]
        self._activity[activity] += measured_sums
        clock += span - ov
        self.step_id += 1
        if self._fill == _FLUSH_STEPS:
            self.flush()

    def _ipu_rows(self, sid, span, frm, sums, active_tiles, tile_max, lows, active, stats, is_compute) -> None:
        """The steps_by_ipu rows of a step: each IPU's figures, zeros on replicas not profiled."""
        T = self.tiles_per_ipu
        to_max = frm + span
        for j in range(self.num_ipus):
            s, f = int(span[j]), int(frm[j])
            total, act = int(sums[j]), int(active_tiles[j])
            figures = {
                "profiled": 1,
                "cycles": total,
                "active_tiles": act,
                "cycles_base": int(self._base[j]),
                "all_cycles_from_min": f,
                "all_cycles_from_max": f,
                "all_cycles_from_avg": f,
                "all_cycles_to_min": f + int(lows["all"][j]),
                "all_cycles_to_max": int(to_max[j]),
                "all_cycles_to_avg": f + int(lows["all_mean"][j]),
                "active_cycles_from_min": f,
                "active_cycles_from_max": f,
                "active_cycles_from_avg": f,
                "active_cycles_to_min": f + int(lows["active"][j]) if active[j] else f,
                "active_cycles_to_max": int(to_max[j]),
                "active_cycles_to_avg": f + int(lows["active_mean"][j]) if active[j] else f,
                "tile_cycles_max": int(tile_max[j]),
                "thread_balance": round(float(stats["thread"][j]), 6) if is_compute else 0.0,
                "tile_balance": round(total / (s * T) if s else 0.0, 6),
                "active_tile_balance": round(total / (s * act) if s and act else 0.0, 6),
                "data_in": int(stats["data_in"][j]),
                "data_out": int(stats["data_out"][j]),
                "data_balance": round(float(stats["data_balance"][j]), 6),
            }
            for r in range(self.replicas):
                ipu = r * self.num_ipus + j
                self._by_ipu.append({"step_id": sid, "ipu": ipu, **(figures if self.profiled[r] else _UNPROFILED)})

    def end_run(self, clock: np.ndarray) -> None:
        engine = self.engine
        clock_hz = engine.graph.target.clockFrequency
        cycles = int((clock - self._base).max()) if clock.size else 0
        start = self._microseconds
        end = start + int(np.ceil(cycles / clock_hz * 1e6))
        self._microseconds = end + 40
        self.runs.append(
            {
                "id": self.run_id,
                "name": self._run_name,
                "microseconds_start": start,
                "microseconds_end": end,
                "first_step": self._run_first,
                "num_steps": self.step_id - self._run_first,
            }
        )
        for r in range(self.replicas):
            if not self.profiled[r]:
                continue
            for j in range(self.num_ipus):
                ipu = r * self.num_ipus + j
                self.run_cycles.append((self.run_id, ipu, int(self._base[j]), int(clock[j])))
                act = {a: int(self._activity[a][j]) for a in _ACTIVITIES}
                total = sum(v for k, v in act.items() if k != "active_compute")
                self.totals.append({"run": self.run_id, "ipu": ipu, **act, "total": total})
        self.run_id += 1
        self.flush()

    def flush(self) -> None:
        w = self.writer
        if self._steps:
            w.insert_rows("steps", self._steps)
            self._steps = []
        if self._by_ipu:
            w.insert_rows("steps_by_ipu", self._by_ipu)
            self._by_ipu = []
        if self._cs_rows:
            w.insert("step_compute_sets", ("step_id", "position", "compute_set", "cycles_row"), self._cs_rows)
            self._cs_rows = []
        if self._vertex_rows:
            w.insert_rows("step_vertex_cycles", self._vertex_rows)
            self._vertex_rows = []
        if self._fill:
            w.matrix("step_cycles_by_tile").append(self._matrix[: self._fill])
            self._fill = 0

    def finish(self) -> None:
        self.flush()
        w = self.writer
        w.insert_rows("runs", self.runs)
        w.insert("run_cycles_by_ipu", ("run", "ipu", "start", "end"), self.run_cycles)
        w.insert("run_parameters", ("run", "name", "value"), self.run_params)
        w.insert_rows("cycle_totals", self.totals)


_ACTIVITY_OF = {
    "OnTileExecute": "compute",
    "DoExchange": "internal_exchange",
    "GlobalExchange": "inter_ipu_exchange",
    "StreamCopyBegin": "stream_copy_begin",
    "StreamCopyMid": "stream_copy",
    "StreamCopyEnd": "stream_copy_end",
    "Sync": "sync",
}


class ReportSession:
    """The reports of one engine: opened on first need, committed by close."""

    def __init__(self, engine: ProfiledRun) -> None:
        self.engine = engine
        options = engine.options
        self.directory = os.path.abspath(options.directory)
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as exc:
            raise OutputError(
                f"cannot write the reports to {self.directory!r}: expected a directory there or one that can "
                f"be made ({exc.strerror or exc})",
                self.directory,
            ) from None
        self.profile_path = os.path.join(self.directory, "profile.pop")
        self.debug_path = os.path.join(self.directory, "debug.cbor")
        self.trace_path = os.path.join(self.directory, trace_file_name(engine.timestamp.timestamp()))
        self.writer: ProfileWriter | None = None
        self._execution: ExecutionSink | None = None
        self._closed = False
        if options.graph_profile or options.execution_profile:
            self.writer = ProfileWriter(
                self.profile_path, producer=PRODUCER, producer_version=__version__, poplar_version=POPLAR_VERSION
            )
            self.writer.execute("PRAGMA cache_size=-262144")  # 256 MB of page cache for the bulk inserts
            try:
                with engine.trace.phase("write graph profile"):
                    write_compilation(self.writer, engine)
            except BaseException:
                self.writer.abort()
                raise

    @property
    def execution(self) -> ExecutionSink:
        if self._execution is None:
            self._execution = ExecutionSink(self)
        return self._execution

    def close(self) -> None:
        """Write every report under a temporary name, then rename them together.

        Nothing is renamed before profile.pop, debug.cbor and the trace are all complete and
        durable, so a process killed at any point leaves the directory's previous pair intact.
        """
        if self._closed:
            return
        self._closed = True
        engine = self.engine
        staged = []
        try:
            if self.writer is not None:
                with engine.trace.phase("write execution profile"):
                    if self._execution is not None:
                        self._execution.finish()
                    stamp = engine.timestamp.isoformat(timespec="seconds").replace("+00:00", "Z")
                    self.writer.set_metadata(created=stamp, compilation_timestamp=stamp)
                    if engine.options.debug_info:  # the report records which debug.cbor is its own
                        staged.append(stage_debug_info(self.debug_path, engine.graph.state.debug.contexts)[0])
                        self.writer.set_metadata(debug_info_id=read_debug_id(staged[-1].path))
                    if engine.program_name:
                        self.writer.set_metadata(program_name=engine.program_name)
                self.writer.close(commit=False)
                staged.append(self.writer.output)
            elif engine.options.debug_info:
                staged.append(stage_debug_info(self.debug_path, engine.graph.state.debug.contexts)[0])
            staged.append(engine.trace.stage(self.trace_path))
            commit_together(staged)
        except BaseException:
            for out in staged:
                out.abort()
            self.abort()
            raise

    def abort(self) -> None:
        self._closed = True
        if self.writer is not None:
            self.writer.abort()


# -- the compilation part ------------------------------------------------------------------------


def _dense_code(every: int, extra: Sparse | None, n: int) -> np.ndarray:
    out = np.full(n, every, dtype=np.int64)
    if extra is not None and extra.idx.size:
        out[extra.idx] += extra.val
    return out


class _Rows:
    """Buffers rows of a per-tile matrix and appends them in blocks."""

    def __init__(self, writer: ProfileWriter, name: str, n: int, block: int = 64) -> None:
        self.matrix = writer.matrix(name)
        self.buffer = np.zeros((block, n), dtype=np.int64)
        self.fill = 0
        self.next = self.matrix.num_rows

    def add(self, values: np.ndarray) -> int:
        row = self.next
        self.buffer[self.fill] = values
        self.fill += 1
        self.next += 1
        if self.fill == self.buffer.shape[0]:
            self.flush()
        return row

    def add_sparse(self, vec: Sparse) -> int:
        row = self.next
        self.buffer[self.fill] = 0
        self.buffer[self.fill, vec.idx] = vec.val
        self.fill += 1
        self.next += 1
        if self.fill == self.buffer.shape[0]:
            self.flush()
        return row

    def flush(self) -> None:
        if self.fill:
            self.matrix.append(self.buffer[: self.fill])
            self.fill = 0


def write_compilation(w: ProfileWriter, engine: ProfiledRun) -> None:
    """The compilation report of an engine: target, graph, parameters, compute sets, programs,
    debug references, variables, memory and liveness."""
    exe = engine.exe
    state = cast("GraphState", exe.state)
    assert exe.liveness is not None and exe.memory is not None and exe.types is not None and exe.classes is not None
    n = exe.n_tiles
    _write_target_and_graph(w, engine)
    _write_parameters(w, engine)
    w.insert(
        "var_categories",
        ("id", "name", "description"),
        [(i, name, DESCRIPTIONS[name]) for i, name in enumerate(CATEGORIES)],
    )
    w.insert(
        "vertex_types",
        ("id", "name", "size", "source"),
        [(i, t.name, t.state_bytes, t.source) for i, t in enumerate(exe.types.types)],
    )
    _write_compute_sets(w, exe, n)
    _write_programs(w, exe, n)
    _write_debug_refs(w, exe)
    names = [v.name for v in state.vars] + list(exe.classes.synthetic)
    w.insert("variables", ("id", "name"), list(enumerate(names)))
    _write_lowered(w, exe)
    _write_memory(w, exe, n)
    _write_liveness(w, exe, n)


def _write_target_and_graph(w: ProfileWriter, engine: ProfiledRun) -> None:
    exe = engine.exe
    state = cast("GraphState", exe.state)
    target = cast("Target", exe.target)
    opts = engine.options
    w.set_metadata(instrumentation_compute=opts.compute, instrumentation_external_exchange=opts.external_exchange)
    w.set_target(
        num_ipus=target.num_ipus,
        tiles_per_ipu=target.tiles_per_ipu,
        bytes_per_tile=target.bytesPerTile,
        clock_frequency=target.clockFrequency,
        type=target.type,
        architecture=target.architecture,
        num_replicas=state.replicas,
        relative_sync_delay_by_tile=target.relative_sync_delays().tolist(),
        **target.writer_details(),
    )
    num_vertices = sum(info.num_vertices for info in exe.cs_infos if info is not None)
    w.set_graph(
        num_compute_sets=len(exe.compute_sets),
        num_edges=state.num_edges,
        num_vars=len(state.vars),
        num_vertices=num_vertices,
    )


def _write_parameters(w: ProfileWriter, engine: ProfiledRun) -> None:
    """The optimisation metrics, the engine's options and the target's parameters."""
    exe = engine.exe
    state = cast("GraphState", exe.state)
    target = cast("Target", exe.target)
    assert exe.liveness is not None and exe.memory is not None
    mem = exe.memory
    lv = cast("LoweredVars", exe.lowered)
    metrics = {
        "numLoweredVariables": float(len(lv)),
        "numLivenessSteps": float(exe.liveness.num_steps),
        "numOverlapLanes": float(mem.num_lanes),
        "numPrograms": float(len(exe.progs)),
        "numCompilerComputeSets": float(sum(1 for cs in exe.compute_sets if cs.origin == "compiler")),
        "maxTileBytesIncludingGaps": float(mem.by_tile["total_including_gaps"].max() if exe.n_tiles else 0),
    }
    w.insert("optimisation_metrics", ("name", "value"), sorted(metrics.items()))
    w.insert("compilation_parameters", ("name", "value"), sorted(engine.options.as_text().items()))
    a = target.arch
    params = {
        "architecture": a.name,
        "targetType": target.type,
        "exchangeSetupCycles": a.exchange_setup_cycles,
        "globalExchangeBytesPerCycle": a.global_exchange_bytes_per_cycle,
        "hostBytesPerCycle": a.host_bytes_per_cycle,
        "hostSyncCycles": a.host_sync_cycles,
        "halfHalfMacsPerCycle": a.half_half_macs,
        "halfFloatMacsPerCycle": a.half_float_macs,
        "floatFloatMacsPerCycle": a.float_float_macs,
        "replicationFactor": state.replicas,
        "ipusPerReplica": exe.num_ipus,
    }
    w.insert("target_parameters", ("name", "value"), sorted((k, str(v)) for k, v in params.items()))


def _write_compute_sets(w: ProfileWriter, exe: Executable, n: int) -> None:
    """Compute sets with their per-tile estimates, their vertices and the variables they use."""
    lv = cast("LoweredVars", exe.lowered)
    est = _Rows(w, "compute_set_estimated_cycles_by_tile", n)
    act = _Rows(w, "compute_set_active_cycles_by_tile", n)
    counts = _Rows(w, "vertex_count_by_tile", n)
    cs_rows: list[dict] = []
    vertex_rows: list[dict] = []
    cs_vars: list[tuple[int, int]] = []
    msg_by_cs: dict[int, list[int]] = {}
    for (cs_id, _), cls in exe.message_classes.items():
        msg_by_cs.setdefault(cs_id, []).append(cls)
    for info in exe.cs_infos:
        assert info is not None, "the compiler analysed every compute set"
        cs_rows.append(
            {
                "compute_set": info.id,
                "name": info.name,
                "num_vertices": info.num_vertices,
                "estimated_cycles_row": est.add_sparse(info.cycles),
                "active_cycles_row": act.add_sparse(info.active),
                "estimated_cycles_max": info.cycles.max,
                "estimated_cycles_total": info.cycles.total,
            }
        )
        for v in info.vertices:
            vertex_rows.append(
                {
                    "id": len(vertex_rows),
                    "compute_set": info.id,
                    "vertex_type": v.type_id,
                    "count": v.count,
                    "estimated_cycles": v.cycles,
                    "count_by_tile_row": counts.add_sparse(v.count_by_tile),
                }
            )
        ids = [lv.user_ids(info.lv_keys)] if info.lv_keys.size else []
        for cls in msg_by_cs.get(info.id, ()):
            ids.append(_class_piece_ids(exe, cls))
        if ids:
            cs_vars.extend((info.id, int(v)) for v in np.unique(np.concatenate(ids)).tolist())
    for rows in (est, act, counts):
        rows.flush()
    w.insert_rows("compute_sets", cs_rows)
    w.insert_rows("compute_set_vertices", vertex_rows)
    w.insert("compute_set_vars", ("compute_set", "var"), cs_vars)


def _write_debug_refs(w: ProfileWriter, exe: Executable) -> None:
    """Which debug context each program, compute set and variable comes from."""
    state = cast("GraphState", exe.state)
    refs = set()
    for p in exe.progs:
        for ctx in p.debug:
            refs.add(("program", p.id, ctx))
    for cs in exe.compute_sets:
        refs.add(("compute_set", cs.id, cs.debug))
    for var in state.vars:
        refs.add(("variable", var.id, var.debug))
    w.insert("debug_context_refs", ("kind", "object", "debug_context"), sorted(refs))


def _class_piece_ids(exe, cls: int) -> np.ndarray:
    b = exe.classes.bytes(cls)
    tiles = b.idx[b.val > 0]
    return exe.lowered.class_ids(cls, tiles)


def _write_programs(w: ProfileWriter, exe: Executable, n: int) -> None:
    progs = exe.progs
    w.insert_rows(
        "programs",
        (
            {
                "id": p.id,
                "type": p.type,
                "name": p.name,
                "compute_set": p.cs,
                "repeat_count": p.repeat,
                "sync_type": p.sync if p.type in ("Sync", "GlobalExchange") else None,
                "stream_copy_type": p.sct,
                "call_target": p.call,
                "num_tiles": None,
            }
            for p in progs
        ),
    )
    w.insert(
        "program_children",
        ("parent", "position", "child"),
        [(p.id, i, c.id) for p in progs for i, c in enumerate(p.children)],
    )
    assert exe.root is not None
    w.insert("control_programs", ("position", "program"), [(0, exe.root.id)])
    w.insert("function_programs", ("position", "program"), [(i, f.id) for i, f in enumerate(exe.functions)])
    w.insert_rows("program_vectors", _program_vectors(w, exe, n))
    _write_program_vars(w, exe)


def _program_vectors(w: ProfileWriter, exe: Executable, n: int) -> list[dict]:
    """Each program's per-tile vectors written as matrix rows, and their program_vectors rows: the
    cumulative control code of every program, and the plans of exchanges and stream copies."""
    progs = exe.progs
    assert exe.root is not None
    vectors: list[dict] = []
    code_rows = _Rows(w, "program_control_code_by_tile", n)

    def emit(prog_id: int, kind: str, rows: _Rows, vec: np.ndarray) -> None:
        row = rows.add(vec)
        vectors.append(
            {
                "program": prog_id,
                "kind": kind,
                "row": row,
                "total": int(vec.sum()),
                "min": int(vec.min()) if vec.size else 0,
                "max": int(vec.max()) if vec.size else 0,
            }
        )

    # cumulative control code, children before parents
    done = np.zeros(len(progs), dtype=bool)
    for root in [exe.root] + list(exe.functions) + list(progs):
        if done[root.id]:
            continue
        stack = [(root, 0, _dense_code(*root.code, n))]
        while stack:
            node, index, acc = stack[-1]
            if index < len(node.children):
                stack[-1] = (node, index + 1, acc)
                child = node.children[index]
                if not done[child.id]:
                    stack.append((child, 0, _dense_code(*child.code, n)))
                continue
            stack.pop()
            done[node.id] = True
            emit(node.id, "control_code", code_rows, acc)
            if stack:
                stack[-1][2][:] += acc
    code_rows.flush()
    matrices = {
        kind: _Rows(w, f"program_{kind}_by_tile", n, block=32)
        for kind in ("bytes_received", "bytes_sent", "estimated_cycles", "exchange_cycles", "sync_cycles", "code_bytes")
    }
    for p in progs:
        plan = p.plan
        if plan is None or p.type not in ("DoExchange", "GlobalExchange", "StreamCopyMid"):
            continue
        emit(p.id, "bytes_received", matrices["bytes_received"], plan.recv.dense())
        emit(p.id, "bytes_sent", matrices["bytes_sent"], plan.sent.dense())
        emit(p.id, "estimated_cycles", matrices["estimated_cycles"], plan.cycles.dense())
        if p.type == "DoExchange":
            emit(p.id, "code_bytes", matrices["code_bytes"], plan.code.dense())
        if p.type == "GlobalExchange":
            assert plan.exchange_cycles is not None and plan.sync is not None, "a global exchange plans its syncs"
            emit(p.id, "exchange_cycles", matrices["exchange_cycles"], plan.exchange_cycles.dense())
            emit(p.id, "sync_cycles", matrices["sync_cycles"], plan.sync.dense())
    for matrix in matrices.values():
        matrix.flush()
    return vectors


def _write_program_vars(w: ProfileWriter, exe: Executable) -> None:
    """The lowered variables each program uses."""
    progs = exe.progs
    lv = cast("LoweredVars", exe.lowered)
    program_vars: list[tuple[int, int]] = []
    for p in progs:
        ids = []
        if p.lv_keys is not None and p.lv_keys.size:
            ids.append(lv.user_ids(p.lv_keys))
        for cls in p.classes:
            ids.append(_class_piece_ids(exe, cls))
        if ids:
            program_vars.extend((p.id, int(v)) for v in np.unique(np.concatenate(ids)).tolist())
        if len(program_vars) > 200_000:
            w.insert("program_vars", ("program", "var"), program_vars)
            program_vars = []
    w.insert("program_vars", ("program", "var"), program_vars)


def _write_lowered(w: ProfileWriter, exe) -> None:
    lv = exe.lowered
    mem = exe.memory
    names = lv.names
    w.insert_columns(
        "vars_info",  # every piece is allocated: the column's default
        {
            "id": np.arange(len(lv)),
            "tile": lv["tile"],
            "name": [names[i] for i in lv["name_id"].tolist()],
            "size_bytes": lv["size"],
            "alignment": lv["align"],
            "offset": mem.offset,
            "category": lv["category"],
            "constant": lv["constant"],
            "always_live": lv["always_live"],
            "executable": lv["executable"],
            "vertex_code": lv["vertex_code"],
            "lowest_256k": lv["lowest_256k"],
            "start_section": lv["start_section"],
            "in_interleaved_mem": lv["in_interleaved"],
            "accessed_in_vertex": lv["accessed"],
            "equivalence_class": lv["eq_class"],
            "unlowered_var": lv["unlowered"],
            "alloc_order": mem.alloc_order,
        },
    )
    always = exe.classes.always_live
    intervals = sorted(i for i in exe.liveness.intervals if not always[i[0]])
    w.insert("equivalence_class_steps", ("class", "start", "end"), intervals)


def _write_memory(w: ProfileWriter, exe, n: int) -> None:
    mem = exe.memory
    w.insert_columns("memory_by_tile", {"tile": np.arange(n), **mem.by_tile})
    w.matrix("memory_category_by_tile").append(mem.category_matrix)
    rows = []
    matrix = mem.category_matrix
    for c in range(len(CATEGORIES)):
        for ri, region in enumerate(MEMORY_REGIONS):
            for overlapped in (0, 1):
                column = matrix[:, 6 * c + 2 * ri + overlapped]
                if column.any():
                    rows.append(
                        {
                            "category": c,
                            "region": region,
                            "overlapped": overlapped,
                            "total": int(column.sum()),
                            "max": int(column.max()),
                        }
                    )
    w.insert_rows("memory_by_category", rows)
    vm = []
    for type_id, (vtype, memory) in enumerate(zip(exe.types.types, exe.types.memory)):
        used = np.flatnonzero(memory["count"])
        for tile in used.tolist():
            vm.append(
                {
                    "tile": tile,
                    "vertex_type": type_id,
                    "code_bytes": vtype.code_bytes,
                    "copy_ptr_bytes": int(memory["copy_ptr"][tile]),
                    "descriptor_bytes": int(memory["descriptor"][tile]),
                    "edge_ptr_bytes": int(memory["edge_ptr"][tile]),
                    "padding_bytes": int(memory["padding"][tile]),
                    "vertex_data_bytes": int(memory["vertex_data"][tile]),
                }
            )
    w.insert_rows("vertex_memory", vm)


def _write_liveness(w: ProfileWriter, exe, n: int) -> None:
    live = exe.liveness
    w.insert_columns(
        "liveness_steps",
        {
            "id": range(live.num_steps),
            "program": live.step_program,
            "parent": live.step_parent,
            "depth": live.step_depth,
            "not_always_live_bytes": live.step_bytes,
        },
    )
    num_ipus = exe.num_ipus
    w.insert(
        "liveness_step_ipus",
        ("step", "ipu", "bytes"),
        ((s, i, int(b[i])) for s, b in enumerate(live.step_ipu_bytes) for i in range(num_ipus)),
    )
    # every tile's liveness follows from vars_info and equivalence_class_steps: all tiles have it
    w.insert("liveness_tiles", ("tile",), ((x,) for x in range(n)))
    lv = exe.lowered
    al = np.flatnonzero(lv["always_live"])
    keys = lv["unlowered"][al] * np.int64(n) + lv["tile"][al]
    ukeys, inverse = np.unique(keys, return_inverse=True)
    sizes = np.bincount(inverse, weights=lv["size"][al]).astype(np.int64)
    w.insert(
        "always_live_vars", ("var", "tile", "bytes"), zip((ukeys // n).tolist(), (ukeys % n).tolist(), sizes.tolist())
    )
