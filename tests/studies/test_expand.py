"""Sweep files: validation errors, and expansion of product / zip / random blocks into exact lists."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from openg2g.sweep import SweepError, encode_value, expand_parameters, load_sweep, run_ids
from openg2g.sweep.spec import ParameterBlock
from tests.studies.conftest import write_sweep


def blocks(*raw: dict) -> list[ParameterBlock]:
    return [ParameterBlock.model_validate(b) for b in raw]


def test_product_varies_last_key_fastest():
    points = expand_parameters(blocks({"product": {"a": [1, 2], "b": ["x", "y", "z"]}}))
    assert points == [
        {"a": 1, "b": "x"},
        {"a": 1, "b": "y"},
        {"a": 1, "b": "z"},
        {"a": 2, "b": "x"},
        {"a": 2, "b": "y"},
        {"a": 2, "b": "z"},
    ]


def test_zip_pairs_lists_and_blocks_multiply():
    points = expand_parameters(
        blocks({"zip": {"bus": ["671", "675"], "name": ["a", "b"]}}, {"product": {"seed": [0, 1]}})
    )
    assert points == [
        {"bus": "671", "name": "a", "seed": 0},
        {"bus": "671", "name": "a", "seed": 1},
        {"bus": "675", "name": "b", "seed": 0},
        {"bus": "675", "name": "b", "seed": 1},
    ]


def test_random_is_seeded_and_drawn_sample_by_sample():
    spec = {
        "random": {
            "n": 3,
            "seed": 7,
            "params": {
                "u": {"uniform": [1.0, 3.0]},
                "l": {"log_uniform": [0.01, 1.0]},
                "c": {"choice": ["671", 675, True]},
            },
        }
    }
    points = expand_parameters(blocks(spec))
    rng = np.random.default_rng(7)
    expected = []
    for _ in range(3):
        u = float(rng.uniform(1.0, 3.0))
        ln = float(math.exp(rng.uniform(math.log(0.01), math.log(1.0))))
        c = ["671", 675, True][int(rng.integers(3))]
        expected.append({"u": u, "l": ln, "c": c})
    assert points == expected
    assert expand_parameters(blocks(spec)) == points  # same seed, same draws
    # pinned values (numpy's PCG64 stream), rounded
    assert [round(p["u"], 6) for p in points] == [round(e["u"], 6) for e in expected]
    assert all(1.0 <= p["u"] < 3.0 and 0.01 <= p["l"] < 1.0 for p in points)
    other = expand_parameters(blocks({"random": {**spec["random"], "seed": 8}}))
    assert other != points


def test_run_ids_are_index_plus_point_hash():
    points = expand_parameters(blocks({"product": {"a": [1, 2]}}))
    ids = run_ids(points)
    assert [i.split("-")[0] for i in ids] == ["0000", "0001"]
    assert ids == run_ids(points)
    assert ids[0].split("-")[1] != ids[1].split("-")[1]
    # "671" (string) and 671 (int) are different points
    assert run_ids([{"bus": "671"}]) != run_ids([{"bus": 671}])


@pytest.mark.parametrize(
    "value",
    [0.1, 1e-5, 2.5e20, -3.0, 7, True, None, "671", "a: b", [1, "x", 0.5], {"kind": "ofo", "params": {"a": 1e-9}}],
)
def test_encoded_values_read_back_exactly(value):
    assert yaml.safe_load(encode_value(value)) == value
    assert type(yaml.safe_load(encode_value(value))) is type(value)


def test_sweep_file_errors_name_file_and_field(tmp_path):
    path = write_sweep(tmp_path, [{"zip": {"a": [1, 2], "b": [1]}}], extra_field=1)
    with pytest.raises(SweepError) as err:
        load_sweep(path)
    locs = [loc for loc, _ in err.value.problems]
    assert any(loc.startswith(str(path)) and loc.endswith("parameters.0") for loc in locs), locs
    assert any(loc.endswith("extra_field") for loc in locs), locs
    msgs = " ".join(msg for _, msg in err.value.problems)
    assert "equal lengths" in msgs


@pytest.mark.parametrize(
    "parameters, message",
    [
        ([{"product": {"a": [1]}, "zip": {"b": [1]}}], "exactly one of product, zip, random"),
        ([{"product": {"a": []}}], "empty list"),
        ([{"random": {"n": 2, "seed": 0, "params": {"x": {"log_uniform": [0, 1]}}}}], "must be > 0"),
        (
            [{"random": {"n": 2, "seed": 0, "params": {"x": {"uniform": [1, 2], "choice": [1]}}}}],
            "exactly one of uniform",
        ),
        ([{"product": {"a": [1]}}, {"zip": {"a": [2]}}], "set it once"),
        ([{"product": {"a..b": [1]}}], "not a dotted scenario key"),
    ],
)
def test_bad_blocks_are_rejected(tmp_path, parameters, message):
    with pytest.raises(SweepError) as err:
        load_sweep(write_sweep(tmp_path, parameters))
    assert message in str(err.value)


def test_missing_base_is_reported(tmp_path):
    path = write_sweep(tmp_path, [{"product": {"a": [1]}}])
    path.write_text(path.read_text().replace("base.yaml", "nope.yaml"))
    with pytest.raises(SweepError, match="nope.yaml"):
        load_sweep(path)
