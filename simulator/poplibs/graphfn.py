"""poputil::graphfn: a program outlined as a function of tensors (lib/poputil/GraphFunction.cpp)."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import GraphError
from ..graph import Graph
from ..programs import Call, Copy, Sequence
from ..tensor import Tensor
from ._util import in_storage_order


class TensorFunction:
    """A function of tensors like `inputs` that returns a tensor; each call copies its arguments
    in, calls the function and copies the output to a new tensor (graphfn::TensorFunction)."""

    def __init__(
        self, graph: Graph, inputs: dict[str, Tensor], build: Callable[[list[Tensor], Sequence], Tensor], name: str
    ) -> None:
        self.graph = graph
        self.params = [graph.clone(t, f"{name}/{key}") for key, t in inputs.items()]
        body = Sequence(name=name)
        self.out = build(self.params, body)
        self.function = graph.addFunction(body, name)

    def __call__(self, args: list[Tensor], prog: Sequence, name: str) -> Tensor:
        """The function's output for `args`, in a new tensor `name`."""
        if len(args) != len(self.params):
            raise GraphError(f"the function takes {len(self.params)} tensors, got {len(args)}")
        for arg, param in zip(args, self.params):
            dst, src = in_storage_order(param, arg)
            prog.add(Copy(src, dst))
        prog.add(Call(self.function))
        out = self.graph.clone(self.out, name)
        dst, src = in_storage_order(out, self.out)
        prog.add(Copy(src, dst))
        return out
