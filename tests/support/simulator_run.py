"""Building and running small simulator graphs in tests: a graph with poplibs' codelets, and a
functional engine run that returns the tensors read back and checks the report it writes."""

from __future__ import annotations

from simulator_invariants import check_report

from simulator import Engine, Graph, Target
from simulator.poplibs import poplin, popnn, popops

TS = "2024-01-01T00:00:00Z"


def codelet_graph(tiles: int = 32, arch: str = "ipu2") -> Graph:
    """A graph of one IPU with `tiles` tiles and popops', poplin's and popnn's codelets."""
    g = Graph(Target(arch, tiles_per_ipu=tiles))
    for lib in (popops, poplin, popnn):
        lib.addCodelets(g)
    return g


def run_functional(g, prog, tmp_path, writes: dict, reads: list[str]) -> dict:
    """Run `prog` once with values, write its report to tmp_path (checked), return the tensors read."""
    with Engine(
        g, prog, {"autoReport.all": "true", "autoReport.directory": str(tmp_path)}, timestamp=TS, functional=True
    ) as e:
        for name, value in writes.items():
            e.writeTensor(name, value)
        e.run(0)
        out = {name: e.readTensor(name) for name in reads}
    assert check_report(tmp_path / "profile.pop") == []
    return out
