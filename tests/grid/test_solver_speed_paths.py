"""The solver's analytic derivatives: the load kernel's Wirtinger derivatives against central
differences of its currents in every OpenDSS load model and voltage region, and the voltage
sensitivity (implicit function theorem on the power flow) against central finite differences of
full solves at +/-1 kW and 1e-12 pu, on the bundled feeders."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from openg2g.grid.feeder.library import load_feeder
from openg2g.grid.feeder.network import LoadPorts, Switching, load_ports, node_index
from openg2g.grid.feeder.ports import OPENDSS_VLOWPU, LoadKernel
from openg2g.grid.feeder.solver import CompiledNetwork

DP_W = 1000.0
"""Per-phase power step of the finite-difference reference (W)."""

SENS_RTOL = 1e-6
"""Agreement asked of the analytic sensitivity with the finite differences, relative to the
largest entry (the differences' truncation error is O(DP_W^2), about 1e-8 relative here)."""


def _ports(model: int, n: int) -> LoadPorts:
    """``n`` wye branches of one OpenDSS load model, 10 kW + 4 kvar each on a 2.4 kV base."""
    return LoadPorts(
        load=np.arange(n),
        from_node=np.arange(n),
        to_node=np.full(n, -1),
        v_base_v=np.full(n, 2400.0),
        p_w=np.full(n, 1e4),
        q_var=np.full(n, 4e3),
        model=np.full(n, model),
        vminpu=np.full(n, 0.95),
        vmaxpu=np.full(n, 1.05),
        vlowpu=np.full(n, OPENDSS_VLOWPU),
        cvrwatts=np.full(n, 0.8),
        cvrvars=np.full(n, 3.0),
    )


@pytest.mark.parametrize("model", [1, 2, 4, 5])
def test_kernel_derivatives_match_central_differences(model: int) -> None:
    # one branch per region: below vlowpu, between vlowpu and vminpu, normal, above vmaxpu
    v_pu = np.array([0.3, 0.7, 0.9, 1.0, 1.2])
    angle = np.array([-0.4, 0.1, -2.2, 2.0, 0.6])
    u = (2400.0 * v_pu * np.exp(1j * angle))[:, None]
    kernel = LoadKernel(_ports(model, u.shape[0]))
    ctx = kernel.prepare(np.full((u.shape[0], 1), 1.3), 1)
    a, b = kernel.derivatives(u, ctx)
    h = 1e-4  # V; the currents are smooth within each region at this distance from its edges
    for direction in (1.0, 1j):
        fd = (kernel.currents(u + h * direction, ctx) - kernel.currents(u - h * direction, ctx)) / (2 * h)
        exact = a * direction + b * np.conj(direction)
        np.testing.assert_allclose(exact, fd, rtol=1e-7, atol=1e-9 * np.abs(fd).max())


def test_kernel_currents_in_every_region_by_column_into_a_given_array() -> None:
    """Model-1 currents (OpenDSS's regions, by hand) of three branches of different bands over
    three columns, each column in other regions, written into the array given: a branch outside
    its band is found at its own row and column, whatever the others do."""
    vmin = np.array([0.95, 0.9, 0.85])
    kernel = LoadKernel(dataclasses.replace(_ports(1, 3), vminpu=vmin))
    v_pu = np.array([[0.3, 1.0, 0.92], [1.2, 0.88, 1.0], [1.0, 0.7, 1.1]])  # branch x column
    u = 2400.0 * v_pu * np.exp(1j * np.array([[-0.4, 0.1, 2.0], [0.6, -2.2, 0.3], [1.1, -0.9, 0.2]]))
    scale = 1.3
    ctx = kernel.prepare(np.full((3, 1), scale), 3)
    out = np.full((3, 3), np.nan + 0j)
    got = kernel.currents(u, ctx, out=out)
    assert got is out
    s_conj = scale * (1e4 - 4e3j)
    y_nom = s_conj / 2400.0**2  # the nominal admittance at 1 pu (S)
    expected = np.empty((3, 3), dtype=complex)
    for r in range(3):
        for c in range(3):
            x, vm = u[r, c], v_pu[r, c]
            if vm <= OPENDSS_VLOWPU:
                y = y_nom
            elif vm <= vmin[r]:  # |I| linear in |V| from y_nom at vlowpu to the power at vminpu
                i_low, i_min = y_nom * OPENDSS_VLOWPU, y_nom / vmin[r]
                y = (i_low + (i_min - i_low) * (vm - OPENDSS_VLOWPU) / (vmin[r] - OPENDSS_VLOWPU)) / vm
            elif vm > 1.05:
                y = y_nom / 1.05**2  # the admittance that draws the nominal power at vmaxpu
            else:
                y = None
            expected[r, c] = s_conj / np.conj(x) if y is None else y * x
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def _network(
    feeder: str, bus: str, band: tuple[float, float] | None, extra: bool = False
) -> tuple[CompiledNetwork, np.ndarray]:
    """The feeder at its file state with one PQ port per phase of ``bus`` (constant power, or
    OpenDSS model 1 within ``band``), and those ports' nodes; with ``extra``, three more
    constant-power ports at the same nodes."""
    model = load_feeder(feeder).model
    nodes = node_index(model)
    at = np.array([nodes.index[(bus, p)] for p in "abc"])
    pq_band = np.tile(band if band else (np.nan, np.nan), (3, 1))
    if extra:
        pq_band = np.concatenate([pq_band, np.full((3, 2), np.nan)])
    pq_nodes = np.concatenate([at, at]) if extra else at
    net = CompiledNetwork(model, nodes, load_ports(model, nodes), pq_nodes, Switching.initial(model), pq_band)
    return net, at


def _finite_difference(
    feeder: str, bus: str, band: tuple[float, float] | None, scale: np.ndarray, s_pq: np.ndarray, s_dir: complex
) -> np.ndarray:
    """Central differences of |V| (V/W) for +/-DP_W per phase drawn at ``bus`` by an added
    constant-power port, solved to 1e-12 pu (the solver's former sensitivity method)."""
    net, _ = _network(feeder, bus, band, extra=True)
    cols = np.repeat(np.concatenate([s_pq, np.zeros((3, 1))]), 6, axis=1)
    for k in range(3):
        cols[3 + k, 2 * k] += DP_W * s_dir
        cols[3 + k, 2 * k + 1] -= DP_W * s_dir
    sol = net.solve(scale, cols, tol_pu=1e-12, max_iter=200)
    assert sol.converged
    vm = np.abs(sol.v)
    return (vm[:, 0::2] - vm[:, 1::2]) / (2 * DP_W)


CASES = [
    ("ieee13", "671", 8e5, 0.95, None),
    ("ieee13", "675", 5e5, 1.0, None),
    ("openg2g-ieee13", "671", 1.2e6, 0.95, (0.95, 1.05)),  # 671 below 0.95 pu: the model-1 band's admittance
    ("ieee34", "806", 6e5, 0.95, None),
    ("ieee123", "67", 1e6, 0.95, None),
    ("ieee123", "300", 1.2e6, 0.9, (0.95, 1.05)),
]


@pytest.mark.parametrize(("feeder", "bus", "p_w", "pf", "band"), CASES)
def test_sensitivity_matches_finite_differences(
    feeder: str, bus: str, p_w: float, pf: float, band: tuple[float, float] | None
) -> None:
    net, at = _network(feeder, bus, band)
    s_dir = 1.0 + 1j * np.tan(np.arccos(pf))
    scale = np.ones((len(net.ports.load), 1))
    s_pq = (p_w * np.array([0.9, 1.0, 1.1]) * s_dir)[:, None]
    exact = net.voltage_sensitivity(scale, s_pq, at, s_dir)
    fd = _finite_difference(feeder, bus, band, scale, s_pq, s_dir)
    assert exact.shape == fd.shape == (len(net.nodes), 3)
    assert np.all(np.diag(exact[at]) < 0)  # drawing power lowers the voltage where it is drawn
    np.testing.assert_allclose(exact, fd, rtol=0, atol=SENS_RTOL * np.abs(fd).max())


def test_sensitivity_is_of_the_point_asked_for() -> None:
    """A linearization is shared by calls at the same point and never reused at another one; the
    point the last solve accepted is linearized without solving it again."""
    s_dir = 1.0 + 0.3j
    lo, hi = np.full((3, 1), 2e5 * s_dir), np.full((3, 1), 1.5e6 * s_dir)
    net, at = _network("ieee13", "671", None)
    scale = np.ones((len(net.ports.load), 1))
    at_lo = net.voltage_sensitivity(scale, lo, at, s_dir)
    net.solve(scale, hi)
    at_lo_again = net.voltage_sensitivity(scale, lo, at, s_dir)
    at_hi = net.voltage_sensitivity(scale, hi, at, s_dir)
    fresh_hi = _network("ieee13", "671", None)[0].voltage_sensitivity(scale, hi, at, s_dir)
    np.testing.assert_allclose(at_lo_again, at_lo, rtol=0, atol=1e-9 * np.abs(at_lo).max())
    np.testing.assert_allclose(at_hi, fresh_hi, rtol=0, atol=1e-9 * np.abs(at_hi).max())
    assert np.abs(at_hi - at_lo).max() > 1e-3 * np.abs(at_lo).max()
    # the last column of a batch is linearized where the batch solved it, without a new solve
    net.solve(scale, np.hstack([lo, hi]))
    after_batch = net.voltage_sensitivity(scale, hi, at, s_dir)
    np.testing.assert_allclose(after_batch, fresh_hi, rtol=0, atol=1e-7 * np.abs(at_hi).max())
