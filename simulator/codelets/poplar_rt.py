"""Poplar's runtime vertices (copies, memsets) and poprand's seed vertex.

Poplar's own copy vertices have no published estimator; these are this simulator's own models:
an entry overhead, a cost per region and the bytes one load/store path moves per cycle.
"""

from __future__ import annotations

import numpy as np

from .base import VertexType, fields, work_array


def copy_cost(overhead: int, per_region: int, bytes_per_cycle: int):
    def cost(work, n, target):
        nbytes = work_array(work, "bytes", n)
        regions = work_array(work, "regions", n)
        cycles = overhead + per_region * np.maximum(regions, 1) + (nbytes + bytes_per_cycle - 1) // bytes_per_cycle
        return cycles, cycles

    return cost


def memcpy_supervisor_cost(work, n, target):
    """Six workers moving 8 bytes a cycle each after a 32-cycle supervisor entry."""
    nbytes = work_array(work, "bytes", n)
    per_worker = (nbytes + 47) // 48
    cycles = 32 + 6 * per_worker
    active = 32 + (nbytes + 7) // 8
    return cycles, np.minimum(active, cycles)


def constant_cost(value: int):
    def cost(work, n, target):
        cycles = np.full(n, value, dtype=np.int64)
        return cycles, cycles

    return cost


_BYTES = (("src", "in", "unsigned char", "vector"), ("dst", "out", "unsigned char", "vector"))


def _copy(code_bytes: int, cost, supervisor: bool = False):
    def build(name, args):
        return VertexType(
            name,
            fields(*_BYTES),
            supervisor=supervisor,
            code_bytes=code_bytes,
            library="poplar_rt",
            copy=True,
            cost=cost,
        )

    return build


def _memset(name, args):
    return VertexType(
        name,
        fields(("dst", "out", "unsigned char", "vector")),
        code_bytes=72,
        library="poplar_rt",
        cost=copy_cost(8, 2, 8),
    )


def _set_seed(name, args):
    return VertexType(
        name,
        fields(("seed", "in", "unsigned int", "vector")),
        supervisor=True,
        code_bytes=212,
        library="poprand",
        cost=constant_cost(140),
    )


VERTICES = {
    "poplar_rt::DstStridedCopyDA32": (0, _copy(184, copy_cost(10, 6, 4))),
    "poplar_rt::StridedCopyDA32": (0, _copy(184, copy_cost(10, 5, 4))),
    "poplar_rt::DstStridedCopy64BitMultiAccess": (0, _copy(236, copy_cost(12, 4, 8))),
    "poplar_rt::StridedCopy64BitMultiAccess": (0, _copy(236, copy_cost(12, 4, 8))),
    "poplar_rt::ShortMemcpy": (0, _copy(96, copy_cost(12, 0, 4))),
    "poplar_rt::Memcpy64BitSupervisor": (0, _copy(168, memcpy_supervisor_cost, supervisor=True)),
    "poplar_rt::MemsetZero": (0, _memset),
    "poplar_rt::MemsetZero64Bit": (0, _memset),
    "poplar_rt::DstStridedMemsetZero64Bit": (0, _memset),
    "poprand::SetSeedSupervisor": (0, _set_seed),
}
