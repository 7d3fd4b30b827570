"""Per-tile vectors: Python lists of ints that also hand numpy their array without copying."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

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

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self._array
        if array is None:  # the list was modified: follow it
            array = np.asarray(list(self), dtype=np.uint64)
        if dtype is not None and np.dtype(dtype) != array.dtype:
            return array.astype(dtype)
        if copy:
            return array.copy()
        return array


def _forgetting(name: str) -> Callable[..., Any]:
    method = getattr(list, name)

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
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


class VectorCache:
    """Per-tile vectors read recently, handed out again while nobody has modified them.

    A loop that indexes ``step.cyclesByTile[t]`` tile by tile then reads the row once instead of
    once per tile. A list its caller modified is the caller's own: the next read gives a fresh one.
    """

    def __init__(self, max_values: int = 1 << 22) -> None:
        self._vectors: OrderedDict[Hashable, tuple[TileVector, int]] = OrderedDict()
        self._values = 0
        self._max = max_values

    def get(self, key: Hashable, load: Callable[[], np.ndarray]) -> TileVector:
        """The vector cached under `key`, or `load()`'s array as a new one."""
        vectors = self._vectors
        found = vectors.get(key)
        if found is not None:
            if found[0]._array is not None:  # unmodified
                vectors.move_to_end(key)
                return found[0]
            del vectors[key]
            self._values -= found[1]
        vector = TileVector(load())
        vectors[key] = (vector, len(vector))
        self._values += len(vector)
        while self._values > self._max and len(vectors) > 1:
            _, (_, size) = vectors.popitem(last=False)
            self._values -= size
        return vector
