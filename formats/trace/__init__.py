"""The pva trace file (PVTI-style host events in SQLite).

Public face: `formats.trace.writer.TraceWriter` (all at once, for converters) and its batch-by-batch
form for live recording, `formats.trace.reader.TraceReader`, and `formats.trace.tracing`, the
libpvti-style API for recording your own code's events.
"""
