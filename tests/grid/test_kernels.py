"""The compiled chord-Newton loops against the numpy expressions they replace, bit for bit, and
against currents and updates computed by hand."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from openg2g.grid.feeder.kernels import chord_step, chord_update, port_currents
from openg2g.grid.feeder.library import load_feeder
from openg2g.grid.feeder.network import Switching, load_ports, node_index
from openg2g.grid.feeder.ports import PortCurrents


def _fma(a: float, b: float, c: float) -> float:
    """``a * b + c`` rounded once (exact rationals, then one rounding to the nearest float)."""
    return float(Fraction(a) * Fraction(b) + Fraction(c))


def _numpy_fuses() -> bool:
    """True where numpy's complex loops are the fused ones the kernels reproduce (x86 with AVX2 and
    FMA, and wider): its product ``fma(ar, br, -(ai bi))`` (with ``a = 1 + 2**-30 + 1j``, ``(a *
    a).real`` is ``2**-29 + 2**-60`` fused and ``2**-29`` rounded twice) and its ``abs``
    ``max * sqrt(fma(r, r, 1))`` with ``r = min / max``, checked on random values against those
    formulas in exact arithmetic, not against the kernels."""
    a = np.array([1 + 2**-30 + 1j])
    if (a * a)[0].real != 2.0**-29 + 2.0**-60:
        return False
    rng = np.random.default_rng(5)
    z = rng.normal(size=200) * 10.0 ** rng.uniform(-5, 5, 200) + 1j * rng.normal(size=200)
    for value, got in zip(z.tolist(), np.abs(z).tolist()):
        larger, smaller = max(abs(value.real), abs(value.imag)), min(abs(value.real), abs(value.imag))
        ratio = smaller / larger
        if got != math.sqrt(_fma(ratio, ratio, 1.0)) * larger:
            return False
    return True


numpys_loops = pytest.mark.skipif(
    not _numpy_fuses(),
    reason="numpy's complex loops on this CPU are not the fused ones the kernels reproduce (no AVX2/FMA?): "
    "the kernels' bits are numpy's only where they are",
)


def _bits(a: np.ndarray) -> np.ndarray:
    """The bytes of ``a`` as integers (a complex value's two parts apart), NaNs made one pattern
    (their payloads are not results)."""
    f = np.ascontiguousarray(a).view(np.float64) if a.dtype.kind == "c" else np.ascontiguousarray(a, dtype=float)
    return np.where(np.isnan(f), np.nan, f).view(np.uint64)


def _ieee13_ports(line_out: str | None) -> PortCurrents:
    """IEEE 13's load branches (models 1, 2 and 5) and one PQ port per phase of 675 and 671, with
    ``line_out`` out of service (its downstream ports de-energized)."""
    model = load_feeder("ieee13").model
    nodes = node_index(model)
    state = Switching.initial(model)
    if line_out is not None:
        state.lines[line_out] = False
    pq_nodes = np.array([nodes.index[(bus, p)] for bus in ("675", "671") for p in "abc"])
    return PortCurrents(model, nodes, load_ports(model, nodes), pq_nodes, state, None)


def _numpy_i_comp(
    pc: PortCurrents, u: np.ndarray, ctx: tuple[np.ndarray, ...], s_conj: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The compensation and load currents as numpy computed them before the compiled pass."""
    live = np.where(pc.dead_ports[:, None], 1.0, u)
    ul, uq = live[: pc.n_load], live[pc.n_load :]
    i_actual = np.concatenate([pc.kernel.currents(ul, ctx), np.divide(s_conj, np.conj(uq))])
    i_actual[pc.dead_ports] = 0.0
    i_comp = i_actual.copy()
    i_comp[: pc.n_load] -= pc.y_nominal[:, None] * u[: pc.n_load]
    return i_comp, i_actual


@numpys_loops
def test_port_currents_are_numpys_in_every_region_and_on_dead_ports() -> None:
    """Port voltages from 0.2 to 1.3 pu at any angle (every fallback region of the model-1 and
    model-5 branches, the voltage-dependent model-2 ones), random scales, 10 columns, with and
    without a line out: the compiled currents equal numpy's expressions bit for bit."""
    rng = np.random.default_rng(7)
    for line_out in (None, "692675"):
        pc = _ieee13_ports(line_out)
        assert pc.dead_ports.any() == (line_out is not None)
        n, cols = pc.v_ref.shape[0], 10
        u = pc.v_ref * rng.uniform(0.2, 1.3, (n, cols)) * np.exp(1j * rng.uniform(-np.pi, np.pi, (n, cols)))
        scale = rng.uniform(0.0, 2.0, (pc.n_load, cols))
        s_conj = np.conj(
            rng.uniform(-3e5, 3e5, (n - pc.n_load, cols)) + 1j * rng.uniform(-1e5, 1e5, (n - pc.n_load, cols))
        )
        ctx = pc.prepared(scale, cols)
        i_comp, i_actual = pc.i_comp(u, ctx, s_conj)
        want_comp, want_actual = _numpy_i_comp(pc, u, ctx, s_conj)
        np.testing.assert_array_equal(_bits(i_actual), _bits(want_actual))
        np.testing.assert_array_equal(_bits(i_comp), _bits(want_comp))


def test_port_currents_by_hand() -> None:
    """One constant-power PQ port drawing 1000 + 500j VA at 100 V: 10 - 5j A, its compensation
    current the same; a constant-impedance branch of 0.1 S nominal admittance: nothing beyond it."""
    u = np.array([[100.0 + 0j], [100.0 + 0j]])
    i_actual, i_comp = np.empty((2, 1), dtype=complex), np.empty((2, 1), dtype=complex)
    one = np.ones(1)
    port_currents(
        u, np.array([[1000.0 + 0j]]), np.array([[1000.0]]), np.zeros((1, 1)), np.ones((1, 1)),
        np.array([[1000.0 - 500j]]), np.array([0]), np.array([2.0]), np.array([2.0]), np.array([100.0]),
        -one, -one, np.full(1, np.inf), np.zeros(1, dtype=complex), np.zeros(1, dtype=complex),
        np.zeros(1, dtype=complex), np.zeros(1, dtype=complex), np.array([0.1 + 0j]), np.zeros(2, dtype=bool),
        i_actual, i_comp,
    )  # fmt: skip
    np.testing.assert_array_equal(i_actual, [[10.0 + 0j], [10.0 - 5j]])
    np.testing.assert_array_equal(i_comp, [[0.0 + 0j], [10.0 - 5j]])


def test_a_branchs_compensation_current_is_the_fused_product_on_any_cpu() -> None:
    """``y u`` with ``y = u = 1 + 2**-30 + 1j``: the real part ``(1 + 2**-30)**2 - 1`` is
    ``2**-29 + 2**-60`` exactly, kept by a fused multiply-add (rounding the square first would
    drop the ``2**-60``); the imaginary part ``2 (1 + 2**-30)``. A de-energized branch draws
    nothing, so its compensation current is ``-y u``."""
    y = np.array([1 + 2**-30 + 1j])
    i_actual, i_comp = np.empty((1, 1), dtype=complex), np.empty((1, 1), dtype=complex)
    none_c, none_f = np.zeros(1, dtype=complex), np.ones(1)
    port_currents(
        y[:, None], np.zeros((1, 1), dtype=complex), np.zeros((0, 1)), np.zeros((0, 1)), np.ones((1, 1)),
        np.zeros((0, 1), dtype=complex), np.array([-1]), np.zeros(0), np.zeros(0), np.zeros(0), -none_f,
        -none_f, np.full(1, np.inf), none_c, none_c, none_c, none_c, y, np.array([True]), i_actual, i_comp,
    )  # fmt: skip
    assert i_actual[0, 0] == 0
    assert i_comp[0, 0] == complex(-(2.0**-29 + 2.0**-60), -(2.0 + 2.0**-29))


@numpys_loops
def test_chord_update_and_step_are_numpys() -> None:
    """The update, its largest relative size (NaN when an entry is NaN) and the next iterate equal
    numpy's expressions bit for bit; ``|3 + 4j| / 2 = 2.5`` by hand."""
    rng = np.random.default_rng(3)
    n, cols = 23, 10
    u, k_i = (rng.normal(0, 3e3, (n, cols)) + 1j * rng.normal(0, 3e3, (n, cols)) for _ in range(2))
    u0 = rng.normal(0, 3e3, n) + 1j * rng.normal(0, 3e3, n)
    v_ref = rng.uniform(100.0, 3e3, n)
    g, rhs = np.empty((n, cols), dtype=complex), np.empty((2 * n, cols), order="F")
    err = chord_update(u, u0, k_i, v_ref, g, rhs)
    want = u - (u0[:, None] - k_i)
    np.testing.assert_array_equal(_bits(g), _bits(want))
    np.testing.assert_array_equal(rhs, np.concatenate([want.real, want.imag]))
    assert err == (np.abs(want) / v_ref[:, None]).max(initial=0.0)
    k_i[5, 4] = np.nan
    assert np.isnan(chord_update(u, u0, k_i, v_ref, g, rhs))
    x, out = rng.normal(0, 1.0, (2 * n, cols)), np.empty((n, cols), dtype=complex)
    x[0, 0], x[n + 1, 1] = -0.0, 0.0
    chord_step(u, x, out)
    np.testing.assert_array_equal(_bits(out), _bits(u - (x[:n] + 1j * x[n:])))
    one = np.zeros((1, 1), dtype=complex)
    assert (
        chord_update(one + (3 + 4j), np.zeros(1, dtype=complex), one, np.array([2.0]), one.copy(), rhs[:2, :1]) == 2.5
    )


@numpys_loops
@pytest.mark.filterwarnings("ignore:.*encountered:RuntimeWarning")  # numpy on infinities, NaNs, zeros
def test_complex_arithmetic_is_numpys_on_special_values() -> None:
    """Products, quotients and magnitudes of values over 14 decades and of signed zeros,
    infinities and NaNs: the same as numpy's array loops, bit for bit (through the kernels that use
    them: a step's ``1j * x``, an update's ``|g|``, a port's ``conj(S) / conj(u)`` and ``y u``)."""
    rng = np.random.default_rng(11)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.5, 1e-300, 3e300])
    re = np.concatenate([rng.normal(size=400) * 10.0 ** rng.uniform(-7, 7, 400), np.repeat(special, special.size)])
    im = np.concatenate([rng.normal(size=400) * 10.0 ** rng.uniform(-7, 7, 400), np.tile(special, special.size)])
    z = (re + 1j * im)[:, None]
    w = z[::-1].copy()
    # |z| through the update with u0 = K i = 0 and v_ref = 1, one entry at a time
    for k in range(z.shape[0]):
        g = np.empty((1, 1), dtype=complex)
        err = chord_update(
            z[k : k + 1],
            np.zeros(1, dtype=complex),
            np.zeros((1, 1), dtype=complex),
            np.ones(1),
            g,
            np.empty((2, 1), order="F"),
        )
        assert _bits(np.array([err])) == _bits(np.abs(z[k : k + 1, 0])), z[k]  # fmt: skip
    # conj(S) / conj(u) and the compensation y u of constant-power ports: PQ rows, then one branch
    n = z.shape[0]
    i_actual, i_comp = np.empty((n + 1, 1), dtype=complex), np.empty((n + 1, 1), dtype=complex)
    u = np.concatenate([np.ones((1, 1), dtype=complex), np.conj(w)])
    empty_c, empty_f = np.zeros(1, dtype=complex), np.ones(1)
    port_currents(
        u, np.zeros((1, 1), dtype=complex), np.zeros((0, 1)), np.zeros((0, 1)), np.ones((1, 1)), z,
        np.array([-1]), np.zeros(0), np.zeros(0), np.zeros(0), -empty_f, -empty_f, np.full(1, np.inf),
        empty_c, empty_c, empty_c, empty_c, empty_c, np.zeros(n + 1, dtype=bool), i_actual, i_comp,
    )  # fmt: skip
    np.testing.assert_array_equal(_bits(i_actual[1:]), _bits(z / w))
    branch = np.empty((n, 1), dtype=complex)
    for k in range(n):  # the branch's nominal admittance z[k] at voltage w[k]: i_comp = 0 - z w
        port_currents(
            w[k : k + 1], np.zeros((1, 1), dtype=complex), np.zeros((0, 1)), np.zeros((0, 1)),
            np.ones((1, 1)), np.zeros((0, 1), dtype=complex), np.array([-1]), np.zeros(0), np.zeros(0),
            np.zeros(0), -empty_f, -empty_f, np.full(1, np.inf), empty_c, empty_c, empty_c, empty_c, z[k, :],
            np.array([True]), i_actual[:1], i_comp[:1],
        )  # fmt: skip
        branch[k] = i_comp[0]
    np.testing.assert_array_equal(_bits(branch), _bits(0.0 - z * w))
