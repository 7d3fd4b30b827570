"""Per-tile vectors: Python lists of ints that also hand numpy their array without copying."""

from __future__ import annotations

from typing import TYPE_CHECKING

from formats.lazy_import import lazy_module

from .lists_and_enums import PvaList

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")


class TileVector(PvaList):
    """A list of ints (one per tile) backed by a read-only uint64 array.

    It is a real list (``len``, indexing, iteration, ``list()``, ``json.dumps``), and
    ``numpy.array(v)`` / ``numpy.asarray(v)`` take the stored array directly.
    """

    __slots__ = ("_array",)

    def __init__(self, array: np.ndarray | None = None) -> None:
        if array is None or array.size == 0:
            array = read_only(np.zeros(0, dtype=np.uint64))
        else:
            array = np.ascontiguousarray(array, dtype=np.uint64)
            array.setflags(write=False)
        super().__init__(array.tolist())
        self._array = array

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        array = self._array
        if array is None:  # the list was modified: follow it
            array = np.asarray(list(self), dtype=np.uint64)
        if dtype is not None and np.dtype(dtype) != array.dtype:
            return array.astype(dtype)
        if copy:
            return array.copy()
        return array


def _forgetting(name: str):
    method = getattr(list, name)

    def wrapper(self, *args, **kwargs):
        self._array = None
        return method(self, *args, **kwargs)

    wrapper.__name__ = name
    wrapper.__doc__ = method.__doc__
    return wrapper


for _name in (
    "__setitem__",
    "__delitem__",
    "__iadd__",
    "__imul__",
    "append",
    "extend",
    "insert",
    "pop",
    "remove",
    "sort",
    "reverse",
    "clear",
):
    setattr(TileVector, _name, _forgetting(_name))


def read_only(array: np.ndarray) -> np.ndarray:
    """The array, marked read-only (cached arrays are shared between calls)."""
    array.setflags(write=False)
    return array
