"""Generated PyTorch profiler (Kineto) traces of any size, shaped like the real ones.

The shape follows the Kineto traces of tests/data (HolisticTraceAnalysis' test data): the
object form with ``deviceProperties``, ``distributedInfo``, ``traceName``, ``displayTimeUnit``
and ``baseTimeNanoseconds``; timestamps with three decimals; ``args`` on every event (External
id, Record function id, Sequence number, input dims and types, correlation ids, kernel launch
geometry); CPU operators nesting on a few host threads; runtime calls that launch kernels and
copies on GPU streams, each launch linked to its kernel by a flow (an ``s`` event where the
runtime call starts, an ``f`` event with ``"bp": "e"`` where the kernel starts), so a third of
the events are flow events; and M events naming, labelling and ordering every process and thread.

Three shapes:

* ``real``: 4 GPUs of 8 streams and 8 host threads (40 threads), metadata for each.
* ``threads``: `threads` threads of one event each, each named and ordered (a trace of many
  short-lived threads, as a thread pool leaves).
* ``metadata``: the ``real`` events plus many metadata events (names and labels repeated for
  every thread, as a trace merged from many ranks holds).
"""

from __future__ import annotations

import os
import pathlib
import random

_HEAD = (
    '{"schemaVersion": 1, "deviceProperties": [%s], "distributedInfo": {"backend": "nccl", "rank": 0, '
    '"world_size": 8}, "record_shapes": 1, "traceEvents": [\n'
)
_DEVICE = (
    '{"id": %d, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85198045184, "computeMajor": 8, '
    '"computeMinor": 0, "maxThreadsPerBlock": 1024, "numSms": 108, "sharedMemPerBlock": 49152}'
)
_TAIL = (
    '\n], "traceName": "generated.pt.trace.json", "displayTimeUnit": "ms", '
    '"baseTimeNanoseconds": 1700000000000000000}\n'
)
_OPS = ("aten::linear", "aten::addmm", "aten::relu", "aten::layer_norm", "aten::softmax", "aten::copy_", "aten::mul")
_KERNELS = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(int)",
    "ampere_sgemm_128x64_tn",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float> >(float)",
    "Memcpy HtoD (Pageable -> Device)",
)


def generate(path: str | os.PathLike[str], events: int, shape: str = "real", *, threads: int = 100_000) -> None:
    """Write a Kineto-shaped trace of about `events` events (`shape` as the module says)."""
    path = pathlib.Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", buffering=1 << 22) as out:
        out.write(_HEAD % ", ".join(_DEVICE % gpu for gpu in range(4)))
        if shape == "threads":
            _many_threads(out, threads)
        else:
            _real(out, events, extra_metadata=shape == "metadata")
        out.write(_TAIL)
    os.replace(tmp, path)


def _metadata(pid: int, tid: int, name: str, kind: str, index: int) -> list[str]:
    head = f'"ph": "M", "ts": 1000.000, "pid": {pid}, "tid": {tid}'
    if kind == "process":
        return [
            f'{{"name": "process_name", {head}, "args": {{"name": "{name}"}}}}',
            f'{{"name": "process_labels", {head}, "args": {{"labels": "{name}"}}}}',
            f'{{"name": "process_sort_index", {head}, "args": {{"sort_index": {index}}}}}',
        ]
    return [
        f'{{"name": "thread_name", {head}, "args": {{"name": "{name}"}}}}',
        f'{{"name": "thread_sort_index", {head}, "args": {{"sort_index": {index}}}}}',
    ]


def _many_threads(out, threads: int) -> None:
    lines = _metadata(1, 0, "python3", "process", 1)
    for tid in range(1, threads + 1):
        lines.extend(_metadata(1, tid, f"worker {tid}", "thread", tid))
        lines.append(
            f'{{"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": {tid}, "ts": {1000 + tid}.125, '
            f'"dur": 2.500, "args": {{"External id": {tid}, "Record function id": 0, "Ev Idx": {tid}}}}}'
        )
    out.write(",\n".join(lines))


def _real(out, events: int, extra_metadata: bool) -> None:
    rng = random.Random(44)
    host = [(100, 100 + t) for t in range(8)]
    gpus = [(gpu, 7 + stream) for gpu in range(4) for stream in range(8)]
    lines = _metadata(100, 0, "python3", "process", 100)
    for gpu in range(4):
        lines.extend(_metadata(gpu, 0, f"GPU {gpu}", "process", 1000 + gpu))
    for pid, tid in host:
        lines.extend(_metadata(pid, tid, f"thread {tid}", "thread", tid))
    for pid, tid in gpus:
        lines.extend(_metadata(pid, tid, f"stream {tid}", "thread", tid))
    out.write(",\n".join(lines))
    written = len(lines)
    clock = dict.fromkeys(host, 5000.0)
    stream_clock = dict.fromkeys(gpus, 5000.0)
    correlation = 0
    while written < events:
        lines = []
        for _ in range(64):
            pid, tid = host[rng.randrange(len(host))]
            gpu, stream = gpus[rng.randrange(len(gpus))]
            t0 = clock[(pid, tid)]
            correlation += 1
            op = _OPS[correlation % len(_OPS)]
            head = f'"pid": {pid}, "tid": {tid}'
            outer = (
                f'{{"ph": "X", "cat": "cpu_op", "name": "{op}", {head}, "ts": {t0:.3f}, "dur": 40.250, '
                f'"args": {{"External id": {correlation}, "Record function id": 0, "Sequence number": '
                f'{correlation}, "Fwd thread id": 0, "Input Dims": [[64, 1024], [1024, 1024], []], '
                f'"Input type": ["float", "float", "Scalar"], "Ev Idx": {correlation}}}}}'
            )
            inner = (
                f'{{"ph": "X", "cat": "cpu_op", "name": "aten::empty", {head}, "ts": {t0 + 2:.3f}, "dur": 5.125, '
                f'"args": {{"External id": {correlation}, "Record function id": 0, "Ev Idx": {correlation}}}}}'
            )
            launch_at = t0 + 10
            runtime = (
                f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", {head}, "ts": {launch_at:.3f}, '
                f'"dur": 6.500, "args": {{"External id": {correlation}, "cbid": 211, "correlation": {correlation}}}}}'
            )
            start = f'{{"ph": "s", "id": {correlation}, {head}, "ts": {launch_at:.3f}, "cat": "ac2g", "name": "ac2g"}}'
            k0 = max(stream_clock[(gpu, stream)], launch_at + 3)
            kernel_name = _KERNELS[correlation % len(_KERNELS)]
            kernel = (
                f'{{"ph": "X", "cat": "kernel", "name": "{kernel_name}", "pid": {gpu}, "tid": {stream}, '
                f'"ts": {k0:.3f}, "dur": 12.750, "args": {{"External id": {correlation}, "queued": 0, '
                f'"device": {gpu}, "context": 1, "stream": {stream}, "correlation": {correlation}, '
                f'"registers per thread": 32, "shared memory": 0, "blocks per SM": 1.18, "warps per SM": 4.74, '
                f'"grid": [128, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %": 7}}}}'
            )
            finish = (
                f'{{"ph": "f", "id": {correlation}, "pid": {gpu}, "tid": {stream}, "ts": {k0:.3f}, '
                f'"cat": "ac2g", "name": "ac2g", "bp": "e"}}'
            )
            lines += [outer, inner, runtime, start, kernel, finish]
            if extra_metadata:
                lines.extend(_metadata(pid, tid, f"thread {tid}", "thread", tid))
                lines.extend(_metadata(pid, 0, "python3", "process", 100))
            clock[(pid, tid)] = t0 + 41 + rng.randrange(5)
            stream_clock[(gpu, stream)] = k0 + 13
        out.write(",\n")
        out.write(",\n".join(lines))
        written += len(lines)
