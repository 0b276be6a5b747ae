"""A live datacenter: real inference servers and measured GPU power in the loop (docs/live.md).

- :mod:`~openg2g.datacenter.live.config`: a scenario's ``kind: live`` site (endpoints, power, requests).
- :mod:`~openg2g.datacenter.live.site`: :class:`~openg2g.datacenter.live.site.LiveSite`, the backend:
  what is measured and how it is scaled to the site's simulated replicas.
- :mod:`~openg2g.datacenter.live.load`: the closed loop of streaming requests per real replica and
  what it measures (tokens, inter-token latency, requests in flight).
- :mod:`~openg2g.datacenter.live.power` and :mod:`~openg2g.datacenter.live.meters`: GPU power from
  NVML, zeusd or a meter's growing log.
- :mod:`~openg2g.datacenter.live.demo`: a tiny model and ``transformers serve``, for a live run
  without GPUs (``openg2g live demo``).

A replay run imports only the spec (:mod:`~openg2g.datacenter.live.config`, part of the scenario schema).
"""
