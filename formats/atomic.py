"""Atomic output: write under a temporary name beside the target, rename when complete.

Never deletes or replaces what pva did not write: a non-empty directory is replaced only when it
is a previous export of ours (its manifest.json lists every file in it), an existing file only
when it is one pva wrote (its format and pva's marker in it, `written_by_pva`) or one the caller
names in `output_rules(force=...)`, and never when it is an input of the command (the same device
and inode as a file `note_input` was given); a FIFO or a character device (``-o /dev/stdout``) is
written as a stream where the writer can stream, and a symbolic link is followed, not replaced.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import re
import shutil
import sqlite3
import stat
import sys
import tempfile
from typing import Self

from .errors import InvalidInputError, OutputError, PvaError, ReportNotFoundError
from .protected_files import FORCED, check_not_input

#: The file a directory output of ours carries: it lists every file the directory holds.
MANIFEST = "manifest.json"
#: The marker inside an unfinished temporary directory (removed when it is complete).
_PARTIAL = ".pva-partial"
#: Largest manifest read when deciding whether a directory is ours.
_MANIFEST_LIMIT = 64 << 20
#: Bytes read from each end of an existing file when deciding whether pva wrote it.
_MARK_WINDOW = 64 << 10


class AtomicOutput:
    """A temporary file (or directory) beside `target` that replaces it only on commit.

    A process killed before `commit` leaves the target untouched: either absent or the complete
    previous version. The temporary name starts with a dot, names its writer process and ends
    with ``.tmp``, so the next write to the same target removes temporaries left by a killed
    writer. With ``stream=True`` a target that is a FIFO or a character device (or
    ``/dev/stdout``) is written in place, as a stream; otherwise such a target is refused.
    """

    def __init__(self, target: str | os.PathLike[str], *, directory: bool = False, stream: bool = False) -> None:
        given = os.path.abspath(os.fspath(target))
        self.directory = directory
        self.done = False
        self._prepared = False
        self.stream = _is_stream_target(given)
        if self.stream:
            if directory or not stream:
                raise InvalidInputError(
                    f"{given!r}: is {_kind_name(given)}; this output cannot be written as a stream: expected "
                    f"a regular file name (or nothing there)",
                    given,
                )
            check_not_input(given)  # -o /dev/stdout >> input.pop: the stream is the input itself
            self.target = self.path = given
            return
        # follow a symbolic link: its target is replaced, the link stays
        self.target = os.path.realpath(given) if os.path.islink(given) else given
        parent = os.path.dirname(self.target)
        if not os.path.isdir(parent):
            raise ReportNotFoundError(f"cannot write {self.target!r}: directory {parent!r} does not exist", self.target)
        self.check_target()
        remove_stale_temporaries(self.target)
        prefix = "." + os.path.basename(self.target) + "." + _owner_tag()
        try:
            if directory:
                self.path = tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=parent)
                os.chmod(self.path, 0o777 & ~_umask())
                open(os.path.join(self.path, _PARTIAL), "wb").close()
            else:
                fd, self.path = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=parent)
                os.close(fd)
                os.chmod(self.path, 0o666 & ~_umask())  # as open() would create it, not mkstemp's 0600
        except OSError as exc:
            raise output_error(exc, self.target) from None

    def check_target(self) -> None:
        """Refuse a target of the wrong kind, or one that is not ours to replace."""
        if self.stream:
            return
        target = self.target
        if os.path.isdir(target) and not self.directory:
            raise InvalidInputError(
                f"{target!r}: is a directory; expected a file name to write to (or nothing there)", target
            )
        if not os.path.lexists(target):
            return
        mode = os.lstat(target).st_mode
        if self.directory:
            if not stat.S_ISDIR(mode):
                raise InvalidInputError(
                    f"{target!r}: is {_kind_name(target)}; expected a directory name to write to (or nothing there)",
                    target,
                )
            if not is_our_directory(target):
                raise InvalidInputError(
                    f"{target!r}: is a non-empty directory that is not a previous pva export (its {MANIFEST} "
                    f"must list every file in it); refusing to replace it: give a new or an empty directory",
                    target,
                )
        elif not stat.S_ISREG(mode):
            raise InvalidInputError(
                f"{target!r}: is {_kind_name(target)}; refusing to replace it: expected a "
                f"regular file name to write to (or nothing there)",
                target,
            )
        else:
            check_replaceable(target)

    def prepare(self) -> None:
        """Make the temporary output durable (fsync) without making it visible yet."""
        if self.done or self._prepared:
            return
        if self.stream:
            self._prepared = True
            return
        try:
            if self.directory:
                _write_manifest(self.path)
                for root, dirs, files in os.walk(self.path):
                    for name in files:
                        _fsync_path(os.path.join(root, name))
                    for name in dirs:
                        _fsync_dir(os.path.join(root, name))
                _fsync_dir(self.path)
            else:
                _mark(self.path)
                _fsync_path(self.path)
        except OSError as exc:
            raise output_error(exc, self.target) from None
        self._prepared = True

    def commit(self) -> None:
        """Make the temporary output durable and move it to the target name."""
        commit_together([self])

    def _publish(self) -> None:
        """Move the (prepared) temporary output to the target name in one step."""
        if self.stream:
            self.done = True
            return
        if self.directory and os.path.isdir(self.target) and not os.path.islink(self.target):
            # A directory cannot be renamed over a non-empty one: swap the two atomically where
            # the system can (Linux renameat2 RENAME_EXCHANGE), so the target name always holds
            # a complete version; then remove the old one (checked again to be ours), now under
            # the temporary name.
            if _exchange(self.path, self.target):
                if is_our_directory(self.path):
                    shutil.rmtree(self.path, ignore_errors=True)
            else:
                old = tempfile.mkdtemp(
                    prefix="." + os.path.basename(self.target) + "." + _owner_tag(),
                    suffix=".old",
                    dir=os.path.dirname(self.target),
                )
                os.rmdir(old)
                os.replace(self.target, old)
                try:
                    os.replace(self.path, self.target)
                except BaseException:
                    os.replace(old, self.target)  # put the previous version back under its name
                    raise
                if is_our_directory(old):
                    shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(self.path, self.target)
        self.done = True

    def abort(self) -> None:
        """Remove the temporary output; the target is left as it was (a stream is left as written)."""
        if self.done:
            return
        self.done = True
        if self.stream:
            return
        if self.directory:
            shutil.rmtree(self.path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            try:
                self.commit()
            except BaseException:
                self.abort()
                raise
        else:
            self.abort()
            if exc is not None and not isinstance(exc, PvaError):
                translated = output_error(exc, self.target, only_machine=True)
                if translated is not None:
                    raise translated from None


def commit_together(outputs: list[AtomicOutput]) -> None:
    """Commit several outputs as close together as the file system allows.

    Every output is made durable first; only then are they renamed to their targets, one rename
    each, back to back, so a process killed before the renames leaves every target as it was.
    """
    pending = [out for out in outputs if not out.done]
    for out in pending:
        out.check_target()  # every rename must be able to succeed before the first is made
    for out in pending:
        out.prepare()
    try:
        for out in pending:
            out._publish()
    except OSError as exc:
        raise output_error(exc, pending[0].target) from None
    for parent in dict.fromkeys(os.path.dirname(out.target) for out in pending if not out.stream):
        _fsync_dir(parent)


# -- which existing files may be replaced ----------------------------------------------------------------------------


def check_replaceable(target: str) -> None:
    """Refuse to replace an existing regular file that is an input, or that pva did not write and is not forced."""
    try:
        info = os.stat(target)
    except OSError:
        return
    check_not_input(target, info)
    real = os.path.realpath(target)
    if real in FORCED.get() or os.path.dirname(real) in FORCED.get() or written_by_pva(target):
        return
    raise InvalidInputError(
        f"{target!r}: exists and is not a file pva wrote (no pva marker in it); refusing to replace it: "
        f"give a new name, or add --force to replace it",
        target,
    )


#: The metadata pva writes into a chart image (matplotlib's `savefig(metadata=...)`), by image format.
IMAGE_MARK = {"png": {"Software": "pva"}, "svg": {"Creator": "pva"}, "pdf": {"Creator": "pva"}}
#: The mark in an HTML page pva wrote (in its head).
HTML_MARK = '<meta name="generator" content="pva">'
#: The field a JSON document pva wrote carries at its top level or in its "otherData".
JSON_MARK = re.compile(rb'"(?:generator|format|written_by)"\s*:\s*"pva')
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: application_id of the SQLite files pva writes: profile.pop ("PVAR") and the trace file ("PVAT").
SQLITE_APPLICATION_IDS = (b"PVAR", b"PVAT")


#: The extended attribute every file pva commits carries (where the file system keeps them): the mark
#: of the formats that have no place for one inside (legacy JSON and CBOR, compile_report.txt).
XATTR_MARK = "user.pva.output"


def _mark(path: str) -> None:
    with contextlib.suppress(OSError, AttributeError):  # a file system without user attributes
        os.setxattr(path, XATTR_MARK, b"pva")


def _xattr_marked(path: str | os.PathLike[str]) -> bool:
    try:
        return os.getxattr(path, XATTR_MARK) == b"pva"
    except (OSError, AttributeError):
        return False


def written_by_pva(path: str | os.PathLike[str]) -> bool:
    """Whether an existing file is one pva wrote: its format recognised, with pva's marker in it (or, for a
    format without a place for one, in the file's extended attributes)."""
    if _xattr_marked(path):
        return True
    try:
        with open(path, "rb") as handle:
            head = handle.read(_MARK_WINDOW)
            size = os.fstat(handle.fileno()).st_size
            if size > _MARK_WINDOW:
                handle.seek(max(size - _MARK_WINDOW, _MARK_WINDOW))
            tail = handle.read(_MARK_WINDOW) if size > _MARK_WINDOW else head
    except OSError:
        return False
    return _marked(head, tail, os.fspath(path))


def _marked(head: bytes, tail: bytes, path: str) -> bool:
    if head.startswith(_SQLITE_MAGIC):
        return head[68:72] in SQLITE_APPLICATION_IDS
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return b"tEXtSoftware\x00pva" in head
    if head.startswith(b"%PDF-"):
        return b"/Creator (pva)" in tail or b"/Creator (pva)" in head
    if head.startswith(b"\x89HDF\r\n\x1a\n"):
        return _hdf5_marked(path)
    if head.startswith(b"\xa3") and b"pva_debug_info" in head[:32]:
        return True  # debug.cbor: a map whose first key names pva's debug format
    text = head.lstrip()
    if text.startswith((b"<!DOCTYPE html>", b"<!doctype html>")):
        return HTML_MARK.encode() in head
    if text.startswith(b"<?xml") or text.startswith(b"<svg"):
        return re.search(rb"<dc:creator>\s*<cc:Agent>\s*<dc:title>pva</dc:title>", head) is not None
    if text.startswith(b"{"):
        return JSON_MARK.search(head) is not None or JSON_MARK.search(tail) is not None
    return False  # other formats carry no mark inside: only the extended attribute tells


def _hdf5_marked(path: str) -> bool:
    try:
        import h5py
    except ImportError:
        return False
    try:
        with h5py.File(path, "r") as h5:
            value = h5.attrs.get("format")
    except Exception:  # a damaged or foreign file is simply not ours
        return False
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return isinstance(value, str) and value.startswith("pva ")


# -- errors of the machine -----------------------------------------------------------------------------------------

_MACHINE_ERRNOS = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EFBIG: "file too large",
    errno.EIO: "input/output error",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "a component of the path is not a directory",
}
_SQLITE_FULL = 13
_SQLITE_IOERR = 10
_SQLITE_CANTOPEN = 14


def output_error(exc: BaseException, target: str, *, only_machine: bool = False):
    """The OutputError for a failure to write `target` caused by the machine (a full disk, ...).

    With ``only_machine`` returns None for failures that are not the machine's (bugs stay bugs).
    """
    cause = _machine_cause(exc)
    if cause is None:
        if only_machine:
            return None
        cause = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return OutputError(f"cannot write {target!r}: {cause}", target)


def _machine_cause(exc: BaseException) -> str | None:
    if isinstance(exc, OSError) and exc.errno in _MACHINE_ERRNOS:
        return _MACHINE_ERRNOS[exc.errno]
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None and code & 0xFF == _SQLITE_FULL:
            return "no space left on device"
        if code is not None and code & 0xFF in (_SQLITE_IOERR, _SQLITE_CANTOPEN):
            return f"input/output error ({exc})"
    text = str(exc)
    if "No space left on device" in text or "errno = 28" in text:  # HDF5 reports errno in its text
        return "no space left on device"
    return None


# -- what is ours ----------------------------------------------------------------------------------------------------


def _write_manifest(path: str) -> None:
    """List every file of a finished directory output in its manifest (the mark that it is ours)."""
    marker = os.path.join(path, _PARTIAL)
    if os.path.exists(marker):
        os.unlink(marker)
    manifest_path = os.path.join(path, MANIFEST)
    manifest: dict = {}
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    files = sorted(name for name in _relative_files(path) if name != MANIFEST)
    manifest["written_by"] = "pva"
    manifest["files"] = files
    with open(manifest_path, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=2)
        handle.write("\n")


def _relative_files(path: str) -> list[str]:
    found = []
    for root, dirs, files in os.walk(path):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            found.append(os.path.relpath(os.path.join(root, name), path).replace(os.sep, "/"))
    return found


def is_our_directory(path: str) -> bool:
    """Whether a directory is empty, or a pva export whose manifest lists every file in it."""
    try:
        entries = os.listdir(path)
    except OSError:
        return False
    if not entries:
        return True
    manifest_path = os.path.join(path, MANIFEST)
    try:
        if not stat.S_ISREG(os.lstat(manifest_path).st_mode) or os.path.getsize(manifest_path) > _MANIFEST_LIMIT:
            return False
        with open(manifest_path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (OSError, ValueError):
        return False
    if not isinstance(manifest, dict) or manifest.get("written_by") != "pva":
        return False
    listed = manifest.get("files")
    if not isinstance(listed, list):
        return False
    return set(_relative_files(path)) <= {*map(str, listed), MANIFEST}


def _is_partial_directory(path: str) -> bool:
    return os.path.isfile(os.path.join(path, _PARTIAL)) and not os.path.islink(path)


def _start_time(pid: int) -> str | None:
    """The start time of a live process (Linux), which tells it from a later one with the same id."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19] if len(fields) > 19 else None


def _owner_tag() -> str:
    """The part of a temporary name that names its writer: ``p<pid>s<start time>.``."""
    start = _start_time(os.getpid())
    return f"p{os.getpid()}s{start}." if start is not None else ""


def stale_temporaries(target: str | os.PathLike[str]) -> list[str]:
    """Temporaries of ours beside `target` whose writer process is gone (killed before it committed)."""
    if not os.path.isdir("/proc/self"):
        return []
    target = os.path.abspath(os.fspath(target))
    parent, base = os.path.split(target)
    pattern = re.compile(r"\." + re.escape(base) + r"\.p(\d+)s(\d+)\.[A-Za-z0-9_]{8}\.(tmp|old)\Z")
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    found = []
    for name in names:
        match = pattern.match(name)
        if not match or _start_time(int(match.group(1))) == match.group(2):
            continue  # not ours, or its writer is alive
        path = os.path.join(parent, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode):
            if not (_is_partial_directory(path) or is_our_directory(path)):
                continue
        elif not stat.S_ISREG(info.st_mode):
            continue
        found.append(path)
    return sorted(found)


def remove_stale_temporaries(target: str | os.PathLike[str]) -> list[str]:
    """Remove the stale temporaries of ours beside `target`; returns what was removed."""
    removed = []
    for path in stale_temporaries(target):
        try:
            if os.path.isdir(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError:
            continue
        removed.append(path)
    return removed


# -- what a target is -----------------------------------------------------------------------------------------------


def _is_stream_target(path: str) -> bool:
    """Whether `path` is written in place as a stream: a FIFO, a character device, or /dev/stdout and kin."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return True
    return stat.S_ISREG(mode) and _through_proc(path)


def _through_proc(path: str) -> bool:
    """Whether a chain of symbolic links leads through /proc (a process's own descriptors)."""
    current = path
    for _hop in range(40):
        if current.startswith(("/proc/", "/dev/fd/")):
            return True
        if not os.path.islink(current):
            return False
        link = os.readlink(current)
        current = os.path.normpath(os.path.join(os.path.dirname(current), link))
    return False


def _kind_name(path: str) -> str:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "not a regular file"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a file"
    return "not a regular file"


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: str, b: str) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
        return False  # no renameat2, or a file system without exchange: fall back to two renames
    raise OSError(error, os.strerror(error), b)


def _umask() -> int:
    """The process's umask, read without changing it where the system says (Linux /proc)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0)  # elsewhere: set and restore (briefly process-wide)
    os.umask(mask)
    return mask


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
