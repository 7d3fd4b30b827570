"""The engine: compiles a graph, runs its programs bulk-synchronously and records the profile.

Each run walks the lowered program tree. Every OnTileExecute, DoExchange, GlobalExchange,
StreamCopy and Sync it meets is an execution step with cycles on every tile: compute from the
compute set's estimates (six hardware threads per tile), exchanges from bytes and bandwidth,
syncs from the tiles' sync delays plus the time each tile waits there for the slowest tile.
Each IPU keeps its own cycle counter; global and host syncs bring the IPUs of a replica
together. Stream copies on I/O tiles overlap the compute steps before them. With ``functional`` on, vertices and copies also compute
data, so streams, readTensor and PrintTensor see real values.
"""

from __future__ import annotations

import datetime
import math
import os
import re
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from formats.progress import Progress

from . import options as opts
from .compiler import compile_graph
from .compiler.computesets import CSInfo
from .compiler.lowering import LProg
from .compiler.regions import Sparse
from .errors import ExecutionError, GraphError
from .graph import DataStream, Graph, RemoteBuffer
from .hosttrace import HostTrace
from .steps import StepTemplate
from .tensor import Tensor

if TYPE_CHECKING:
    from .report import ExecutionSink, ReportSession

_STEP_TYPES = {
    "OnTileExecute",
    "DoExchange",
    "GlobalExchange",
    "StreamCopyBegin",
    "StreamCopyMid",
    "StreamCopyEnd",
    "Sync",
}
#: Microseconds the host takes between runs (the simulated host is deterministic).
HOST_GAP_US = 40


def _segment(sparse: Sparse, num_ipus: int, tiles_per_ipu: int, fn, empty: int = 0) -> np.ndarray:
    """fn (np.maximum or np.minimum) of the stored values of each IPU; `empty` where an IPU has none."""
    out = np.full(num_ipus, empty, dtype=np.int64)
    if sparse.idx.size:
        ipu = sparse.idx // tiles_per_ipu
        if num_ipus == 1 or ipu[0] == ipu[-1]:
            out[ipu[0]] = fn.reduce(sparse.val)
            return out
        change = np.empty(ipu.size, dtype=bool)
        change[0] = True
        np.not_equal(ipu[1:], ipu[:-1], out=change[1:])
        starts = np.flatnonzero(change)
        out[ipu[starts]] = fn.reduceat(sparse.val, starts)
    return out


def _ipu_stats(
    cycles: Sparse, num_ipus: int, tiles_per_ipu: int, active: Sparse | None, recv: Sparse | None, sent: Sparse | None
) -> dict[str, np.ndarray]:
    """Per-IPU summaries of a per-tile vector, computed from its non-zero entries."""
    T = tiles_per_ipu
    nz = cycles.val > 0
    idx, val = cycles.idx[nz], cycles.val[nz]
    ipu = idx // T
    sums = np.bincount(ipu, weights=val, minlength=num_ipus).astype(np.int64)
    count = np.bincount(ipu, minlength=num_ipus).astype(np.int64)
    compact = Sparse(idx, val, cycles.n)
    span = _segment(compact, num_ipus, T, np.maximum)
    act_min = _segment(compact, num_ipus, T, np.minimum)
    mins = np.where(count == T, act_min, 0)
    stats = {
        "sum": sums,
        "span": span,
        "min": mins,
        "mean": np.rint(sums / T).astype(np.int64),
        "active": count,
        "act_min": np.where(count > 0, act_min, 0),
        "act_mean": np.where(count > 0, np.rint(sums / np.maximum(count, 1)), 0).astype(np.int64),
        "thread": np.zeros(num_ipus),
        "data_in": np.zeros(num_ipus, dtype=np.int64),
        "data_out": np.zeros(num_ipus, dtype=np.int64),
        "data_balance": np.zeros(num_ipus),
    }
    if active is not None:
        a = np.bincount(active.idx // T, weights=active.val, minlength=num_ipus).astype(np.int64)
        stats["thread"] = np.where(sums > 0, a / np.maximum(sums, 1), 0.0)
        stats["active_sum"] = a
    if recv is not None:
        assert sent is not None, "an exchange's sent bytes come with its received ones"
        stats["data_in"] = np.bincount(recv.idx // T, weights=recv.val, minlength=num_ipus).astype(np.int64)
        stats["data_out"] = np.bincount(sent.idx // T, weights=sent.val, minlength=num_ipus).astype(np.int64)
        data = recv.add(sent)
        top = _segment(data, num_ipus, T, np.maximum)
        total = stats["data_in"] + stats["data_out"]
        stats["data_balance"] = np.where(top > 0, (total / T) / np.maximum(top, 1), 0.0)
    return stats


class _Data:
    """Device memory when the engine runs with data: one numpy array per variable."""

    def __init__(self, state) -> None:
        self.state = state
        self.arrays: dict[int, np.ndarray] = {}

    def array(self, var_id: int) -> np.ndarray:
        found = self.arrays.get(var_id)
        if found is None:
            var = self.state.vars[var_id]
            if var.init is not None:
                found = np.array(var.init, dtype=var.dtype.numpy).reshape(-1)
            else:
                found = np.zeros(var.numel, dtype=var.dtype.numpy)
            self.arrays[var_id] = found
        return found

    def read(self, tensor: Tensor) -> np.ndarray:
        if tensor.vars.size == 1:
            v, s, n = int(tensor.vars[0]), int(tensor.starts[0]), int(tensor.lengths[0])
            return self.array(v)[s : s + n].reshape(tensor.shape).copy()
        parts = [
            self.array(v)[s : s + n]
            for v, s, n in zip(tensor.vars.tolist(), tensor.starts.tolist(), tensor.lengths.tolist())
        ]
        flat = np.concatenate(parts) if parts else np.zeros(0, dtype=tensor.dtype.numpy)
        return flat.reshape(tensor.shape)

    def write(self, tensor: Tensor, values) -> None:
        flat = np.asarray(values).reshape(-1)
        if flat.size != tensor.numElements():
            flat = np.broadcast_to(flat, (tensor.numElements(),))
        pos = 0
        for v, s, n in zip(tensor.vars.tolist(), tensor.starts.tolist(), tensor.lengths.tolist()):
            target = self.array(v)
            target[s : s + n] = flat[pos : pos + n].astype(target.dtype, copy=False)
            pos += n


def format_tensor(title: str, values: np.ndarray) -> str:
    """PrintTensor's text: ``title: {1,1.5,2}`` with nested braces for more dimensions."""

    def fmt(x) -> str:
        if isinstance(x, (np.floating, float)):
            return f"{float(x):g}"
        return str(x.item() if hasattr(x, "item") else x)

    def nest(a: np.ndarray, depth: int) -> str:
        if a.ndim == 0:
            return fmt(a)
        if a.ndim == 1:
            return "{" + ",".join(fmt(x) for x in a) + "}"
        inner = (",\n").join(" " * (depth + 1) + nest(x, depth + 1) for x in a)
        return "{\n" + inner + "\n" + " " * depth + "}"

    return f"{title}: {nest(np.asarray(values), 0)}"


def _timestamp(value) -> datetime.datetime:
    """The report's creation time: `value` (a datetime, seconds since 1970, or ISO 8601 text),
    else SOURCE_DATE_EPOCH (whole seconds, the reproducible-builds convention), else now."""
    if value is None:
        epoch = os.environ.get("SOURCE_DATE_EPOCH")
        if not epoch:
            return datetime.datetime.now(datetime.UTC).replace(microsecond=0)
        try:
            if not re.fullmatch(r"[0-9]+", epoch):
                raise ValueError(epoch)
            return datetime.datetime.fromtimestamp(int(epoch), datetime.UTC)
        except (ValueError, OverflowError, OSError):
            raise GraphError(f"SOURCE_DATE_EPOCH must be whole seconds since 1970, got {epoch!r}") from None
    if isinstance(value, datetime.datetime):
        return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)
    text = str(value).strip()
    try:
        if isinstance(value, (int, float)):
            return datetime.datetime.fromtimestamp(value, datetime.UTC)
        try:
            parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            # not a date (20240101 is one): seconds, such as 1700000000 or 1700000000.5
            if not re.fullmatch(r"[0-9]+(\.[0-9]*)?", text):
                raise
            return datetime.datetime.fromtimestamp(float(text), datetime.UTC)
    except (ValueError, OverflowError, OSError):
        raise GraphError(f"timestamp must be ISO 8601 (e.g. 2024-01-01T00:00:00Z) or seconds, got {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


class Engine:
    """Compiles a graph with its control programs and runs them (poplar::Engine).

    `options` are Poplar engine options (see simulator.options.KNOWN); POPLAR_ENGINE_OPTIONS
    overrides them. Reports are written to ``autoReport.directory`` when the engine is closed
    (``close()`` or the end of a ``with`` block). `functional` runs vertices on data (default:
    when every compute set has an implementation and the graph is small); `timestamp` fixes the
    report's creation time; `progress` shows a progress bar on standard error.
    """

    #: Step templates kept for programs that run again (loops); older ones are recomputed.
    TEMPLATE_CACHE = 8192

    def __init__(
        self,
        graph: Graph,
        programs=None,
        options: Mapping[str, Any] | None = None,
        *,
        functional: bool | None = None,
        timestamp=None,
        progress: bool | Progress | None = None,
        output=None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(graph, Graph):
            raise GraphError(f"Engine expects a Graph, got {type(graph).__name__}")
        self.graph = graph
        self.options = opts.resolve(options, environ)
        self.trace = HostTrace()
        self.progress = progress if isinstance(progress, Progress) else Progress(enabled=progress, unit="")
        self.timestamp = _timestamp(timestamp)
        self.output = output
        self.program_name: str | None = None  # recorded in the report's metadata, for titles
        self.printed: list[str] = []
        programs = [] if programs is None else programs
        self._user_programs = list(programs) if isinstance(programs, (list, tuple)) else [programs]
        if not self._user_programs:
            raise GraphError("the Engine needs at least one program")
        state = graph.state
        self.progress.start("compiling", len(state.compute_sets))
        with self.trace.phase("compile"):
            self.exe = compile_graph(
                graph,
                self._user_programs,
                {"compute": self.options.compute, "external_exchange": self.options.external_exchange},
                self.progress,
                self.trace,
            )
        self.progress.finish()
        assert self.exe.memory is not None
        over = np.flatnonzero(self.exe.memory.by_tile["overflowed"] > 0)
        if over.size and not self.options.allow_out_of_memory:
            raise GraphError(
                f"out of memory: {over.size} tile(s) need more than {graph.target.bytesPerTile:,} bytes (first: tile "
                f"{int(over[0])} needs {int(self.exe.memory.by_tile['total_including_gaps'][over[0]]):,}); set "
                f"debug.allowOutOfMemory to true to run anyway"
            )
        self.functional = self._auto_functional() if functional is None else bool(functional)
        self._data = _Data(state) if self.functional else None
        self._streams: dict[str, dict] = {}
        self._remote: dict[int, np.ndarray] = {}
        self._stream_use = [self._streams_of(p) for p in self.exe.user_programs]
        self._templates: OrderedDict[int, StepTemplate] = OrderedDict()
        self._implicit: dict[str, StepTemplate] = {}
        n = self.exe.n_tiles
        self.num_ipus = self.exe.num_ipus  # IPUs of one replica
        self.tiles_per_ipu = graph.target.tiles_per_ipu
        self.replicas = state.replicas
        self.clock = np.zeros(self.num_ipus, dtype=np.int64)
        self.runs_recorded: dict[int, int] = {}
        self.run_count = 0
        self._report: ReportSession | None = None
        self._closed = False
        self._sync_delays = np.tile(graph.target.relative_sync_delays(), self.num_ipus)
        self._n = n
        self._case = 0
        self._prev_program: LProg | None = None
        self._recording = False
        self._sink: ExecutionSink | None = None
        self._idle = np.zeros(n, dtype=np.int64)  # cycles each tile waited since its last sync
        target = graph.target
        self._io = target.io_tile_mask(self.num_ipus) if target.io_tiles else None
        self._io_free = np.zeros(self.num_ipus, dtype=np.int64)  # when each IPU's I/O tiles were last busy
        self._io_used = np.zeros(self.num_ipus, dtype=np.int64)  # cycles of I/O-tile copies since then
        self._io_only: dict[int, bool] = {}

    # -- set-up -----------------------------------------------------------------------------

    def _auto_functional(self) -> bool:
        state = self.graph.state
        if sum(v.numel for v in state.vars) > 4_000_000:
            return False
        for info in self.exe.cs_infos:
            if info is not None and info.num_vertices and not info.functional and info.origin != "compiler":
                return False
        return True

    def _streams_of(self, root: LProg) -> list:
        found: list[DataStream] = []
        stack = [root]
        seen = set()
        while stack:
            p = stack.pop()
            if p.id in seen:
                continue
            seen.add(p.id)
            if (
                p.type == "StreamCopyMid"
                and isinstance(p.op, tuple)
                and p.op[0] == "stream"
                and isinstance(p.op[3], DataStream)
            ):
                found.append(p.op[3])
            stack.extend(p.children)
            if p.type == "Call":
                stack.append(self._called(p))
        return found

    def load(self, device=None) -> None:
        """Load the compiled graph on the device (recorded in the host trace)."""
        with self.trace.phase("engine load"):
            pass

    def connectStream(self, name, buffer, end=None) -> None:
        """Connect a host buffer to a stream; host-to-device streams read it as a circular buffer."""
        stream_name = name.name if isinstance(name, DataStream) else str(name)
        stream = self.graph.state.streams.get(stream_name)
        if stream is None:
            known = ", ".join(sorted(self.graph.state.streams)) or "none"
            raise ExecutionError(f"no stream called {stream_name!r} in the graph (streams: {known})")
        array = None
        if buffer is not None and not callable(buffer):
            array = np.asarray(buffer, dtype=stream.dtype.numpy).reshape(-1)
            if array.size == 0 and stream.numel:
                raise ExecutionError(f"the buffer connected to stream {stream_name!r} is empty")
        self._streams[stream_name] = {"buffer": array, "callback": buffer if callable(buffer) else None, "pos": 0}

    connectStreamToCallback = connectStream

    def writeTensor(self, name: str, data) -> None:
        tensor = self._handle(name, "write")
        self._device().write(tensor, np.asarray(data, dtype=tensor.dtype.numpy))

    def readTensor(self, name: str, out=None) -> np.ndarray:
        tensor = self._handle(name, "read")
        values = self._device().read(tensor)
        if out is not None:
            np.copyto(np.asarray(out).reshape(values.shape), values, casting="unsafe")
            return out
        return values

    def _handle(self, name: str, kind: str) -> Tensor:
        found = self.graph.state.host_handles.get((kind, name))
        if found is None:
            raise ExecutionError(
                f"no host {kind} handle called {name!r}; create it with graph.createHost"
                f"{'Write' if kind == 'write' else 'Read'}"
            )
        if not self.functional:
            raise ExecutionError(
                f"{'writeTensor' if kind == 'write' else 'readTensor'}({name!r}) needs an engine "
                f"that runs with data (functional=True)"
            )
        return found[1]

    def _device(self) -> _Data:
        """The device memory of an engine that runs with data."""
        assert self._data is not None, "the engine does not run with data"
        return self._data

    def _called(self, p: LProg) -> LProg:
        """The function a Call program calls."""
        assert p.call is not None, "a Call names its function"
        return self.exe.progs[p.call]

    def _cs_info(self, p: LProg) -> CSInfo:
        """What the compiler knows about the compute set an OnTileExecute runs."""
        assert p.cs is not None, "an OnTileExecute names its compute set"
        info = self.exe.cs_infos[p.cs]
        assert info is not None, "the compiler analysed every executed compute set"
        return info

    # -- running ----------------------------------------------------------------------------

    def print_line(self, text: str) -> None:
        """Print a line of the run's output: kept in `printed`, and written to `output` if given."""
        self.printed.append(text)
        if self.output is not None:
            self.output.write(text + "\n")

    def run(self, programIndex: int = 0, debugName: str = "") -> None:
        """Run control program `programIndex`."""
        if self._closed:
            raise ExecutionError("the engine is closed")
        if not 0 <= programIndex < len(self._user_programs):
            raise ExecutionError(
                f"program index {programIndex} is out of range: the engine has {len(self._user_programs)} program(s)"
            )
        for stream in self._stream_use[programIndex]:
            if stream.name not in self._streams:
                raise ExecutionError(
                    f"stream {stream.name!r} ({stream.direction}, {stream.numel} x {stream.dtype}) is used by program "
                    f"{programIndex} but was never connected; call engine.connectStream({stream.name!r}, buffer) "
                    f"before engine.run({programIndex})"
                )
        recorded = self.runs_recorded.get(programIndex, 0)
        self._recording = self.options.execution_profile and recorded < self.options.run_count
        if self._recording:
            self.runs_recorded[programIndex] = recorded + 1
            sink = self._report_session().execution
            sink.begin_run(debugName or f"run{self.run_count}", programIndex, self.clock)
            self._sink = sink
            self._idle[:] = 0
        self._case = programIndex
        self._prev_program = None
        root = self.exe.root
        assert root is not None
        with self.trace.phase(f"run {programIndex}" + (f" ({debugName})" if debugName else "")):
            self._exec(root)
        if self._recording:
            assert self._sink is not None
            self._sink.end_run(self.clock)
            self._sink = None
        self.run_count += 1

    def _exec(self, p: LProg) -> None:
        t = p.type
        if t == "Sequence":
            for child in p.children:
                self._exec(child)
        elif t in _STEP_TYPES:
            self._step(p)
        elif t == "Repeat":
            body = p.children[0]
            assert p.repeat is not None
            for _ in range(p.repeat):
                self._exec(body)
        elif t == "RepeatWhile":
            predicate, until, iterations, limit = cast("tuple[Tensor, bool, int, int]", p.extra)
            cond, body = p.children
            count = 0
            while True:
                self._exec(cond)
                if self.functional:
                    value = bool(self._device().read(predicate).reshape(-1)[0])
                    go = value != until
                else:
                    go = count < iterations
                if not go:
                    break
                count += 1
                if count > limit:
                    raise ExecutionError(
                        f"RepeatWhile {p.name!r} ran {limit:,} iterations without its predicate "
                        f"changing; raise maxIterations or check the condition"
                    )
                self._exec(body)
        elif t == "IfElse":
            predicate, simulated = cast("tuple[Tensor, Any]", p.extra)
            value = self._value(predicate, simulated)
            self._exec(p.children[0] if value else p.children[1])
        elif t == "OnEveryTileSwitch":
            extra = cast(tuple, p.extra)
            if extra[0] == "program":
                self._exec(p.children[self._case])
            else:
                control, values, simulated = extra
                value = self._value(control, simulated)
                index = values.index(int(value)) if value is not None and int(value) in values else len(values)
                self._exec(p.children[index])
        elif t == "Call":
            self._exec(self._called(p))
        # SetLocalConsensusFromVar and WriteUndef take no measurable time

    def _value(self, tensor: Tensor, simulated):
        if self.functional:
            return self._device().read(tensor).reshape(-1)[0].item()
        if simulated is not None:
            return simulated
        var = self.graph.state.vars[int(tensor.vars[0])]
        if var.init is not None:
            return var.init[int(tensor.starts[0])].item()
        return 0

    def _apply(self, p: LProg) -> None:
        op = cast(Any, p.op)
        data = self._device()
        if p.type == "OnTileExecute":
            info = self._cs_info(p)
            for item in info.functional:
                if isinstance(item, tuple) and item[0] == "vertices":
                    self._run_vertices(item[1])
                else:
                    item(data)
        if op is None:
            return
        kind = op[0]
        if kind == "copy":
            data.write(op[2], data.read(op[1]))
        elif kind == "print":
            self.print_line(format_tensor(op[1], data.read(op[2])))
        elif kind == "stream":
            _, program, tensor, endpoint, to_device = op
            if isinstance(endpoint, RemoteBuffer):
                rows = self._remote.setdefault(
                    endpoint.id, np.zeros((endpoint.repeats, endpoint.numel), dtype=endpoint.dtype.numpy)
                )
                if to_device:
                    data.write(tensor, rows[program.offset])
                else:
                    rows[program.offset] = data.read(tensor).reshape(-1)
                return
            connection = self._streams[endpoint.name]
            n = endpoint.numel
            if connection["callback"] is not None:
                if to_device:
                    buffer = np.zeros(n, dtype=endpoint.dtype.numpy)
                    connection["callback"](buffer)
                    data.write(tensor, buffer)
                else:
                    connection["callback"](data.read(tensor).reshape(-1))
                return
            buffer = connection["buffer"]
            if buffer is None or n == 0:
                return
            index = (connection["pos"] + np.arange(n)) % buffer.size
            if to_device:
                data.write(tensor, buffer[index])
            else:
                buffer[index] = data.read(tensor).reshape(-1)
            connection["pos"] = (connection["pos"] + n) % buffer.size

    def _run_vertices(self, batch) -> None:
        data = self._device()
        vtype = batch.vtype
        for i in range(batch.n):
            fields: dict[str, np.ndarray] = {}
            regions: dict[str, np.ndarray] = {}
            for name, (vidx, var, start, length) in batch.fields.items():
                rows = np.flatnonzero(vidx == i)
                parts = [data.array(int(var[r]))[int(start[r]) : int(start[r]) + int(length[r])] for r in rows]
                fields[name] = np.concatenate(parts).copy() if parts else np.zeros(0)
                regions[name] = rows
            for name, values in batch.params.items():
                fields[name] = values[i]
            vtype.compute(fields)
            for name, (_vidx, var, start, length) in batch.fields.items():
                if not vtype.get_field(name).writes:
                    continue
                pos = 0
                for r in regions[name]:
                    a, n = int(start[r]), int(length[r])
                    data.array(int(var[r]))[a : a + n] = fields[name][pos : pos + n]
                    pos += n

    # -- timing -----------------------------------------------------------------------------

    def _template(self, p: LProg) -> StepTemplate:
        found = self._templates.get(p.id)
        if found is not None:
            self._templates.move_to_end(p.id)
            return found
        if p.type == "Sync":
            assert p.sync is not None, "a Sync names its type"
            base = self._sync_base(p.sync)
            tpl = StepTemplate("Sync", p.id, p.name, base.cycles)
            tpl.sync, tpl.dynamic, tpl.stats = p.sync, base.dynamic, base.stats
            return tpl
        n = self._n
        t = p.type
        active = recv = sent = None
        if t == "OnTileExecute":
            info = self._cs_info(p)
            cycles = info.cycles
            active = info.active
        else:
            plan = p.plan
            assert plan is not None, "an exchange or stream copy has a plan"
            recv, sent = plan.recv, plan.sent
            if t == "StreamCopyBegin":
                cycles = Sparse(plan.cycles.idx, np.full(plan.cycles.idx.size, 16), n)
                recv = sent = None
            elif t == "StreamCopyEnd":
                cycles = Sparse(plan.cycles.idx, np.full(plan.cycles.idx.size, 8), n)
                recv = sent = None
            elif t == "GlobalExchange" and self.options.external_exchange == "Off":
                cycles = Sparse([], [], n)
            else:
                cycles = plan.cycles
        tpl = StepTemplate(t, p.id, p.name, cycles)
        tpl.sync = p.sync if t == "Sync" else None
        tpl.dynamic = t == "Sync" and p.sync != "Internal"
        if t == "OnTileExecute":
            tpl.cs = p.cs
            info = self._cs_info(p)
            tpl.vertex_rows = [(v.type_id, v.count, v.active) for v in info.vertices]
        tpl.active = active
        tpl.recv, tpl.sent = recv, sent
        tpl.stats = _ipu_stats(cycles, self.num_ipus, self.tiles_per_ipu, active, recv, sent)
        self._templates[p.id] = tpl
        if len(self._templates) > self.TEMPLATE_CACHE:
            self._templates.popitem(last=False)
        return tpl

    def _sync_base(self, sync_type: str) -> StepTemplate:
        """The cycles of a sync of one type on every tile (shared by all syncs of that type)."""
        key = "sync:" + sync_type
        found = self._implicit.get(key)
        if found is None:
            n = self._n
            a = self.graph.target.arch
            delay = self.graph.target.min_sync_delay if sync_type == "Internal" else a.global_sync_cycles
            cycles = Sparse(np.arange(n), delay + self._sync_delays, n)
            found = StepTemplate("Sync", None, "", cycles)
            found.sync = sync_type
            found.dynamic = sync_type != "Internal"
            found.stats = _ipu_stats(cycles, self.num_ipus, self.tiles_per_ipu, None, None, None)
            self._implicit[key] = found
        return found

    def _external_sync(self) -> StepTemplate:
        found = self._implicit.get("External")
        if found is None:
            n = self._n
            cycles = Sparse(np.arange(n), self.graph.target.arch.host_sync_cycles + self._sync_delays, n)
            found = StepTemplate("Sync", None, "hostSync", cycles)
            found.sync = "External"
            found.dynamic = True
            found.stats = _ipu_stats(cycles, self.num_ipus, self.tiles_per_ipu, None, None, None)
            self._implicit["External"] = found
        return found

    def _internal_sync(self) -> StepTemplate:
        found = self._implicit.get("Internal")
        if found is None:
            n = self._n
            cycles = Sparse(np.arange(n), self.graph.target.min_sync_delay + self._sync_delays, n)
            found = StepTemplate("Sync", None, "instrumentationSync", cycles)
            found.sync = "Internal"
            found.stats = _ipu_stats(cycles, self.num_ipus, self.tiles_per_ipu, None, None, None)
            self._implicit["Internal"] = found
        return found

    def _overlap(self, tpl: StepTemplate, prev: LProg | None) -> int:
        """Cycles a compute set can start early on tiles that finished the exchange before it."""
        if prev is None or tpl.type != "OnTileExecute" or prev.type != "DoExchange":
            return 0
        assert tpl.program is not None
        if self.exe.progs[tpl.program].extra != prev.id:
            return 0
        found = tpl.overlap_after.get(prev.id)
        if found is not None:
            return found
        assert prev.plan is not None
        exch = prev.plan.cycles.dense().reshape(self.num_ipus, self.tiles_per_ipu)
        comp = tpl.cycles.dense().reshape(self.num_ipus, self.tiles_per_ipu)
        best = None
        for i in range(self.num_ipus):
            act = comp[i] > 0
            if not act.any():
                continue
            slack = int(exch[i].max() - exch[i][act].max())
            best = slack if best is None else min(best, slack)
        tpl.overlap_after[prev.id] = best or 0
        return best or 0

    def _step(self, p: LProg) -> None:
        if self.functional and (p.op is not None or p.type == "OnTileExecute"):
            self._apply(p)
        if not self._recording:
            self._prev_program = p
            return
        if self._io is not None and p.type.startswith("StreamCopy") and self._on_io_tiles(p):
            self._io_step(p)
            self._prev_program = p
            return
        if p.type == "StreamCopyBegin":
            self._emit(self._external_sync(), 0)
        device_level = self.options.compute in ("Device",) and p.type == "OnTileExecute"
        if device_level:
            self._emit(self._internal_sync(), 0)
        tpl = self._template(p)
        self._emit(tpl, self._overlap(tpl, self._prev_program))
        if device_level:
            self._emit(self._internal_sync(), 0)
        self._prev_program = p

    def _emit(self, tpl: StepTemplate, overlap: int) -> None:
        wait = None
        if tpl.dynamic:
            wait = int(self.clock.max()) - self.clock
        if tpl.type == "Sync" and tpl.name != "ioHostSync":
            tpl, overlap = self._with_waiting(tpl)
        else:
            self._account_idle(tpl, overlap)
        assert self._sink is not None
        self._sink.step(tpl, overlap, self.clock, wait)
        if (
            self._io is not None
            and tpl.sync != "Internal"
            and tpl.name != "ioHostSync"
            and tpl.cycles.idx.size
            and self._io[tpl.cycles.idx].any()
            and not (tpl.program is not None and self._io_only.get(tpl.program))
        ):
            busy = _segment(tpl.cycles, self.num_ipus, self.tiles_per_ipu, np.maximum) > 0
            self._io_free = np.where(busy, self.clock, self._io_free)
            self._io_used = np.where(busy, 0, self._io_used)

    # -- overlapped I/O ---------------------------------------------------------------------

    def _on_io_tiles(self, p: LProg) -> bool:
        """Whether a stream copy moves data only on I/O tiles."""
        found = self._io_only.get(p.id)
        if found is None:
            assert self._io is not None
            tiles = p.plan.cycles.idx if p.plan is not None else np.zeros(0, dtype=np.int64)
            found = bool(tiles.size) and bool(self._io[tiles].all())
            self._io_only[p.id] = found
        return found

    def _io_step(self, p: LProg) -> None:
        """A stream copy on I/O tiles: it runs while the compute tiles go on with earlier steps.

        Its host sync involves the I/O tiles only, and both start as early as the I/O tiles are
        free (no earlier than the steps before them began), so they overlap compute steps.
        """
        steps = [self._io_sync(p), self._template(p)] if p.type == "StreamCopyBegin" else [self._template(p)]
        for tpl in steps:
            span = tpl.stats["span"]
            active = span > 0
            # the I/O tiles' free time since they were last busy, less the copies already put there
            free = np.maximum(self.clock - self._io_free - self._io_used, 0)
            overlap = int(np.minimum(span, free)[active].min()) if active.any() else 0
            self._emit(tpl, overlap)
            self._io_used += np.where(active, span, 0)

    def _io_sync(self, p: LProg) -> StepTemplate:
        key = "io:" + str(p.id)
        found = self._implicit.get(key)
        if found is None:
            assert p.plan is not None
            tiles = p.plan.cycles.idx
            n = self._n
            cycles = Sparse(tiles, self.graph.target.arch.host_sync_cycles + self._sync_delays[tiles], n)
            found = StepTemplate("Sync", None, "ioHostSync", cycles)
            found.sync = "External"
            found.stats = _ipu_stats(cycles, self.num_ipus, self.tiles_per_ipu, None, None, None)
            self._implicit[key] = found
        return found

    def _account_idle(self, tpl: StepTemplate, overlap: int) -> None:
        """Add the cycles each tile idles in this step (the IPU's span minus its own) to its wait."""
        span = tpl.stats["span"]
        advance = span - np.minimum(overlap, span)
        if self.num_ipus == 1:
            self._idle += int(advance[0])
        else:
            self._idle += np.repeat(advance, self.tiles_per_ipu)
        cycles = tpl.cycles
        if cycles.idx.size:
            self._idle[cycles.idx] -= cycles.val

    def _with_waiting(self, tpl: StepTemplate):
        """A sync whose cycles on each tile include the time it waited there for the slowest tile.

        Bulk-synchronous execution (seed 003): a tile that ends its compute or exchange early
        waits at the next sync, so that wait is sync time. The waiting started during the steps
        before, so the sync begins that much earlier (returned as its overlap, per IPU).
        """
        idle = np.maximum(self._idle, 0)
        self._idle[:] = 0
        if not idle.any():
            return tpl, 0
        own = tpl.cycles.dense()
        total = own + idle
        span = tpl.stats["span"]
        T = self.tiles_per_ipu
        # one early start for the step: the smallest over the IPUs (a single IPU's is exact)
        early = int((total.reshape(self.num_ipus, T).max(axis=1) - span).min())
        if early <= 0:
            return tpl, 0
        total = np.minimum(total, np.repeat(span + early, T))
        cycles = Sparse(np.arange(self._n), total, self._n)
        found = StepTemplate("Sync", tpl.program, tpl.name, cycles)
        found.sync, found.dynamic = tpl.sync, tpl.dynamic
        found.stats = _ipu_stats(cycles, self.num_ipus, self.tiles_per_ipu, None, None, None)
        return found, early

    # -- reports ----------------------------------------------------------------------------

    def _report_session(self):
        if self._report is None:
            from .report import ReportSession

            self._report = ReportSession(self)
            if self._report.writer is not None:
                # an engine dropped without close() leaves no temporary file behind
                weakref.finalize(self, self._report.writer.abort)
        return self._report

    def writeReport(self) -> str | None:
        """Close the engine, writing the requested reports; returns their directory or None."""
        self.close()
        return self._report.directory if self._report is not None else None

    def close(self) -> None:
        """Finish: write the reports the options ask for."""
        if self._closed:
            return
        self._closed = True
        if self.options.any_report:
            self._report_session().close()

    def abort(self) -> None:
        """Discard any report being written."""
        self._closed = True
        if self._report is not None:
            self._report.abort()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __repr__(self) -> str:
        return (
            f"<Engine {len(self.exe.progs):,} programs, {len(self.exe.compute_sets):,} compute sets, "
            f"{self.run_count} run(s)>"
        )


def cycles_to_microseconds(cycles: int, clock: float) -> int:
    return int(math.ceil(cycles / clock * 1e6))
