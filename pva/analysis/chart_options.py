"""Options of the charts (`pva html`, `pva plot`): how much detail they keep and which can be drawn.

Light to import: the command line reads the defaults for its help before any analysis loads.
"""

from __future__ import annotations

import dataclasses

#: Units of format_size: Poplar's kB and MB (1024 bytes and 1024 kB), as printProfileSummary prints them.
_SIZE_UNITS = ("B", "kB", "MB", "GB", "TB")


def format_size(size: float) -> str:
    """A size in bytes as pva prints it everywhere: "512 B", "81.3 kB", "1.2 MB" (units of 1024)."""
    value, unit = float(size), 0
    while abs(value) >= 1024 and unit < len(_SIZE_UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{int(value):,} B" if unit == 0 else f"{value:,.1f} {_SIZE_UNITS[unit]}"


#: What `pva plot --kind` and `write_plot` draw.
PLOT_KINDS = ("memory", "liveness", "timeline", "vertex-types")
#: Image formats of `write_plot`, by file extension.
PLOT_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


@dataclasses.dataclass(frozen=True)
class Limits:
    """How much detail the charts keep; larger reports are downsampled to these sizes."""

    max_tiles: int = 512  #: tile buckets per IPU in the memory chart
    max_liveness_points: int = 2000  #: step buckets in the liveness chart
    timeline_resolution: int = 8192  #: segments per IPU in the timeline; 0 keeps every step
    max_table_rows: int = 500  #: rows of the compute set table
    top_categories: int = 8  #: categories drawn separately; the rest are "other"
    peak_variables: int = 10  #: variables listed for the liveness peak

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            low = 0 if field.name == "timeline_resolution" else 1
            if not isinstance(value, int) or value < low:
                raise ValueError(f"{field.name} must be an integer of at least {low}, not {value!r}")
