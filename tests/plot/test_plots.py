"""The plotting helpers, on small hand-made tables: each figure has the artists it promises."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection, PathCollection, PolyCollection, QuadMesh
from matplotlib.figure import Figure

from openg2g.core.errors import G2GError
from openg2g.plot import (
    bus_voltages,
    plot_comparison,
    plot_feeder_map,
    plot_model_power,
    plot_voltage_heatmap,
    summary_frame,
    voltage_matrix,
)

BUS_PHASES = ["650.a", "650.b", "650.c", "671.a", "671.c", "652.a"]


def _voltages(n_steps: int = 4, dt_s: float = 0.5) -> pd.DataFrame:
    """Voltages falling by 0.01 pu per bus-phase down the list and 0.001 pu per step."""
    rows = []
    for k in range(n_steps):
        for i, bp in enumerate(BUS_PHASES):
            rows.append({"t_s": (k + 1) * dt_s, "bus_phase": bp, "v_pu": 1.0 - 0.01 * i - 0.001 * k})
    frame = pd.DataFrame(rows)
    # the engine writes bus_phase as a categorical in feeder order, which is not sorted order
    frame["bus_phase"] = pd.Categorical(frame["bus_phase"], categories=BUS_PHASES)
    return frame


def _models() -> pd.DataFrame:
    rows = []
    for t in (0.1, 0.2, 0.3):
        for site, models in (("dc1", {"A": 1e6, "B": 2e6, "C": 0.5e6}), ("dc2", {"A": 3e6})):
            for model, p in models.items():
                rows.append({"t_s": t, "site": site, "model": model, "power_w": p})
    return pd.DataFrame(rows)


def _colorbar_axes(fig: Figure) -> list:
    return [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]


# --------------------------------------------------------------------------- voltage heatmap
def test_voltage_matrix_keeps_feeder_order_and_bins_with_min():
    wide = voltage_matrix(_voltages(n_steps=4), max_time_bins=2, agg="min")
    assert list(wide.columns) == BUS_PHASES
    assert list(wide.index) == [0.5, 1.5]  # bins labelled by their first time
    # bin 0 holds steps 0 and 1; its min is step 1's value
    assert wide.loc[0.5, "650.a"] == pytest.approx(1.0 - 0.001)
    assert wide.loc[1.5, "652.a"] == pytest.approx(1.0 - 0.05 - 0.003)


def test_voltage_matrix_missing_column_is_an_error():
    with pytest.raises(ValueError, match="v_pu"):
        voltage_matrix(pd.DataFrame({"t_s": [1.0], "bus_phase": ["a.a"]}))


def test_heatmap_has_one_cell_per_step_and_bus_phase_and_limit_colorbar():
    fig = plot_voltage_heatmap(_voltages(n_steps=4), v_min_pu=0.95, v_max_pu=1.05)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    meshes = [c for c in ax.collections if isinstance(c, QuadMesh)]
    assert len(meshes) == 1
    assert meshes[0].get_array().shape == (len(BUS_PHASES), 4)
    norm = meshes[0].norm
    assert (norm.v_min_pu, norm.v_max_pu) == (0.95, 1.05)
    # the data's lowest (0.947 pu) is below the band, the scale reaches a quarter band beyond each limit
    assert (norm.vmin, norm.vmax) == pytest.approx((0.925, 1.075))
    (cbar_ax,) = _colorbar_axes(fig)
    assert cbar_ax.get_ylabel() == "voltage (pu)"
    assert [t.get_text() for t in ax.get_yticklabels()] == BUS_PHASES
    assert ax.get_xlabel() == "time (s)"
    # time edges run from the first step to one step past the last
    assert ax.get_xlim() == pytest.approx((0.5, 2.5))


def test_heatmap_without_limits_spans_the_data():
    fig = plot_voltage_heatmap(_voltages(n_steps=3))
    mesh = next(c for c in fig.axes[0].collections if isinstance(c, QuadMesh))
    assert mesh.norm.v_min_pu == pytest.approx(1.0 - 0.05 - 0.002)
    assert mesh.norm.v_max_pu == pytest.approx(1.0)


def test_heatmap_bins_long_runs_and_says_so():
    fig = plot_voltage_heatmap(_voltages(n_steps=10), max_time_bins=5)
    mesh = next(c for c in fig.axes[0].collections if isinstance(c, QuadMesh))
    assert mesh.get_array().shape == (len(BUS_PHASES), 5)
    assert "min over bins of 2 grid steps" in fig.axes[0].get_title()


# --------------------------------------------------------------------------- feeder map
BUSES = pd.DataFrame({"bus": ["src", "650", "671", "652"], "x": [0.0, 0.0, 0.0, 1.0], "y": [3.0, 2.0, 1.0, 1.0]})
EDGES = pd.DataFrame(
    {
        "from_bus": ["src", "650", "671"],
        "to_bus": ["650", "671", "652"],
        "kind": ["transformer", "line", "switch"],
        "in_service": [True, True, False],
    }
)


def test_bus_voltages_takes_the_worst_phase_over_time_or_at_an_instant():
    v = _voltages(n_steps=3)
    worst = bus_voltages(v)
    assert worst["671"] == pytest.approx(1.0 - 0.04 - 0.002)  # phase c, last step
    assert worst["652"] == pytest.approx(1.0 - 0.05 - 0.002)
    at = bus_voltages(v, t_s=0.7)  # between steps 1 (0.5 s) and 2 (1.0 s): step at 0.5 s
    assert at["650"] == pytest.approx(1.0 - 0.02)
    with pytest.raises(ValueError, match="no grid step"):
        bus_voltages(v, t_s=0.1)


def test_feeder_map_colours_buses_by_voltage_and_draws_each_branch_kind():
    volts = {"650": 0.96, "671": 1.02, "652": 0.94}  # src has none: drawn grey
    fig = plot_feeder_map(BUSES, EDGES, volts, v_min_pu=0.95, v_max_pu=1.05, highlight=["671"])
    ax = fig.axes[0]
    lines = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert sorted(c.get_label() for c in lines) == ["line", "switch (open)", "transformer"]
    assert next(c for c in lines if c.get_label() == "switch (open)").get_alpha() == pytest.approx(0.25)
    points = [c for c in ax.collections if isinstance(c, PathCollection)]
    buses, ring = points
    # drawn the missing first, then by distance from the band's centre: 671, 650, then 652 on top
    values = np.asarray(buses.get_array(), dtype=float)
    assert np.isnan(values[0]) and values[1:] == pytest.approx([1.02, 0.96, 0.94])
    assert buses.get_offsets().tolist() == [[0.0, 3.0], [0.0, 1.0], [0.0, 2.0], [1.0, 1.0]]
    assert (buses.norm.v_min_pu, buses.norm.v_max_pu) == (0.95, 1.05)
    assert ring.get_offsets().tolist() == [[0.0, 1.0]]
    assert len(_colorbar_axes(fig)) == 1
    assert {t.get_text() for t in ax.texts} == {"src", "650", "671", "652"}
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["line", "switch", "transformer", "datacenter 671"]


def test_feeder_map_without_voltages_has_no_colorbar():
    fig = plot_feeder_map(BUSES, EDGES[["from_bus", "to_bus"]], labels=False)
    assert _colorbar_axes(fig) == []
    assert len(fig.axes[0].texts) == 0
    (lc,) = [c for c in fig.axes[0].collections if isinstance(c, LineCollection)]
    assert len(lc.get_segments()) == 3


def test_feeder_tables_of_a_bundled_feeder():
    from openg2g.grid.feeder.library import load_feeder
    from openg2g.plot import feeder_tables

    buses, edges = feeder_tables(load_feeder("ieee13"))
    assert {"671", "652", "sourcebus"} <= set(buses["bus"])
    assert set(edges["kind"]) == {"line", "switch", "transformer", "regulator"}
    # the three single-phase regulator units of one bank are one branch
    assert edges.loc[edges["name"] == "reg1", "kind"].tolist() == ["regulator"]
    assert set(edges["from_bus"]) | set(edges["to_bus"]) <= set(buses["bus"])


# --------------------------------------------------------------------------- power per model
def test_model_power_stacks_one_band_per_model_and_one_axes_per_site():
    dc = pd.DataFrame({"t_s": [0.1, 0.2, 0.3] * 2, "site": ["dc1"] * 3 + ["dc2"] * 3, "power_w": [5e6] * 6})
    fig = plot_model_power(_models(), datacenter=dc)
    ax1, ax2 = fig.axes
    assert len([c for c in ax1.collections if isinstance(c, PolyCollection)]) == 3
    assert len([c for c in ax2.collections if isinstance(c, PolyCollection)]) == 1
    assert [t.get_text() for t in ax1.get_legend().get_texts()] == ["A", "B", "C", "facility total"]
    (total,) = ax1.lines
    assert total.get_ydata() == pytest.approx([5.0] * 3)  # MW
    # the stack's top is the sum of the models, in MW
    top = ax1.collections[-1].get_paths()[0].vertices[:, 1].max()
    assert top == pytest.approx(3.5)
    assert ax1.get_ylabel() == "power (MW)" and "dc1" in ax1.get_title()


def test_model_power_lines():
    fig = plot_model_power(_models(), kind="line")
    assert len(fig.axes[0].lines) == 3
    assert fig.axes[0].lines[1].get_ydata() == pytest.approx([2.0] * 3)
    with pytest.raises(ValueError, match="kind"):
        plot_model_power(_models(), kind="area")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- comparison
SUMMARIES = [
    {
        "scenario": "none",
        "violation_integral_pu_s": 2.0,
        "mean_throughput_tok_s": 8e6,
        "itl_deadline_miss_fraction": 0.01,
        "n_batch_changes": 0,
    },
    {
        "scenario": "ofo",
        "violation_integral_pu_s": 0.5,
        "mean_throughput_tok_s": 7e6,
        "itl_deadline_miss_fraction": 0.02,
        "n_batch_changes": 9,
    },
    {
        "label": "mine",
        "scenario": "ieee13",
        "violation_integral_pu_s": 0.0,
        "mean_throughput_tok_s": 6e6,
        "itl_deadline_miss_fraction": 0.0,
        "n_batch_changes": 4,
    },
]


def test_summary_frame_accepts_every_row_shape():
    frame = summary_frame(SUMMARIES)
    assert list(frame.index) == ["none", "ofo", "mine"]
    assert "label" not in frame.columns
    pairs = summary_frame([("a", {"x": 1}), ("b", {"x": 2})])
    mapping = summary_frame({"a": {"x": 1}, "b": {"x": 2}})
    pd.testing.assert_frame_equal(pairs, mapping)
    with pytest.raises(ValueError, match="same label"):
        summary_frame([("a", {}), ("a", {})])


def test_comparison_has_one_axes_per_metric_and_one_bar_per_run():
    fig = plot_comparison(SUMMARIES, highlight="mine")
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 4
    assert "violation integral" in visible[0].get_title()
    widths = [p.get_width() for p in visible[1].patches]
    assert widths == pytest.approx([8.0, 7.0, 6.0])  # million tok/s
    misses = [p.get_width() for p in visible[2].patches]
    assert misses == pytest.approx([1.0, 2.0, 0.0])  # percent
    colors = {tuple(p.get_facecolor()) for p in visible[0].patches}
    assert len(colors) == 2  # the highlighted run stands out
    assert [t.get_text() for t in visible[0].get_yticklabels()] == ["none", "ofo", "mine"]


def test_comparison_unknown_metric_names_the_available_ones():
    with pytest.raises(KeyError, match="energy_mwh"):
        plot_comparison(SUMMARIES, metrics=["energy_mwh"])
    fig = plot_comparison(
        SUMMARIES, metrics=["n_batch_changes", "violation_integral_pu_s", "mean_throughput_tok_s"], ncols=2
    )
    assert [ax.get_visible() for ax in fig.axes] == [True, True, True, False]


# --------------------------------------------------------------------------- show
def test_show_releases_a_pyplot_figure_and_accepts_a_plain_one():
    import matplotlib.pyplot as plt

    from openg2g.plot import show

    fig = plt.figure()
    assert plt.fignum_exists(fig.number)
    show(fig)  # outside a notebook: renders, displays nothing, closes it in pyplot
    assert not plt.fignum_exists(fig.number)
    show(plot_model_power(_models()))  # a pyplot-free figure is fine too


def test_read_summaries_labels_runs_like_compare(tmp_path):
    import json

    from openg2g.plot import read_summaries

    for name, status in (("a", "complete"), ("b", "interrupted")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps({"scenario": f"sc_{name}", "status": status}))
    rows = read_summaries([tmp_path / "a", tmp_path / "b"])
    assert [label for label, _ in rows] == ["sc_a", "sc_b [interrupted]"]
    with pytest.raises(G2GError, match="no summary.json"):
        read_summaries([tmp_path / "missing"])


def test_latency_plot_draws_each_models_deadline(tmp_path):
    import yaml

    from openg2g.plot import plot_latency
    from openg2g.plot.run import itl_deadlines

    (tmp_path / "scenario.yaml").write_text(
        yaml.safe_dump(
            {
                "datacenters": [
                    {"name": "dc1", "models": [{"model": "A", "itl_deadline_s": 0.08}, {"model": "B"}]},
                ]
            }
        )
    )
    deadlines = itl_deadlines(tmp_path)
    assert deadlines == {("dc1", "A"): 0.08}
    models = pd.DataFrame(
        {"t_s": [0.0, 1.0, 0.0, 1.0], "site": "dc1", "model": ["A", "A", "B", "B"], "itl_s": [0.05, 0.06, 0.02, 0.03]}
    )
    ax = plot_latency(models, deadlines).axes[0]
    dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and list(dashed[0].get_ydata()) == [80.0, 80.0]
    model_a = next(line for line in ax.get_lines() if line.get_label() == "dc1/A")
    assert dashed[0].get_color() == model_a.get_color() and "deadline" in dashed[0].get_label()
    assert itl_deadlines(tmp_path / "elsewhere") == {}


# --------------------------------------------------------------------------- voltage colours
def _colour(v: float, norm) -> np.ndarray:
    """The RGB colour (0-1 channels) a voltage gets under ``norm``."""
    from openg2g.plot.style import voltage_cmap

    return np.asarray(voltage_cmap()(norm(v))[:3])


def _rgb_distance(a: float, b: float, norm) -> float:
    return float(np.linalg.norm(_colour(a, norm) - _colour(b, norm)))


def test_a_bus_just_outside_a_limit_is_coloured_unlike_one_just_inside():
    from openg2g.plot.style import LIMIT_POINTS, voltage_norm

    norm = voltage_norm([0.90, 1.0, 1.08], 0.95, 1.05)
    assert norm([0.90, 0.95, 1.0, 1.05, 1.08]).tolist() == pytest.approx(
        [0.0, *LIMIT_POINTS[:1], 0.5, LIMIT_POINTS[1], 1.0]
    )
    # across each limit the colour jumps (RGB distance on 0-1 channels; the whole cube's diagonal is 1.73)
    assert _rgb_distance(0.9499, 0.9501, norm) > 0.4
    assert _rgb_distance(1.0499, 1.0501, norm) > 0.4
    assert _rgb_distance(0.93, 0.951, norm) > 0.4
    # beyond a limit the scale goes on to the data's extreme: 0.90 is not drawn as 0.9499
    assert _rgb_distance(0.90, 0.9499, norm) > 0.2
    assert norm.inverse(norm(0.93)) == pytest.approx(0.93)


def test_the_voltage_scale_reaches_past_limits_the_data_stays_inside():
    from openg2g.plot.style import voltage_norm

    norm = voltage_norm([0.97, 1.01], 0.95, 1.05)
    assert (norm.vmin, norm.v_min_pu, norm.v_max_pu, norm.vmax) == pytest.approx((0.925, 0.95, 1.05, 1.075))


def test_the_apps_colour_scale_gives_the_plots_colours():
    from matplotlib.colors import to_rgb

    from openg2g.plot.style import VOLTAGE_STOPS, voltage_colorscale, voltage_norm

    norm = voltage_norm([0.90, 1.0], 0.95, 1.05)
    scale = voltage_colorscale(norm)
    assert [c for _, c in scale] == [c for _, c in VOLTAGE_STOPS]
    # plotly's stops are linear in pu from vmin: the lower limit's stop at (0.95 - 0.90) / (1.075 - 0.90)
    assert scale[1][0] == pytest.approx(0.05 / 0.175) and scale[2][0] == scale[1][0]
    assert to_rgb(scale[2][1]) == pytest.approx(_colour(0.95, norm), abs=0.01)


def test_the_map_says_how_many_buses_it_placed_and_names_the_worst_with_its_kv():
    from openg2g.plot import plot_worst_voltage_map
    from openg2g.plot.extremes import extremes_of

    buses = BUSES.assign(kv=[115.0, 4.16, 4.16, 0.48], x=[np.nan, 0.0, 0.0, 1.0])
    table = pd.DataFrame({"t_s": [0.5, 0.5, 1.0], "bus_phase": ["650.a", "652.a", "652.a"], "v_pu": [1.0, 0.96, 0.93]})
    fig = plot_worst_voltage_map(buses, EDGES, extremes_of(table), 0.95, 1.05)
    ax = fig.axes[0]
    assert "worst: 652.a (0.48 kV) 0.9300 pu at t=1 s" in ax.get_title()
    assert any(t.get_text().startswith("1 of 4 buses placed from the topology") for t in ax.texts)
