"""Options of the charts (`pva html`, `pva plot`): how much detail they keep and which can be drawn.

Light to import: the command line reads the defaults for its help before any analysis loads.
"""

from __future__ import annotations

import dataclasses

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
