"""Compiled loops of the chord-Newton iteration (numba): the ports' currents and the update.

An iteration of the dense power flow was about 40 numpy calls on arrays of ``ports x columns``
(23 x 10 on IEEE 13), so its cost was numpy's per call, not arithmetic. :func:`port_currents`
evaluates every port's load model (:class:`~openg2g.grid.feeder.ports.LoadKernel`, the PQ ports'
constant power) and the compensation currents in one pass; :func:`chord_update` forms the update,
its largest relative size and LAPACK's right-hand side in another; :func:`chord_step` takes the
solved step. The matrix product ``K i_c`` and LAPACK's solve stay numpy's and scipy's.

Each float comes from the same IEEE operations, in the same order, as the numpy expressions the
solver was written in, so every voltage is the same bit for bit. numpy's complex loops have their
own formulas, reproduced here: division is Smith's with the reciprocal of the denominator
(:func:`_div`); on CPUs with AVX2 and FMA (numpy's ``X86_V3`` loops) a complex product is two
fused multiply-adds (:func:`_mul`) and ``abs`` is ``max * sqrt(fma(r, r, 1))`` with ``r = min /
max`` (:func:`_abs`). A real operand is promoted to ``(x, 0)`` first, as numpy does, so signed
zeros and infinities come out as numpy's. The fused products are the kernels' on any CPU (LLVM's
``fma`` rounds once everywhere); numpy's are fused only where it takes those loops, so elsewhere
the grid's last bits differ from a numpy-only solve (deterministic all the same).
``tests/grid/test_kernels.py`` checks the kernels against the numpy expressions bit for bit where
numpy fuses (it skips those checks elsewhere, saying why) and the fused product by hand on any CPU. A division by zero gives numpy's infinities and NaNs (numba's
``error_model="numpy"``), not Python's exception: a de-energized port tends to 0 V.

numba compiles these on first use (about 3 s) and keeps the machine code in ``__pycache__``
(``cache=True``, as :mod:`openg2g.datacenter.kernels`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["chord_step", "chord_update", "port_currents"]


def _fma_intrinsic(typingctx: Any, a: Any, b: Any, c: Any) -> Any:  # pragma: no cover - compiled
    """numba's typing and code of :func:`_fma`."""
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        double = ir.DoubleType()
        fn = builder.module.declare_intrinsic("llvm.fma", [double], ir.FunctionType(double, [double] * 3))
        return builder.call(fn, args)

    return sig, codegen


_fma = cast(Callable[[float, float, float], float], intrinsic(_fma_intrinsic))
"""``a * b + c`` rounded once (LLVM's ``fma``; numba has no ``math.fma`` before Python 3.13)."""


@numba.njit(cache=True, error_model="numpy")
def _mul(ar: float, ai: float, br: float, bi: float) -> tuple[float, float]:  # pragma: no cover - compiled
    """numpy's complex product ``a * b`` (its AVX2 loop: two fused multiply-adds)."""
    return _fma(ar, br, -(ai * bi)), _fma(ar, bi, ai * br)


@numba.njit(cache=True, error_model="numpy")
def _div(ar: float, ai: float, br: float, bi: float) -> tuple[float, float]:  # pragma: no cover - compiled
    """numpy's complex quotient ``a / b`` (Smith's method, scaled by the denominator's reciprocal)."""
    abs_r, abs_i = abs(br), abs(bi)
    if abs_r >= abs_i:
        if abs_r == 0.0 and abs_i == 0.0:
            return ar / abs_r, ai / abs_r
        rat = bi / br
        scl = 1.0 / (br + bi * rat)
        return (ar + ai * rat) * scl, (ai - ar * rat) * scl
    rat = br / bi
    scl = 1.0 / (bi + br * rat)
    return (ar * rat + ai) * scl, (ai * rat - ar) * scl


@numba.njit(cache=True, error_model="numpy")
def _abs(re: float, im: float) -> float:  # pragma: no cover - compiled
    """numpy's ``abs`` of a complex number (its AVX2 loop; an infinite part wins over a NaN)."""
    re, im = abs(re), abs(im)
    if re == math.inf or im == math.inf:
        return math.inf
    if math.isnan(re) or math.isnan(im):
        return math.nan
    larger, smaller = max(re, im), min(re, im)
    if larger == 0.0:
        return 0.0
    ratio = smaller / larger
    return math.sqrt(_fma(ratio, ratio, 1.0)) * larger


@numba.njit(cache=True, error_model="numpy")
def _fallback(
    p: int, vm: float, sc: float, vlow: np.ndarray, v95: np.ndarray, yeq: np.ndarray, i_low: np.ndarray,
    slope: np.ndarray, y_high: np.ndarray,
) -> tuple[float, float]:  # fmt: skip  # pragma: no cover - compiled
    """Admittance (S) of load branch ``p`` outside its normal range at voltage magnitude ``vm`` (V)
    and load scale ``sc``, as :meth:`LoadKernel._fallback <openg2g.grid.feeder.ports.LoadKernel>`."""
    if vm <= vlow[p]:
        return _mul(yeq[p].real, yeq[p].imag, sc, 0.0)
    if vm <= v95[p]:
        sr, si = _mul(slope[p].real, slope[p].imag, vm - vlow[p], 0.0)
        tr, ti = _mul(i_low[p].real + sr, i_low[p].imag + si, sc, 0.0)
        return _div(tr, ti, vm, 0.0)
    return _mul(y_high[p].real, y_high[p].imag, sc, 0.0)


@numba.njit(cache=True, error_model="numpy")
def port_currents(
    u: np.ndarray, num: np.ndarray, p_pow: np.ndarray, q_pow: np.ndarray, sc: np.ndarray,
    s_pq_conj: np.ndarray, pow_row: np.ndarray, ap: np.ndarray, aq: np.ndarray, vb_pow: np.ndarray,
    vlow: np.ndarray, v95: np.ndarray, vmax: np.ndarray, yeq: np.ndarray, i_low: np.ndarray,
    slope: np.ndarray, y_high: np.ndarray, y_nominal: np.ndarray, dead: np.ndarray,
    i_actual: np.ndarray, i_comp: np.ndarray,
) -> None:  # fmt: skip  # pragma: no cover - compiled
    """Load currents and compensation currents (A) of every port at port voltages ``u`` (V,
    ``(n_ports, cols)``, load branches first), into ``i_actual`` and ``i_comp``.

    A load branch draws ``num / conj(u)`` in its normal range, with ``num`` from
    :meth:`LoadKernel.prepare <openg2g.grid.feeder.ports.LoadKernel.prepare>` (``num``, ``p_pow``,
    ``q_pow``, ``sc``), or for a voltage-dependent branch (``pow_row >= 0``, its row of ``p_pow``,
    ``q_pow``, ``ap``, ``aq``, ``vb_pow``) ``p r^ap - j q r^aq`` with ``r = |u| / vb``; outside the
    range (``|u| <= v95`` or ``|u| > vmax``) its fallback admittance times ``u``. Its compensation
    current is that minus ``y_nominal u``. A PQ port draws ``s_pq_conj / conj(u)``, its compensation
    current the same. A de-energized port (``dead``) draws nothing.
    """
    n_load = num.shape[0]
    for p in range(u.shape[0]):
        for j in range(u.shape[1]):
            ur, ui = u[p, j].real, u[p, j].imag
            if p >= n_load:
                if dead[p]:
                    ir_, ii = 0.0, 0.0
                else:
                    s = s_pq_conj[p - n_load, j]
                    ir_, ii = _div(s.real, s.imag, ur, -ui)
                i_actual[p, j] = i_comp[p, j] = complex(ir_, ii)
                continue
            if dead[p]:
                ir_, ii = 0.0, 0.0
            else:
                vm = _abs(ur, ui)
                if vm <= v95[p] or vm > vmax[p]:
                    yr, yi = _fallback(p, vm, sc[p, j], vlow, v95, yeq, i_low, slope, y_high)
                    ir_, ii = _mul(yr, yi, ur, ui)
                else:
                    k = pow_row[p]
                    if k >= 0:
                        r = vm / vb_pow[k]
                        cr, ci = _mul(0.0, 1.0, q_pow[k, j], 0.0)  # 1j * q
                        cr, ci = _mul(cr, ci, r ** aq[k], 0.0)
                        nr, ni = p_pow[k, j] * r ** ap[k] - cr, 0.0 - ci
                    else:
                        nr, ni = num[p, j].real, num[p, j].imag
                    ir_, ii = _div(nr, ni, ur, -ui)
            i_actual[p, j] = complex(ir_, ii)
            yr, yi = _mul(y_nominal[p].real, y_nominal[p].imag, ur, ui)
            i_comp[p, j] = complex(ir_ - yr, ii - yi)


@numba.njit(cache=True, error_model="numpy")
def chord_update(
    u: np.ndarray, u0: np.ndarray, k_i: np.ndarray, v_ref: np.ndarray, g: np.ndarray, rhs: np.ndarray
) -> float:  # pragma: no cover - compiled
    """The dense iteration's update ``g = u - (u0 - K i_c)`` (V, ``k_i`` is ``K i_c``) into ``g``,
    its real and imaginary parts into ``rhs`` (``(2 n, cols)``, LAPACK's right-hand side), and the
    largest ``|g| / v_ref`` (NaN if any is NaN; 0 for no ports)."""
    n = u.shape[0]
    err = 0.0
    for p in range(n):
        for j in range(u.shape[1]):
            t = u0[p] - k_i[p, j]
            gr, gi = u[p, j].real - t.real, u[p, j].imag - t.imag
            g[p, j] = complex(gr, gi)
            rhs[p, j], rhs[n + p, j] = gr, gi
            rel = _abs(gr, gi) / v_ref[p]
            if not math.isnan(err) and (rel > err or math.isnan(rel)):
                err = rel
    return err


@numba.njit(cache=True, error_model="numpy")
def chord_step(u: np.ndarray, x: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``u - (x[:n] + 1j * x[n:])`` into ``out``: the next iterate (V) from LAPACK's solution ``x``
    (``(2 n, cols)``, real parts over imaginary parts)."""
    n = u.shape[0]
    for p in range(n):
        for j in range(u.shape[1]):
            sr, si = _mul(0.0, 1.0, x[n + p, j], 0.0)
            out[p, j] = complex(u[p, j].real - (x[p, j] + sr), u[p, j].imag - (0.0 + si))
