"""Program lowering: user programs become the lowered program tree of the report.

Execute becomes OnTileExecute with the DoExchange/GlobalExchange programs its vertices need and
the syncs before them; Copy becomes on-tile copy vertices, DoExchange, GlobalExchange or
StreamCopyBegin/Mid/End; If becomes SetLocalConsensusFromVar, Sync, IfElse; Switch becomes a
control broadcast and OnEveryTileSwitch; Call refers to the lowered function.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import programs as P
from ..errors import GraphError
from ..graph import ComputeSetDef, DataStream, GraphState, RemoteBuffer
from ..tensor import Tensor
from .exchange import ExchangePlan, host_plan, pieces_plan
from .regions import Sparse, align_regions, fully_covered, split_by_mapping


class LProg:
    """One lowered program: a row of the programs table plus what the engine needs to run it."""

    __slots__ = (
        "id",
        "type",
        "name",
        "children",
        "cs",
        "repeat",
        "sync",
        "sct",
        "call",
        "num_tiles",
        "debug",
        "plan",
        "code",
        "uses",
        "defs",
        "kills",
        "lv_keys",
        "op",
        "extra",
        "classes",
    )

    def __init__(self, prog_id: int, type_: str, name: str, debug: list[int]) -> None:
        self.id = prog_id
        self.type = type_
        self.name = name
        self.children: list[LProg] = []
        self.cs: int | None = None
        self.repeat: int | None = None
        self.sync: str | None = None
        self.sct: str | None = None
        self.call: int | None = None
        self.num_tiles: int | None = None
        self.debug = debug
        self.plan: ExchangePlan | None = None
        self.code: tuple[int, Sparse | None] = (0, None)  # (bytes on every tile, extra bytes by tile)
        self.uses = 0
        self.defs = 0
        self.kills = 0
        self.lv_keys: np.ndarray | None = None
        self.op: tuple | None = None  # what a stream or copy program does, for the engine
        self.extra: Any = None  # an OnTileExecute's exchange program id; a loop's parameters
        self.classes: list[int] = []  # liveness classes (message buffers) whose lowered vars it uses

    def __repr__(self) -> str:
        return f"<LProg {self.id} {self.type} {self.name!r}>"


def _memory_runs(var: np.ndarray, tile: np.ndarray, start: np.ndarray, end: np.ndarray, n: int) -> Sparse:
    """Regions per tile of pieces sent in memory order (a copy rearranged on the host): pieces of
    one variable on one tile that overlap or touch are one run, whatever their order."""
    order = np.lexsort((start, tile, var))
    v, t, s, e = var[order], tile[order], start[order], end[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = (v[1:] != v[:-1]) | (t[1:] != t[:-1])
    # the furthest end so far of each (variable, tile): a running maximum restarted at each group
    # by an offset above every earlier end
    offset = (np.cumsum(first) - 1) * (int(e.max(initial=0)) + 1)
    reach = np.maximum.accumulate(e + offset) - offset
    starts_run = first.copy()
    starts_run[1:] |= s[1:] > reach[:-1]
    return Sparse.from_pairs(t[starts_run], np.ones(int(starts_run.sum())), n)


def _bits(ids) -> int:
    out = 0
    for i in ids:
        out |= 1 << int(i)
    return out


class Lowerer:
    """Lowers user programs, analysing compute sets and planning exchanges on the way."""

    def __init__(self, state: GraphState, target, n_tiles: int, compute_sets: list, analyse, classes) -> None:
        self.state = state
        self.target = target
        self.n = n_tiles
        self.compute_sets = compute_sets  # ComputeSetDef list (user and compiler-made)
        self.analyse = analyse  # cs id -> CSInfo (cached)
        self.classes = classes
        self.progs: list[LProg] = []
        self.function_roots: dict[int, LProg] = {}
        self._in_progress: list[int] = []
        self._msg_classes: dict[tuple[int, str], int] = {}
        self.multi_ipu = n_tiles > target.tiles_per_ipu

    # -- helpers ----------------------------------------------------------------------------

    def new(self, type_: str, name: str, debug: list[int], **attrs) -> LProg:
        prog = LProg(len(self.progs), type_, name, debug)
        for key, value in attrs.items():
            setattr(prog, key, value)
        self.progs.append(prog)
        return prog

    def _debug(self, program: P.Program) -> list[int]:
        ctx = program.debug_ids
        if ctx is None:
            parent = None
            if program.scope is not None and program.scope[0] is self.state.debug:
                parent = program.scope[1]
            ctx = [
                self.state.debug.new(
                    program.name or program.kind,
                    "poplar",
                    {"kind": program.kind},
                    parent=parent,
                    location=program.location,
                )
            ]
            program.debug_ids = ctx
        return ctx

    def _all_tiles(self, value: int) -> tuple[int, Sparse | None]:
        return (value, None)

    def _sync(self, sync_type: str, debug: list[int]) -> LProg:
        return self.new("Sync", "", debug, sync=sync_type, code=self._all_tiles(4))

    def _global_sync(self) -> str:
        return "GS1"

    def _single(self, progs: list[LProg], debug: list[int]) -> LProg:
        if len(progs) == 1:
            return progs[0]
        seq = self.new("Sequence", "", debug)
        seq.children = self._with_syncs(progs)
        return seq

    def _with_syncs(self, progs: list[LProg]) -> list[LProg]:
        out: list[LProg] = []
        for p in progs:
            if p.type == "Sync" and out and out[-1].type == "Sync" and out[-1].sync == p.sync:
                continue
            out.append(p)
        return out

    def _exchange(self, plan: ExchangePlan, name: str, debug: list[int]) -> list[LProg]:
        if plan.kind == "internal":
            prog = self.new(
                "DoExchange",
                name,
                debug,
                plan=plan,
                code=(0, Sparse(plan.code.idx, np.full(plan.code.idx.size, 8), self.n)),
            )
            return [self._sync("Internal", debug), prog]
        prog = self.new(
            "GlobalExchange",
            name,
            debug,
            plan=plan,
            sync=self._global_sync(),
            code=(0, Sparse(plan.code.idx, np.full(plan.code.idx.size, 12), self.n)),
        )
        return [self._sync(self._global_sync(), debug), prog]

    def message_class(self, cs_id: int, kind: str, plan: ExchangePlan | _Holder) -> int:
        key = (cs_id, kind)
        found = self._msg_classes.get(key)
        if found is None:
            label = "message" if plan.message_category == "message" else plan.message_category
            name = f"<{label}:{self.compute_sets[cs_id].name}>"
            found = self.classes.new(name, plan.message_category, plan.message)
            self._msg_classes[key] = found
        return found

    def compact(self, roots: list[LProg]) -> None:
        """Drop programs no root reaches (syncs merged away) and renumber the rest in order."""
        by_id = {p.id: p for p in self.progs}
        seen: set[int] = set()
        stack = list(roots)
        while stack:
            p = stack.pop()
            if p.id in seen:
                continue
            seen.add(p.id)
            stack.extend(p.children)
            if p.call is not None:
                stack.append(by_id[p.call])
        kept = [p for p in self.progs if p.id in seen]
        new_id = {p.id: i for i, p in enumerate(kept)}
        for p in kept:
            if p.call is not None:
                p.call = new_id[p.call]
            if p.type == "OnTileExecute" and p.extra is not None:
                p.extra = new_id.get(p.extra)
        for p in kept:
            p.id = new_id[p.id]
        self.progs = kept

    # -- entry points -----------------------------------------------------------------------

    def lower_function(self, fn) -> LProg:
        found = self.function_roots.get(fn.id)
        if found is not None:
            return found
        if fn.id in self._in_progress:
            cycle = self._in_progress[self._in_progress.index(fn.id) :] + [fn.id]
            names = " -> ".join(repr(self.state.functions[i].name) for i in cycle)
            raise GraphError(
                f"function calls form a cycle: {names}; a function may not call itself directly or indirectly"
            )
        self._in_progress.append(fn.id)
        debug = [fn.debug]
        lowered = self.lower(fn.program)
        root = self.new("Sequence", fn.name, debug)
        root.children = self._with_syncs(lowered)
        self._in_progress.pop()
        self.function_roots[fn.id] = root
        return root

    def lower(self, program: P.Program) -> list[LProg]:
        if not isinstance(program, P.Program):
            raise GraphError(f"expected a program, got {type(program).__name__}")
        method = getattr(self, "_lower_" + type(program).__name__, None)
        if method is None:
            for base in type(program).__mro__:
                method = getattr(self, "_lower_" + base.__name__, None)
                if method is not None:
                    break
        if method is None:
            raise GraphError(f"a {type(program).__name__} is not a control program the engine can run")
        return method(program)

    # -- per program kind -------------------------------------------------------------------

    def _lower_Sequence(self, p: P.Sequence) -> list[LProg]:
        debug = self._debug(p)
        node = self.new("Sequence", p.name, debug)
        children: list[LProg] = []
        for child in p.programs:
            children.extend(self.lower(child))
        node.children = self._with_syncs(children)
        return [node]

    def _lower_Repeat(self, p: P.Repeat) -> list[LProg]:
        debug = self._debug(p)
        node = self.new("Repeat", p.name, debug, repeat=p.count, code=self._all_tiles(16))
        node.children = [self._single(self.lower(p.body), debug)]
        return [node]

    def _consensus(self, predicate: Tensor, debug: list[int]) -> list[LProg]:
        var_ids = predicate.variable_ids()
        node = self.new(
            "SetLocalConsensusFromVar", "", debug, code=self._all_tiles(8), uses=_bits(var_ids), extra=predicate
        )
        return [node, self._sync(self._global_sync() if self.multi_ipu else "Internal", debug)]

    def _lower_RepeatWhileTrue(self, p: P.RepeatWhileTrue) -> list[LProg]:
        debug = self._debug(p)
        node = self.new(
            "RepeatWhile",
            p.name,
            debug,
            code=self._all_tiles(24),
            extra=(p.predicate, p.until, p.simulated_iterations, p.max_iterations),
        )
        cond = self.lower(p.cond) + self._consensus(p.predicate, debug)
        cond_seq = self.new("Sequence", "", debug)
        cond_seq.children = self._with_syncs(cond)
        node.children = [cond_seq, self._single(self.lower(p.body), debug)]
        return [node]

    def _lower_Execute(self, p: P.Execute) -> list[LProg]:
        debug = self._debug(p)
        cs_id = p.compute_set.id
        info = self.analyse(cs_id)
        cs_debug = debug + [info.debug]
        name = p.name or info.name
        out: list[LProg] = []
        msg_classes = []
        for plan, suffix, kind in ((info.pre, "ExchangePre", "pre"), (info.pre_global, "GlobalPre", "preg")):
            if plan is None:
                continue
            cls = self.message_class(cs_id, kind, plan)
            msg_classes.append(cls)
            progs = self._exchange(plan, f"{name}/{suffix}", cs_debug)
            progs[-1].uses = _bits(info.reads)
            progs[-1].defs = progs[-1].kills = 1 << cls
            progs[-1].classes = [cls]
            out.extend(progs)
        counts = info.vertex_tiles
        code = Sparse(counts.idx, 12 + 4 * counts.val, self.n)
        rearr = []
        if info.rearrangement is not None and info.rearrangement:
            rearr = [self.message_class(cs_id, "rearrangement", _Holder(info.rearrangement, "rearrangement"))]
        edge_classes = []
        for plan, kind in ((info.post, "post"), (info.post_global, "postg")):
            if plan is not None:
                edge_classes.append(self.message_class(cs_id, kind, plan))
        ote = self.new("OnTileExecute", name, cs_debug, cs=cs_id, code=(0, code))
        pre = [q for q in out if q.type == "DoExchange"]
        ote.extra = pre[-1].id if pre else None
        ote.uses = _bits(info.reads) | _bits(msg_classes) | _bits(rearr)
        ote.defs = _bits(info.writes) | _bits(edge_classes) | _bits(rearr)
        ote.kills = _bits(info.kills) | _bits(edge_classes)
        ote.lv_keys = info.lv_keys
        ote.classes = msg_classes + edge_classes + rearr
        out.append(ote)
        for plan, suffix, kind in ((info.post, "ExchangePost", "post"), (info.post_global, "GlobalPost", "postg")):
            if plan is None:
                continue
            cls = self.message_class(cs_id, kind, plan)
            progs = self._exchange(plan, f"{name}/{suffix}", cs_debug)
            progs[-1].uses = 1 << cls
            progs[-1].defs = _bits(info.writes)
            progs[-1].classes = [cls]
            out.extend(progs)
        return out

    def _lower_Copy(self, p: P.Copy) -> list[LProg]:
        debug = self._debug(p)
        src, dst = p.src, p.dst
        if isinstance(src, Tensor) and isinstance(dst, Tensor):
            return self._copy_tensors(p, src, dst, debug)
        if isinstance(src, DataStream) or isinstance(dst, DataStream):
            stream = src if isinstance(src, DataStream) else dst
            tensor = dst if isinstance(src, DataStream) else src
            if isinstance(src, DataStream) and src.direction != "HostToDevice":
                raise GraphError(f"stream {src.name!r} is device-to-host; it cannot be copied into a tensor")
            if isinstance(dst, DataStream) and dst.direction != "DeviceToHost":
                raise GraphError(f"stream {dst.name!r} is host-to-device; a tensor cannot be copied into it")
            if tensor.numElements() != stream.numel or tensor.dtype != stream.dtype:
                raise GraphError(
                    f"stream {stream.name!r} carries {stream.numel} x {stream.dtype} but the tensor has "
                    f"{tensor.numElements()} x {tensor.dtype}"
                )
            return self._stream_copy(
                p,
                tensor,
                to_device=isinstance(src, DataStream),
                name=p.name or stream.name,
                debug=debug + [stream.debug],
                sct="Host",
                endpoint=stream,
                rearranged_on_host=p.optimiseMemory,
            )
        buffer = src if isinstance(src, RemoteBuffer) else dst
        tensor = dst if isinstance(src, RemoteBuffer) else src
        if tensor.numElements() != buffer.numel or tensor.dtype != buffer.dtype:
            raise GraphError(
                f"remote buffer {buffer.name!r} rows hold {buffer.numel} x {buffer.dtype} but the tensor has "
                f"{tensor.numElements()} x {tensor.dtype}"
            )
        if not 0 <= p.offset < buffer.repeats:
            raise GraphError(f"remote buffer {buffer.name!r} has {buffer.repeats} rows; row {p.offset} does not exist")
        return self._stream_copy(
            p,
            tensor,
            to_device=isinstance(src, RemoteBuffer),
            name=p.name or buffer.name,
            debug=debug + [buffer.debug],
            sct="RemoteBuffer",
            endpoint=buffer,
        )

    def _stream_copy(
        self,
        p,
        tensor: Tensor,
        to_device: bool,
        name: str,
        debug: list[int],
        sct: str,
        endpoint,
        op=None,
        rearranged_on_host: bool = False,
    ) -> list[LProg]:
        row, tiles, pstart, plen = split_by_mapping(self.state, tensor.vars, tensor.starts, tensor.lengths)
        nbytes = plen * tensor.dtype.size
        data = Sparse.from_pairs(tiles, nbytes, self.n)
        empty = Sparse([], [], self.n)
        if rearranged_on_host:
            regions = _memory_runs(tensor.vars[row], tiles, pstart, pstart + plen, self.n)
        else:
            regions = Sparse.from_pairs(tiles, np.ones(tiles.size), self.n)
        plan = host_plan(self.target, self.n, data if to_device else empty, empty if to_device else data, regions)
        participants = plan.cycles.idx
        code = Sparse(participants, np.full(participants.size, 8), self.n)
        begin = self.new("StreamCopyBegin", name, debug, plan=plan, code=(0, code))
        mid = self.new("StreamCopyMid", name, debug, plan=plan, sct=sct, code=(0, code))
        end = self.new("StreamCopyEnd", name, debug, plan=plan, code=(0, code))
        var_ids = tensor.variable_ids()
        keys = np.unique(tensor.vars[row] * self.n + tiles) if row.size else np.zeros(0, np.int64)
        mid.lv_keys = keys
        if to_device:
            mid.defs = _bits(var_ids)
            mid.kills = _bits(fully_covered(self.state, tensor.vars, tensor.starts, tensor.lengths))
        else:
            mid.uses = _bits(var_ids)
        mid.op = op if op is not None else ("stream", p, tensor, endpoint, to_device)
        out = [begin, mid, end]
        if to_device:
            out.append(self._sync("Internal", debug))
        return out

    def _copy_tensors(self, p: P.Copy, src: Tensor, dst: Tensor, debug: list[int]) -> list[LProg]:
        state = self.state
        if src.numElements() == 0:
            return []
        sv, ss, dv, ds, ln = align_regions(src.vars, src.starts, src.lengths, dst.vars, dst.starts, dst.lengths)
        row, dtile, dps, dpl = split_by_mapping(state, dv, ds, ln)
        sps = ss[row] + (dps - ds[row])
        row2, stile, sps2, spl2 = split_by_mapping(state, sv[row], sps, dpl)
        piece_sv = sv[row][row2]
        piece_dv = dv[row][row2]
        piece_dt = dtile[row2]
        piece_ds = dps[row2] + (sps2 - sps[row2])
        elem = src.dtype.size
        base = p.name or f"copy/{state.vars[int(sv[0])].name}->{state.vars[int(dv[0])].name}"
        out: list[LProg] = []
        local = stile == piece_dt
        kills = _bits(fully_covered(state, dst.vars, dst.starts, dst.lengths))
        uses = _bits(src.variable_ids())
        defs = _bits(dst.variable_ids())
        keys = np.unique(np.concatenate((piece_sv * self.n + stile, piece_dv * self.n + piece_dt)))
        if local.any():
            cs = self._copy_compute_set(
                base,
                debug,
                stile[local],
                piece_sv[local],
                sps2[local],
                piece_dv[local],
                piece_ds[local],
                spl2[local],
                elem,
            )
            info = self.analyse(cs.id)
            counts = info.vertex_tiles
            ote = self.new(
                "OnTileExecute",
                cs.name,
                debug + [cs.debug],
                cs=cs.id,
                code=(0, Sparse(counts.idx, 12 + 4 * counts.val, self.n)),
            )
            ote.lv_keys = info.lv_keys
            out.append(ote)
        remote = ~local
        if remote.any():
            internal, glob = pieces_plan(
                self.target, self.n, stile[remote], piece_dt[remote], spl2[remote] * elem, message=False
            )
            if internal is not None:
                out.extend(self._exchange(internal, f"{base}/Exchange", debug))
                out[-1].lv_keys = keys
            if glob is not None:
                glob.message = glob.recv
                out.extend(self._exchange(glob, f"{base}/GlobalExchange", debug))
                cls = self.classes.new(f"<globalMessage:{base}>", "globalMessage", glob.recv)
                out[-1].classes = [cls]
                out[-1].lv_keys = keys
                out[-1].defs |= 1 << cls
                out[-1].kills |= 1 << cls
        work = [q for q in out if q.type in ("OnTileExecute", "DoExchange", "GlobalExchange")]
        for q in work:
            q.uses |= uses
            q.defs |= defs
        work[0].kills |= kills
        work[0].op = ("copy", src, dst)
        return out

    def _copy_compute_set(self, base, debug, tiles, sv, ss, dv, ds, ln, elem) -> ComputeSetDef:
        """A compiler-made compute set of copy vertices, one vertex per tile."""
        state = self.state
        cs = ComputeSetDef(len(self.compute_sets), f"{base}/OnTileCopy", debug[0], origin="compiler")
        self.compute_sets.append(cs)
        order = np.argsort(tiles, kind="stable")
        tiles, sv, ss, dv, ds, ln = tiles[order], sv[order], ss[order], dv[order], ds[order], ln[order]
        vertex_tiles, vidx = np.unique(tiles, return_inverse=True)
        nbytes = np.bincount(vidx, weights=ln * elem).astype(np.int64)
        regions = np.bincount(vidx).astype(np.int64)
        for kind_mask, type_name in (
            ((nbytes >= 256) & (regions == 1), "poplar_rt::Memcpy64BitSupervisor"),
            ((nbytes < 64) & (regions == 1), "poplar_rt::ShortMemcpy"),
            (~(((nbytes >= 256) & (regions == 1)) | ((nbytes < 64) & (regions == 1))), "poplar_rt::DstStridedCopyDA32"),
        ):
            chosen = np.flatnonzero(kind_mask)
            if chosen.size == 0:
                continue
            remap = np.full(vertex_tiles.size, -1, dtype=np.int64)
            remap[chosen] = np.arange(chosen.size)
            rows = np.flatnonzero(kind_mask[vidx])
            fields = {
                "src": (remap[vidx[rows]], sv[rows], ss[rows], ln[rows]),
                "dst": (remap[vidx[rows]], dv[rows], ds[rows], ln[rows]),
            }
            batch_type = state.vertex_type(type_name)
            from ..graph import VertexBatch

            cs.batches.append(
                VertexBatch(
                    batch_type, vertex_tiles[chosen], fields, {"bytes": nbytes[chosen], "regions": regions[chosen]}
                )
            )
            state.num_edges += 2 * rows.size
        return cs

    def _lower_If(self, p: P.If) -> list[LProg]:
        debug = self._debug(p)
        out = self._consensus(p.predicate, debug)
        node = self.new("IfElse", p.name, debug, code=self._all_tiles(16), extra=(p.predicate, p.simulated_value))
        node.children = [self._single(self.lower(p.then), debug), self._single(self.lower(p.else_), debug)]
        return out + [node]

    def broadcast(
        self, owner: int, nbytes: int, uses: int, name: str, debug: list[int], class_name: str
    ) -> tuple[list[LProg], int]:
        """Send a one-element control value from `owner` to every tile (switch control broadcast)."""
        dst = np.array([t for t in range(self.n) if t != owner], dtype=np.int64)
        sizes = np.full(dst.size, max(4, nbytes), dtype=np.int64)
        internal, glob = pieces_plan(
            self.target, self.n, np.full(dst.size, owner), dst, sizes, send_key=np.zeros(dst.size, dtype=np.int64)
        )
        cls = self.classes.new(class_name, "controlId", Sparse.constant(4, self.n))
        out: list[LProg] = []
        for plan in (internal, glob):
            if plan is None:
                continue
            progs = self._exchange(plan, name, debug)
            progs[-1].uses = uses
            progs[-1].defs = progs[-1].kills = 1 << cls
            progs[-1].classes = [cls]
            out.extend(progs)
        return out, cls

    def _lower_Switch(self, p: P.Switch) -> list[LProg]:
        debug = self._debug(p)
        control = p.control
        _, tiles, _, _ = split_by_mapping(self.state, control.vars, control.starts, control.lengths)
        out, cls = self.broadcast(
            int(tiles[0]),
            control.dtype.size,
            _bits(control.variable_ids()),
            f"switchControlBroadcast{len(self.progs)}/ExchangePre",
            debug,
            "broadcastControl",
        )
        node = self.new(
            "OnEveryTileSwitch",
            p.name,
            debug,
            code=self._all_tiles(8 + 4 * (len(p.cases) + 1)),
            extra=(p.control, [v for v, _ in p.cases], p.simulated_value),
            uses=1 << cls,
        )
        node.classes = [cls]
        node.children = [self._single(self.lower(c), debug) for c in p.children()]
        return out + [node]

    def _lower_Call(self, p: P.Call) -> list[LProg]:
        debug = self._debug(p)
        root = self.lower_function(p.function)
        return [self.new("Call", p.name, debug + [p.function.debug], call=root.id, code=self._all_tiles(8))]

    def _lower_WriteUndef(self, p: P.WriteUndef) -> list[LProg]:
        debug = self._debug(p)
        t = p.tensor
        return [
            self.new("WriteUndef", p.name, debug, kills=_bits(fully_covered(self.state, t.vars, t.starts, t.lengths)))
        ]

    def _lower_Sync(self, p: P.Sync) -> list[LProg]:
        debug = self._debug(p)
        sync = p.sync_type if self.multi_ipu else "Internal"
        return [self._sync(sync, debug)]

    def _lower_PrintTensor(self, p: P.PrintTensor) -> list[LProg]:
        debug = self._debug(p)
        return self._stream_copy(
            p,
            p.tensor,
            to_device=False,
            name=p.name or f"print/{p.title}",
            debug=debug,
            sct="Host",
            endpoint=None,
            op=("print", p.title, p.tensor),
        )


class _Holder:
    """An object with the message attributes of an ExchangePlan (for rearrangement buffers)."""

    def __init__(self, message: Sparse, category: str) -> None:
        self.message = message
        self.message_category = category
