"""Whether the RL extra is installed: training and running SB3 policies need stable-baselines3 and
PyTorch, which the platform's main job does not (``pip install 'openg2g-cosim[rl]'``)."""

from __future__ import annotations

from openg2g.core.errors import G2GError

__all__ = ["RL_INSTALL", "require_sb3"]

RL_INSTALL = (
    "pip install torch --index-url https://download.pytorch.org/whl/cpu && pip install 'openg2g-cosim[rl]' "
    "(the CPU PyTorch first: the package index's Linux build is the multi-GB CUDA one)"
)
"""How to install the RL extra."""


def require_sb3(what: str) -> None:
    """Check that stable-baselines3 imports, before ``what`` starts.

    :param what: what needs it, for the message (``"openg2g train"``, ``"policy ieee13_ppo"``).
    :raises G2GError: it does not (not installed, or its PyTorch fails to load), with how to install it.
    """
    try:
        import stable_baselines3  # noqa: F401
    except ImportError as exc:
        raise G2GError(f"{what} needs stable-baselines3 and PyTorch, the rl extra ({exc}): {RL_INSTALL}") from None
