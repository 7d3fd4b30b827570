"""Chrome trace event JSON out: a report's execution (one track per IPU) or a pva trace file."""

from ..chrome_trace import export_chrome_trace

__all__ = ["export_chrome_trace"]
