"""One BLAS thread inside openg2g's computations, the caller's limits back afterwards."""

from __future__ import annotations

from threadpoolctl import threadpool_info, threadpool_limits

from openg2g.core.threads import one_blas_thread


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_one_thread_inside_and_the_callers_limit_back_after_the_outermost_context() -> None:
    with threadpool_limits(limits=2, user_api="blas"):
        assert _blas_threads() and set(_blas_threads()) == {2}
        with one_blas_thread():
            assert set(_blas_threads()) == {1}
            with one_blas_thread():
                assert set(_blas_threads()) == {1}
            assert set(_blas_threads()) == {1}  # an inner context leaves the outer one's limit
        assert set(_blas_threads()) == {2}


def test_the_limit_comes_back_when_the_computation_fails() -> None:
    with threadpool_limits(limits=2, user_api="blas"):
        try:
            with one_blas_thread():
                raise RuntimeError("a failed solve")
        except RuntimeError:
            pass
        assert set(_blas_threads()) == {2}
