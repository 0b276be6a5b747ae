"""What-if runs from the browser: a bundled scenario with a planner's changes, checked as the CLI
checks it, run by ``openg2g run`` in its own process through a bounded queue.

A :class:`WhatIf` is the form: the bundled scenario, the first site's bus, replicas and batch size
per model, its training job (on or off, GPUs, start, end), the controller, the duration and the
tap mode of the regulators the scenario names (:data:`TAP_MODES`). :func:`overrides` turns it
into the ``--set`` assignments ``openg2g run`` takes, :func:`check` validates them with
:func:`openg2g.scenario.loader.load_scenario` (every problem with its field path), and
:class:`RunQueue` runs them, at most ``max_running`` at a time, each as ``python -m openg2g run
SCENARIO --set ... --out RUNS/whatif/<name>-<k>`` (the same validation, output folder lock and
SIGTERM handling as a run from the terminal). Progress is the run's own ``summary.json``
(``sim_time_s`` of ``duration_s``); cancel sends SIGTERM, so the run stops as after Ctrl-C, its
summary saying ``interrupted``. What-if runs write no PNG plots (``outputs.plots=false``): the app
draws their views.

What a request brings is checked before it is used: the form's fields for their types
(:class:`FormValues`; a request may hold any JSON, and a wrong one is a message naming the field,
never a server error), the controller parameters as YAML of at most :data:`FORM_YAML_NODES`
values once its aliases are expanded (:func:`parse_params`), and at most ``max_queued`` runs wait
in the queue (:class:`RunQueue`; more is refused as full). :meth:`RunQueue.close` ends the
running what-ifs, and ``openg2g app`` calls it when it ends, on Ctrl-C or SIGTERM too.

Only stock controllers run unless the app was started with ``allow_code``: the form offers the
controllers of the ``openg2g.controllers`` package, and a scenario that would import a controller
file, read a pickle or a policy zip's pickled objects, or deploy a policy whose observation terms
are not openg2g's own (:mod:`openg2g.envs.terms`), is refused. With ``allow_code`` the form also
takes free ``key=value`` lines, which can name such files.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BeforeValidator, Field, ValidationError

from openg2g.core.config import ConfigModel, field_path
from openg2g.core.errors import G2GError, ScenarioError
from openg2g.core.paths import bundled_dir
from openg2g.core.yamltext import YamlTextError, read_yaml_text
from openg2g.scenario.loaded import LoadedScenario, resolved_scenario_text
from openg2g.scenario.loader import load_scenario

__all__ = [
    "FORM_YAML_NODES",
    "KEEP",
    "NO_CONTROL",
    "TAP_AUTO",
    "TAP_FIXED",
    "TAP_MODES",
    "TAP_SCHEDULED",
    "WHATIF_FOLDER",
    "FormValues",
    "Job",
    "RunQueue",
    "ScenarioForm",
    "WhatIf",
    "bundled_scenarios",
    "check",
    "controller_choices",
    "form_values",
    "overrides",
    "parse_params",
    "scenario_form",
    "tap_choices",
]

KEEP = "(as in the scenario)"
"""Controller choice: keep the scenario's controllers."""

NO_CONTROL = "none"
"""Controller choice: run without a controller."""

TAP_FIXED = "fixed"
"""Tap mode: every regulator bank the scenario names holds its initial taps (``mode: fixed``; the
scenario's ``set_taps`` and ``set_regulator_mode`` events dropped)."""

TAP_SCHEDULED = "scheduled"
"""Tap mode: the banks hold their taps between the scenario's own ``set_taps`` events (``mode: fixed``,
the events kept); offered when the scenario has such events."""

TAP_AUTO = "auto"
"""Tap mode: every bank the scenario names runs its own band control (``mode: auto``; the tap
events dropped)."""

TAP_MODES = (TAP_FIXED, TAP_SCHEDULED, TAP_AUTO)
"""The tap modes a what-if can choose besides keeping the scenario's."""

TAP_COMMANDS = frozenset({"set_taps", "set_regulator_mode"})
"""Scenario events that move taps or switch a bank's mode: dropped by the fixed and auto modes."""

WHATIF_FOLDER = "whatif"
"""Sub-folder of the runs folder that what-if runs are written to."""

LOG_FOLDER = ".openg2g-app"
"""Hidden sub-folder of the runs folder keeping each what-if process's terminal output."""

STOCK_PACKAGE = "openg2g.controllers"
"""Module prefix of the controllers that ship with openg2g (the only ones run without ``allow_code``)."""

DISTRIBUTION = "openg2g-cosim"
"""openg2g's distribution: its own datacenter plug-ins are the only ones run without ``allow_code``."""


@dataclass(frozen=True)
class WhatIf:
    """One what-if: a bundled scenario and the changes made to it.

    :param scenario: a bundled scenario's name (:func:`bundled_scenarios`).
    :param bus: the first datacenter site's bus; ``None`` keeps it.
    :param replicas: model index (in the first site's list) -> replicas at the start.
    :param batch_sizes: model index -> initial batch size.
    :param controller: :data:`KEEP`, :data:`NO_CONTROL`, or a stock controller's name.
    :param params: the chosen controller's parameters (checked by the controller's own config).
    :param duration_s: simulated time (s); ``None`` keeps it.
    :param extra: further ``key=value`` assignments (only with ``allow_code``).
    :param training: the first site's training job on (``True``) or off (``False``); ``None``
        keeps the scenario's.
    :param training_gpus: GPUs of the job (a whole number, else the loader refuses it); ``None``
        keeps the scenario's.
    :param training_start_s: the job's start (s); ``None`` keeps it.
    :param training_end_s: the job's end (s); ``None`` keeps it.
    :param taps: :data:`KEEP` or one of :data:`TAP_MODES`.
    """

    scenario: str
    bus: str | None = None
    replicas: dict[int, int] = field(default_factory=dict)
    batch_sizes: dict[int, int] = field(default_factory=dict)
    controller: str = KEEP
    params: dict[str, Any] = field(default_factory=dict)
    duration_s: float | None = None
    extra: tuple[str, ...] = ()
    training: bool | None = None
    training_gpus: float | None = None
    training_start_s: float | None = None
    training_end_s: float | None = None
    taps: str = KEEP


FORM_YAML_NODES = 10_000
"""Most values the controller parameters box may hold once its YAML aliases are expanded (a
controller takes a few dozen)."""


def _form_number(value: Any) -> Any:
    """A number input's value as a number: blank (``None``, ``""``) is ``None``; text (which a
    crafted request may send) is read as a number or refused."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"not a number: {value!r}") from None
    return value


FormNumber = Annotated[float | None, BeforeValidator(_form_number)]
"""A number input's value (:func:`_form_number`); finite (:class:`ConfigModel`)."""


class FormValues(ConfigModel):
    """The what-if form's fields as a request brings them, each checked for its type: the page's
    inputs send these, and a request can hold any JSON. What the values mean is checked where
    they are used, by the scenario's validation as ``openg2g run`` checks it (:func:`check`).

    :param replicas: one value per model of the first site (blank keeps the scenario's).
    :param batch_sizes: likewise.
    :param training: the training checkbox's value: ``["on"]`` or ``[]``.
    :param extra: the free ``key=value`` lines (only with ``allow_code``).
    """

    scenario: str
    bus: str | None = None
    replicas: list[FormNumber] = Field(default_factory=list)
    batch_sizes: list[FormNumber] = Field(default_factory=list)
    controller: str | None = None
    params: str | None = None
    duration_s: FormNumber = None
    training: list[str] | None = None
    training_gpus: FormNumber = None
    training_start_s: FormNumber = None
    training_end_s: FormNumber = None
    taps: str | None = None
    extra: str | None = None


def form_values(names: Sequence[str], values: Sequence[Any]) -> FormValues:
    """The form's fields (``names`` are :class:`FormValues` fields, in the order of ``values``),
    checked.

    :raises ScenarioError: a field of the wrong type, named (``duration_s: ...``).
    """
    try:
        return FormValues.model_validate(dict(zip(names, values, strict=True)))
    except ValidationError as exc:
        raise ScenarioError([(field_path(e["loc"]) or "form", e["msg"]) for e in exc.errors()]) from None


@dataclass(frozen=True)
class ScenarioForm:
    """What the form shows for a bundled scenario before any change.

    :param bus: the first site's bus (``""`` without a site).
    :param models: ``(name, replicas, batch_size)`` of each model of the first site.
    :param controllers: the scenario's controller kinds.
    :param duration_s: its duration (s).
    :param training: the first site's training job as ``(gpus, start_s, end_s)``, ``None`` without one.
    :param regulators: the regulator banks the scenario names (``grid.regulators``).
    :param scheduled_taps: the scenario has ``set_taps`` events.
    """

    bus: str
    models: list[tuple[str, int, int]]
    controllers: list[str]
    duration_s: float
    training: tuple[int, float, float] | None = None
    regulators: tuple[str, ...] = ()
    scheduled_taps: bool = False


def bundled_scenarios() -> list[str]:
    """Names of the bundled scenario files (not sweeps, studies or suites: those have no
    ``duration_s`` at the top)."""
    return list(_bundled_names())


@functools.cache
def _bundled_names() -> tuple[str, ...]:
    """The bundled scenario names, read once a process: the files ship with the package, and
    parsing all of them takes seconds, which every what-if check would otherwise pay again."""
    names = []
    for path in sorted(bundled_dir("scenarios").glob("*.yaml")):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(data, dict) and "duration_s" in data and "grid" in data:
            names.append(path.stem)
    return tuple(names)


def _bundled(name: str) -> Path:
    if name not in bundled_scenarios():
        raise ScenarioError([("scenario", f"not a bundled scenario: {name!r}")])
    return bundled_dir("scenarios") / f"{name}.yaml"


@functools.lru_cache(maxsize=64)
def scenario_form(name: str) -> ScenarioForm:
    """The form's starting values for a bundled scenario.

    :raises ScenarioError: not a bundled scenario's name.
    """
    data = _scenario_data(name)
    sites = data.get("datacenters") or []
    site = sites[0] if sites else {}
    job = site.get("training")
    return ScenarioForm(
        bus=str(site.get("bus", "")),
        models=[(str(m["model"]), int(m["replicas"]), int(m["batch_size"])) for m in site.get("models") or []],
        controllers=[str(c.get("kind")) for c in data.get("controllers") or []],
        duration_s=float(data["duration_s"]),
        training=(int(job["gpus"]), float(job["start_s"]), float(job["end_s"])) if job else None,
        regulators=tuple(str(b) for b in (data.get("grid") or {}).get("regulators") or {}),
        scheduled_taps=any(e.get("command") == "set_taps" for e in data.get("events") or []),
    )


def _scenario_data(name: str) -> dict[str, Any]:
    data = yaml.safe_load(_bundled(name).read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def tap_choices(form: ScenarioForm) -> list[str]:
    """The tap modes the form offers for a scenario: keep, and (when it names regulator banks)
    fixed, scheduled (when it has ``set_taps`` events) and auto."""
    if not form.regulators:
        return [KEEP]
    return [KEEP, *(m for m in TAP_MODES if m != TAP_SCHEDULED or form.scheduled_taps)]


def controller_choices(allow_code: bool) -> list[str]:
    """Controller choices of the form: keep, none, and the registered controllers (only those of
    openg2g's own package without ``allow_code``)."""
    from importlib.metadata import entry_points

    from openg2g.control.registry import ENTRY_POINT_GROUP

    names = sorted(
        e.name for e in entry_points(group=ENTRY_POINT_GROUP) if allow_code or e.value.startswith(STOCK_PACKAGE + ".")
    )
    return [KEEP, NO_CONTROL, *names]


def overrides(whatif: WhatIf) -> list[str]:
    """The ``--set`` assignments of a what-if (values written as JSON, which YAML reads as given:
    a bus ``"675"`` stays text).

    :raises ScenarioError: a training job added without its GPUs, start or end; a tap mode the
        scenario does not offer.
    """
    out: list[str] = []
    if whatif.bus is not None:
        out.append(f"datacenters.0.bus={json.dumps(whatif.bus)}")
    for k, n in sorted(whatif.replicas.items()):
        out.append(f"datacenters.0.models.{k}.replicas={json.dumps(n)}")
    for k, b in sorted(whatif.batch_sizes.items()):
        out.append(f"datacenters.0.models.{k}.batch_size={json.dumps(b)}")
    if whatif.controller == NO_CONTROL:
        out.append("controllers=[]")
    elif whatif.controller != KEEP:
        chosen: dict[str, Any] = {"kind": whatif.controller}
        if whatif.params:
            chosen["params"] = whatif.params
        out.append(f"controllers={json.dumps([chosen])}")
    if whatif.duration_s is not None:
        out.append(f"duration_s={json.dumps(whatif.duration_s)}")
    out += _training_overrides(whatif)
    out += _tap_overrides(whatif)
    out.append("outputs.plots=false")
    return [*out, *whatif.extra]


def _training_overrides(whatif: WhatIf) -> list[str]:
    """The first site's training job: removed, its changed fields set, or (for a site without one)
    added whole; the loader checks the values (``end_s`` after ``start_s``, GPUs within capacity).

    :raises ScenarioError: a job added without its GPUs, start or end.
    """
    if whatif.training is None:
        return []
    where = "datacenters.0.training"
    if not whatif.training:
        return [f"{where}=null"]
    changed = {
        key: value
        for key, value in (
            ("gpus", whatif.training_gpus),
            ("start_s", whatif.training_start_s),
            ("end_s", whatif.training_end_s),
        )
        if value is not None
    }
    if scenario_form(whatif.scenario).training is not None:
        return [f"{where}.{key}={json.dumps(value)}" for key, value in changed.items()]
    missing = [key for key in ("gpus", "start_s", "end_s") if key not in changed]
    if missing:
        raise ScenarioError([(f"{where}.{key}", "needed to add a training job") for key in missing])
    return [f"{where}={json.dumps(changed)}"]


def _tap_overrides(whatif: WhatIf) -> list[str]:
    """The tap mode as overrides: each named bank's ``mode``, and the scenario's events without
    the tap events for the fixed and auto modes.

    :raises ScenarioError: a mode the scenario does not offer (:func:`tap_choices`).
    """
    if whatif.taps == KEEP:
        return []
    form = scenario_form(whatif.scenario)
    choices = tap_choices(form)
    if whatif.taps not in choices:
        why = "it names no regulator bank" if not form.regulators else f"choose one of {', '.join(choices)}"
        raise ScenarioError([("grid.regulators", f"tap mode {whatif.taps!r} is not offered for this scenario: {why}")])
    mode = TAP_AUTO if whatif.taps == TAP_AUTO else TAP_FIXED
    out = [f"grid.regulators.{bank}.mode={json.dumps(mode)}" for bank in form.regulators]
    if whatif.taps != TAP_SCHEDULED:
        events = _scenario_data(whatif.scenario).get("events") or []
        out.append(f"events={json.dumps([e for e in events if e.get('command') not in TAP_COMMANDS])}")
    return out


def _runs_code(data: dict[str, Any]) -> list[tuple[str, str]]:
    """Where a scenario (as dumped) would run code that is not openg2g's own: a controller file
    or another package's controller, a datacenter plug-in of another package or file, a trusted
    pickle net, a policy zip's trusted pickles."""
    from importlib.metadata import entry_points

    from openg2g.control.registry import ENTRY_POINT_GROUP
    from openg2g.scenario.build import DATACENTER_GROUP

    own = {e.name for e in entry_points(group=ENTRY_POINT_GROUP) if e.value.startswith(STOCK_PACKAGE + ".")}
    own_sites = {"replay"} | {
        e.name for e in entry_points(group=DATACENTER_GROUP) if e.dist is not None and e.dist.name == DISTRIBUTION
    }
    problems = []
    for k, site in enumerate(data.get("datacenters") or []):
        if site.get("kind", "replay") not in own_sites:
            problems.append(
                (
                    f"datacenters.{k}.kind",
                    f"{site.get('kind')!r} is not one of openg2g's datacenter backends; start the app with --allow-code",
                )
            )
    if (data.get("grid") or {}).get("trust_pickle"):
        problems.append(("grid.trust_pickle", "a pickle net runs code; start the app with --allow-code to allow it"))
    for k, ctrl in enumerate(data.get("controllers") or []):
        if ctrl.get("kind") not in own:
            problems.append(
                (
                    f"controllers.{k}.kind",
                    f"{ctrl.get('kind')!r} is not a stock controller; start the app with --allow-code",
                )
            )
        if (ctrl.get("params") or {}).get("trust_pickle"):
            problems.append((f"controllers.{k}.params.trust_pickle", "start the app with --allow-code to unpickle"))
        if ctrl.get("kind") == "rl_policy":
            problems += [(f"controllers.{k}.params.policy", msg) for msg in _policy_code(ctrl.get("params") or {})]
    return problems


def _policy_code(params: dict[str, Any]) -> list[str]:
    """The observation terms of an ``rl_policy``'s saved settings that are not openg2g's own code
    (a deployed policy imports them)."""
    from openg2g.envs.policy import policy_meta, resolve_policy
    from openg2g.envs.terms import foreign_term

    try:
        meta = policy_meta(resolve_policy(str(params.get("policy"))))
    except G2GError:
        return []  # the run refuses a policy it cannot find or read, naming it
    return [
        f"the policy's observation term {spec.term!r} is not openg2g's; start the app with --allow-code"
        for spec in meta.env.observation_terms
        if foreign_term(spec.term)
    ]


PROGRESS_FLUSHES = 50
"""Writes of a what-if's tables at least (each writes ``summary.json``, which its progress is read
from): its progress moves in steps of 2 % of its time, not from 0 to 100 % at the end of a run
shorter than the default 60 s between writes."""


def progress_flush_s(loaded: LoadedScenario) -> float:
    """The simulated seconds between a what-if's writes: the scenario's ``outputs.flush_every_s``
    or less, :data:`PROGRESS_FLUSHES` per run, never below one grid step (results do not depend on
    it; the tables only come in more parts)."""
    sc = loaded.scenario
    return min(float(sc.outputs.flush_every_s), max(float(sc.periods.grid_s), float(sc.duration_s) / PROGRESS_FLUSHES))


def check(whatif: WhatIf, allow_code: bool) -> LoadedScenario:
    """Validate a what-if as ``openg2g run`` would before running it.

    :raises ScenarioError: every problem, each ``(location, message)`` with its field path; a
        scenario that would run code not in openg2g (see the module doc) without ``allow_code``;
        ``extra`` lines without ``allow_code``.
    """
    # refused before loading: the loader imports a controller file to check it
    if whatif.extra and not allow_code:
        raise ScenarioError([("extra", "free key=value lines need the app started with --allow-code")])
    choices = controller_choices(allow_code)
    if whatif.controller not in choices:
        raise ScenarioError(
            [("controller", f"{whatif.controller!r} is not one of {', '.join(choices)} (others need --allow-code)")]
        )
    loaded = load_scenario(_bundled(whatif.scenario), overrides(whatif))
    if not allow_code:
        problems = _runs_code(loaded.scenario.model_dump(mode="json"))
        if problems:
            raise ScenarioError([(f"{loaded.path}: {loc}", msg) for loc, msg in problems])
    return loaded


def scenario_yaml(whatif: WhatIf, allow_code: bool) -> str:
    """The what-if as a scenario file (overrides applied, paths absolute), to download and run with
    ``openg2g run``.

    :raises ScenarioError: see :func:`check`.
    """
    return resolved_scenario_text(check(whatif, allow_code))


@dataclass
class Job:
    """One what-if run in the queue.

    :param job_id: its number in the queue (from 1).
    :param run_id: its folder relative to the runs folder (``whatif/<scenario>-<k>``).
    :param state: ``queued``, ``running``, ``complete``, ``failed`` or ``cancelled``.
    :param message: for a failed run, the last line ``openg2g run`` printed (its error).
    """

    job_id: int
    run_id: str
    args: list[str]
    state: str = "queued"
    message: str = ""
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    log: Path | None = field(default=None, repr=False)


class RunQueue:
    """What-if runs, at most ``max_running`` at a time, each ``openg2g run`` in its own process.

    A thread started with the queue starts queued runs as places free up and notes the end of
    each; :meth:`close` stops it and ends what is still running or waiting.

    :param root: the runs folder (runs go to its ``whatif/`` sub-folder).
    :param max_running: runs at the same time at most (>= 1).
    :param poll_s: how often the thread looks at the processes (s).
    :param max_queued: runs waiting to start at most (>= 1); a what-if beyond is refused.
    """

    def __init__(self, root: Path, max_running: int = 1, poll_s: float = 0.5, max_queued: int = 8) -> None:
        if max_running < 1:
            raise ValueError(f"max_running must be at least 1, got {max_running}")
        if max_queued < 1:
            raise ValueError(f"max_queued must be at least 1, got {max_queued}")
        self.root = Path(root).resolve()
        self.max_running = max_running
        self.max_queued = max_queued
        self._jobs: list[Job] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._pump, args=(poll_s,), name="openg2g-app-queue", daemon=True)
        self._thread.start()

    def _folder_name(self, scenario: str) -> str:
        taken = {j.run_id for j in self._jobs}
        k = 1
        while True:
            run_id = f"{WHATIF_FOLDER}/{scenario}-{k:03d}"
            if run_id not in taken and not (self.root / run_id).exists():
                return run_id
            k += 1

    def _refuse_when_full(self) -> None:
        """(Under the lock.) :raises G2GError: :attr:`max_queued` runs are waiting."""
        waiting = sum(j.state == "queued" for j in self._jobs)
        if waiting >= self.max_queued:
            raise G2GError(
                f"the what-if queue is full: {waiting} runs are waiting to start (at most {self.max_queued}); "
                "cancel one or wait until one starts"
            )

    def submit(self, whatif: WhatIf, allow_code: bool) -> Job:
        """Validate (:func:`check`) and queue a what-if.

        :raises ScenarioError: the what-if is not valid; nothing is queued.
        :raises G2GError: the queue is full (:attr:`max_queued` runs waiting); nothing is queued.
        """
        with self._lock:  # before the seconds of validation, and again once they are over
            self._refuse_when_full()
        loaded = check(whatif, allow_code)
        with self._lock:
            self._refuse_when_full()
            run_id = self._folder_name(whatif.scenario)
            args = [sys.executable, "-m", "openg2g", "run", str(_bundled(whatif.scenario))]
            # first, so that a flush_every_s of the what-if's own lines (--allow-code) stands
            for assignment in [f"outputs.flush_every_s={progress_flush_s(loaded)!r}", *overrides(whatif)]:
                args += ["--set", assignment]
            args += ["--out", str(self.root / run_id), "--no-progress"]
            job = Job(len(self._jobs) + 1, run_id, args)
            self._jobs.append(job)
        self._advance()
        return job

    def cancel(self, job_id: int) -> Job:
        """Cancel a queued run, or stop a running one (SIGTERM: it writes what it has, status
        ``interrupted``).

        :raises G2GError: no such job.
        """
        with self._lock:
            job = self._job(job_id)
            if job.state == "queued":
                job.state = "cancelled"
            elif job.state == "running" and job.process is not None:
                job.process.terminate()
                job.state = "cancelled"
        return job

    def _job(self, job_id: int) -> Job:
        for job in self._jobs:
            if job.job_id == job_id:
                return job
        raise G2GError(f"no what-if run number {job_id}")

    def jobs(self) -> list[Job]:
        """The jobs, newest first (copies of their state)."""
        with self._lock:
            return [Job(j.job_id, j.run_id, list(j.args), j.state, j.message) for j in reversed(self._jobs)]

    def progress(self, job: Job) -> float:
        """Fraction of the simulated time done (0-1) from the run's ``summary.json``; 0 before the
        first write."""
        try:
            summary = json.loads((self.root / job.run_id / "summary.json").read_text(encoding="utf-8"))
            return min(1.0, float(summary["sim_time_s"]) / float(summary["duration_s"]))
        except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError):
            return 0.0

    def wait(self, timeout_s: float) -> bool:
        """Wait until no run is queued or running; ``False`` when ``timeout_s`` passed first."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            with self._lock:
                if not any(j.state in ("queued", "running") for j in self._jobs):
                    return True
            time.sleep(0.1)
        return False

    def close(self, grace_s: float = 30.0) -> list[str]:
        """Stop the queue's thread, cancel the waiting runs and end the running ones: SIGTERM, so
        each writes its outputs, and SIGKILL for one still running after ``grace_s`` (s).

        :return: the run ids of the runs ended (running) and cancelled (waiting).
        """
        self._stop.set()
        self._thread.join()
        with self._lock:
            running = [j.process for j in self._jobs if j.state == "running" and j.process is not None]
            ended = [j for j in self._jobs if j.state in ("queued", "running")]
            for job in ended:
                job.state = "cancelled"
            for process in running:
                process.terminate()
            end = time.monotonic() + grace_s
            for process in running:
                try:
                    process.wait(max(0.0, end - time.monotonic()))
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        return [j.run_id for j in ended]

    def _pump(self, poll_s: float) -> None:
        while not self._stop.wait(poll_s):
            self._advance()

    def _advance(self) -> None:
        """Note the runs that ended and start queued ones while places are free."""
        with self._lock:
            for job in self._jobs:
                if job.process is None or job.process.poll() is None or job.state not in ("running", "cancelled"):
                    continue
                if job.state == "running":
                    job.state = "complete" if job.process.returncode == 0 else "failed"
                    if job.state == "failed":
                        job.message = _last_line(job.log) or f"openg2g run exited with {job.process.returncode}"
                job.process = None
            running = sum(j.state == "running" for j in self._jobs)
            for job in self._jobs:
                if running >= self.max_running:
                    break
                if job.state == "queued":
                    self._start(job)
                    running += 1

    def _start(self, job: Job) -> None:
        logs = self.root / LOG_FOLDER
        logs.mkdir(parents=True, exist_ok=True)
        job.log = logs / f"{job.run_id.replace('/', '_')}.log"
        with job.log.open("wb") as out:
            job.process = subprocess.Popen(job.args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        job.state = "running"


def _last_line(log: Path | None) -> str:
    if log is None:
        return ""
    try:
        lines = [ln for ln in log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def parse_params(text: str) -> dict[str, Any]:
    """The form's controller parameters: a YAML mapping (``{setpoint: 0.96, kp: 2.0}``), empty
    for a blank field.

    :raises ScenarioError: not YAML, more than :data:`FORM_YAML_NODES` values once its aliases
        are expanded (a "billion laughs"), not a mapping, or holding what JSON cannot (a date, a
        set, binary): the what-if passes it to ``openg2g run`` as JSON.
    """
    if not text.strip():
        return {}
    try:
        value = read_yaml_text(text, FORM_YAML_NODES)
    except YamlTextError as exc:
        raise ScenarioError([("controller params", f"the text is {exc}")]) from None
    if not isinstance(value, dict):
        raise ScenarioError(
            [("controller params", f"expected a mapping such as {{kp: 2.0}}, got {type(value).__name__}")]
        )
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise ScenarioError([("controller params", f"only numbers, text, lists and mappings: {exc}")]) from None
    return value


def parse_extra(text: str) -> tuple[str, ...]:
    """Free ``key=value`` lines of the form (blank lines skipped)."""
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def form_models(values: Sequence[Any]) -> dict[int, int]:
    """Model index -> value from the form's per-model inputs (an empty input keeps the scenario's).

    :raises ScenarioError: a value that is not a whole number.
    """
    out: dict[int, int] = {}
    for k, value in enumerate(values):
        if value is None or value == "":
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = float("nan")
        if isinstance(value, bool) or not number.is_integer():
            raise ScenarioError([(f"datacenters.0.models.{k}", f"{value!r} is not a whole number")])
        out[k] = int(number)
    return out
