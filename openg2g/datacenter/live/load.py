"""The load a live site puts on its servers, and what it measures of their answers.

One :class:`ReplicaLoad` per real replica (an OpenAI-compatible server: vLLM, SGLang, TGI,
llama.cpp's server, ``transformers serve``) keeps a closed loop of streaming requests: exactly
``target`` of them in flight, each followed at once by the next prompt when it ends. Lowering the
target closes the newest requests' streams at their next chunk (a server stops generating for a
closed stream), raising it starts new ones at once, so the running batch follows a command within
one inter-token latency. This is the batch-size knob that works with any server; a server with an
endpoint of its own for its batch limit can also be told (:class:`~openg2g.datacenter.live.config.BatchKnobSpec`).

What is measured, on the monotonic clock (``time.monotonic()``):

* every streamed chunk that carries text is one token; the time since the previous chunk of the
  same request is one inter-token latency sample (the first chunk's wait, the time to first token,
  is not one). Servers that stream a token per chunk (vLLM, SGLang, TGI) are measured exactly; one
  that merges tokens into a chunk counts them as one.
* the requests in flight: from the request being sent until its stream ends or is closed.

Threads, not asyncio: one per request slot, each blocking on its own stream, with only the
standard library's ``http.client``; a server's answer is I/O, so the GIL does not serialize them.
"""

from __future__ import annotations

import bisect
import http.client
import itertools
import json
import math
import random
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from openg2g.core.errors import SimulationError

__all__ = [
    "InFlightLog",
    "LiveServerError",
    "ReplicaLoad",
    "TokenLog",
    "Tokens",
    "post_batch_limit",
    "prompt_cycle",
    "served_models",
]

_CONNECT_TIMEOUT_S = 5.0
_KEEP_S = 900.0
"""How long measurements are kept (s): the run asks for windows at most the stagger behind."""


class LiveServerError(SimulationError):
    """A live site's server cannot be reached, stopped answering, or refused what it was sent."""


def _connection(url: str, timeout_s: float) -> tuple[http.client.HTTPConnection, str]:
    """A connection to ``url``'s host and the path prefix of its API."""
    parts = urllib.parse.urlsplit(url)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return cls(parts.netloc, timeout=timeout_s), parts.path.rstrip("/")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (no server listening)"
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return "timed out"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def served_models(url: str, timeout_s: float = _CONNECT_TIMEOUT_S) -> list[str]:
    """The model names the server at ``url`` serves (its ``GET /v1/models``).

    :raises LiveServerError: nothing answers there, or not as an OpenAI-compatible server.
    """
    conn, prefix = _connection(url, timeout_s)
    try:
        conn.request("GET", f"{prefix}/v1/models")
        response = conn.getresponse()
        body = response.read(1_000_000)
    except (OSError, http.client.HTTPException) as exc:
        raise LiveServerError(f"no server at {url}: {_describe(exc)}") from None
    finally:
        conn.close()
    if response.status != 200:
        raise LiveServerError(f"the server at {url} answered GET /v1/models with HTTP {response.status}")
    try:
        return [str(m["id"]) for m in json.loads(body)["data"]]
    except (ValueError, KeyError, TypeError):
        raise LiveServerError(
            f"the server at {url} is not OpenAI-compatible: GET /v1/models gave no model list"
        ) from None


def post_batch_limit(url: str, path: str, batch: int, timeout_s: float = _CONNECT_TIMEOUT_S) -> None:
    """POST ``path`` (its ``{batch}`` replaced) to the server at ``url``: its own batch limit.

    :raises LiveServerError: the server refused or did not answer.
    """
    conn, prefix = _connection(url, timeout_s)
    target = prefix + path.replace("{batch}", str(batch))
    try:
        conn.request("POST", target)
        response = conn.getresponse()
        response.read(10_000)
    except (OSError, http.client.HTTPException) as exc:
        raise LiveServerError(f"setting batch {batch} at {url}{target}: {_describe(exc)}") from None
    finally:
        conn.close()
    if response.status >= 300:
        raise LiveServerError(f"the server at {url} answered POST {target} with HTTP {response.status}")


class InFlightLog:
    """A count that changes by steps (requests in flight), with its time integral, so that the
    mean over any window is exact. Thread-safe."""

    def __init__(self) -> None:
        self._t: list[float] = []
        self._area: list[float] = []  # integral of the count up to each change
        self._value: list[int] = []  # the count from each change on
        self._lock = threading.Lock()

    def change(self, delta: int, t: float | None = None) -> None:
        """The count moves by ``delta`` at ``t`` (monotonic s; default now)."""
        now = time.monotonic() if t is None else t
        with self._lock:
            if self._t:
                area = self._area[-1] + self._value[-1] * (now - self._t[-1])
                value = self._value[-1] + delta
            else:
                area, value = 0.0, delta
            self._t.append(now)
            self._area.append(area)
            self._value.append(value)
            if now - self._t[0] > 2 * _KEEP_S:
                cut = bisect.bisect_left(self._t, now - _KEEP_S)
                del self._t[:cut], self._area[:cut], self._value[:cut]

    def _area_at(self, t: float) -> float:
        i = bisect.bisect_right(self._t, t) - 1
        if i < 0:
            return 0.0
        return self._area[i] + self._value[i] * (t - self._t[i])

    def mean(self, t0: float, t1: float) -> float:
        """The count's time-average over ``[t0, t1]`` (0 before its first change)."""
        with self._lock:
            if t1 <= t0:
                i = bisect.bisect_right(self._t, t0) - 1
                return float(self._value[i]) if i >= 0 else 0.0
            return (self._area_at(t1) - self._area_at(t0)) / (t1 - t0)

    def now(self) -> int:
        """The count now."""
        with self._lock:
            return self._value[-1] if self._value else 0


@dataclass(frozen=True)
class Tokens:
    """The tokens of one window: how many arrived and the inter-token latencies (s) among them."""

    count: int
    itl_s: Sequence[float]


class TokenLog:
    """Token arrivals (monotonic s) with the inter-token latency each ends (NaN for a request's
    first token). Thread-safe."""

    def __init__(self) -> None:
        self._t: list[float] = []
        self._itl: list[float] = []
        self._lock = threading.Lock()

    def add(self, t: float, itl_s: float) -> None:
        with self._lock:
            self._t.append(t)
            self._itl.append(itl_s)
            if t - self._t[0] > 2 * _KEEP_S:
                cut = bisect.bisect_left(self._t, t - _KEEP_S)
                del self._t[:cut], self._itl[:cut]

    def window(self, t0: float, t1: float) -> Tokens:
        """The tokens that arrived in ``(t0, t1]``."""
        with self._lock:
            a, b = bisect.bisect_right(self._t, t0), bisect.bisect_right(self._t, t1)
            itl = [x for x in self._itl[a:b] if not math.isnan(x)]
            return Tokens(b - a, itl)

    def __len__(self) -> int:
        with self._lock:
            return len(self._t)


def _chunk(line: bytes, api: str) -> tuple[str, bool]:
    """The text of one server-sent-events line and whether the stream ends with it (``[DONE]``,
    or a choice's ``finish_reason``: some servers send no ``[DONE]``)."""
    if not line.startswith(b"data:"):
        return "", False
    data = line[5:].strip()
    if data == b"[DONE]":
        return "", True
    event = json.loads(data)
    if "error" in event:
        raise http.client.HTTPException(f"the server sent an error: {str(event['error'])[:300]}")
    choice = (event.get("choices") or [{}])[0]
    text = (choice.get("delta") or {}).get("content") if api == "chat" else choice.get("text")
    return text or "", choice.get("finish_reason") is not None


class ReplicaLoad:
    """The streaming requests on one real replica: a closed loop (a new request as soon as one
    ends), or requests arriving at random (Poisson, seeded) that wait in a queue here until fewer
    than ``target`` are in flight. A request whose stream is closed because the batch was lowered
    goes back to the queue in the second case (as a server preempts it), and is gone in the
    first (the loop sends another).

    :param url: the server's base URL.
    :param model: the model name to ask for (one the server serves).
    :param next_prompt: gives the next prompt (thread-safe; one for all the loads of a site:
        :func:`prompt_cycle`).
    :param api: ``chat`` or ``completions``.
    :param max_tokens: output tokens per request.
    :param slots: the most requests it may ever keep in flight (the largest batch size).
    :param timeout_s: a stream with no chunk for this long is an error (s).
    :param arrival_rate_per_s: mean arrivals per second; ``None`` for a closed loop.
    :param seed: seed of the arrival times.
    """

    def __init__(
        self,
        url: str,
        model: str,
        next_prompt: Callable[[], str],
        api: str,
        max_tokens: int,
        slots: int,
        timeout_s: float,
        arrival_rate_per_s: float | None = None,
        seed: int = 0,
    ):
        self.url = url
        self.model = model
        self._next_prompt = next_prompt
        self._api = api
        self._max_tokens = max_tokens
        self._timeout_s = timeout_s
        self.tokens = TokenLog()
        self.in_flight = InFlightLog()
        self._target = 0
        self._stopped = False
        self._cond = threading.Condition()
        self._error: tuple[float, str] | None = None
        self._rate = arrival_rate_per_s
        self._seed = seed
        self.waiting = 0
        """Requests arrived and not yet sent (always 0 in a closed loop)."""
        self._threads = [
            threading.Thread(target=self._slot, args=(i,), name=f"openg2g-live {url} #{i}", daemon=True)
            for i in range(slots)
        ]
        if arrival_rate_per_s is not None:
            self._threads.append(
                threading.Thread(target=self._arrivals, name=f"openg2g-live {url} arrivals", daemon=True)
            )

    def start(self, target: int) -> None:
        """Start the loop with ``target`` requests in flight."""
        self._target = target
        for thread in self._threads:
            thread.start()

    def set_target(self, target: int) -> None:
        """Keep ``target`` requests in flight from now on."""
        with self._cond:
            self._target = target
            self._cond.notify_all()

    def stop(self, wait_s: float = 5.0) -> None:
        """End every request (their streams closed at their next chunk) and the threads."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        deadline = time.monotonic() + wait_s
        for thread in self._threads:
            if thread.is_alive():
                thread.join(max(0.0, deadline - time.monotonic()))

    @property
    def error(self) -> tuple[float, str] | None:
        """``(monotonic s, what happened)`` of the first failure, ``None`` while all is well."""
        return self._error

    def _fail(self, message: str) -> None:
        if self._error is None and not self._stopped:
            self._error = (time.monotonic(), message)

    def _arrivals(self) -> None:
        assert self._rate is not None
        rng = random.Random(self._seed)
        due = time.monotonic()
        while True:
            due += rng.expovariate(self._rate)
            with self._cond:
                while not self._stopped and time.monotonic() < due:
                    self._cond.wait(due - time.monotonic())
                if self._stopped:
                    return
                self.waiting += 1
                self._cond.notify_all()

    def _slot(self, i: int) -> None:
        while True:
            with self._cond:
                while not self._stopped and (i >= self._target or (self._rate is not None and self.waiting == 0)):
                    self._cond.wait()
                if self._stopped or self._error is not None:
                    return
                if self._rate is not None:
                    self.waiting -= 1
            try:
                cut = self._request(i)
            except (OSError, http.client.HTTPException, ValueError) as exc:
                self._fail(_describe(exc))
                return
            if cut and self._rate is not None:
                with self._cond:
                    self.waiting += 1
                    self._cond.notify_all()

    def _request(self, i: int) -> bool:
        """Send one request and read its stream; True if it was closed before its end (the batch
        was lowered, or the load stopped)."""
        prompt = self._next_prompt()
        if self._api == "chat":
            path = "/v1/chat/completions"
            body: dict[str, object] = {"messages": [{"role": "user", "content": prompt}]}
        else:
            path = "/v1/completions"
            body = {"prompt": prompt}
        body.update(model=self.model, max_tokens=self._max_tokens, stream=True)
        conn, prefix = _connection(self.url, self._timeout_s)
        self.in_flight.change(+1)
        try:
            conn.request("POST", prefix + path, json.dumps(body), {"Content-Type": "application/json"})
            response = conn.getresponse()
            if response.status != 200:
                detail = response.read(2000).decode("utf-8", "replace").strip()
                self._fail(f"POST {path} answered HTTP {response.status}: {detail[:300]}")
                return False
            last: float | None = None
            for line in _lines(response):
                text, finished = _chunk(line, self._api)
                if text:
                    now = time.monotonic()
                    self.tokens.add(now, now - last if last is not None else math.nan)
                    last = now
                if finished:
                    return False
                if self._stopped or i >= self._target:  # the batch was lowered
                    return True
            if not self._stopped and i < self._target:
                self._fail(f"POST {path}: the stream broke off before its end (the server closed it)")
            return False
        finally:
            self.in_flight.change(-1)
            conn.close()


def _lines(response: http.client.HTTPResponse) -> Iterator[bytes]:
    while True:
        line = response.readline(1_000_000)
        if not line:
            return
        line = line.strip()
        if line:
            yield line


def prompt_cycle(prompts: Sequence[str]) -> Callable[[], str]:
    """A thread-safe function giving the prompts in turn, forever."""
    cycle = itertools.cycle(prompts)
    lock = threading.Lock()

    def next_prompt() -> str:
        with lock:
            return next(cycle)

    return next_prompt
