"""Output targets: never delete or replace what pva did not write; a full disk is the machine's fault (exit 2)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import time

import pytest

from formats import atomic
from formats.atomic import AtomicOutput, remove_stale_temporaries, stale_temporaries

PVA = [sys.executable, "-m", "pva"]


def _pva(*args, cwd=None, **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    return subprocess.run(
        [*PVA, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=300, check=False, **kwargs
    )


# -- 1: a directory export never deletes what is not ours -----------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "parquet", "legacy-json"])
def test_a_directory_export_refuses_a_directory_with_unrelated_files(simulated, tmp_path, fmt):
    target = tmp_path / "mydata"
    target.mkdir()
    (target / "thesis.tex").write_text("years of work")
    result = _pva("export", simulated / "profile.pop", "--format", fmt, "-o", target)
    assert result.returncode == 2, result.stderr
    assert "not a previous pva export" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert os.listdir(target) == ["thesis.tex"]
    assert (target / "thesis.tex").read_text() == "years of work"
    assert os.listdir(tmp_path) == ["mydata"]


def test_a_directory_export_into_the_working_directory_keeps_its_files(simulated, tmp_path):
    (tmp_path / "thesis.tex").write_text("years of work")
    result = _pva("export", simulated / "profile.pop", "--format", "csv", "-o", ".", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert sorted(os.listdir(tmp_path)) == ["thesis.tex"]


def test_a_previous_export_is_replaced_and_a_user_file_added_to_it_is_kept(simulated, tmp_path):
    target = tmp_path / "out"
    assert _pva("export", simulated / "profile.pop", "--format", "csv", "-o", target).returncode == 0
    assert _pva("export", simulated / "profile.pop", "--format", "csv", "-o", target).returncode == 0
    (target / "notes.txt").write_text("mine")
    result = _pva("export", simulated / "profile.pop", "--format", "csv", "-o", target)
    assert result.returncode == 2
    assert (target / "notes.txt").read_text() == "mine"


def test_a_directory_export_through_a_symbolic_link_writes_the_linked_directory(simulated, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    result = _pva("export", simulated / "profile.pop", "--format", "parquet", "-o", link)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and (real / "manifest.json").exists()


# -- 5: targets that are not regular files ---------------------------------------------------------------------------


def test_chrome_trace_export_to_a_fifo_is_written_as_a_stream(simulated, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    result = _pva("export", simulated / "profile.pop", "--format", "chrome-trace", "-o", fifo)
    reader.join(timeout=60)
    assert result.returncode == 0, result.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert len(json.loads(received[0])["traceEvents"]) > 10
    assert sorted(os.listdir(tmp_path)) == ["pipe"]


def test_export_to_dev_stdout_streams_the_export_to_standard_output(simulated):
    result = _pva("export", simulated / "profile.pop", "--format", "chrome-trace", "-o", "/dev/stdout")
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["traceEvents"]) > 10
    assert "wrote" in result.stderr


def test_a_symbolic_link_to_standard_output_stays_a_link(simulated, tmp_path):
    link = tmp_path / "out.json"
    link.symlink_to("/proc/self/fd/1")
    result = _pva("export", simulated / "profile.pop", "--format", "legacy-json", "-o", link)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink()
    assert "graphProfile" in json.loads(result.stdout)


def test_a_character_device_is_never_replaced(simulated, tmp_path):
    device = tmp_path / "mynull"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers
    except (PermissionError, OSError):
        pytest.skip("cannot create a character device here")
    result = _pva("export", simulated / "profile.pop", "--format", "chrome-trace", "-o", device)
    assert result.returncode == 0, result.stderr
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    hdf5 = _pva("export", simulated / "profile.pop", "--format", "hdf5", "-o", device)
    assert hdf5.returncode == 2 and "cannot be written as a stream" in hdf5.stderr
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_a_fifo_is_refused_where_the_format_cannot_stream(simulated, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    result = _pva("export", simulated / "profile.pop", "--format", "hdf5", "-o", fifo)
    assert result.returncode == 2 and "a FIFO" in result.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


# -- 14: stale temporaries of a killed writer ------------------------------------------------------------------------


def _killed_writer_temporary(target) -> str:
    """A temporary left by a writer that was killed (a child process that made it and exited)."""
    code = (
        "import sys; from formats.atomic import AtomicOutput; out = AtomicOutput(sys.argv[1]); "
        "open(out.path, 'w').write('partial'); print(out.path)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(target)],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, PYTHONPATH=os.getcwd()),
    )
    return proc.stdout.strip()


def test_the_next_write_removes_temporaries_left_by_a_killed_writer(tmp_path):
    target = tmp_path / "out.json"
    left = _killed_writer_temporary(target)
    assert os.path.exists(left) and stale_temporaries(target) == [left]
    (tmp_path / ".out.json.unrelated.tmp").write_text("not ours")
    with AtomicOutput(target) as live, open(live.path, "w") as handle:
        handle.write("{}")
        assert stale_temporaries(target) == []  # a live writer's temporary is never stale
    assert not os.path.exists(left)
    assert sorted(os.listdir(tmp_path)) == [".out.json.unrelated.tmp", "out.json"]
    assert remove_stale_temporaries(target) == []


def test_check_mentions_stale_temporaries(sample, tmp_path):
    report = tmp_path / "profile.pop"
    shutil.copyfile(sample.path, report)
    left = _killed_writer_temporary(report)
    result = _pva("check", report)
    assert os.path.basename(left) in result.stdout + result.stderr


# -- 8: a full disk, and other faults of the machine ------------------------------------------------------------------


@pytest.fixture
def tiny_disk(tmp_path):
    """A 256 kB tmpfs where the machine allows mounting one (root); skipped elsewhere."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    if not sys.platform.startswith("linux") or shutil.which("mount") is None:
        pytest.skip("no mount here")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True, check=False
    )
    if proc.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root, or in a container without the capability)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True, check=False)


@pytest.mark.parametrize(
    "fmt, name",
    [
        ("parquet", "pq"),
        ("csv", "csv"),
        ("legacy-json", "legacy"),
        ("legacy-json", "legacy.json"),
        ("hdf5", "m.h5"),
        ("chrome-trace", "t.json"),
    ],
)
def test_export_on_a_full_disk_exits_2_and_leaves_nothing(simulated, tiny_disk, fmt, name):
    result = _pva("export", simulated / "profile.pop", "--format", fmt, "-o", tiny_disk / name)
    if result.returncode == 0:  # the output fitted
        assert os.listdir(tiny_disk) == [name]
        return
    assert result.returncode == 2, result.stderr
    assert "no space left on device" in result.stderr and str(tiny_disk / name) in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert os.listdir(tiny_disk) == []


def test_convert_and_simulate_on_a_full_disk_exit_2(simulated, tiny_disk):
    exported = tiny_disk.parent / "legacy.json"
    assert _pva("export", simulated / "profile.pop", "--format", "legacy-json", "-o", exported).returncode == 0
    result = _pva("convert", exported, "-o", tiny_disk / "back.pop")
    assert result.returncode == 2 and "no space left on device" in result.stderr, result.stderr
    result = _pva("simulate", "--preset", "mnist-mlp", "--tiles-per-ipu", "64", "-o", tiny_disk / "run")
    assert result.returncode == 2 and "no space left on device" in result.stderr, result.stderr
    assert [p for p in tiny_disk.rglob("*") if not p.is_dir()] == []


def test_a_simulated_full_disk_is_an_output_error(tmp_path, monkeypatch):
    """Where no tmpfs can be mounted: ENOSPC from a write is reported as the machine's fault, nothing is left."""
    target = tmp_path / "out.json"

    with (
        pytest.raises(OSError, match="no space left on device") as caught,
        AtomicOutput(target) as out,
        open(out.path, "w") as handle,
    ):
        handle.write("x")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert type(caught.value).__name__ == "OutputError" and str(target) in str(caught.value)
    assert os.listdir(tmp_path) == []
    with pytest.raises(ZeroDivisionError), AtomicOutput(target):  # a bug stays a bug
        1 / 0
    assert os.listdir(tmp_path) == []


def test_simulate_onto_an_existing_file_exits_2(tmp_path):
    target = tmp_path / "file"
    target.write_text("mine")
    result = _pva("simulate", "--preset", "tutorial1", "--tiles-per-ipu", "16", "-o", target)
    assert result.returncode == 2 and "is a file" in result.stderr, result.stderr
    assert target.read_text() == "mine"


def test_stale_detection_tells_a_reused_process_id(tmp_path, monkeypatch):
    target = tmp_path / "x"
    name = tmp_path / f".x.p{os.getpid()}s1.abcdefgh.tmp"  # our pid, another start time
    name.write_text("")
    old = time.time() - 100
    os.utime(name, (old, old))
    assert stale_temporaries(target) == [str(name)]
    assert atomic._owner_tag().startswith(f"p{os.getpid()}s")
