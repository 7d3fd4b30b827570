"""Variable liveness over the program tree (seed 002 section 1.3, seed 003 "Variable liveness").

A variable is live at a step if its value may still be read. It is killed only where all of
its elements are written by one compute set (or one copy), or by WriteUndef. The analysis is
the standard backward data flow, over whole variables, on the lowered program tree; loops are
iterated to a fixed point and calls are expanded, so the steps are "all possible call stacks"
in depth-first order. Live sets are Python integers used as bit sets of liveness classes.
Memory keeps its values between runs, so the control program's live-out is its own live-in;
a class live at every step is always live.
"""

from __future__ import annotations

import sys

import numpy as np

from .lowering import LProg
from .regions import Sparse

_LEAVES = {
    "OnTileExecute",
    "DoExchange",
    "GlobalExchange",
    "StreamCopyBegin",
    "StreamCopyMid",
    "StreamCopyEnd",
    "Sync",
    "WriteUndef",
    "SetLocalConsensusFromVar",
}


class LivenessResult:
    """Liveness steps, class intervals and per-tile peaks of not-always-live memory."""

    def __init__(self) -> None:
        self.step_program: list[int] = []
        self.step_parent: list[int | None] = []
        self.step_depth: list[int] = []
        self.step_bytes: list[int] = []
        self.step_ipu_bytes: list[np.ndarray] = []
        self.intervals: list[tuple[int, int, int]] = []  # (class, start, end)
        self.peak_by_tile: np.ndarray = np.zeros(0, dtype=np.int64)  # set by Liveness.run

    @property
    def num_steps(self) -> int:
        return len(self.step_program)


class Liveness:
    """Runs the analysis over one lowered program forest."""

    def __init__(
        self, progs: list[LProg], class_bytes: list[Sparse], n_tiles: int, tiles_per_ipu: int, always: int = 0
    ) -> None:
        self.progs = progs
        self.class_bytes = class_bytes
        self.n = n_tiles
        self.tiles_per_ipu = tiles_per_ipu
        self.num_ipus = max(1, n_tiles // tiles_per_ipu)
        self.always = always
        self.result = LivenessResult()
        self._open: dict[int, int] = {}
        self._prev = 0
        self._cur_tile = np.zeros(n_tiles, dtype=np.int64)
        self._peak = np.zeros(n_tiles, dtype=np.int64)
        self._cur_ipu = np.zeros(self.num_ipus, dtype=np.int64)
        self._ipu_cache: dict[int, np.ndarray] = {}

    # -- transfer functions -----------------------------------------------------------------

    def live_in(self, p: LProg, out: int) -> int:
        t = p.type
        if t in _LEAVES:
            return p.uses | (out & ~p.kills)
        if t == "Sequence":
            for child in reversed(p.children):
                out = self.live_in(child, out)
            return out
        if t == "Repeat":
            return self._repeat_in(p, out)[0]
        if t == "RepeatWhile":
            return self._while_in(p, out)[0]
        if t == "IfElse":
            return self.live_in(p.children[0], out) | self.live_in(p.children[1], out)
        if t == "OnEveryTileSwitch":
            acc = p.uses
            for child in p.children:
                acc |= self.live_in(child, out)
            return acc
        if t == "Call":
            assert p.call is not None, "a Call names its function"
            return self.live_in(self.progs[p.call], out)
        return p.uses | (out & ~p.kills)

    def _repeat_in(self, p: LProg, out: int) -> tuple[int, int]:
        body = p.children[0]
        if not p.repeat:
            return out, out
        x = self.live_in(body, out)
        for _ in range(64):
            y = self.live_in(body, out | x)
            if y == x:
                break
            x = y
        return x, out | x

    def _while_in(self, p: LProg, out: int) -> tuple[int, int, int]:
        cond, body = p.children
        in_body = 0
        in_cond = self.live_in(cond, out)
        for _ in range(64):
            in_body_new = self.live_in(body, in_cond)
            in_cond_new = self.live_in(cond, out | in_body_new)
            if in_body_new == in_body and in_cond_new == in_cond:
                break
            in_body, in_cond = in_body_new, in_cond_new
        return in_cond, in_body, out | in_body

    # -- recording --------------------------------------------------------------------------

    def _class_ipu(self, cls: int) -> np.ndarray:
        found = self._ipu_cache.get(cls)
        if found is None:
            b = self.class_bytes[cls]
            found = np.bincount(b.idx // self.tiles_per_ipu, weights=b.val, minlength=self.num_ipus).astype(np.int64)
            self._ipu_cache[cls] = found
        return found

    def _emit(self, program: int, parent: int | None, depth: int, live: int) -> int:
        r = self.result
        step = len(r.step_program)
        live |= self.always
        changed = live ^ self._prev
        born = []
        while changed:
            low = changed & -changed
            cls = low.bit_length() - 1
            changed ^= low
            b = self.class_bytes[cls]
            if live & low:
                self._open[cls] = step
                self._cur_tile[b.idx] += b.val
                self._cur_ipu += self._class_ipu(cls)
                born.append(cls)
            else:
                r.intervals.append((cls, self._open.pop(cls), step))
                self._cur_tile[b.idx] -= b.val
                self._cur_ipu -= self._class_ipu(cls)
        for cls in born:
            idx = self.class_bytes[cls].idx
            self._peak[idx] = np.maximum(self._peak[idx], self._cur_tile[idx])
        self._prev = live
        r.step_program.append(program)
        r.step_parent.append(parent)
        r.step_depth.append(depth)
        r.step_ipu_bytes.append(self._cur_ipu.copy())
        r.step_bytes.append(int(self._cur_ipu.sum()))
        return step

    def record(self, p: LProg, out: int, parent: int | None, depth: int, known_in: int | None = None) -> int:
        """Emit the steps of `p` and its subtree; return the live-in of `p`."""
        t = p.type
        if t in _LEAVES:
            live_in = p.uses | (out & ~p.kills)
            self._emit(p.id, parent, depth, live_in | p.defs)
            return live_in
        if t == "Sequence":
            ins = [0] * len(p.children)
            acc = out
            for i in range(len(p.children) - 1, -1, -1):
                acc = self.live_in(p.children[i], acc)
                ins[i] = acc
            live_in = acc
            step = self._emit(p.id, parent, depth, live_in)
            for i, child in enumerate(p.children):
                child_out = ins[i + 1] if i + 1 < len(p.children) else out
                self.record(child, child_out, step, depth + 1, ins[i])
            return live_in
        if t == "Repeat":
            live_in, body_out = self._repeat_in(p, out)
            step = self._emit(p.id, parent, depth, live_in)
            self.record(p.children[0], body_out, step, depth + 1)
            return live_in
        if t == "RepeatWhile":
            in_cond, in_body, cond_out = self._while_in(p, out)
            step = self._emit(p.id, parent, depth, in_cond)
            self.record(p.children[0], cond_out, step, depth + 1)
            self.record(p.children[1], in_cond, step, depth + 1)
            return in_cond
        if t in ("IfElse", "OnEveryTileSwitch"):
            live_in = known_in if known_in is not None else self.live_in(p, out)
            step = self._emit(p.id, parent, depth, live_in)
            for child in p.children:
                self.record(child, out, step, depth + 1)
            return live_in
        if t == "Call":
            live_in = known_in if known_in is not None else self.live_in(p, out)
            step = self._emit(p.id, parent, depth, live_in)
            assert p.call is not None, "a Call names its function"
            self.record(self.progs[p.call], out, step, depth + 1)
            return live_in
        live_in = p.uses | (out & ~p.kills)
        self._emit(p.id, parent, depth, live_in | p.defs)
        return live_in

    def promote_always_live(self) -> list[int]:
        """Classes live at every step become always live (seed 003: "Always-live variables").

        Their bytes leave every step's not-always-live figure and the per-tile peaks; their
        intervals are dropped. Returns the promoted classes.
        """
        r = self.result
        end = r.num_steps
        if end == 0:
            return []
        count: dict[int, int] = {}
        for cls, _, _ in r.intervals:
            count[cls] = count.get(cls, 0) + 1
        promoted = [
            cls
            for cls, start, stop in r.intervals
            if start == 0 and stop >= end and count[cls] == 1 and self.class_bytes[cls]
        ]
        if not promoted:
            return []
        chosen = set(promoted)
        r.intervals = [i for i in r.intervals if i[0] not in chosen]
        ipu = np.zeros(self.num_ipus, dtype=np.int64)
        tile = np.zeros(self.n, dtype=np.int64)
        for cls in promoted:
            ipu += self._class_ipu(cls)
            b = self.class_bytes[cls]
            tile[b.idx] += b.val
        total = int(ipu.sum())
        r.step_bytes = [b - total for b in r.step_bytes]
        r.step_ipu_bytes = [b - ipu for b in r.step_ipu_bytes]
        r.peak_by_tile = np.maximum(r.peak_by_tile - tile, 0)
        return promoted

    def run(self, root: LProg) -> LivenessResult:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 20_000))
        try:
            # device memory persists between runs and any program may run next, so what the
            # control program reads before writing is live at its end too
            out = 0
            for _ in range(64):
                found = self.live_in(root, out) | self.always
                if found == out:
                    break
                out = found
            self.record(root, out, None, 0)
        finally:
            sys.setrecursionlimit(limit)
        r = self.result
        end = r.num_steps
        for cls, start in self._open.items():
            r.intervals.append((cls, start, end))
        self._open.clear()
        r.peak_by_tile = self._peak
        return r
