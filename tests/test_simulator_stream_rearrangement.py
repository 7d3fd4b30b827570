"""Stream copies rearranged on the host (Poplar's Copy with optimiseMemory)."""

from __future__ import annotations

import numpy as np
import pytest

import pva
from simulator import programs as P
from simulator.engine import Engine
from simulator.errors import GraphError
from simulator.graph import Graph
from simulator.target import Target
from simulator.types import FLOAT

TS = "2024-01-01T00:00:00Z"


def _transposed_upload(directory, optimise_memory: bool):
    """An 8 x 8 matrix on two tiles (four rows each), streamed in as its transpose."""
    g = Graph(Target("ipu2", tiles_per_ipu=4))
    v = g.addVariable(FLOAT, [8, 8], "v")
    g.setTileMapping(v.slice(0, 4), 0)
    g.setTileMapping(v.slice(4, 8), 1)
    g.createHostRead("v", v)
    stream = g.addHostToDeviceFIFO("in", FLOAT, 64)
    prog = P.Sequence(P.Copy(stream, v.transpose(), optimiseMemory=optimise_memory), name="upload")
    engine = Engine(g, [prog], {"autoReport.all": "true", "autoReport.directory": str(directory)}, timestamp=TS)
    engine.load()
    engine.connectStream("in", np.arange(64, dtype=np.float32))
    engine.run(0)
    got = engine.readTensor("v")
    engine.close()
    compilation = pva.openReport(str(directory / "profile.pop")).compilation
    code = compilation.categoryMemoryArray("hostExchangeCode")
    headers = compilation.categoryMemoryArray("hostExchangePacketHeader")
    return np.asarray(got).reshape(8, 8), np.asarray(code), np.asarray(headers)


def test_a_stream_copy_rearranged_on_the_host_is_one_region_per_tile(tmp_path):
    """Poplar's Copy(stream, tensor, optimiseMemory): the host sends each tile its data in memory
    order, so each tile's part of the variable is one region, not one per element of the view."""
    plain_values, plain, plain_headers = _transposed_upload(tmp_path / "plain", False)
    host_values, host, host_headers = _transposed_upload(tmp_path / "host", True)
    expected = np.arange(64, dtype=np.float32).reshape(8, 8).T
    assert np.array_equal(plain_values, expected) and np.array_equal(host_values, expected)
    # host exchange code of 8 bytes a region: 32 single-element regions a tile against one
    assert list(plain[:2] - host[:2]) == [31 * 8, 31 * 8]
    assert host[1] == 32 + 8
    # one 16-byte packet header a tile taking part either way (tile 0 also holds the control
    # program's header for the program id it reads from the host)
    assert plain_headers[1] == host_headers[1] == 16
    assert plain_headers[0] == host_headers[0] > 16


def test_overlapping_pieces_of_a_download_are_one_region_in_any_order(tmp_path):
    """Pieces of one variable that overlap or touch are one run whatever their order in the view."""
    from simulator.tensor import concat

    counts = []
    for name, parts in (("a", ((0, 8), (0, 4), (4, 8))), ("b", ((0, 4), (0, 8), (4, 8)))):
        g = Graph(Target("ipu2", tiles_per_ipu=4))
        v = g.addVariable(FLOAT, [8], "v")
        g.setTileMapping(v, 1)
        view = concat([v.slice(a, b) for a, b in parts])
        out = g.addDeviceToHostFIFO("out", FLOAT, view.numElements())
        prog = P.Sequence(P.Copy(view, out, optimiseMemory=True))
        directory = tmp_path / name
        engine = Engine(g, [prog], {"autoReport.all": "true", "autoReport.directory": str(directory)}, timestamp=TS)
        engine.load()
        engine.connectStream("out", np.zeros(view.numElements(), dtype=np.float32))
        engine.run(0)
        engine.close()
        report = pva.openReport(str(directory / "profile.pop"))
        counts.append(int(np.asarray(report.compilation.categoryMemoryArray("hostExchangePacketHeader"))[1]))
    assert counts == [16, 16]


def test_optimise_memory_is_for_stream_copies():
    g = Graph(Target("ipu2", tiles_per_ipu=4))
    a = g.addVariable(FLOAT, [4], "a")
    b = g.addVariable(FLOAT, [4], "b")
    with pytest.raises(GraphError, match="data stream"):
        P.Copy(a, b, optimiseMemory=True)
