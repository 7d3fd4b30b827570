"""Atomic output: write under a temporary name beside the target, rename when complete."""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import sys
import tempfile

from .errors import InvalidInputError, ReportNotFoundError


class AtomicOutput:
    """A temporary file (or directory) beside `target` that replaces it only on commit.

    A process killed before `commit` leaves the target untouched: either absent or the complete
    previous version. The temporary name starts with a dot and ends with ``.tmp``.
    """

    def __init__(self, target: str | os.PathLike[str], *, directory: bool = False) -> None:
        self.target = os.path.abspath(os.fspath(target))
        parent = os.path.dirname(self.target)
        if not os.path.isdir(parent):
            raise ReportNotFoundError(f"cannot write {self.target!r}: directory {parent!r} does not exist",
                                      self.target)
        self.directory = directory
        self.check_target()
        prefix = "." + os.path.basename(self.target) + "."
        if directory:
            self.path = tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=parent)
            os.chmod(self.path, 0o777 & ~_umask())
        else:
            fd, self.path = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=parent)
            os.close(fd)
            os.chmod(self.path, 0o666 & ~_umask())  # as open() would create it, not mkstemp's 0600
        self.done = False
        self._prepared = False

    def check_target(self) -> None:
        """Refuse a target of the wrong kind (a directory where a file goes, or a file where a directory goes)."""
        if os.path.isdir(self.target) and not os.path.islink(self.target) and not self.directory:
            raise InvalidInputError(f"{self.target!r}: is a directory; expected a file name to write to "
                                    f"(or nothing there)", self.target)
        if self.directory and os.path.lexists(self.target) and not os.path.isdir(self.target):
            raise InvalidInputError(f"{self.target!r}: is a file; expected a directory name to write to "
                                    f"(or nothing there)", self.target)

    def prepare(self) -> None:
        """Make the temporary output durable (fsync) without making it visible yet."""
        if self.done or self._prepared:
            return
        if self.directory:
            for root, dirs, files in os.walk(self.path):
                for name in files:
                    _fsync_path(os.path.join(root, name))
                for name in dirs:
                    _fsync_dir(os.path.join(root, name))
            _fsync_dir(self.path)
        else:
            _fsync_path(self.path)
        self._prepared = True

    def commit(self) -> None:
        """Make the temporary output durable and move it to the target name."""
        commit_together([self])

    def _publish(self) -> None:
        """Move the (prepared) temporary output to the target name in one step."""
        if self.directory and os.path.isdir(self.target) and not os.path.islink(self.target):
            # A directory cannot be renamed over a non-empty one: swap the two atomically where
            # the system can (Linux renameat2 RENAME_EXCHANGE), so the target name always holds
            # a complete version; then remove the old one, now under the temporary name.
            if _exchange(self.path, self.target):
                shutil.rmtree(self.path, ignore_errors=True)
            else:
                old = tempfile.mkdtemp(prefix="." + os.path.basename(self.target) + ".", suffix=".old",
                                       dir=os.path.dirname(self.target))
                os.rmdir(old)
                os.replace(self.target, old)
                try:
                    os.replace(self.path, self.target)
                except BaseException:
                    os.replace(old, self.target)  # put the previous version back under its name
                    raise
                shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(self.path, self.target)
        self.done = True

    def abort(self) -> None:
        """Remove the temporary output; the target is left as it was."""
        if self.done:
            return
        if self.directory:
            shutil.rmtree(self.path, ignore_errors=True)
        else:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        self.done = True

    def __enter__(self) -> "AtomicOutput":
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


def commit_together(outputs: "list[AtomicOutput]") -> None:
    """Commit several outputs as close together as the file system allows.

    Every output is made durable first; only then are they renamed to their targets, one rename
    each, back to back, so a process killed before the renames leaves every target as it was.
    """
    pending = [out for out in outputs if not out.done]
    for out in pending:
        out.check_target()  # every rename must be able to succeed before the first is made
    for out in pending:
        out.prepare()
    for out in pending:
        out._publish()
    for parent in dict.fromkeys(os.path.dirname(out.target) for out in pending):
        _fsync_dir(parent)


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
