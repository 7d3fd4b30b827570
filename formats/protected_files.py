"""The files no output of this process may replace: those open for reading in it and the inputs of
the command running; and the outputs `--force` lets replace although pva did not write them.

Kept apart from formats.atomic, which writes outputs, so that reading a report imports no more than this.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import stat
import threading
from collections.abc import Iterable, Iterator

from .errors import InvalidInputError

#: Files open for reading in this process (device, inode: count of readers), and the inputs of the
#: commands running (`output_rules`): no output replaces either.
_OPEN_INPUTS: dict[tuple[int, int], int] = {}
_INPUTS_LOCK = threading.Lock()
_INPUTS: contextvars.ContextVar[frozenset[tuple[int, int]]] = contextvars.ContextVar("pva_inputs", default=frozenset())
FORCED: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("pva_forced_outputs", default=frozenset())


def hold_input(info: os.stat_result) -> None:
    """Record that a file is open for reading (from its `os.fstat`): no output replaces it until released."""
    with _INPUTS_LOCK:
        key = (info.st_dev, info.st_ino)
        _OPEN_INPUTS[key] = _OPEN_INPUTS.get(key, 0) + 1


def release_input(info: os.stat_result) -> None:
    """Undo one `hold_input`."""
    with _INPUTS_LOCK:
        key = (info.st_dev, info.st_ino)
        left = _OPEN_INPUTS.get(key, 0) - 1
        if left > 0:
            _OPEN_INPUTS[key] = left
        else:
            _OPEN_INPUTS.pop(key, None)


def _identity(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISREG(info.st_mode) else None


@contextlib.contextmanager
def output_rules(*, inputs: Iterable[str | os.PathLike[str]] = (), force: Iterable[str] = ()) -> Iterator[None]:
    """Within the block: the files `inputs` name are never replaced (compared by device and inode), and
    the files named in `force` may be replaced even when pva did not write them (never an input)."""
    found = {key for key in map(_identity, inputs) if key is not None}
    forced = frozenset(os.path.realpath(os.fspath(p)) for p in force if p)
    inputs_token = _INPUTS.set(_INPUTS.get() | found)
    forced_token = FORCED.set(FORCED.get() | forced)
    try:
        yield
    finally:
        FORCED.reset(forced_token)
        _INPUTS.reset(inputs_token)


def check_not_input(target: str, info: os.stat_result | None = None) -> None:
    """Refuse to write to a file (or a stream that is a file) that is an input of this process."""
    if info is None:
        try:
            info = os.stat(target)
        except OSError:
            return
    key = (info.st_dev, info.st_ino)
    with _INPUTS_LOCK:
        is_input = key in _OPEN_INPUTS or key in _INPUTS.get()
    if is_input:
        raise InvalidInputError(
            f"{target!r}: is an input of this command (or open for reading in this process); refusing to replace it: "
            "write the output to another name",
            target,
        )
