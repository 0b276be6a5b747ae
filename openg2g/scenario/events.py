"""A scenario's events as commands: each event's fields validated against its command, field by field."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import create_model

from openg2g.core.commands import COMMANDS, Command
from openg2g.core.config import ConfigModel

__all__ = ["build_event_command"]


_EVENT_MODELS: dict[str, type[ConfigModel]] = {}


def _event_model(name: str) -> type[ConfigModel]:
    """A strict pydantic model mirroring a command dataclass, so events are validated field by field."""
    if name not in _EVENT_MODELS:
        cls = COMMANDS[name]
        fields: dict[str, Any] = {  # (type or its name, default) per field
            f.name: (f.type, ... if f.default is dataclasses.MISSING else f.default) for f in dataclasses.fields(cls)
        }
        _EVENT_MODELS[name] = create_model(
            f"{cls.__name__}Event", __base__=ConfigModel, __module__=cls.__module__, **fields
        )
    return _EVENT_MODELS[name]


def build_event_command(name: str, fields: dict[str, Any]) -> Command:
    """Build a command from its scenario name and fields.

    :raises ValidationError: a field is missing or unknown.
    :raises CommandError: a field has the wrong type (the command checks the values as written:
        ``online: 'no'`` is not a boolean, ``cap_w_per_gpu: '400'`` not a number).
    :raises KeyError: no command has that name.
    """
    model = _event_model(name).model_validate(fields)
    values = {**model.model_dump(), **fields}  # defaults filled in; given values unconverted
    return COMMANDS[name](**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})
