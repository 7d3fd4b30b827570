"""Compile-time performance estimates in the layout of Cerebras' compile_report.txt (seed 000).

How the Cerebras terms map onto a Poplar compilation report:

* A **kernel** is a compute set that an OnTileExecute program runs.
* A kernel's **PEs** are the tiles on which its estimated cycles are non-zero; **Active PEs** overall
  is the share of tiles (of one replica) used by any kernel.
* **Compute delta-T** of a kernel is its estimated cycles on its slowest tile.
* **Transmission delta-T** of a kernel is the estimated cycles (slowest tile) of the exchanges
  (DoExchange, GlobalExchange, StreamCopyMid) that run between the previous OnTileExecute and it, in
  program order: the data it waits for.
* **Delta-T** follows seed 000: max(compute, transmission) when the kernel can overlap them, their
  sum when it cannot. On the IPU, compute and exchange are separate BSP phases on a tile, so a
  kernel overlaps them only when its exchanges use tiles disjoint from its compute tiles (for
  example stream copies through I/O tiles); otherwise the sum applies.
* A **sample** is one execution of the control programs (times `batch_size`). Kernels run one after
  another on the IPU, so the per-sample time is the sum over kernel executions of their delta-T
  (Repeat counts multiply executions); Samples/s = clock * batch / that time, and likewise
  Compute and Transmission Samples/s from the sums of the compute and transmission delta-Ts. A rate
  over no cycles (a kernel with no transmission) does not apply: "n/a" in the text, None in Python
  and null in JSON.
* **Compute Utilization** is the estimated compute cycles summed over active tiles divided by
  (active tiles * delta-T), overall and per kernel.
"""

from __future__ import annotations

import dataclasses
import os
from collections import defaultdict

import numpy as np

from formats.atomic import AtomicOutput
from formats.pop.reader import ProfileReader

from ..lists_and_enums import as_text
from .estimate_walk import EXCHANGES, Effect, walk


@dataclasses.dataclass
class Kernel:
    """One kernel (compute set) of the estimate."""

    name: str
    compute_dt: int
    transmission_dt: int
    overlaps: bool
    active_pes: int
    compute_cycles: int  # estimated cycles summed over the kernel's tiles
    executions: int

    @property
    def delta_t(self) -> int:
        """Seed 000's delta-T: max when compute and transmission overlap, sum otherwise."""
        if self.overlaps:
            return max(self.compute_dt, self.transmission_dt)
        return self.compute_dt + self.transmission_dt

    @property
    def utilization(self) -> float:
        """Share of time the kernel's active tiles compute."""
        if not self.active_pes or not self.delta_t:
            return 0.0
        return self.compute_cycles / (self.active_pes * self.delta_t)


@dataclasses.dataclass
class Estimate:
    """The overall figures and the kernels."""

    clock: float
    batch_size: int
    total_pes: int
    active_pes: int
    kernels: list[Kernel]

    def _rate(self, cycles: float) -> float | None:
        """Samples per second over `cycles`; None where there are no such cycles (the rate does not apply)."""
        return self.clock * self.batch_size / cycles if cycles else None

    @property
    def samples_per_second(self) -> float | None:
        return self._rate(sum(k.delta_t * k.executions for k in self.kernels))

    @property
    def compute_samples_per_second(self) -> float | None:
        return self._rate(sum(k.compute_dt * k.executions for k in self.kernels))

    @property
    def transmission_samples_per_second(self) -> float | None:
        return self._rate(sum(k.transmission_dt * k.executions for k in self.kernels))

    @property
    def active_pes_fraction(self) -> float:
        return self.active_pes / self.total_pes if self.total_pes else 0.0

    @property
    def compute_utilization(self) -> float:
        time = sum(k.delta_t * k.executions for k in self.kernels)
        work = sum(k.compute_cycles * k.executions for k in self.kernels)
        return work / (self.active_pes * time) if self.active_pes and time else 0.0

    def as_dict(self) -> dict:
        """The figures as plain data (what `pva estimate --json` prints)."""
        return {
            "samples_per_second": self.samples_per_second,
            "compute_samples_per_second": self.compute_samples_per_second,
            "transmission_samples_per_second": self.transmission_samples_per_second,
            "active_pes_percent": 100 * self.active_pes_fraction,
            "compute_utilization_percent": 100 * self.compute_utilization,
            "kernels": [
                {
                    "name": k.name,
                    "compute_delta_t": k.compute_dt,
                    "transmission_delta_t": k.transmission_dt,
                    "overlaps": k.overlaps,
                    "delta_t": k.delta_t,
                    "active_pes": k.active_pes,
                    "executions": k.executions,
                    "compute_utilization_percent": 100 * k.utilization,
                }
                for k in self.kernels
            ],
        }

    def compile_report(self) -> str:
        """The estimate as the text of a Cerebras compile_report.txt."""
        return format_compile_report(self)

    def write_compile_report(self, path: str | os.PathLike[str]) -> str:
        """Write compile_report.txt atomically into a directory, or to the file named; returns the path written."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"expected a path, not {type(path).__name__}")
        target = os.fspath(path)
        if os.path.isdir(target):
            target = os.path.join(target, "compile_report.txt")
        with AtomicOutput(target) as out, open(out.path, "w", encoding="utf-8") as handle:
            handle.write(self.compile_report())
        return target


def estimate(reader: ProfileReader, batch_size: int = 1) -> Estimate:
    """The Cerebras-style estimate of a report's compiled program."""
    program_rows = reader.program_structure()
    info = {pid: (ptype, cs) for pid, ptype, cs, _repeat, _target in program_rows}
    cs_rows = {cs: (name, row) for cs, name, row in reader.compute_set_estimate_rows()}
    vectors = {
        (p, k): r
        for p, k, r in reader.program_vector_rows_of_kinds(("estimated_cycles", "bytes_sent", "bytes_received"))
    }
    estimates = reader.matrix("compute_set_estimated_cycles_by_tile")
    exchange_cycles = reader.matrix("program_estimated_cycles_by_tile")
    sent = reader.matrix("program_bytes_sent_by_tile")
    received = reader.matrix("program_bytes_received_by_tile")
    tiles = reader.target["tiles_per_replica"]

    def leaf(program: int, ptype: str) -> Effect:
        if ptype in EXCHANGES:
            cycles, used_tiles = 0, None
            row = vectors.get((program, "estimated_cycles"))
            if row is not None and exchange_cycles is not None:
                cycles = int(exchange_cycles.row(row).max(initial=0))
            for kind, matrix in (("bytes_sent", sent), ("bytes_received", received)):
                row = vectors.get((program, kind))
                if row is not None and matrix is not None:
                    active = matrix.row(row) > 0
                    used_tiles = active if used_tiles is None else used_tiles | active
            return Effect(pre=(cycles, used_tiles))
        cs = info.get(program, ("", None))[1]
        if ptype != "OnTileExecute" or cs not in cs_rows:
            return Effect()
        return Effect(head=(cs, 1))

    programs = {pid: (ptype, repeat, target) for pid, ptype, _cs, repeat, target in program_rows}
    children: dict[int, list[int]] = defaultdict(list)
    for parent, child in reader.program_child_links():
        children[parent].append(child)
    runs = walk(reader.control_program_ids(), programs, children, leaf, reader.path).runs()
    used = np.zeros(tiles, dtype=bool)
    kernels = []
    for cs, run in runs.items():
        name, row = cs_rows[cs]
        per_tile = estimates.row(row) if (row is not None and estimates is not None) else np.zeros(tiles, np.uint64)
        compute_tiles = per_tile > 0
        used |= compute_tiles
        pending = run.first_tiles
        kernels.append(
            Kernel(
                name=as_text(name),
                compute_dt=int(per_tile.max(initial=0)),
                transmission_dt=run.max_cycles,
                overlaps=bool(run.first_cycles) and not (pending is not None and bool((pending & compute_tiles).any())),
                active_pes=int(compute_tiles.sum()),
                compute_cycles=int(per_tile.sum()),
                executions=run.executions,
            )
        )
    return Estimate(
        clock=float(reader.target["clock_frequency"]),
        batch_size=batch_size,
        total_pes=tiles,
        active_pes=int(used.sum()),
        kernels=kernels,
    )


#: Printed where a rate does not apply (a kernel with no transmission has no transmission rate).
NOT_APPLICABLE = "n/a"


def _rate_text(value: float | None) -> str:
    return NOT_APPLICABLE if value is None else f"{value:.1f}"


def format_compile_report(est: Estimate) -> str:
    """The estimate as compile_report.txt text (values from column 30, a +---+ bordered kernel table)."""
    lines = [
        "Estimated Overall Performance",
        "-" * 31,
        f"{'Samples/s:':<30}{_rate_text(est.samples_per_second)}",
        f"{'Compute Samples/s:':<30}{_rate_text(est.compute_samples_per_second)}",
        f"{'Transmission Samples/s:':<30}{_rate_text(est.transmission_samples_per_second)}",
        f"{'Active PEs:':<30}{round(100 * est.active_pes_fraction)}%",
        f"{'Compute Utilization:':<30}{round(100 * est.compute_utilization)}%",
    ]
    headers = (
        "Kernel Name",
        "Samples/s",
        "Compute Samples/s",
        "Transmission Samples/s",
        "Active PEs",
        "Compute Utilization",
    )
    rows = []
    for k in est.kernels:
        rate = est.clock * est.batch_size
        rows.append(
            (
                k.name,
                _rate_text(rate / k.delta_t if k.delta_t else None),
                _rate_text(rate / k.compute_dt if k.compute_dt else None),
                _rate_text(rate / k.transmission_dt if k.transmission_dt else None),
                str(k.active_pes),
                f"{round(100 * k.utilization)}%",
            )
        )
    widths = [max(len(h), 91 if i == 0 else 14) for i, h in enumerate(headers)]
    for row in rows:
        widths = [max(w, len(v)) for w, v in zip(widths, row)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    lines.append(rule)
    lines.append("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |")
    lines.append(rule)
    lines.append("| " + " | ".join(" " * w for w in widths) + " |")
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [v.rjust(w) for v, w in zip(row[1:], widths[1:])]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append(rule)
    return "\n".join(lines) + "\n"
