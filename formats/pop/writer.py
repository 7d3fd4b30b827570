"""The profile.pop writer: what a producer (the simulator, a converter) streams a report into."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import __version__
from ..errors import InvalidInputError
from .arrow_chunks import encode_chunk
from .categories import MEMORY_REGIONS  # noqa: F401  (re-exported)
from .schema import (
    PROFILE_APPLICATION_ID,
    PROFILE_FORMAT,
    profile_matrices,
    profile_schema,
)
from .sqlite_writer import SqliteFileWriter

#: Kinds of per-program per-tile vectors (program_vectors.kind), each with its own matrix.
PROGRAM_VECTOR_KINDS = (
    "control_code",
    "bytes_received",
    "bytes_sent",
    "estimated_cycles",
    "exchange_cycles",
    "sync_cycles",
    "code_bytes",
)


_TARGET_ARCHITECTURES = {"Ipu1", "Ipu2", "Ipu21", "Ipu30", "Unknown"}
_TARGET_TYPES = {"Ipu", "IpuModel", "Cpu", "Unknown"}


class MatrixWriter:
    """Appends rows to one per-tile matrix, writing a compressed chunk each time one fills."""

    def __init__(
        self, owner: ProfileWriter, name: str, num_cols: int, rows_per_chunk: int, compression: str | None
    ) -> None:
        self._owner = owner
        self.name = name
        self.num_cols = num_cols
        self.rows_per_chunk = rows_per_chunk
        self._compression = compression
        self._buffer = np.zeros((rows_per_chunk, num_cols), dtype=np.uint64)
        self._fill = 0
        self._written = 0  # rows already in chunks
        self.num_rows = 0  # rows appended, buffered ones included

    def append(self, rows: Any) -> int:
        """Append one row (1-D) or several (2-D) of non-negative integers; return the first row number."""
        array = np.asarray(rows)
        if array.ndim == 1:
            array = array.reshape(1, -1)
        if array.ndim != 2 or array.shape[1] != self.num_cols:
            raise InvalidInputError(
                f"{self._owner.path!r}: matrix {self.name!r} expects rows of {self.num_cols} values, "
                f"got an array of shape {array.shape}"
            )
        if array.dtype.kind not in "uib":
            raise InvalidInputError(f"{self._owner.path!r}: matrix {self.name!r} expects integers, got {array.dtype}")
        if array.size and array.dtype.kind == "i" and int(array.min()) < 0:
            raise InvalidInputError(
                f"{self._owner.path!r}: matrix {self.name!r} expects non-negative values, got {int(array.min())}"
            )
        first = self.num_rows
        self.num_rows += array.shape[0]
        position = 0
        count = array.shape[0]
        while position < count:
            if self._fill == 0 and count - position >= self.rows_per_chunk:
                self._write(array[position : position + self.rows_per_chunk])
                position += self.rows_per_chunk
                continue
            take = min(self.rows_per_chunk - self._fill, count - position)
            self._buffer[self._fill : self._fill + take] = array[position : position + take]
            self._fill += take
            position += take
            if self._fill == self.rows_per_chunk:
                self.flush()
        return first

    def _write(self, rows: np.ndarray) -> None:
        first_row = self._written
        codec, raw_size, data = encode_chunk(self.name, first_row, rows, self._compression)
        self._owner.insert_rows(
            "matrix_chunks",
            [
                {
                    "matrix": self.name,
                    "first_row": first_row,
                    "num_rows": rows.shape[0],
                    "codec": codec,
                    "raw_size": raw_size,
                    "data": data,
                }
            ],
        )
        self._written += rows.shape[0]

    def flush(self) -> None:
        """Write the rows buffered so far as a chunk."""
        if self._fill:
            self._write(self._buffer[: self._fill])
            self._fill = 0


class ProfileWriter(SqliteFileWriter):
    """Stream a profile.pop report to disk.

    Call `set_target` first (per-tile matrices are sized from it), insert rows into the tables
    of schemas/profile.sql with `insert`, append per-tile vectors with `matrix(name).append`,
    then `close` (or leave the ``with`` block) to build the indexes and rename the file into
    place. Nothing appears under the target name until then.

    >>> with ProfileWriter(path, producer="my-tool") as w:              # doctest: +SKIP
    ...     w.set_target(num_ipus=1, tiles_per_ipu=4, bytes_per_tile=638976)
    ...     w.insert("compute_sets", ("compute_set", "name"), [(0, "cs0")])
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        producer: str = "pva",
        producer_version: str = __version__,
        poplar_version: str = "",
        compression: str | None = "zstd",
        chunk_bytes: int = 2 << 20,
    ) -> None:
        super().__init__(
            path,
            schema=profile_schema(),
            application_id=PROFILE_APPLICATION_ID,
            version=PROFILE_FORMAT,
            producer=producer,
            producer_version=producer_version,
        )
        self.set_metadata(
            poplar_version=poplar_version,
            instrumentation_compute="Off",
            instrumentation_external_exchange="Off",
            report_unstable="0",
        )
        self._compression = compression
        self._chunk_bytes = chunk_bytes
        self._matrices: dict[str, MatrixWriter] = {}
        self.target: dict[str, Any] | None = None
        self._graph_set = False

    # -- singletons -------------------------------------------------------------------------

    def set_target(
        self,
        *,
        num_ipus: int,
        tiles_per_ipu: int,
        bytes_per_tile: int,
        clock_frequency: float = 1.33e9,
        type: str = "IpuModel",
        architecture: str = "Ipu2",
        num_replicas: int = 1,
        relative_sync_delay_by_tile: Sequence[int] | None = None,
        **details: Any,
    ) -> dict[str, Any]:
        """Write the target row, the replicas, IPUs and tiles; derived sizes are computed."""
        if self.target is not None:
            raise InvalidInputError(f"{self.path!r}: the target is already set")
        if type not in _TARGET_TYPES:
            raise InvalidInputError(f"{self.path!r}: target type must be one of {sorted(_TARGET_TYPES)}, got {type!r}")
        if architecture not in _TARGET_ARCHITECTURES:
            raise InvalidInputError(
                f"{self.path!r}: architecture must be one of {sorted(_TARGET_ARCHITECTURES)}, got {architecture!r}"
            )
        for name, count in (("num_ipus", num_ipus), ("tiles_per_ipu", tiles_per_ipu), ("num_replicas", num_replicas)):
            if not isinstance(count, (int, np.integer)) or count < 1:
                raise InvalidInputError(f"{self.path!r}: {name} must be a positive integer, got {count!r}")
        if num_ipus % num_replicas:
            raise InvalidInputError(
                f"{self.path!r}: num_ipus ({num_ipus}) must be a multiple of num_replicas ({num_replicas})"
            )
        num_tiles = num_ipus * tiles_per_ipu
        ipus_per_replica = num_ipus // num_replicas
        row: dict[str, Any] = {
            "type": type,
            "architecture": architecture,
            "num_ipus": num_ipus,
            "tiles_per_ipu": tiles_per_ipu,
            "num_tiles": num_tiles,
            "bytes_per_tile": bytes_per_tile,
            "bytes_per_ipu": bytes_per_tile * tiles_per_ipu,
            "total_memory": bytes_per_tile * num_tiles,
            "clock_frequency": float(clock_frequency),
            "num_replicas": num_replicas,
            "ipus_per_replica": ipus_per_replica,
            "tiles_per_replica": ipus_per_replica * tiles_per_ipu,
            "memory_per_replica": bytes_per_tile * ipus_per_replica * tiles_per_ipu,
        }
        for key, value in details.items():
            if key in ("memory_element_offsets", "memory_region_offsets") and not isinstance(value, str):
                value = "[" + ",".join(str(int(v)) for v in value) + "]"
            row[key] = value
        self.insert("target", list(row), [tuple(row.values())])
        self.insert("replicas", ("id",), [(r,) for r in range(num_replicas)])
        self.insert(
            "ipus",
            ("id", "replica", "architecture"),
            [(i, i // ipus_per_replica, architecture) for i in range(num_ipus)],
        )
        delays = [0] * tiles_per_ipu if relative_sync_delay_by_tile is None else list(relative_sync_delay_by_tile)
        if len(delays) != tiles_per_ipu:
            raise InvalidInputError(
                f"{self.path!r}: relative_sync_delay_by_tile needs {tiles_per_ipu} values (one per tile of an IPU), "
                f"got {len(delays)}"
            )
        clock = float(clock_frequency)
        self.insert_columns(
            "tiles",
            {
                "id": range(num_tiles),
                "ipu": [t // tiles_per_ipu for t in range(num_tiles)],
                "tile_in_ipu": [t % tiles_per_ipu for t in range(num_tiles)],
                "relative_sync_delay": [int(delays[t % tiles_per_ipu]) for t in range(num_tiles)],
                "clock_frequency": [clock] * num_tiles,
            },
        )
        self.target = row
        return row

    def set_graph(self, *, num_compute_sets: int, num_edges: int, num_vars: int, num_vertices: int) -> None:
        """Write the graph counts."""
        self.insert_one(
            "graph",
            num_compute_sets=num_compute_sets,
            num_edges=num_edges,
            num_vars=num_vars,
            num_vertices=num_vertices,
        )
        self._graph_set = True

    # -- matrices ---------------------------------------------------------------------------

    def matrix(self, name: str) -> MatrixWriter:
        """The writer of a per-tile matrix declared in schemas/profile_matrices.json."""
        writer = self._matrices.get(name)
        if writer is not None:
            return writer
        declared = profile_matrices()["matrices"].get(name)
        if declared is None:
            raise InvalidInputError(f"{self.path!r}: no matrix {name!r} in schemas/profile_matrices.json")
        num_cols = self.matrix_columns(declared["columns"])
        rows_per_chunk = max(1, self._chunk_bytes // (8 * max(1, num_cols)))
        writer = MatrixWriter(self, name, num_cols, rows_per_chunk, self._compression)
        self._matrices[name] = writer
        return writer

    def matrix_columns(self, kind: str) -> int:
        """The number of columns of a matrix whose columns are of `kind`."""
        if self.target is None:
            raise InvalidInputError(f"{self.path!r}: set the target before writing per-tile data")
        if kind == "num_tiles":
            return int(self.target["num_tiles"])
        if kind == "tiles_per_replica":
            return int(self.target["tiles_per_replica"])
        if kind == "categories_x_regions":
            (count,) = self.execute("SELECT count(*) FROM var_categories").fetchone()
            if not count:
                raise InvalidInputError(f"{self.path!r}: insert var_categories before memory_category_by_tile")
            return 6 * int(count)
        raise InvalidInputError(f"{self.path!r}: unknown matrix column kind {kind!r}")

    def add_program_vector(self, program: int, kind: str, values: Any) -> int:
        """Store a per-tile vector of a program with its summary row; return its matrix row."""
        if kind not in PROGRAM_VECTOR_KINDS:
            raise InvalidInputError(
                f"{self.path!r}: program vector kind must be one of {', '.join(PROGRAM_VECTOR_KINDS)}, got {kind!r}"
            )
        vector = np.asarray(values)
        row = self.matrix(f"program_{kind}_by_tile").append(vector)
        self.insert_rows(
            "program_vectors",
            [
                {
                    "program": program,
                    "kind": kind,
                    "row": row,
                    "total": int(vector.sum()),
                    "min": int(vector.min()),
                    "max": int(vector.max()),
                }
            ],
        )
        return row

    # -- finishing --------------------------------------------------------------------------

    def _finish(self) -> None:
        if self.target is None:
            raise InvalidInputError(f"{self.path!r}: a report needs a target; call set_target")
        if not self._graph_set:  # counted from the rows written
            sets, vertices = self.execute(
                "SELECT count(*), coalesce(sum(num_vertices), 0) FROM compute_sets"
            ).fetchone()
            self.set_graph(num_compute_sets=sets, num_edges=0, num_vars=0, num_vertices=vertices)
        for writer in self._matrices.values():
            writer.flush()
        self.insert(
            "matrices",
            ("name", "num_rows", "num_cols", "rows_per_chunk"),
            [(w.name, w.num_rows, w.num_cols, w.rows_per_chunk) for w in self._matrices.values()],
        )
        step_matrix = self._matrices.get("step_cycles_by_tile")
        if step_matrix is not None:
            (num_steps,) = self.execute("SELECT count(*) FROM steps").fetchone()
            if step_matrix.num_rows != num_steps:
                raise InvalidInputError(
                    f"{self.path!r}: step_cycles_by_tile has {step_matrix.num_rows} rows but there are "
                    f"{num_steps} steps; write one row per step, in step order"
                )
