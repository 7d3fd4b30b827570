"""debug.cbor: the debug contexts of a compiled graph, written and read as CBOR.

Public face: `formats.debug.debug_cbor` (`write_debug_info`, `DebugInfoReader`, `DebugRecord`).
"""
