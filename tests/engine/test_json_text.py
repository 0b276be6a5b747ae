"""Every JSON file openg2g writes is standard JSON (issue 29): NaN and infinities are refused,
naming the field, instead of being written as ``NaN``/``Infinity``, which strict readers reject."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from openg2g.core.atomic import write_json_atomic
from openg2g.core.errors import OutputError
from openg2g.core.jsontext import json_text


def _strict(text: str) -> object:
    """``text`` read by a reader that accepts standard JSON only."""

    def refuse(constant: str) -> object:
        raise ValueError(f"not standard JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    ("value", "shown"), [(math.inf, "inf"), (-math.inf, "-inf"), (math.nan, "nan")], ids=["inf", "-inf", "nan"]
)
def test_a_non_finite_number_is_refused_with_its_path(value: float, shown: str) -> None:
    data = {"run": "x", "figures": {"overload_integral_pct_s": [1.0, value]}}
    with pytest.raises(OutputError, match=rf"^out/summary.json: figures.overload_integral_pct_s.1 is {shown}, "):
        json_text(data, "out/summary.json")


def test_write_json_atomic_writes_standard_json_and_nothing_when_refused(tmp_path: Path) -> None:
    good = {"max_loading_pct": 101.5, "max_loading_branch": None, "steps": [1, 2]}
    write_json_atomic(tmp_path / "summary.json", good)
    assert _strict((tmp_path / "summary.json").read_text()) == good
    with pytest.raises(OutputError, match="overload_integral_pct_s is inf"):
        write_json_atomic(tmp_path / "other.json", {"overload_integral_pct_s": math.inf})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]
