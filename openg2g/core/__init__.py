"""Core types shared by every component: commands, states, interfaces, errors, bundled paths."""

from openg2g.core.commands import *  # noqa: F403
from openg2g.core.commands import __all__ as _commands_all
from openg2g.core.errors import *  # noqa: F403
from openg2g.core.errors import __all__ as _errors_all
from openg2g.core.protocols import *  # noqa: F403
from openg2g.core.protocols import __all__ as _protocols_all
from openg2g.core.state import *  # noqa: F403
from openg2g.core.state import __all__ as _state_all

__all__ = [*_commands_all, *_errors_all, *_protocols_all, *_state_all]
