"""Tensors: views of graph variables as lists of contiguous element regions (poplar::Tensor)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from .errors import GraphError
from .types import Type


class _Variable(Protocol):
    name: str
    numel: int


class VariableStore(Protocol):
    """What a tensor views: the graph's variables by id (simulator.graph.GraphState)."""

    @property
    def vars(self) -> Sequence[_Variable]: ...


def _as_shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        dims = tuple(int(d) for d in shape)
    except TypeError:
        raise GraphError(f"a shape must be a sequence of non-negative integers, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise GraphError(f"a shape must be a sequence of non-negative integers, got {list(dims)}")
    return dims


class Tensor:
    """A view of graph data: `shape`, element type and the (variable, start, length) regions.

    Elements are in row-major order over `shape`. Slicing along the first dimension and
    reshaping work on regions; other rearrangements go through element index arrays.
    """

    __slots__ = ("_state", "dtype", "_shape", "vars", "starts", "lengths")

    def __init__(self, state: VariableStore, dtype: Type, shape, vars_, starts, lengths) -> None:
        self._state = state
        self.dtype = dtype
        self._shape = _as_shape(shape)
        self.vars = np.asarray(vars_, dtype=np.int64)
        self.starts = np.asarray(starts, dtype=np.int64)
        self.lengths = np.asarray(lengths, dtype=np.int64)

    # -- basic properties -------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        """The dimensions of the tensor."""
        return self._shape

    def numElements(self) -> int:
        return math.prod(self._shape)

    def rank(self) -> int:
        return len(self._shape)

    def elementType(self) -> Type:
        return self.dtype

    def dim(self, i: int) -> int:
        return self._shape[i]

    @property
    def num_bytes(self) -> int:
        return self.numElements() * self.dtype.size

    def is_whole_variable(self) -> bool:
        """True if the tensor is exactly one variable in its own element order."""
        return (
            self.vars.size == 1
            and self.starts[0] == 0
            and int(self.lengths[0]) == self._state.vars[int(self.vars[0])].numel
        )

    def variable_ids(self) -> list[int]:
        """Ids of the variables the tensor refers to, in first-use order."""
        ids, first = np.unique(self.vars, return_index=True)
        return ids[np.argsort(first, kind="stable")].tolist()

    def __repr__(self) -> str:
        names = [self._state.vars[v].name for v in self.variable_ids()[:3]]
        more = "..." if len(self.variable_ids()) > 3 else ""
        return f"<Tensor {self.dtype} {list(self._shape)} of {', '.join(names)}{more}>"

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a scalar tensor")
        return self._shape[0]

    # -- region helpers ---------------------------------------------------------------------

    def _with(self, shape, vars_, starts, lengths) -> Tensor:
        return Tensor(self._state, self.dtype, shape, vars_, starts, lengths)

    def _range(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Regions of flattened elements lo..hi-1."""
        if hi <= lo:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        ends = np.cumsum(self.lengths)
        begins = ends - self.lengths
        i0 = int(np.searchsorted(ends, lo, side="right"))
        i1 = int(np.searchsorted(begins, hi, side="left"))
        v = self.vars[i0:i1].copy()
        s = self.starts[i0:i1].copy()
        b = begins[i0:i1]
        e = ends[i0:i1]
        cut_lo = np.maximum(lo - b, 0)
        cut_hi = np.maximum(e - hi, 0)
        s += cut_lo
        ln = (e - b) - cut_lo - cut_hi
        keep = ln > 0
        return v[keep], s[keep], ln[keep]

    def element_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(variable id, element index) of every element, in row-major order."""
        n = int(self.lengths.sum())
        var = np.repeat(self.vars, self.lengths)
        offsets = np.cumsum(self.lengths) - self.lengths
        idx = np.repeat(self.starts - offsets, self.lengths) + np.arange(n, dtype=np.int64)
        return var, idx

    def storage_order(self) -> np.ndarray | None:
        """The row-major positions of the elements in the order they are stored (by variable, then
        index), or None when that is the row-major order or an element appears twice."""
        if len(self.vars) <= 1:
            return None
        scale = int((self.starts + self.lengths).max()) + 1
        first = self.vars * scale + self.starts
        if np.all(first[:-1] + self.lengths[:-1] <= first[1:]):
            return None  # regions in storage order, none overlapping
        var, idx = self.element_arrays()
        key = var * (int(idx.max()) + 1) + idx
        if not np.any(key[1:] < key[:-1]):
            return None
        order = np.argsort(key, kind="stable")
        stored = key[order]
        return None if np.any(stored[1:] == stored[:-1]) else order

    @classmethod
    def from_elements(cls, state, dtype, shape, var: np.ndarray, idx: np.ndarray) -> Tensor:
        """A tensor from per-element (variable, index) arrays, merged into runs."""
        if var.size == 0:
            return cls(state, dtype, shape, [], [], [])
        breaks = np.flatnonzero((var[1:] != var[:-1]) | (idx[1:] != idx[:-1] + 1)) + 1
        first = np.concatenate(([0], breaks))
        last = np.concatenate((breaks, [var.size]))
        return cls(state, dtype, shape, var[first], idx[first], last - first)

    def _from_index(self, index: np.ndarray, shape) -> Tensor:
        var, idx = self.element_arrays()
        flat = index.reshape(-1)
        return Tensor.from_elements(self._state, self.dtype, shape, var[flat], idx[flat])

    # -- views ------------------------------------------------------------------------------

    def slice(self, begin, end=None, dim: int = 0) -> Tensor:
        """Elements begin..end-1 along `dim`, or a box given as lists of begins and ends."""
        if isinstance(begin, Sequence) and not isinstance(begin, str):
            ends = list(end)
            begins = list(begin)
            if len(begins) != len(ends) or len(begins) > self.rank():
                raise GraphError(f"slice bounds {begins} and {ends} do not match a tensor of shape {list(self._shape)}")
            out = self
            for d, (b, e) in enumerate(zip(begins, ends)):
                out = out.slice(b, e, d)
            return out
        b, e = int(begin), int(end)
        if not 0 <= dim < self.rank():
            raise GraphError(f"slice dimension {dim} is out of range for a tensor of rank {self.rank()}")
        if not 0 <= b <= e <= self._shape[dim]:
            raise GraphError(f"slice {b}:{e} is out of range for dimension {dim} of size {self._shape[dim]}")
        shape = list(self._shape)
        shape[dim] = e - b
        if dim == 0:
            inner = math.prod(self._shape[1:])
            return self._with(shape, *self._range(b * inner, e * inner))
        index = np.arange(self.numElements(), dtype=np.int64).reshape(self._shape)
        sl = [slice(None)] * self.rank()
        sl[dim] = slice(b, e)
        return self._from_index(index[tuple(sl)], shape)

    def __getitem__(self, key) -> Tensor:
        if isinstance(key, tuple):
            out = self
            dim = 0
            for k in key:
                if isinstance(k, (int, np.integer)):
                    out = out._index(int(k), dim)
                else:
                    out = out._slice_obj(k, dim)
                    dim += 1
            return out
        if isinstance(key, (int, np.integer)):
            return self._index(int(key), 0)
        return self._slice_obj(key, 0)

    def _index(self, i: int, dim: int) -> Tensor:
        if not self._shape:
            raise GraphError("a scalar tensor cannot be indexed")
        size = self._shape[dim]
        if i < 0:
            i += size
        if not 0 <= i < size:
            raise GraphError(f"index {i} is out of range for dimension {dim} of size {size}")
        sliced = self.slice(i, i + 1, dim)
        shape = self._shape[:dim] + self._shape[dim + 1 :]
        return sliced._with(shape, sliced.vars, sliced.starts, sliced.lengths)

    def _slice_obj(self, k, dim: int) -> Tensor:
        if not isinstance(k, slice):
            raise GraphError(f"tensor index must be an integer or a slice, got {k!r}")
        start, stop, step = k.indices(self._shape[dim])
        if step != 1:
            index = np.arange(self.numElements(), dtype=np.int64).reshape(self._shape)
            sl = [slice(None)] * self.rank()
            sl[dim] = k
            chosen = index[tuple(sl)]
            return self._from_index(chosen, chosen.shape)
        return self.slice(start, max(start, stop), dim)

    def reshape(self, shape) -> Tensor:
        dims = _as_shape(shape)
        if math.prod(dims) != self.numElements():
            raise GraphError(f"cannot reshape a tensor of shape {list(self._shape)} to {list(dims)}")
        return self._with(dims, self.vars, self.starts, self.lengths)

    def flatten(self) -> Tensor:
        return self.reshape((self.numElements(),))

    def expand(self, dims: Sequence[int]) -> Tensor:
        """Insert dimensions of size 1 at the given positions."""
        shape = list(self._shape)
        for d in sorted(dims):
            shape.insert(d, 1)
        return self.reshape(shape)

    def dimShuffle(self, permutation: Sequence[int]) -> Tensor:
        perm = [int(p) for p in permutation]
        if sorted(perm) != list(range(self.rank())):
            raise GraphError(f"{perm} is not a permutation of the {self.rank()} dimensions of the tensor")
        index = np.arange(self.numElements(), dtype=np.int64).reshape(self._shape).transpose(perm)
        return self._from_index(index, index.shape)

    def transpose(self) -> Tensor:
        if self.rank() != 2:
            raise GraphError(f"transpose needs a 2-D tensor, got shape {list(self._shape)}")
        return self.dimShuffle([1, 0])

    def broadcast(self, n: int, dim: int) -> Tensor:
        """Repeat the tensor n times along `dim`."""
        index = np.arange(self.numElements(), dtype=np.int64).reshape(self._shape)
        index = np.repeat(index, n, axis=dim)
        return self._from_index(index, index.shape)

    @property
    def T(self) -> Tensor:
        return self.transpose()


def concat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join tensors along `dim` (poplar::concat)."""
    if not tensors:
        raise GraphError("concat needs at least one tensor")
    first = tensors[0]
    for t in tensors[1:]:
        if (
            t.dtype != first.dtype
            or t.rank() != first.rank()
            or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != dim)
        ):
            raise GraphError(
                f"cannot concatenate tensors of shapes {list(first.shape)} ({first.dtype}) and "
                f"{list(t.shape)} ({t.dtype}) along dimension {dim}"
            )
    shape = list(first.shape)
    shape[dim] = sum(t.shape[dim] for t in tensors)
    if dim == 0:
        return Tensor(
            first._state,
            first.dtype,
            shape,
            np.concatenate([t.vars for t in tensors]),
            np.concatenate([t.starts for t in tensors]),
            np.concatenate([t.lengths for t in tensors]),
        )
    moved = [t.dimShuffle([dim] + [i for i in range(t.rank()) if i != dim]) for t in tensors]
    joined = concat(moved, 0)
    back = list(range(1, dim + 1)) + [0] + list(range(dim + 1, first.rank()))
    return joined.dimShuffle(back)
