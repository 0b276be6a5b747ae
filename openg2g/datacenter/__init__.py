"""openg2g.datacenter: the trace library and the trace-replay datacenter backend.

- :mod:`~openg2g.datacenter.library`: :class:`TraceLibrary`, measured power timelines + metadata.
- :mod:`~openg2g.datacenter.build`: builds the bundled library, imports raw power logs.
- :mod:`~openg2g.datacenter.fits`: the controllers' curve fits, stored with the library.
- :mod:`~openg2g.datacenter.replay`: :class:`ReplayDatacenter`, the backend.
- :mod:`~openg2g.datacenter.training`: the parameterized training-job power model.
"""

from openg2g.core.lazy import lazy_exports

__all__ = ["ReplayDatacenter", "TraceConfig", "TraceLibrary", "validate_site"]

# Lazy, so that the site settings of a scenario file (``openg2g.datacenter.config``, read by the
# schema) do not load the trace library and the replay with numpy and scipy.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {"library": ("TraceConfig", "TraceLibrary"), "replay": ("ReplayDatacenter",), "validate": ("validate_site",)},
)
