"""Where sweep runs execute: in-process, a local process pool, or Ray tasks.

Every engine takes a list of :class:`~openg2g.sweep.tasks.RunTask` and calls ``on_record`` with
each run's record as it finishes (in completion order). A worker that dies (killed, out of
memory, segfault) loses only the run it was doing; that run is attempted again up to
``retries`` times, then recorded as ``failed``.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import socket
import sys
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path
from typing import Any

from typing_extensions import Self

from openg2g.core.errors import G2GError, ScenarioError
from openg2g.core.limits import MAX_RETRIES, bound_text, max_processes
from openg2g.sweep.tasks import RunTask, execute_task, lost_record

__all__ = [
    "ENGINES",
    "Engine",
    "LocalEngine",
    "RayEngine",
    "SerialEngine",
    "check_ray_address",
    "make_engine",
    "prepare_ray_auth",
    "ray_connect_error",
]

OnRecord = Callable[[dict[str, Any]], None]


class Engine(ABC):
    """Runs tasks and reports their records.

    :param workers: runs at a time.
    :param retries: re-attempts of a run whose worker died.
    :param local: the workers are processes on this machine (not a cluster's), so at most
        :func:`~openg2g.core.limits.max_processes` of them.
    :raises ScenarioError: ``workers`` < 1 or (``local``) above that bound, or ``retries`` outside 0 to
        :data:`~openg2g.core.limits.MAX_RETRIES`.
    """

    name: str = ""

    def __init__(self, workers: int = 1, retries: int = 1, *, local: bool = True):
        if workers < 1:
            raise ScenarioError([("--workers", f"must be at least 1, got {workers}")])
        if local and workers > max_processes():
            raise ScenarioError([("--workers", f"{workers} is more than this machine runs usefully: {bound_text()}")])
        if not 0 <= retries <= MAX_RETRIES:
            raise ScenarioError([("retries", f"must be from 0 to {MAX_RETRIES}, got {retries}")])
        self.workers = workers
        self.retries = retries

    @abstractmethod
    def map(self, tasks: Sequence[RunTask], on_record: OnRecord) -> None:
        """Run every task, calling ``on_record(record)`` as each one finishes."""

    def __enter__(self) -> Self:
        """Keep the engine's resources (a Ray connection) across several :meth:`map` calls."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Release what :meth:`__enter__` kept."""

    def _lost(self, task: RunTask, attempts: int, why: str) -> dict[str, Any]:
        return lost_record(task, f"{why} (attempt {attempts} of {self.retries + 1}; no retries left)")


def execute_in_worker(task: RunTask) -> dict[str, Any]:
    """:func:`~openg2g.sweep.tasks.execute_task` in a sweep worker, with BLAS and OpenMP pools
    limited to one thread.

    A run's linear algebra is small (feeder matrices of tens to hundreds of rows), where extra
    threads only add synchronization; and ``workers`` processes on as many cores, each with a
    pool of one thread per core, would oversubscribe the machine ``workers``-fold.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        return execute_task(task)


class SerialEngine(Engine):
    """In this process, one run after another (debugging; a crash here ends the sweep)."""

    name = "serial"

    def map(self, tasks: Sequence[RunTask], on_record: OnRecord) -> None:
        for task in tasks:
            on_record(execute_task(task))


# imported once by the fork server (names that fail to import are skipped)
_PRELOAD = [
    "openg2g.sweep.tasks",
    "openg2g.engine.simulation",
    "openg2g.grid.feeder.backend",
    "openg2g.grid.feeder.library",
    "openg2g.datacenter.replay",
    "openg2g.control.registry",
    "openg2g.controllers",
    "openg2g.plot.run",
]


def _mp_context() -> multiprocessing.context.BaseContext:
    # forkserver: workers fork from a clean server that has imported the sweep machinery, so they
    # start fast and never inherit the driver's threads (progress bar, Ray client).
    if sys.platform.startswith("linux"):
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


class LocalEngine(Engine):
    """A :class:`pebble.ProcessPool` of ``workers`` processes.

    The pool replaces a worker that dies (killed, out of memory, segfault) and fails only the
    future of the run that worker was doing, with :class:`pebble.ProcessExpired`; that run is
    charged an attempt and submitted again, the others go on undisturbed.
    """

    name = "local"

    def map(self, tasks: Sequence[RunTask], on_record: OnRecord) -> None:
        from pebble import ProcessExpired, ProcessPool  # here: the command line imports this module for its choices

        attempts: Counter[str] = Counter()
        pool = ProcessPool(max_workers=self.workers, context=_mp_context())
        try:
            pending: dict[Future[dict[str, Any]], RunTask] = {
                pool.submit(execute_in_worker, None, task): task for task in tasks
            }
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    task = pending.pop(future)
                    try:
                        record = future.result()
                    except ProcessExpired as exc:
                        attempts[task.run_id] += 1
                        if attempts[task.run_id] <= self.retries:
                            pending[pool.submit(execute_in_worker, None, task)] = task
                            continue
                        why = f"worker process died with exit code {exc.exitcode}"
                        record = self._lost(task, attempts[task.run_id], why)
                    on_record(record)
        except BaseException:  # Ctrl-C or an error in on_record: end the runs in flight too
            pool.stop()
            pool.join()
            raise
        pool.close()
        pool.join()


def check_ray_address(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast if a ``host:port`` or ``ray://host:port`` Ray address does not accept connections.

    :raises G2GError: the address is malformed or nothing listens there within ``timeout_s``.
    """
    if address in ("auto", "local"):
        return
    target = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise G2GError(f"Ray address {address!r} is not host:port, ray://host:port or auto")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise G2GError(
            f"cannot reach a Ray cluster at {address} ({exc.strerror or exc}); "
            f"is the head node running (ray start --head) and the port open?"
        ) from None


RAY_AUTH_DOC = "docs/ray.md (token authentication)"
"""Where the token set-up is explained (quoted in errors)."""


def _ray_token_source() -> str:
    """Where Ray takes the token from, in its own order of precedence."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    if os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return f"the file {os.environ['RAY_AUTH_TOKEN_PATH']} (RAY_AUTH_TOKEN_PATH)"
    return "~/.ray/auth_token"


def prepare_ray_auth() -> None:
    """Use a token given in the environment to authenticate with a Ray cluster (Ray >= 2.52).

    Ray sends a token only when ``RAY_AUTH_MODE=token``; it reads the token from ``RAY_AUTH_TOKEN``,
    else from the file named by ``RAY_AUTH_TOKEN_PATH``, else from ``~/.ray/auth_token``. A token
    given through either variable is taken as the wish to authenticate: ``RAY_AUTH_MODE`` is then
    set to ``token`` unless it is set already. Ray reads these when it is imported, so this must
    run before ``import ray``.

    :raises G2GError: ``RAY_AUTH_TOKEN_PATH`` names a file that cannot be read or is empty (Ray
        would abort the process).
    """
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path and not os.environ.get("RAY_AUTH_TOKEN"):
        try:
            token = Path(path).expanduser().read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise G2GError(
                f"RAY_AUTH_TOKEN_PATH={path}: cannot read the Ray token file ({getattr(exc, 'strerror', None) or exc})"
            ) from None
        if not token:
            raise G2GError(f"RAY_AUTH_TOKEN_PATH={path}: the Ray token file is empty")
    if "RAY_AUTH_MODE" not in os.environ and (os.environ.get("RAY_AUTH_TOKEN") or path):
        os.environ["RAY_AUTH_MODE"] = "token"


def ray_connect_error(address: str, exc: BaseException) -> G2GError:
    """What to tell the user when ``ray.init(address=...)`` fails with ``exc``.

    A rejected or missing token (the cluster runs with ``RAY_AUTH_MODE=token``) gets the steps to
    pass the cluster's token; anything else the innermost cause Ray gave.
    """
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    text = " ".join(str(e) for e in chain)
    if any(type(e).__name__ == "AuthenticationError" for e in chain) or "InvalidAuthToken" in text:
        if os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
            why = f"rejected the token this command sent (from {_ray_token_source()})"
        else:
            why = "requires token authentication and this command sent no token (RAY_AUTH_MODE is not 'token')"
        return G2GError(
            f"cannot connect to Ray at {address}: the cluster {why}. Run this command with the cluster's "
            "token (print it on the head node with `ray get-auth-token`) in RAY_AUTH_TOKEN=<token>, or in a "
            "file named by RAY_AUTH_TOKEN_PATH=<file>; openg2g then sets RAY_AUTH_MODE=token. "
            f"See {RAY_AUTH_DOC}"
        )
    detail = str(chain[-1]).strip().splitlines()
    cause = f" ({type(chain[-1]).__name__}: {detail[-1]})" if chain[-1] is not exc and detail else ""
    return G2GError(f"cannot connect to Ray at {address}: {exc}{cause}")


class RayEngine(Engine):
    """Ray tasks, one CPU each; Ray retries a task whose worker died ``retries`` times.

    :param address: Ray cluster address (``host:port``, ``ray://host:port``, ``auto``); None
        starts a local Ray instance with ``workers`` CPUs (or uses one already initialised).
    :param connect_timeout_s: how long to wait for the address to accept a connection.

    A cluster started with token authentication (``RAY_AUTH_MODE=token``, the default of recent
    Ray when a token exists) needs its token: see :func:`prepare_ray_auth`.

    Outputs are written by the workers to the sweep folder, so on a multi-node cluster that
    folder must be on a file system shared by all nodes, and openg2g installed on every node.
    """

    name = "ray"

    def __init__(self, workers: int = 1, retries: int = 1, address: str | None = None, connect_timeout_s: float = 5.0):
        super().__init__(workers, retries, local=address is None)
        self.address = address
        self.connect_timeout_s = connect_timeout_s
        self._session: bool | None = None  # inside `with`: whether we started Ray

    def _connect(self) -> bool:
        """Initialise Ray; returns True if this call started it (and should shut it down)."""
        if self.address is not None:
            check_ray_address(self.address, self.connect_timeout_s)
            prepare_ray_auth()
        try:
            import ray
        except ImportError:
            raise G2GError("the ray engine needs Ray: pip install 'openg2g-cosim[ray]'") from None
        if ray.is_initialized():
            return False
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "logging_level": logging.ERROR,
            "log_to_driver": False,
            "configure_logging": True,
        }
        if self.address is None:
            kwargs["num_cpus"] = self.workers
        try:
            ray.init(address=self.address, **kwargs)
        except Exception as exc:  # noqa: BLE001 - Ray raises several types for a bad address
            raise ray_connect_error(self.address or "a new local instance", exc) from None
        return True

    def __enter__(self) -> Self:
        self._session = self._connect()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._session:
            import ray

            ray.shutdown()
        self._session = None

    def map(self, tasks: Sequence[RunTask], on_record: OnRecord) -> None:
        started = self._connect() if self._session is None else False
        import ray
        from ray.exceptions import RayError

        remote = ray.remote(num_cpus=1, max_retries=self.retries, retry_exceptions=False)(execute_in_worker)
        try:
            pending = {remote.remote(task): task for task in tasks}
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    task = pending.pop(ref)
                    try:
                        record = ray.get(ref)
                    except RayError as exc:
                        record = self._lost(task, self.retries + 1, f"Ray task lost: {type(exc).__name__}: {exc}")
                    on_record(record)
        except KeyboardInterrupt:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        finally:
            if started:
                ray.shutdown()


ENGINES = ("local", "ray", "serial")


def make_engine(name: str, workers: int = 1, retries: int = 1, address: str | None = None) -> Engine:
    """An engine by name (``local``, ``ray``, ``serial``).

    :raises G2GError: unknown name, or ``address`` given for an engine other than ray.
    """
    if address is not None and name != "ray":
        raise G2GError(f"--address is for --engine ray (got --engine {name})")
    if name == "local":
        return LocalEngine(workers, retries)
    if name == "ray":
        return RayEngine(workers, retries, address)
    if name == "serial":
        return SerialEngine(workers, retries)
    raise G2GError(f"unknown engine {name!r}; valid: {', '.join(ENGINES)}")
