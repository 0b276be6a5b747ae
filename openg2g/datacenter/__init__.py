"""openg2g.datacenter: the trace library and the trace-replay datacenter backend.

- :mod:`~openg2g.datacenter.library`: :class:`TraceLibrary`, measured power timelines + metadata.
- :mod:`~openg2g.datacenter.build`: builds the bundled library, imports raw power logs.
- :mod:`~openg2g.datacenter.fits`: the controllers' curve fits, stored with the library.
- :mod:`~openg2g.datacenter.replay`: :class:`ReplayDatacenter`, the backend.
- :mod:`~openg2g.datacenter.training`: the parameterized training-job power model.
"""

from openg2g.datacenter.library import TraceConfig, TraceLibrary
from openg2g.datacenter.replay import ReplayDatacenter
from openg2g.datacenter.validate import validate_site

__all__ = ["ReplayDatacenter", "TraceConfig", "TraceLibrary", "validate_site"]
