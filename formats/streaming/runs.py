"""Arrays of numbers read from a legacy profile, kept compactly in memory or in a spool file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import numpy as np

from ..errors import InvalidInputError

#: Runs with at most this many values stay in memory; longer ones go to the spool file.
IN_MEMORY_LIMIT = 256

_UNSIGNED = tuple((np.dtype(t), int(np.iinfo(t).max)) for t in (np.uint8, np.uint16, np.uint32, np.uint64))


class NonFiniteNumberError(ValueError):
    """A NaN or an infinity among numbers read from a legacy profile.

    ``where`` locates it relative to the value being read (a JSON location without the ``$``).
    """

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.where = where


def non_finite_message(found: str) -> str:
    """The message for a non-finite number `found` (as the input spelt it)."""
    return f"expected a finite number, found {found}"


def spelling(value: float) -> str:
    """NaN, Infinity or -Infinity, as JavaScript writes them."""
    return "NaN" if value != value else "Infinity" if value > 0 else "-Infinity"


def compact(array: np.ndarray, low: int | None = None, high: int | None = None) -> np.ndarray:
    """The same numbers in the narrowest dtype that holds them (unsigned when non-negative)."""
    if array.dtype.kind == "b":
        return array.astype(np.uint8)
    if array.dtype.kind not in "iu" or array.size == 0:
        return array
    low = int(array.min()) if low is None else low
    if low < 0:
        return array.astype(np.int64, copy=False)
    high = int(array.max()) if high is None else high
    for dtype, top in _UNSIGNED:
        if high <= top:
            return array.astype(dtype, copy=False)
    return array


class Run:
    """A JSON/CBOR array of numbers: its size, type summary and values (in memory or spooled).

    ``kind`` is ``"int"`` when every value is an integer, ``"float"`` otherwise; ``minimum`` and
    ``maximum`` summarise the values (0 for an empty run) so schema checks need not read them.
    """

    __slots__ = ("count", "kind", "minimum", "maximum", "offset", "_array", "_segments", "_spool")

    def __init__(self, offset: int = -1) -> None:
        self.count = 0
        self.kind = "int"
        self.minimum: int | float = 0
        self.maximum: int | float = 0
        self.offset = offset  # byte offset of the array in its input, for messages
        self._array: np.ndarray | None = None
        self._segments: list[tuple[int, int, np.dtype]] = []
        self._spool: Spool | None = None

    # -- building -------------------------------------------------------------------------

    def _note(self, array: np.ndarray, low=None, high=None) -> None:
        if array.size == 0:
            return
        if low is None:
            low, high = array.min(), array.max()
        if array.dtype.kind == "f":
            self.kind = "float"
            low, high = float(low), float(high)
            if not (np.isfinite(low) and np.isfinite(high)):
                index = int(np.argmin(np.isfinite(array)))
                raise NonFiniteNumberError(non_finite_message(spelling(float(array[index]))), f"[{index}]")
        else:
            low, high = int(low), int(high)
        if self.count == 0:
            self.minimum, self.maximum = low, high
        else:
            self.minimum = min(self.minimum, low)
            self.maximum = max(self.maximum, high)
        self.count += int(array.size)

    def add(self, array: np.ndarray, spool: Spool | None) -> None:
        """Append values (a 1-D numeric array)."""
        if array.dtype.kind == "O":
            raise ValueError("number does not fit in 64 bits")
        low = high = None
        if array.size and array.dtype.kind in "iu":
            low, high = int(array.min()), int(array.max())
        array = compact(array, low, high)
        self._note(array, low, high)
        if self._segments or (spool is not None and self.count > IN_MEMORY_LIMIT):
            assert spool is not None, "a run that spilled to a spool is continued with it"
            if self._array is not None:
                pending, self._array = self._array, None
                self._segments.append(spool.write(pending))
            self._spool = spool
            if array.size:
                self._segments.append(spool.write(array))
        elif self._array is None:
            self._array = array
        else:
            self._array = np.concatenate([self._array, array])

    # -- reading --------------------------------------------------------------------------

    @property
    def is_integral(self) -> bool:
        """Whether every value is an integer (floats with no fraction count, as in JSON Schema)."""
        if self.kind == "int":
            return True
        return all(bool(np.all(np.mod(chunk, 1) == 0)) for chunk in self.iter_chunks())

    def iter_chunks(self) -> Iterator[np.ndarray]:
        """The values in order, a stored piece at a time."""
        if self._array is not None:
            yield self._array
        for offset, count, dtype in self._segments:
            assert self._spool is not None, "segments are stored in the spool"
            yield self._spool.read(offset, count, dtype)

    def array(self, dtype=None) -> np.ndarray:
        """All values as one array (widened to a common type, or to `dtype`)."""
        chunks = list(self.iter_chunks())
        if not chunks:
            return np.zeros(0, dtype=dtype or np.int64)
        if dtype is None:
            dtype = np.result_type(*chunks)
        if len(chunks) == 1:
            return chunks[0].astype(dtype, copy=False)
        out = np.empty(self.count, dtype=dtype)
        position = 0
        for chunk in chunks:
            out[position : position + chunk.size] = chunk
            position += chunk.size
        return out

    def tolist(self) -> list:
        """The values as Python numbers."""
        return self.array().tolist()

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        where = "spooled" if self._segments else "in memory"
        return f"<Run {self.count} {self.kind} values {where}>"


class Spool:
    """An anonymous temporary file holding the long runs of one conversion; gone when closed."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        try:
            self._file = tempfile.TemporaryFile(dir=directory, prefix=".pva-spool-")  # noqa: SIM115 (closed by close())
        except OSError as exc:
            raise InvalidInputError(f"cannot create a temporary file in {directory!r}: {exc}", directory) from None
        self._fd = self._file.fileno()
        self._size = 0

    def write(self, array: np.ndarray) -> tuple[int, int, np.dtype]:
        """Store an array; return its (offset, count, dtype)."""
        data = np.ascontiguousarray(array).data.cast("B")
        offset = self._size
        written = 0
        while written < len(data):
            written += os.pwrite(self._fd, data[written:], offset + written)
        self._size += len(data)
        return offset, int(array.size), array.dtype

    def read(self, offset: int, count: int, dtype: np.dtype) -> np.ndarray:
        """An array stored by `write`."""
        size = count * dtype.itemsize
        out = bytearray(size)
        view = memoryview(out)
        done = 0
        while done < size:
            got = os.preadv(self._fd, [view[done:]], offset + done)
            if got <= 0:
                raise OSError("spool file truncated")
            done += got
        return np.frombuffer(out, dtype=dtype)

    @property
    def size(self) -> int:
        """Bytes stored."""
        return self._size

    def close(self) -> None:
        """Delete the spool."""
        self._file.close()

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_slice(run: Run, start: int, stop: int) -> np.ndarray:
    """Values start..stop-1 of a run, reading only the stored pieces that hold them."""
    if run._array is not None and not run._segments:
        return run._array[start:stop]
    pieces = []
    position = 0
    for chunk in [run._array] if run._array is not None else []:
        if position < stop and position + chunk.size > start:
            pieces.append(chunk[max(0, start - position) : stop - position])
        position += chunk.size
    for offset, count, dtype in run._segments:
        if position < stop and position + count > start:
            lo = max(0, start - position)
            hi = min(count, stop - position)
            assert run._spool is not None, "segments are stored in the spool"
            pieces.append(run._spool.read(offset + lo * dtype.itemsize, hi - lo, dtype))
        position += count
        if position >= stop:
            break
    if not pieces:
        return np.zeros(0, dtype=np.int64)
    if len(pieces) == 1:
        return pieces[0]
    return np.concatenate([p.astype(np.result_type(*pieces), copy=False) for p in pieces])
