"""Bytes on disk: writers and readers of profile.pop and trace files, converters and exporters.

This package knows nothing of pva objects; `pva` builds its object model on the readers here.
"""

__version__ = "0.1.0"
