"""The one way openg2g reads YAML text: safe, strict and bounded.

- **safe**: PyYAML's ``SafeLoader`` (libyaml's, when PyYAML has it): plain data, never a Python object;
- **strict**: a key given twice in one mapping is refused (YAML would keep the last silently);
- **bounded**: aliases may not expand a document beyond ``max_nodes`` values, counted without
  expanding them. Seven lines of aliases nesting nine deep (a "billion laughs") read in a moment,
  as shared objects, but writing them out or validating them takes minutes and gigabytes; they are
  refused here, before anything walks them. An alias to the structure it is part of (a cycle) and
  nesting beyond Python's recursion limit are refused too.

Scenario files and ``--set`` values (:mod:`openg2g.scenario.loader`), a run folder's
``scenario.yaml`` read by the plots and the app, and the app's form fields are read here.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import yaml

__all__ = ["MAX_YAML_NODES", "YamlTextError", "read_yaml_text"]

MAX_YAML_NODES = 1_000_000
"""Most values (mapping keys, values and list items, counted as written out) one YAML document
may hold once its aliases are expanded; a bundled scenario holds a few hundred."""

if TYPE_CHECKING:
    from yaml import SafeLoader as _SafeBase
else:  # libyaml's parser (in PyYAML's wheels) reads a scenario 7x faster, with the same constructors
    _SafeBase = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlTextError(ValueError):
    """Why a YAML text cannot be read, as a phrase that follows "is" (``not valid YAML: ...``,
    ``nested too deeply to read``, ``too big: ...``), with the line and column (from 1) of a
    syntax error."""

    def __init__(self, problem: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(problem)
        self.line = line
        self.column = column


class _StrictLoader(_SafeBase):
    """Safe YAML that refuses a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_yaml_text(text: str, max_nodes: int = MAX_YAML_NODES) -> Any:
    """``text`` read as YAML (module docstring); an empty text is ``None``.

    :param max_nodes: most values the document may hold once its aliases are expanded.
    :raises YamlTextError: not valid YAML (with its line and column), nested too deeply, a value
        Python cannot hold (an integer of 5,000 digits, the date 2024-13-45), aliases expanding it
        beyond ``max_nodes`` values, or an alias cycle.
    """
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = str(getattr(exc, "problem", exc))
        if "nesting depth" in problem:  # libyaml's own limit, where the Python parser would recurse too deeply
            raise YamlTextError("nested too deeply to read") from None
        where = (mark.line + 1, mark.column + 1) if mark else (None, None)
        raise YamlTextError(f"not valid YAML: {problem}", *where) from None
    except RecursionError:
        raise YamlTextError("nested too deeply to read") from None
    except ValueError as exc:
        raise YamlTextError(f"not readable: {exc}") from None
    _check_expansion(data, max_nodes)
    return data


def _check_expansion(data: Any, max_nodes: int) -> None:
    """Refuse ``data`` (as loaded, aliases shared) when it is too big to write out.

    Counts each value as often as the aliases repeat it, without expanding them (shared
    containers are counted once and remembered), so an alias bomb is caught in linear time.

    :raises YamlTextError: more than ``max_nodes`` values, a cycle, or nesting too deep to walk.
    """
    sizes: dict[int, int] = {}
    open_ids: set[int] = set()

    def size(value: Any) -> int:
        if not isinstance(value, (dict, list)):
            return 1
        key = id(value)
        if key in sizes:
            return sizes[key]
        if key in open_ids:
            raise YamlTextError("circular: a YAML alias refers to the structure it is part of")
        open_ids.add(key)
        total = 1
        for item in (*value.keys(), *value.values()) if isinstance(value, dict) else value:
            total += size(item)
            if total > max_nodes:
                break
        open_ids.discard(key)
        sizes[key] = total
        return total

    try:
        too_big = size(data) > max_nodes
    except RecursionError:
        raise YamlTextError("nested too deeply to read") from None
    if too_big:
        raise YamlTextError(
            f"too big: more than {max_nodes:,} values once its YAML aliases are expanded (an alias bomb?)"
        )
