"""Targets: IPU architectures with their published sizes and the modelled timing constants.

Sizes (tiles, bytes per tile, clock) are Graphcore's published figures; the timing constants
(sync delays, exchange overheads, accumulating matrix product unit widths) are model
parameters chosen as the README section "The bundled IPU-Model simulator" describes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import GraphError

#: Worker contexts (hardware threads) per tile, on every architecture.
NUM_WORKER_CONTEXTS = 6


@dataclass(frozen=True)
class Architecture:
    """Published sizes and modelled constants of one IPU architecture."""

    name: str  # IPU.Architecture name: Ipu1, Ipu2, Ipu21
    tiles_per_ipu: int
    bytes_per_tile: int
    clock_frequency: float
    interleaved_memory_start: int  # first byte of the interleaved region within a tile
    memory_element_bytes: int
    tile_memory_base_address: int
    min_sync_delay: int  # cycles from a sync request to the release, nearest tile
    global_sync_cycles: int  # cycles to synchronise all IPUs
    host_sync_cycles: int  # cycles of a sync with the host before a stream copy
    exchange_bytes_per_cycle: int  # internal exchange, per tile
    exchange_setup_cycles: int  # fixed cost of a tile taking part in an internal exchange
    global_exchange_bytes_per_cycle: int  # inter-IPU bandwidth of one IPU (all links)
    global_exchange_setup_cycles: int
    global_exchange_packet_bytes: int
    host_bytes_per_cycle: int  # host link bandwidth of one IPU
    memcpy_bytes_per_cycle: int
    half_half_macs: int  # multiply-accumulates per cycle per tile, half in, half partials
    half_float_macs: int  # half in, float partials
    float_float_macs: int  # float in, float partials
    conv_units: dict  # conv units per tile by (in, out) precision
    conv_unit_coeff_load_bytes_per_cycle: int
    tiles_per_super_tile: int
    supports_super_tile_send_receive: bool
    data_path_width: int  # bits
    num_stride_bits: int
    rpt_count_max: int
    fp8: bool = False


ARCHITECTURES: dict[str, Architecture] = {
    "Ipu1": Architecture(
        name="Ipu1",
        tiles_per_ipu=1216,
        bytes_per_tile=262_144,
        clock_frequency=1.6e9,
        interleaved_memory_start=131_072,
        memory_element_bytes=16_384,
        tile_memory_base_address=0x40000,
        # the Poplar user guide's Mk1 IPU-Model execution trace (printProfileSummary, "Steps"): internal
        # syncs take 111-115 cycles (three back to back from cycle 481 to 826), an external sync 118,
        # and a control broadcast exchange of 2 bytes a tile 120 cycles; less the largest relative
        # sync delay (12) and exchange latency (22) these are the delays below
        min_sync_delay=101,
        global_sync_cycles=180,
        host_sync_cycles=110,
        exchange_bytes_per_cycle=4,
        exchange_setup_cycles=97,
        global_exchange_bytes_per_cycle=64,
        global_exchange_setup_cycles=120,
        global_exchange_packet_bytes=256,
        host_bytes_per_cycle=4,
        memcpy_bytes_per_cycle=8,
        half_half_macs=32,
        half_float_macs=32,
        float_float_macs=8,
        conv_units={"fp16_fp16": 8, "fp16_fp32": 8, "fp32_fp32": 4, "fp8_fp16": 0},
        conv_unit_coeff_load_bytes_per_cycle=8,
        tiles_per_super_tile=2,
        supports_super_tile_send_receive=False,
        data_path_width=64,
        num_stride_bits=10,
        rpt_count_max=4095,
    ),
    "Ipu2": Architecture(
        name="Ipu2",
        tiles_per_ipu=1472,
        bytes_per_tile=638_976,
        clock_frequency=1.33e9,
        # no public document gives Mk2's tile memory map; the interleaved region's start is read off
        # poplibs' published IpuModel2 measurements (tests/benchmark_results.csv, sdk-release-2.0):
        # the largest tile of every fc, gemm, bert-layer and convolution row but one needs at least
        # 213,048 bytes including gaps, the smallest layers 213,048 to 213,112, i.e. a few dozen
        # bytes of AMP partials (interleaved memory) just past 212,992 = 13 memory elements. Poplar's
        # Mk1 example has the same shape: totalIncludingGaps = interleaved start + interleaved bytes
        # (the Poplar and PopLibs User Guide, "Memory per tile": 131,608 = 131,072 + 536).
        interleaved_memory_start=212_992,
        # poplibs' TileConstants.hpp, TMEM_ELEMSIZE (0x4000): the memory element its assembly
        # codelets for both architectures assume
        memory_element_bytes=16_384,
        # reported as the target's tileMemoryBaseAddress only; no figure depends on it and no public
        # source gives it: the address at which the region below the interleaved start would begin
        tile_memory_base_address=0x4C000,
        # no Mk2 trace is published: Mk1's measured sync and exchange delays, in cycles
        min_sync_delay=101,
        global_sync_cycles=240,
        host_sync_cycles=140,
        exchange_bytes_per_cycle=4,
        exchange_setup_cycles=97,
        global_exchange_bytes_per_cycle=96,
        global_exchange_setup_cycles=150,
        global_exchange_packet_bytes=256,
        host_bytes_per_cycle=8,
        memcpy_bytes_per_cycle=8,
        half_half_macs=64,
        # half inputs with float partials run on 8 conv units (32 MACs a cycle): poplibs at
        # sdk-release-2.0 has no 16-unit AMP vertex for them. lib/poplin/codelets/ConvPartial1x1Out.cpp
        # and ConvPartialnx1.cpp instantiate numConvUnits = 16 only for <half,half> and
        # <float,float> (hasAssembly: 16 units only when AccumType is half or FPType float), and the
        # assembly is conv_partial_1x1_half_float_8_and_half_half_h16.S. poplin builds the vertex
        # with the target's getFp16InFp32OutConvUnitsPerTile() (ConvVertexType.cpp,
        # getConvVertexAMPCandidates), so on Mk2 that count is 8.
        half_float_macs=32,
        float_float_macs=16,
        conv_units={"fp16_fp16": 16, "fp16_fp32": 8, "fp32_fp32": 16, "fp8_fp16": 0},
        conv_unit_coeff_load_bytes_per_cycle=16,
        tiles_per_super_tile=2,
        supports_super_tile_send_receive=True,
        data_path_width=64,
        num_stride_bits=10,
        rpt_count_max=4095,
    ),
}
ARCHITECTURES["Ipu21"] = dataclasses.replace(
    ARCHITECTURES["Ipu2"],
    name="Ipu21",
    clock_frequency=1.85e9,
    conv_units={"fp16_fp16": 16, "fp16_fp32": 8, "fp32_fp32": 16, "fp8_fp16": 32},
    fp8=True,
)

_ARCH_ALIASES = {
    "ipu1": "Ipu1",
    "ipu": "Ipu1",
    "mk1": "Ipu1",
    "ipu2": "Ipu2",
    "mk2": "Ipu2",
    "ipu21": "Ipu21",
    "bow": "Ipu21",
}
TARGET_TYPES = ("IpuModel", "Cpu")
RELATIVE_SYNC_DELAY_TYPES = ("AUTO", "NO_DELAY")


def architecture(name: str) -> Architecture:
    """The architecture named `name` (Ipu1/ipu1/mk1, Ipu2/ipu2/mk2, Ipu21/ipu21/bow)."""
    key = _ARCH_ALIASES.get(str(name).lower(), name)
    found = ARCHITECTURES.get(key)
    if found is None:
        raise GraphError(f"unknown IPU architecture {name!r}; expected one of ipu1, ipu2, ipu21")
    return found


class Target:
    """A simulated target: IPUs of one architecture, optionally replicated (poplar::Target)."""

    def __init__(
        self,
        arch: str | Architecture = "ipu2",
        *,
        type: str = "IpuModel",
        num_ipus: int = 1,
        tiles_per_ipu: int | None = None,
        replication_factor: int = 1,
        min_sync_delay: int | None = None,
        relative_sync_delay: str = "AUTO",
        io_tiles: int = 0,
    ) -> None:
        self.arch = arch if isinstance(arch, Architecture) else architecture(arch)
        if min_sync_delay is not None and (not isinstance(min_sync_delay, (int, np.integer)) or min_sync_delay < 0):
            raise GraphError(f"min_sync_delay must be a non-negative integer, got {min_sync_delay!r}")
        if relative_sync_delay not in RELATIVE_SYNC_DELAY_TYPES:
            raise GraphError(
                f"relative_sync_delay must be one of {', '.join(RELATIVE_SYNC_DELAY_TYPES)}, "
                f"got {relative_sync_delay!r}"
            )
        #: cycles from a sync request to its release on the nearest tile (IPUModel.minIPUSyncDelay)
        self.min_sync_delay = self.arch.min_sync_delay if min_sync_delay is None else int(min_sync_delay)
        #: IPUModel.relativeSyncDelay: AUTO (by distance from the sync controller) or NO_DELAY
        self.relative_sync_delay = relative_sync_delay
        if type not in TARGET_TYPES:
            raise GraphError(f"target type must be one of {', '.join(TARGET_TYPES)}, got {type!r}")
        for label, value in (("num_ipus", num_ipus), ("replication_factor", replication_factor)):
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise GraphError(f"target {label} must be a positive integer, got {value!r}")
        if type == "Cpu":
            num_ipus, tiles_per_ipu, replication_factor = 1, 1, 1
        tiles = self.arch.tiles_per_ipu if tiles_per_ipu is None else tiles_per_ipu
        if not isinstance(tiles, (int, np.integer)) or not 1 <= tiles <= self.arch.tiles_per_ipu:
            raise GraphError(
                f"tiles_per_ipu must be between 1 and {self.arch.tiles_per_ipu} for {self.arch.name}, got {tiles!r}"
            )
        if num_ipus % replication_factor:
            raise GraphError(
                f"num_ipus ({num_ipus}) must be a multiple of the replication factor ({replication_factor})"
            )
        if not isinstance(io_tiles, (int, np.integer)) or not 0 <= io_tiles < tiles:
            raise GraphError(f"io_tiles must be between 0 and {tiles - 1} (tiles per IPU - 1), got {io_tiles!r}")
        self.type = type
        #: tiles at the top of each IPU reserved for stream copies (Poplar's I/O tiles)
        self.io_tiles = int(io_tiles)
        self.num_ipus = int(num_ipus)
        self.tiles_per_ipu = int(tiles)
        self.replication_factor = int(replication_factor)

    # -- libpva / poplar style names --------------------------------------------------------

    @property
    def architecture(self) -> str:
        return self.arch.name

    @property
    def numIPUs(self) -> int:
        return self.num_ipus

    @property
    def tilesPerIPU(self) -> int:
        return self.tiles_per_ipu

    @property
    def numTiles(self) -> int:
        return self.num_ipus * self.tiles_per_ipu

    @property
    def bytesPerTile(self) -> int:
        return self.arch.bytes_per_tile

    @property
    def bytesPerIPU(self) -> int:
        return self.arch.bytes_per_tile * self.tiles_per_ipu

    @property
    def totalMemory(self) -> int:
        return self.arch.bytes_per_tile * self.numTiles

    @property
    def clockFrequency(self) -> float:
        return self.arch.clock_frequency

    @property
    def numWorkerContexts(self) -> int:
        return NUM_WORKER_CONTEXTS

    @property
    def ipus_per_replica(self) -> int:
        return self.num_ipus // self.replication_factor

    @property
    def tiles_per_replica(self) -> int:
        return self.ipus_per_replica * self.tiles_per_ipu

    def getNumIPUs(self) -> int:
        return self.num_ipus

    def getTilesPerIPU(self) -> int:
        return self.tiles_per_ipu

    def getNumTiles(self) -> int:
        return self.numTiles

    def getBytesPerTile(self) -> int:
        return self.bytesPerTile

    def getTypeSize(self, dtype) -> int:
        from .types import as_type

        return as_type(dtype).size

    # -- model constants --------------------------------------------------------------------

    def io_tile_mask(self, num_ipus: int) -> np.ndarray:
        """For each tile of `num_ipus` IPUs, whether it is an I/O tile."""
        per_ipu = np.arange(self.tiles_per_ipu) >= self.tiles_per_ipu - self.io_tiles
        return np.tile(per_ipu, num_ipus)

    def relative_sync_delays(self) -> np.ndarray:
        """Sync delay of each tile of an IPU relative to the nearest tile [cycles]."""
        tiles = np.arange(self.tiles_per_ipu)
        if self.relative_sync_delay == "NO_DELAY":
            return np.zeros(self.tiles_per_ipu, dtype=np.int64)
        half = max(1, self.tiles_per_ipu // 2)
        return (np.abs((tiles % half) - half // 2) * 12 // max(1, half // 2)).astype(np.int64)

    def exchange_latency(self) -> np.ndarray:
        """Exchange fabric latency of each tile of an IPU relative to the nearest [cycles]."""
        tiles = np.arange(self.tiles_per_ipu)
        return ((tiles * 7919) % 23).astype(np.int64)

    def macs_per_cycle(self, in_type: str, partials_type: str) -> int:
        """Multiply-accumulates per cycle per tile of the convolution units."""
        a = self.arch
        if in_type == "half":
            return a.half_half_macs if partials_type == "half" else a.half_float_macs
        return a.float_float_macs

    def writer_details(self) -> dict[str, Any]:
        """The target columns of profile.pop beyond the basic sizes."""
        a = self.arch
        elements = list(range(0, a.bytes_per_tile, a.memory_element_bytes))
        return {
            "min_sync_delay": self.min_sync_delay,
            "supervisor_instr_fetch_delay": 3,
            "interleaved_memory_start": a.interleaved_memory_start,
            "memory_element_offsets": elements,
            "memory_region_offsets": [0, a.interleaved_memory_start],
            "tile_memory_base_address": a.tile_memory_base_address,
            "tiles_per_super_tile": a.tiles_per_super_tile,
            "num_worker_contexts": NUM_WORKER_CONTEXTS,
            "exchange_bytes_per_cycle": a.exchange_bytes_per_cycle,
            "memcpy_bytes_per_cycle": a.memcpy_bytes_per_cycle,
            "instruction_bytes": 4,
            "supports_super_tile_send_receive": int(a.supports_super_tile_send_receive),
            "global_sync_cycles": a.global_sync_cycles,
            "global_exchange_packet_bytes": a.global_exchange_packet_bytes,
            "tile_local_sync_sync_delay": 15,
            "tile_local_sync_exit_delay": 6,
            "num_stride_bits": a.num_stride_bits,
            "data_path_width": a.data_path_width,
            "fp8_conv_unit_max_pipeline_depth": 16 if a.fp8 else 0,
            "fp16_conv_unit_max_pipeline_depth": 16,
            "fp32_conv_unit_max_pipeline_depth": 8,
            "fp8_conv_unit_input_load_elems_per_cycle": 8 if a.fp8 else 0,
            "fp16_conv_unit_input_load_elems_per_cycle": 4,
            "fp32_conv_unit_input_load_elems_per_cycle": 2,
            "fp16_in_fp16_out_conv_units_per_tile": a.conv_units["fp16_fp16"],
            "fp16_in_fp32_out_conv_units_per_tile": a.conv_units["fp16_fp32"],
            "fp32_in_fp32_out_conv_units_per_tile": a.conv_units["fp32_fp32"],
            "fp8_in_fp16_out_conv_units_per_tile": a.conv_units["fp8_fp16"],
            "conv_unit_coeff_load_bytes_per_cycle": a.conv_unit_coeff_load_bytes_per_cycle,
            "worker_instr_fetch_delay": 8,
            "max_immediate_offset_in_run_instr": 65_535,
            "rpt_count_max": a.rpt_count_max,
            "atomic_store_granularity": 4,
        }

    def __repr__(self) -> str:
        return (
            f"<Target {self.type} {self.arch.name}: {self.num_ipus} IPU(s) x {self.tiles_per_ipu:,} tiles, "
            f"{self.replication_factor} replica(s)>"
        )


class Device:
    """A simulated device: holds its target (poplar::Device)."""

    def __init__(self, target: Target) -> None:
        self.target = target

    def getTarget(self) -> Target:
        return self.target

    def attach(self) -> bool:
        return True

    def detach(self) -> None:
        pass


class IPUModel:
    """Creates IPU Model devices (poplar::IPUModel); `tilesPerIPU` shrinks the IPU for quick tests."""

    def __init__(self, ipuVersion: str = "ipu2") -> None:
        self.ipuVersion = ipuVersion
        self.numIPUs = 1
        self.tilesPerIPU: int | None = None
        self.replicationFactor = 1
        self.compileIPUCode = True
        self.minIPUSyncDelay: int | None = None
        self.relativeSyncDelay = "AUTO"

    def createDevice(self) -> Device:
        return Device(
            Target(
                self.ipuVersion,
                type="IpuModel",
                num_ipus=self.numIPUs,
                tiles_per_ipu=self.tilesPerIPU,
                replication_factor=self.replicationFactor,
                min_sync_delay=self.minIPUSyncDelay,
                relative_sync_delay=self.relativeSyncDelay,
            )
        )


def cpu_device() -> Device:
    """A CPU device: one tile, no profiling data beyond the program structure."""
    return Device(Target("ipu2", type="Cpu"))
