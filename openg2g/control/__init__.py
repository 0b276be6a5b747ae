"""Controller plumbing: resolving controllers named in scenarios. The stock controllers live in ``controllers/``."""

from openg2g.control.registry import build_controller, resolve_controller, stock_controllers

__all__ = ["build_controller", "resolve_controller", "stock_controllers"]
