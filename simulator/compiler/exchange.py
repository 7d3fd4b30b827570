"""Exchange plans: bytes each tile sends and receives, and their cycles, for internal (DoExchange),
inter-IPU (GlobalExchange) and host (StreamCopy) transfers."""

from __future__ import annotations

import numpy as np

from .regions import Sparse, group_ids


class ExchangePlan:
    """Per-tile figures of one exchange (tiles of one replica)."""

    __slots__ = (
        "kind",
        "recv",
        "sent",
        "cycles",
        "code",
        "regions",
        "sync",
        "exchange_cycles",
        "message",
        "message_category",
        "packets",
    )

    def __init__(
        self,
        kind: str,
        recv: Sparse,
        sent: Sparse,
        cycles: Sparse,
        code: Sparse,
        regions: Sparse,
        message: Sparse | None = None,
        message_category: str = "message",
    ) -> None:
        self.kind = kind  # internal, global, host
        self.recv = recv
        self.sent = sent
        self.cycles = cycles
        self.code = code
        self.regions = regions
        self.message = message
        self.message_category = message_category
        self.sync: Sparse | None = None
        self.exchange_cycles: Sparse | None = None
        self.packets: Sparse | None = None

    @property
    def total_bytes(self) -> int:
        return self.recv.total


def _participants(recv: Sparse, sent: Sparse, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tiles sending or receiving, with their received and sent bytes."""
    tiles = np.union1d(recv.idx[recv.val > 0], sent.idx[sent.val > 0])
    return tiles, recv.at(tiles), sent.at(tiles)


#: Exchange code of one tile: a fixed prologue plus, per region sent or received, the
#: instructions that set its address and count, 4 bytes each.
EXCHANGE_CODE_FIXED_BYTES = 16
EXCHANGE_CODE_BYTES_PER_REGION = 8


def internal_plan(
    target,
    n: int,
    recv: Sparse,
    sent: Sparse,
    recv_regions: Sparse,
    send_regions: Sparse,
    message: Sparse | None = None,
    message_category: str = "message",
    shared: Sparse | None = None,
) -> ExchangePlan:
    """A statically scheduled exchange inside each IPU.

    A tile's transfers take its set-up and fabric latency plus its bytes at the per-tile
    exchange bandwidth (the larger of what it sends and what it receives), as poplibs' planners
    estimate exchange (popops reduction/ReductionPlan.cpp, estimateReduceAtDstCost). Bytes that
    both tiles of a super tile receive from one send (`shared`) take half the time: the two tiles
    share an exchange bus and receive the same data in the same cycle, which poplin's planner
    counts as twice the bandwidth (lib/poplin/ExchangeEstimator.hpp, the ExchangeEstimator
    constructor: target.supportsExchangeBusSharing(), getTilesPerSharedExchangeBus()). The
    compiler schedules the transfers of all tiles as one program, so every tile taking part
    runs the exchange until the schedule's last transfer on its IPU.
    """
    a = target.arch
    tiles, r, s = _participants(recv, sent, n)
    latency = target.exchange_latency()[tiles % target.tiles_per_ipu]
    if shared is not None:
        r = r - shared.at(tiles) // 2
    busy = np.maximum(r, s)
    own = a.exchange_setup_cycles + latency + (busy + a.exchange_bytes_per_cycle - 1) // a.exchange_bytes_per_cycle
    ipu = tiles // target.tiles_per_ipu
    span = np.zeros(max(1, n // target.tiles_per_ipu), dtype=np.int64)
    if tiles.size:
        np.maximum.at(span, ipu, own)
    cycles = span[ipu]
    regions = recv_regions.at(tiles) + send_regions.at(tiles)
    code = EXCHANGE_CODE_FIXED_BYTES + EXCHANGE_CODE_BYTES_PER_REGION * regions
    return ExchangePlan(
        "internal",
        recv,
        sent,
        Sparse(tiles, cycles, n),
        Sparse(tiles, code, n),
        Sparse(tiles, regions, n),
        message,
        message_category,
    )


def global_plan(
    target,
    n: int,
    recv: Sparse,
    sent: Sparse,
    recv_regions: Sparse,
    send_regions: Sparse,
    message: Sparse | None = None,
) -> ExchangePlan:
    """An exchange between the IPUs of a replica, preceded by a global sync."""
    a = target.arch
    tiles, r, s = _participants(recv, sent, n)
    per_tile = np.maximum(r, s)
    ipu = tiles // target.tiles_per_ipu
    num_ipus = max(1, n // target.tiles_per_ipu)
    ipu_bytes = np.maximum(
        np.bincount(ipu, weights=r, minlength=num_ipus), np.bincount(ipu, weights=s, minlength=num_ipus)
    )
    link = np.ceil(ipu_bytes / a.global_exchange_bytes_per_cycle).astype(np.int64)
    own = a.global_exchange_setup_cycles + (per_tile + 3) // 4
    cycles = np.maximum(own, a.global_exchange_setup_cycles + link[ipu])
    packets = (per_tile + a.global_exchange_packet_bytes - 1) // a.global_exchange_packet_bytes
    regions = recv_regions.at(tiles) + send_regions.at(tiles)
    code = 24 + 8 * regions + 4 * packets
    plan = ExchangePlan(
        "global",
        recv,
        sent,
        Sparse(tiles, cycles, n),
        Sparse(tiles, code, n),
        Sparse(tiles, regions, n),
        message,
        "globalMessage",
    )
    plan.exchange_cycles = Sparse(tiles, cycles, n)
    delays = target.relative_sync_delays()
    all_tiles = np.arange(n)
    plan.sync = Sparse(all_tiles, a.global_sync_cycles + delays[all_tiles % target.tiles_per_ipu], n)
    plan.packets = Sparse(tiles, packets, n)
    return plan


def host_plan(target, n: int, recv: Sparse, sent: Sparse, regions: Sparse) -> ExchangePlan:
    """A stream copy between the host (or a remote buffer) and the tiles."""
    a = target.arch
    tiles, r, s = _participants(recv, sent, n)
    ipu = tiles // target.tiles_per_ipu
    num_ipus = max(1, n // target.tiles_per_ipu)
    ipu_bytes = np.bincount(ipu, weights=np.maximum(r, s), minlength=num_ipus)
    duration = 8 + np.ceil(ipu_bytes / a.host_bytes_per_cycle).astype(np.int64)
    cycles = duration[ipu]
    reg = regions.at(tiles)
    code = 32 + 8 * reg
    plan = ExchangePlan("host", recv, sent, Sparse(tiles, cycles, n), Sparse(tiles, code, n), Sparse(tiles, reg, n))
    # a 16-byte packet header a tile taking part, however many regions it reads or writes: the
    # Poplar user guide's MNIST example has 10,720 B of headers beside 211,132 B of host
    # exchange code, far fewer than one a region (docs/simulator-memory.md, "Exchange")
    plan.packets = Sparse(tiles, np.full(tiles.size, 16, dtype=np.int64), n)
    return plan


def _super_tile_shared(target, n: int, dst: np.ndarray, nbytes: np.ndarray, key: np.ndarray) -> Sparse | None:
    """Bytes each tile receives that the other tile of its super tile receives from the same send
    (pieces given by destination, bytes and data key; each tile receives a key at most once)."""
    a = target.arch
    per = a.tiles_per_super_tile
    if not a.supports_super_tile_send_receive or per < 2 or dst.size < 2:
        return None
    ids = group_ids(dst // per, key)
    both = np.bincount(ids)[ids] >= 2
    if not both.any():
        return None
    return Sparse.from_pairs(dst[both], nbytes[both], n)


def pieces_plan(
    target,
    n: int,
    src_tile: np.ndarray,
    dst_tile: np.ndarray,
    nbytes: np.ndarray,
    send_key: np.ndarray | None = None,
    message: bool = False,
    message_category: str = "message",
):
    """Internal and global plans for pieces moving src_tile -> dst_tile (src != dst).

    `send_key` identifies identical data so one send can reach several tiles (broadcast).
    Returns (internal plan or None, global plan or None).
    """
    plans: list[ExchangePlan | None] = []
    same_ipu = (src_tile // target.tiles_per_ipu) == (dst_tile // target.tiles_per_ipu)
    for mask, kind in ((same_ipu, "internal"), (~same_ipu, "global")):
        if not mask.any():
            plans.append(None)
            continue
        s, d, b = src_tile[mask], dst_tile[mask], nbytes[mask]
        recv = Sparse.from_pairs(d, b, n)
        if send_key is not None:
            key = send_key[mask]
            ids = group_ids(s, key)
            first = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
            first[ids[::-1]] = np.arange(ids.size - 1, -1, -1)
            sent = Sparse.from_pairs(s[first], b[first], n)
            send_regions = Sparse.from_pairs(s[first], np.ones(first.size), n)
        else:
            sent = Sparse.from_pairs(s, b, n)
            send_regions = Sparse.from_pairs(s, np.ones(s.size), n)
        recv_regions = Sparse.from_pairs(d, np.ones(d.size), n)
        msg = recv if message else None
        if kind == "internal":
            shared = _super_tile_shared(target, n, d, b, send_key[mask]) if send_key is not None else None
            plans.append(
                internal_plan(target, n, recv, sent, recv_regions, send_regions, msg, message_category, shared)
            )
        else:
            plans.append(global_plan(target, n, recv, sent, recv_regions, send_regions, msg))
    return plans[0], plans[1]
