"""An IPU-Model analogue: build Poplar-style graph programs, compile, run, and write reports.

>>> from simulator import IPUModel, Graph, Engine, FLOAT                       # doctest: +SKIP
>>> from simulator.programs import Sequence, Copy, PrintTensor
>>> target = IPUModel("ipu2").createDevice().getTarget()
>>> graph = Graph(target)
>>> v = graph.addVariable(FLOAT, [4], "v"); graph.setTileMapping(v, 0)
>>> c = graph.addConstant(FLOAT, [4], [1, 2, 3, 4]); graph.setTileMapping(c, 0)
>>> with Engine(graph, Sequence(Copy(c, v), PrintTensor("v", v)), {"autoReport.all": "true"}) as e:
...     e.run(0)
"""

from .codelets import InOut, Input, Output, Param, Vertex
from .engine import Engine
from .errors import ExecutionError, GraphError, OptionError
from .graph import ComputeSet, DataStream, Function, Graph, RemoteBuffer, VertexRef
from .programs import (
    Call,
    Copy,
    Execute,
    If,
    PrintTensor,
    Program,
    Repeat,
    RepeatWhileFalse,
    RepeatWhileTrue,
    Sequence,
    Switch,
    Sync,
    WriteUndef,
)
from .target import ARCHITECTURES, Device, IPUModel, Target, cpu_device
from .tensor import Tensor, concat
from .types import BOOL, CHAR, FLOAT, HALF, INT, SHORT, UNSIGNED_CHAR, UNSIGNED_INT, UNSIGNED_SHORT, Type

__all__ = [
    "ARCHITECTURES",
    "BOOL",
    "CHAR",
    "Call",
    "ComputeSet",
    "Copy",
    "DataStream",
    "Device",
    "Engine",
    "ExecutionError",
    "Execute",
    "FLOAT",
    "Function",
    "Graph",
    "GraphError",
    "HALF",
    "INT",
    "IPUModel",
    "If",
    "InOut",
    "Input",
    "OptionError",
    "Output",
    "Param",
    "PrintTensor",
    "Program",
    "RemoteBuffer",
    "Repeat",
    "RepeatWhileFalse",
    "RepeatWhileTrue",
    "SHORT",
    "Sequence",
    "Switch",
    "Sync",
    "Target",
    "Tensor",
    "Type",
    "UNSIGNED_CHAR",
    "UNSIGNED_INT",
    "UNSIGNED_SHORT",
    "Vertex",
    "VertexRef",
    "WriteUndef",
    "concat",
    "cpu_device",
]
