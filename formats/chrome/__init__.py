"""Chrome trace event JSON in and out: chrome://tracing, the Perfetto UI, PyTorch profiler traces.

Public face: `formats.chrome.importer.import_chrome_trace` (JSON in, a pva trace file out) and
`formats.chrome.export.export_chrome_trace` (a report's execution, or a trace file, out). Below them:
``events`` (bounded-memory reading of the JSON), ``parallel_read`` (a large file read as two halves
at once), ``writer`` (the streaming JSON writer) and ``execution_events`` (a report's execution as
Chrome events).
"""
