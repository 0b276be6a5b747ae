"""Branch ratings set in the scenario (``grid.branch_ratings``): loading is reported against them,
the power flow is not touched, and names, units and inconsistent pairs are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from pydantic import ValidationError

from openg2g.cli.main import main
from openg2g.core.state import DatacenterState, GridState
from openg2g.grid.config import SiteConnection as Site
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.branches import transformer_rated_a
from openg2g.grid.feeder.library import load_feeder, resolve_feeder
from openg2g.grid.kinds import validate_grid
from openg2g.grid.nets.source import NET_RATINGS
from openg2g.scenario.schema import GridSpec

_SITE = Site("dc", "671", 0.95)


def _grid(**grid: object) -> tuple[FeederGrid, GridState]:
    spec = GridSpec.model_validate({"feeder": "ieee13", **grid})
    backend = FeederGrid.from_spec(spec, [_SITE], Path("."))
    p = np.full(3, 1e6)
    return backend, backend.solve(0.0, {"dc": DatacenterState("dc", 0.0, p, 0.33 * p, {})}, 1.0)


def _solve(**grid: object) -> GridState:
    return _grid(**grid)[1]


def _rows(state: GridState, name: str) -> np.ndarray:
    assert state.branches is not None
    return np.flatnonzero(state.branches.branch == state.branches.names.index(name))


def test_a_rated_line_is_loaded_against_its_new_rating_and_nothing_else_moves() -> None:
    default_grid, default = _grid()
    rated_grid, rated = _grid(branch_ratings={"line.650632": {"normal_a": 800, "emergency_a": 1000}})
    assert default.branches is not None and rated.branches is not None
    # ratings are not part of the power flow: every voltage and current is the same, bit for bit
    np.testing.assert_array_equal(rated.v_pu, default.v_pu)
    np.testing.assert_array_equal(rated.branch_current_a, default.branch_current_a)
    rows = _rows(rated, "line.650632")
    assert len(rows) == 3
    np.testing.assert_array_equal(rated.branches.rating_a[rows], 800.0)
    np.testing.assert_array_equal(rated.branches.emergency_a[rows], 1000.0)
    assert not rated.branches.default_rating[rows].any() and not rated.branches.default_emergency[rows].any()
    # the file leaves this line at OpenDSS's default 400 A: twice the rating, half the loading
    np.testing.assert_array_equal(default.branches.rating_a[rows], 400.0)
    k = rated.branches.names.index("line.650632")
    assert rated.branch_loading_pct is not None and default.branch_loading_pct is not None
    current = rated.branch_current_a[rows].max()
    assert rated.branch_loading_pct[k] == pytest.approx(100.0 * current / 800.0, rel=1e-15)
    assert rated.branch_loading_pct[k] == pytest.approx(default.branch_loading_pct[k] / 2, rel=1e-15)
    others = np.arange(len(rated.branches.names)) != k
    np.testing.assert_array_equal(rated.branch_loading_pct[others], default.branch_loading_pct[others])
    # and the slope the thermal limits of OFO and MPC steer by
    slope, default_slope = rated_grid.loading_sensitivity("671"), default_grid.loading_sensitivity("671")
    np.testing.assert_allclose(slope[k], default_slope[k] / 2, rtol=1e-15)
    np.testing.assert_array_equal(slope[others], default_slope[others])


def test_a_transformer_is_rated_in_kva_on_each_winding() -> None:
    rated = _solve(branch_ratings={"transformer.xfm1": {"normal_kva": 600}})
    assert rated.branches is not None
    model = next(t for t in load_feeder(resolve_feeder("ieee13", None)).model.transformers if t.name == "xfm1")
    rows = _rows(rated, "transformer.xfm1")
    for w in range(len(model.windings)):
        winding = rows[rated.branches.terminal[rows] == w + 1]
        np.testing.assert_allclose(rated.branches.rating_a[winding], transformer_rated_a(model, w, 600.0), rtol=1e-15)
        # the emergency rating keeps OpenDSS's default: 150 % of the nameplate's 500 kVA
        np.testing.assert_allclose(
            rated.branches.emergency_a[winding], transformer_rated_a(model, w, 750.0), rtol=1e-15
        )


@pytest.mark.parametrize(
    ("ratings", "message"),
    [
        ({"line.nosuch": {"normal_a": 500}}, "unknown branch 'line.nosuch' on feeder ieee13; lines are"),
        (
            {"transformer.nosuch": {"normal_kva": 500}},
            "unknown branch 'transformer.nosuch' on feeder ieee13; transformers",
        ),
        ({"line.650632": {"normal_a": 700}}, "normal rating (700 A) is above the emergency rating (600 A); give both"),
        (
            {"transformer.xfm1": {"emergency_kva": 400}},
            "normal rating (500 kVA) is above the emergency rating (400 kVA)",
        ),
    ],
)
def test_ratings_that_do_not_fit_the_feeder_are_refused(ratings: dict[str, dict[str, float]], message: str) -> None:
    spec = GridSpec.model_validate({"feeder": "ieee13", "branch_ratings": ratings})
    problems = validate_grid(spec, [_SITE])
    assert [p for p, _ in problems] == [f"grid.branch_ratings.{next(iter(ratings))}"]
    assert message in problems[0][1]


@pytest.mark.parametrize(
    ("ratings", "message"),
    [
        ({"bus.671": {"normal_a": 500}}, "'bus.671' is not a branch name"),
        ({"line.650632": {"normal_kva": 500}}, "a line is rated in amperes (normal_a, emergency_a), not normal_kva"),
        (
            {"transformer.xfm1": {"normal_a": 50}},
            "a transformer is rated in kVA (normal_kva, emergency_kva), not normal_a",
        ),
        ({"line.650632": {}}, "give at least one of normal_a"),
        ({"line.650632": {"normal_a": 500, "emergency_a": 400}}, "emergency_a (400) is below normal_a (500)"),
        ({"line.650632": {"normal_a": 0}}, "greater than 0"),
        ({"line.650632": {"normal_a": float("inf")}}, "finite number"),
        ({"line.650632": {"emergency_a": float("nan")}}, "finite number"),
        ({"transformer.xfm1": {"normal_kva": -5}}, "greater than 0"),
    ],
)
def test_malformed_ratings_are_refused_by_the_schema(ratings: dict[str, dict[str, float]], message: str) -> None:
    with pytest.raises(ValidationError, match="branch_ratings") as err:
        GridSpec.model_validate({"feeder": "ieee13", "branch_ratings": ratings})
    assert message in str(err.value)


def test_validate_names_the_file_and_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "rated.yaml"
    scenario = yaml.safe_load((Path(__file__).parents[2] / "scenarios" / "ieee13_thermal_ofo.yaml").read_text())
    scenario["grid"]["branch_ratings"] = {"line.650633": {"normal_a": 500}}
    path.write_text(yaml.safe_dump(scenario))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: grid.branch_ratings.line.650633: unknown branch" in err and "Traceback" not in err


@pytest.mark.slow
@pytest.mark.parametrize("net", ["create_cigre_network_mv", "ieee_european_lv_asymmetric"])
def test_a_pandapower_net_keeps_its_own_ratings(net: str) -> None:
    spec = GridSpec.model_validate({"pandapower": net, "branch_ratings": {"line.1": {"normal_a": 500}}})
    problems = validate_grid(spec, [])
    assert ("grid.branch_ratings", NET_RATINGS) in problems


def test_each_rating_says_where_it_comes_from(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A line the scenario rates is ``scenario``, a line ieee13.dss gives no rating OpenDSS's 400 A
    ``default``, a transformer (rated by its kVA in the file) ``file``. A run's summary says so for its most loaded branch and counts the branches per
    source; its table marks a default-rated worst branch ``*``, as ``openg2g powerflow`` does."""
    _, state = _grid(branch_ratings={"LINE.650632": {"normal_a": 500, "emergency_a": 700}})
    assert state.branches is not None
    sources = dict(zip(state.branches.names, state.branches.rating_sources(["LINE.650632"])))
    assert sources["line.650632"] == "scenario" and sources["line.632645"] == "default"
    assert sources["transformer.sub"] == "file" and sources["transformer.xfm1"] == "file"

    scenario = yaml.safe_load((Path(__file__).parents[2] / "scenarios" / "ieee13_thermal_ofo.yaml").read_text())
    runs = {}
    for name, ratings in (("unrated", {}), ("rated", {"line.650632": {"normal_a": 500, "emergency_a": 700}})):
        scenario["grid"]["branch_ratings"] = ratings
        scenario.update(duration_s=1, controllers=[])
        scenario["outputs"] = {"plots": False}
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(scenario))
        assert main(["run", str(path), "--out", str(tmp_path / name), "--no-progress"]) == 0
        runs[name] = (yaml.safe_load((tmp_path / name / "summary.json").read_text()), capsys.readouterr().out)
    (unrated, table), (rated, rated_table) = runs["unrated"], runs["rated"]
    assert unrated["max_loading_branch"] == "line.650632" and unrated["max_loading_rating"] == "default"
    assert "line.650632*" in table and "rated at OpenDSS's default (400 A a line)" in table
    n_branches = sum(unrated["branch_rating_sources"].values())
    assert (
        rated["branch_rating_sources"]["scenario"]
        == 1
        == unrated["branch_rating_sources"]["default"] - (rated["branch_rating_sources"]["default"])
    )
    assert sum(rated["branch_rating_sources"].values()) == n_branches
    assert "line.650632*" not in rated_table
