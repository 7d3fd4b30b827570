"""A large Chrome trace file read as two halves at once, the second in a child process.

`find_cut`: a place between two events near the middle of the file. `HalfReader`: either side of
it as a whole JSON document. `SecondHalf`: the second half read by a child process that runs an
entry module's `child(task)` (formats.chrome.second_half), its answer handed over as JSON (never
pickle). The caller merges the halves (`_Importer.merge`), or
reads the whole file in one go where the halves cannot be sure to give what one reading gives.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import orjson

#: Files smaller than this are read in one go: starting a process would cost more than it saves.
MIN_BYTES = 32 << 20
#: The first half takes half of this beyond the middle of the file: about what one process reads
#: (at 20 to 25 MB/s) in the 0.3 s a child takes to start Python and import this package.
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


#: The child's program: it takes its task (a JSON line) from stdin, finds modules where the parent
#: does, and runs the `child(task)` of the task's entry module, which answers on stdout; a failure
#: to start is reported as a bug.
_PROGRAM = """\
import json, sys, traceback
try:
    task = json.loads(sys.stdin.buffer.readline())
    sys.path[:] = task.pop("path")
    import importlib
    entry = importlib.import_module(task.pop("entry"))
except Exception:
    sys.stdout.write(json.dumps(["bug", traceback.format_exc()]))
    raise SystemExit(1)
entry.child(task)
"""


class SecondHalf:
    """The second half of a trace, read by a child process (this package in a new interpreter:
    the caller's own program is not run again) while the caller reads the first."""

    def __init__(
        self, entry: str, name: str, output: str, start: int, before: bytes, files: tuple[str, str], memory: int
    ) -> None:
        if not sys.executable:
            raise OSError("no Python interpreter to start")
        task = {
            "path": [path for path in sys.path if isinstance(path, str)],
            "entry": entry,
            "name": name,
            "output": output,
            "start": start,
            "before": before.decode("ascii"),
            "files": list(files),
            "memory": memory,
            "parent": os.getpid(),
        }
        try:
            line = orjson.dumps(task) + b"\n"
        except orjson.JSONEncodeError:  # a file name that is not UTF-8
            raise OSError(f"cannot hand {name!r} over to a child process") from None
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-c", _PROGRAM],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(line)
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
