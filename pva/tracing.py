"""Record host-side events of your own code into a trace file (`formats.trace.tracing`, re-exported).

>>> from pva import tracing                                           # doctest: +SKIP
>>> with tracing.Recorder("host.pvti") as recorder:                   # doctest: +SKIP
...     with recorder.channel("io").event("load"):
...         load()
"""

from formats.trace.tracing import (  # noqa: F401  (re-exported)
    ENVIRONMENT_VARIABLE,
    Channel,
    Recorder,
    __all__,
    active,
    channel,
    start,
    start_from_environment,
    stop,
)
