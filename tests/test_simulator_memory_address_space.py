"""Tile memory is one address space: non-interleaved data run on past the interleaved region's
start when they fill the region below it, the interleaved data follow them, and each item's
bytes count toward the region its addresses fall in (docs/simulator-memory.md)."""

from __future__ import annotations

import numpy as np

from simulator import FLOAT, Graph, Sequence, Target
from simulator.compiler import compile_graph
from simulator.target import architecture


def _placed(big_floats: int) -> tuple[dict[str, int], dict[int, int], dict[str, int], dict[str, np.ndarray]]:
    """Compile a 2-tile Mk2 graph holding `big_floats` floats and 100 interleaved floats (as AMP
    partials are) on tile 0: the offsets of its named items on tile 0, its units there (a lane's
    members share the lane's offset, the largest its size) by offset, tile 0's memory figures and
    all tiles'."""
    g = Graph(Target("ipu2", tiles_per_ipu=2))
    big = g.addVariable(FLOAT, [big_floats], "big")
    partials = g.addVariable(FLOAT, [100], "partials")
    g.setTileMapping(big, 0)
    g.setTileMapping(partials, 0)
    g.state.vars[partials.variable_ids()[0]].interleaved = True
    exe = compile_graph(g, [Sequence()])
    lv, memory = exe.lowered, exe.memory
    on_tile = np.flatnonzero(lv["tile"] == 0)
    where = {lv.names[int(lv["name_id"][i])]: int(memory.offset[i]) for i in on_tile}
    units: dict[int, int] = {}
    for i in on_tile:
        offset = int(memory.offset[i])
        units[offset] = max(units.get(offset, 0), int(lv["size"][i]))
    return where, units, {key: int(value[0]) for key, value in memory.by_tile.items()}, memory.by_tile


def test_non_interleaved_data_run_past_the_interleaved_start():
    # 240,000 bytes of data on a Mk2 tile, past its interleaved region's start (212,992), and 400
    # bytes of interleaved data: the data run on from the code's memory element, and the
    # interleaved data follow them, 16-byte aligned; nothing moves to the interleaved start
    start = architecture("ipu2").interleaved_memory_start
    assert start == 212_992
    where, units, by_tile, all_tiles = _placed(60_000)
    big_start = where["big"]
    big_end = big_start + 240_000
    assert big_start < start < big_end and units[big_start] == 240_000
    low = {offset: size for offset, size in units.items() if offset != where["partials"]}
    low_end = max(offset + size for offset, size in low.items())
    assert where["partials"] == -(-low_end // 16) * 16
    # including gaps: the end of the non-interleaved data, then the interleaved data; had the big
    # item moved past the interleaved data, 212,992 + 400 + 240,000
    assert by_tile["total_including_gaps"] == where["partials"] + 400 < start + 400 + 240_000
    assert by_tile["non_interleaved_including_gaps"] == start
    assert by_tile["interleaved_including_gaps"] == by_tile["total_including_gaps"] - start
    assert by_tile["overflowed"] == by_tile["overflowed_including_gaps"] == 0
    # the big item's bytes split at the interleaved start: non-interleaved below, interleaved above
    below = sum(size for offset, size in low.items() if offset + size <= start)
    above = sum(size for offset, size in low.items() if offset >= start)
    assert by_tile["non_interleaved"] == below + (start - big_start)
    assert by_tile["interleaved"] == (big_end - start) + above + 400
    assert by_tile["total"] == by_tile["non_interleaved"] + by_tile["interleaved"] == sum(units.values())
    # tile 1, with little data, is untouched: all of it below the interleaved start
    assert all_tiles["interleaved_including_gaps"][1] == all_tiles["interleaved"][1] == 0
    assert all_tiles["non_interleaved_including_gaps"][1] == all_tiles["total_including_gaps"][1] < start


def test_data_past_the_tile_are_overflowed_by_address():
    # 632,000 bytes: the big item runs past the tile's 638,976 bytes, and the interleaved data
    # after it are overflowed whole; the interleaved region is all the big item's
    start, tile_bytes = architecture("ipu2").interleaved_memory_start, architecture("ipu2").bytes_per_tile
    where, units, by_tile, _ = _placed(158_000)
    big_start = where["big"]
    big_end = big_start + 632_000
    assert big_start < start and big_end > tile_bytes
    assert where["partials"] > tile_bytes
    low = {offset: size for offset, size in units.items() if offset != where["partials"]}
    below = sum(size for offset, size in low.items() if offset + size <= start)
    past = sum(size for offset, size in low.items() if offset >= tile_bytes)
    assert by_tile["non_interleaved"] == below + (start - big_start)
    assert by_tile["interleaved"] == by_tile["interleaved_including_gaps"] == tile_bytes - start
    assert by_tile["overflowed"] == (big_end - tile_bytes) + past + 400
    assert by_tile["overflowed_including_gaps"] == by_tile["total_including_gaps"] - tile_bytes
    assert by_tile["total_including_gaps"] == where["partials"] + 400
