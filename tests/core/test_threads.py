"""One BLAS thread inside openg2g's computations, the caller's limits back afterwards."""

from __future__ import annotations

from threadpoolctl import threadpool_info, threadpool_limits

from openg2g.core.threads import one_blas_thread


def _blas_threads() -> set[int]:
    """The thread counts of the BLAS libraries loaded that take a limit: a library built
    single-threaded (one a dependency brings, such as a reference BLAS) stays at 1 whatever it is
    told, so the limit of 2 set around each test marks the others."""
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas" and lib["num_threads"] > 1}


def _all_blas_threads() -> list[int]:
    """Every loaded BLAS library's thread count, in threadpoolctl's order."""
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_one_thread_inside_and_the_callers_limit_back_after_the_outermost_context() -> None:
    with threadpool_limits(limits=2, user_api="blas"):
        settable = [i for i, n in enumerate(_all_blas_threads()) if n == 2]
        assert settable, "no BLAS library of this process takes a thread limit"

        def threads() -> set[int]:
            counts = _all_blas_threads()
            return {counts[i] for i in settable}

        with one_blas_thread():
            assert threads() == {1}
            with one_blas_thread():
                assert threads() == {1}
            assert threads() == {1}  # an inner context leaves the outer one's limit
        assert threads() == {2}


def test_the_limit_comes_back_when_the_computation_fails() -> None:
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        try:
            with one_blas_thread():
                raise RuntimeError("a failed solve")
        except RuntimeError:
            pass
        assert before == {2} and _blas_threads() == {2}
