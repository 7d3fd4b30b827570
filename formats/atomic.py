"""Atomic output: write under a temporary name beside the target, rename when complete."""

from __future__ import annotations

import os
import shutil
import tempfile


class AtomicOutput:
    """A temporary file (or directory) beside `target` that replaces it only on commit.

    A process killed before `commit` leaves the target untouched: either absent or the complete
    previous version. The temporary name starts with a dot and ends with ``.tmp``.
    """

    def __init__(self, target: str | os.PathLike[str], *, directory: bool = False) -> None:
        self.target = os.path.abspath(os.fspath(target))
        parent = os.path.dirname(self.target)
        if not os.path.isdir(parent):
            raise FileNotFoundError(f"cannot write {self.target!r}: directory {parent!r} does not exist")
        prefix = "." + os.path.basename(self.target) + "."
        self.directory = directory
        if directory:
            self.path = tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=parent)
            os.chmod(self.path, 0o777 & ~_umask())
        else:
            fd, self.path = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=parent)
            os.close(fd)
            os.chmod(self.path, 0o666 & ~_umask())  # as open() would create it, not mkstemp's 0600
        self.done = False

    def commit(self) -> None:
        """Make the temporary output durable and move it to the target name."""
        if self.done:
            return
        if self.directory:
            for root, _dirs, files in os.walk(self.path):
                for name in files:
                    _fsync_path(os.path.join(root, name))
            if os.path.isdir(self.target):
                # Directories cannot be replaced atomically; swap via a second temporary name.
                old = tempfile.mkdtemp(prefix="." + os.path.basename(self.target) + ".", suffix=".old",
                                       dir=os.path.dirname(self.target))
                os.rmdir(old)
                os.replace(self.target, old)
                os.replace(self.path, self.target)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(self.path, self.target)
        else:
            _fsync_path(self.path)
            os.replace(self.path, self.target)
        _fsync_dir(os.path.dirname(self.target))
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
            self.commit()
        else:
            self.abort()


def _umask() -> int:
    mask = os.umask(0)
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
