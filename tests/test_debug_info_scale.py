"""debug.cbor at scale: the reader keeps columns, not an object per context, so its memory grows by a
few tens of bytes per context (issue: 5 M tiny contexts took 2.6 GB)."""

from __future__ import annotations

import gc
import json
import os
import pathlib
import subprocess
import sys

import hostile_corpus

from formats.debug.debug_cbor import DebugInfoReader
from pva.debug import DebugContext, DebugInfo

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: Resident bytes a context may add to the reader's peak: its bytes in the file (18), its columns while
#: read and sorted (id, layer, start, parent count and parent, 8 bytes each, and their growth) and the
#: parent checks' temporary arrays. A dict per context, as the reader once kept, costs about 900.
BYTES_PER_CONTEXT = 200

PROBE = """
import json, sys
from formats.debug.debug_cbor import DebugInfoReader

def peak():
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) * 1024 for line in handle if line.startswith("VmHWM:"))

records = DebugInfoReader(sys.argv[1]).records
print(json.dumps({"count": len(records), "last": records.parents_of(len(records)), "peak": peak()}))
"""


def _peak(path: pathlib.Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, env=env, cwd=ROOT, check=True
    )
    return json.loads(done.stdout)


def test_the_reader_keeps_no_object_per_context(tmp_path):
    path = hostile_corpus.tiny_debug_contexts(tmp_path / "debug.cbor", 50_000)
    gc.collect()
    before = len(gc.get_objects())
    records = DebugInfoReader(path).records
    gc.collect()
    assert len(gc.get_objects()) - before < 1_000  # a dict or record per context would be 50,000
    assert len(records) == 50_000 and list(records)[:3] == [1, 2, 3]
    assert records.parents_of(50_000) == (25_000,) and records.children_of(3) == (6, 7)
    assert records[7].parents == (3,) and records[1].parents == () and records[7].name == ""


def test_peak_memory_grows_by_a_few_bytes_per_context(tmp_path):
    """Peak resident memory of a child reading 100,000 and then 400,000 contexts: the difference over
    the 300,000 more contexts is the cost per context (the file is 18 bytes a context)."""
    small = _peak(hostile_corpus.tiny_debug_contexts(tmp_path / "small.cbor", 100_000))
    large = _peak(hostile_corpus.tiny_debug_contexts(tmp_path / "large.cbor", 400_000))
    assert (small["count"], large["count"]) == (100_000, 400_000) and large["last"] == [200_000]
    per_context = (large["peak"] - small["peak"]) / 300_000
    assert per_context < BYTES_PER_CONTEXT, f"{per_context:.0f} bytes of peak memory per context"


def test_walking_every_context_makes_each_once(tmp_path):
    path = hostile_corpus.tiny_debug_contexts(tmp_path / "debug.cbor", 20_000)
    info = DebugInfo(str(path), None)
    every = info.select(DebugContext.Filter())
    roots = info.select(DebugContext.Filter(True))
    assert len(every) == 20_000 and [c.id for c in roots] == [1]
    assert every[9_999] is info.context(10_000) and roots[0] is every[0]
    assert [c.id for c in every[4].parents] == [2] and [c.id for c in every[4].children] == [10, 11]
    assert info.descendants(5_000) == [5_000, 10_000, 10_001, 20_000]
