"""Encoding and decoding of per-tile matrix chunks as Arrow IPC streams."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from ..errors import CorruptReportError
from ..lazy_import import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
else:
    np = lazy_module("numpy")
    pa = lazy_module("pyarrow")

#: Value types a chunk may use, narrowest first, with the largest value each holds.
VALUE_TYPES = (("uint8", 2**8 - 1), ("uint16", 2**16 - 1), ("uint32", 2**32 - 1), ("uint64", 2**64 - 1))


def narrowest_dtype(values: np.ndarray) -> np.dtype:
    """The narrowest unsigned integer type that holds every value of a non-negative array."""
    top = int(values.max()) if values.size else 0
    for name, limit in VALUE_TYPES:
        if top <= limit:
            return np.dtype(name)
    raise ValueError(f"value {top} does not fit in 64 bits")


#: Chunk codecs: the name stored in matrix_chunks.codec and pyarrow's codec name.
CODECS = {"zstd": "zstd", "lz4": "lz4", "none": None}
#: Bytes an Arrow IPC stream of one batch may hold beyond its values (schema, metadata, padding).
IPC_OVERHEAD = 64 * 1024


def encode_chunk(
    matrix: str, first_row: int, rows: np.ndarray, compression: str | None = "zstd"
) -> tuple[str, int, bytes]:
    """Encode a 2-D array of non-negative integers: (codec, raw_size, compressed Arrow IPC stream)."""
    if rows.ndim != 2:
        raise ValueError(f"matrix {matrix!r}: expected a 2-D array, got {rows.ndim}-D")
    if rows.size and rows.dtype.kind == "i" and int(rows.min()) < 0:
        raise ValueError(f"matrix {matrix!r}: negative value {int(rows.min())}")
    codec = "none" if compression in (None, "none") else compression
    if codec not in CODECS:
        raise ValueError(f"unknown codec {compression!r}; expected one of {', '.join(CODECS)}")
    dtype = narrowest_dtype(rows)
    flat = np.ascontiguousarray(rows, dtype=dtype).reshape(-1)
    num_cols = rows.shape[1]
    values = pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.from_numpy_dtype(dtype)), num_cols)
    schema = pa.schema(
        [pa.field("values", values.type, nullable=False)],
        metadata={"pva.matrix": matrix, "pva.first_row": str(first_row)},
    )
    batch = pa.record_batch([values], schema=schema)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(batch)
    raw = sink.getvalue()
    if CODECS[codec] is None:
        return codec, raw.size, raw.to_pybytes()
    return codec, raw.size, pa.Codec(CODECS[codec]).compress(raw, asbytes=True)


class _FlatBuffer:
    """Just enough of a FlatBuffers reader to see an Arrow IPC message's header before it is decoded."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def _get(self, fmt: str, pos: int):
        if pos < 0 or pos + struct.calcsize(fmt) > len(self.data):
            raise ValueError("message header out of bounds")
        return struct.unpack_from(fmt, self.data, pos)[0]

    def table(self, pos: int) -> int:
        return pos

    def field(self, table: int, index: int) -> int | None:
        """The position of field `index` of the table at `table`, or None when it is absent."""
        vtable = table - self._get("<i", table)
        size = self._get("<H", vtable)
        entry = vtable + 4 + 2 * index
        if entry + 2 > vtable + size:
            return None
        offset = self._get("<H", entry)
        return table + offset if offset else None

    def indirect(self, pos: int) -> int:
        return pos + self._get("<I", pos)


#: Arrow IPC MessageHeader union values (Schema.fbs / Message.fbs).
_HEADER_SCHEMA, _HEADER_DICTIONARY_BATCH, _HEADER_RECORD_BATCH = 1, 2, 3


def _batch_header(metadata: bytes) -> tuple[int, int, bool, list[int]]:
    """(header type, record count, body compressed?, node lengths) of an Arrow IPC message."""
    fb = _FlatBuffer(metadata)
    message = fb.indirect(0)
    type_pos = fb.field(message, 1)
    header_type = fb._get("<B", type_pos) if type_pos is not None else 0
    header_pos = fb.field(message, 2)
    if header_type not in (_HEADER_DICTIONARY_BATCH, _HEADER_RECORD_BATCH) or header_pos is None:
        return header_type, 0, False, []
    batch = fb.indirect(header_pos)
    if header_type == _HEADER_DICTIONARY_BATCH:  # DictionaryBatch: id, data (a RecordBatch), isDelta
        data_pos = fb.field(batch, 1)
        if data_pos is None:
            return header_type, 0, False, []
        batch = fb.indirect(data_pos)
    length_pos = fb.field(batch, 0)
    length = fb._get("<q", length_pos) if length_pos is not None else 0
    nodes: list[int] = []
    nodes_pos = fb.field(batch, 1)
    if nodes_pos is not None:
        vector = fb.indirect(nodes_pos)
        count = fb._get("<I", vector)
        if count > len(metadata) // 16:
            raise ValueError("message header declares more field nodes than it holds")
        nodes = [fb._get("<q", vector + 4 + 16 * k) for k in range(count)]
    compressed = fb.field(batch, 3) is not None
    return header_type, length, compressed, nodes


def check_ipc_stream(
    raw: pa.Buffer | bytes, *, max_rows: int, where: str, path: str, max_values: int | None = None
) -> int:
    """Check the headers of every message of an Arrow IPC stream before anything is decoded; returns its rows.

    Refuses IPC body compression (pva never writes it: a small stream could expand without bound),
    and batches whose declared lengths take the rows past `max_rows`, or whose fields declare more
    than `max_values` values. Reading headers decodes no body: an uncompressed body is a slice of
    `raw`, so decoding afterwards allocates no more than the stream's own size.
    """
    reader = pa.ipc.MessageReader.open_stream(raw)
    limit_values = max_values if max_values is not None else max_rows
    rows = 0
    first = True
    while True:
        try:
            message = reader.read_next_message()
        except StopIteration:
            break
        if message is None:
            break
        kind, length, compressed, nodes = _batch_header(message.metadata.to_pybytes())
        if first and kind != _HEADER_SCHEMA:
            raise ValueError("the stream does not begin with a schema")
        first = False
        if compressed:
            raise CorruptReportError(
                f"{where}: expected an Arrow IPC stream without body compression (pva never writes it), "
                f"found a compressed {message.type}",
                path,
            )
        if kind == _HEADER_DICTIONARY_BATCH and (
            length < 0 or length > limit_values or any(n < 0 or n > limit_values for n in nodes)
        ):
            raise CorruptReportError(
                f"{where}: expected a dictionary of at most {limit_values} values, found one declaring {length}", path
            )
        if kind == _HEADER_RECORD_BATCH:
            if length < 0 or rows + length > max_rows:
                raise CorruptReportError(
                    f"{where}: expected at most {max_rows} rows in all, found a batch declaring {length} rows "
                    f"after {rows}",
                    path,
                )
            if any(n < 0 or n > limit_values for n in nodes):
                raise CorruptReportError(
                    f"{where}: expected fields of at most {limit_values} values, found a batch declaring {max(nodes)}",
                    path,
                )
            rows += length
    return rows


def decode_chunk(
    data: bytes,
    *,
    codec: str,
    raw_size: int,
    matrix: str,
    first_row: int,
    num_rows: int,
    num_cols: int,
    path: str,
) -> np.ndarray:
    """Decode one chunk into a (num_rows, num_cols) array, checking it is what the index says.

    Nothing larger than the declared shape allows is allocated, whatever the chunk claims.
    """
    where = f"{path!r}: matrix {matrix!r} chunk at row {first_row}"
    limit = num_rows * num_cols * 8 + IPC_OVERHEAD
    if codec not in CODECS:
        raise CorruptReportError(f"{where}: expected codec zstd, lz4 or none, found {codec!r}", path)
    if not isinstance(raw_size, int) or not 0 < raw_size <= limit:
        raise CorruptReportError(
            f"{where}: expected an uncompressed size of at most {limit} bytes for {num_rows}x{num_cols} values, "
            f"found {raw_size!r}",
            path,
        )
    if not isinstance(data, bytes):
        raise CorruptReportError(f"{where}: expected a BLOB, found {type(data).__name__}", path)
    try:
        if CODECS[codec] is None:
            if len(data) != raw_size:
                raise ValueError(f"{len(data)} bytes stored, {raw_size} declared")
            raw = pa.py_buffer(data)
        else:
            raw = pa.Codec(CODECS[codec]).decompress(data, decompressed_size=raw_size)
        check_ipc_stream(raw, max_rows=num_rows, max_values=num_rows * num_cols, where=where, path=path)
        reader = pa.ipc.open_stream(raw)
        _ = reader.schema.names  # field names must be UTF-8 (a damaged name fails here, not on first use)
        batches = list(reader)  # every batch's header is checked: they fit the declared shape together
    except CorruptReportError:
        raise
    except (pa.ArrowException, OSError, ValueError, struct.error, UnicodeDecodeError) as exc:
        raise CorruptReportError(
            f"{where}: expected a {codec}-compressed Arrow IPC stream, found unreadable data ({exc})", path
        ) from None
    if len(batches) != 1 or batches[0].num_columns != 1:
        raise CorruptReportError(
            f"{where}: expected one record batch with one column, found {len(batches)} batches", path
        )
    column = batches[0].column(0)
    if not pa.types.is_fixed_size_list(column.type) or column.type.list_size != num_cols:
        raise CorruptReportError(f"{where}: expected fixed_size_list of {num_cols} values, found {column.type}", path)
    if len(column) != num_rows or column.null_count:
        raise CorruptReportError(
            f"{where}: expected {num_rows} rows without nulls, found {len(column)} rows and {column.null_count} nulls",
            path,
        )
    value_type = column.type.value_type
    if not pa.types.is_unsigned_integer(value_type):
        raise CorruptReportError(f"{where}: expected unsigned integer values, found {value_type}", path)
    flat = column.flatten()
    if len(flat) != num_rows * num_cols:
        raise CorruptReportError(f"{where}: expected {num_rows * num_cols} values, found {len(flat)}", path)
    return flat.to_numpy(zero_copy_only=False).reshape(num_rows, num_cols)
