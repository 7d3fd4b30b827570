"""A large Chrome trace file read as two halves at once, the second in a child process.

`find_cut` finds a place between two events near the middle of the file, `HalfReader` serves
either side of it as a whole JSON document, and `SecondHalf` checks and stages the second half in
a child process, as formats.chrome_trace_import does, handing its staged rows over in two
temporary files that the caller owns, and the rest of what it read as JSON on its standard output
(never pickle: nothing here unpickles). The caller merges the halves (`_Importer.merge`). When the
halves cannot be sure to give what one reading gives (a cut inside an event, an error, string
ids), the caller reads the whole file in one go instead.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import traceback
from typing import Any, BinaryIO, cast

import orjson

#: Files smaller than this are read in one go: starting a process would cost more than it saves.
MIN_BYTES = 32 << 20
#: Bytes the first half takes beyond the middle: about what it reads while the child starts.
_START_BYTES = 8 << 20
#: Bytes searched for a cut from where it is wanted.
_WINDOW = 1 << 20
#: What the end of an event, a comma and the start of the next look like. A match inside a string
#: or deeper in an event is possible; the first half is then not a whole document (its text up to
#: the cut parses as it does in the file), and the file is read in one go.
_CUT = re.compile(rb'\}[ \t\r\n]*,[ \t\r\n]*\{[ \t\r\n]*"')


def processors() -> int:
    """Processors this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def find_cut(path: str, size: int) -> tuple[int, int, bytes, bytes] | None:
    """Where to cut the file (the end of the first half's last event, the start of the second
    half's first), and the text that makes each half a whole document (before the second, after
    the first); None when no cut is found near the middle."""
    with open(path, "rb") as handle:
        head = handle.read(64).lstrip(b" \t\r\n")
        at = min(size - 1, (size + _START_BYTES) // 2)
        handle.seek(at)
        window = handle.read(_WINDOW)
    match = _CUT.search(window)
    if match is None or not head:
        return None
    if head[:1] == b"[":
        before, after = b"[", b"]"
    elif head[:1] == b"{":
        before, after = b'{"traceEvents":[', b"]}"
    else:
        return None
    return at + match.start() + 1, at + window.index(b"{", match.start()), before, after


class HalfReader:
    """`before`, bytes `start` to `stop` of the file, then `after`, read as one binary file."""

    def __init__(self, path: str, start: int, stop: int, before: bytes = b"", after: bytes = b"") -> None:
        self._file = open(path, "rb")  # noqa: SIM115 (closed by close)
        self._file.seek(start)
        self._left = stop - start
        self._pieces = [before] if before else []
        self._after = after

    def read(self, size: int = -1) -> bytes:
        if self._pieces:
            return self._pieces.pop()
        if self._left > 0:
            data = self._file.read(self._left if size < 0 else min(size, self._left))
            if data:
                self._left -= len(data)
                return data
            self._left = 0
        data, self._after = self._after, b""
        return data

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> HalfReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SecondHalf:
    """The second half of a trace, read in a child process started at once (a new interpreter
    that imports only this package, from where this process found it: the caller's main module is
    not run again)."""

    def __init__(self, name: str, output: str, start: int, before: bytes, files: tuple[str, str], memory: int) -> None:
        try:
            task = orjson.dumps([name, output, start, before.decode("ascii"), list(files), memory])
        except orjson.JSONEncodeError:  # a file name that is not UTF-8
            raise OSError(f"cannot hand {name!r} over to a child process") from None
        # the child finds modules where this process does (its `formats` is this one)
        path = [entry for entry in sys.path if isinstance(entry, str)]
        program = f"import sys; sys.path[:] = {path!r}; import formats.chrome_trace_halves as h; h.child()"
        self._process = subprocess.Popen(
            [sys.executable, "-c", program], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(task)
            self._process.stdin.close()
        except OSError:  # the child could not start reading
            pass

    def result(self) -> dict | None:
        """What the child read (`_Importer.hand_over`, plus the keys after the events and the
        status), or None when the halves cannot decide (the whole file is then read in one go)."""
        assert self._process.stdout is not None
        try:
            kind, value = orjson.loads(self._process.stdout.read())
        except (orjson.JSONDecodeError, ValueError, TypeError, OSError):  # the child died
            return None
        finally:
            self.stop()
        if kind == "bug":
            raise RuntimeError(f"the second half of the Chrome trace failed:\n{value}")
        return value if kind == "read" else None

    def stop(self) -> None:
        """End the child (at once if it is still reading)."""
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        for pipe in (self._process.stdin, self._process.stdout):
            if pipe is not None:
                pipe.close()


def child() -> None:
    """The child's program: read its task from stdin, answer on stdout."""
    name, output, start, before, files, memory = orjson.loads(sys.stdin.buffer.read())
    answer = _read_second_half(name, output, start, before.encode("ascii"), (files[0], files[1]), memory)
    try:
        text = orjson.dumps(answer)
    except orjson.JSONEncodeError:  # a value JSON cannot carry: the caller reads the whole file
        text = orjson.dumps(["undecided", None])
    sys.stdout.buffer.write(text)
    sys.stdout.buffer.flush()


def _read_second_half(
    name: str, output: str, start: int, before: bytes, files: tuple[str, str], memory: int
) -> tuple[str, Any]:
    """Check and stage the events from `start` to the end of the file: what was read, as an answer."""
    from .chrome_trace_import import _Importer
    from .chrome_trace_json import NotFastError, read_trace_blocks_fast
    from .errors import InvalidInputError
    from .gcpause import gc_paused

    try:
        importer = _Importer(name, output, memory, spill_to=files)
        try:
            with gc_paused(), HalfReader(name, start, os.path.getsize(name), before) as raw:
                blocks, others, status = read_trace_blocks_fast(cast(BinaryIO, raw))
                for prefix, first, events in blocks:
                    importer.add_block(prefix, first, events)
                return ("read", {"half": importer.hand_over(), "others": others, "status": status})
        finally:
            importer.close()
    except (NotFastError, InvalidInputError, OSError):
        return ("undecided", None)
    except Exception:  # a bug: reported by the parent
        return ("bug", traceback.format_exc())
