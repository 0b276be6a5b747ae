"""Fuzz set of hostile inputs (issue 13, "Done when"): scenario files, ``--set`` overrides, DSS
feeder files, trace-import logs, sweep and study files and command lines.

Every case runs the real CLI in-process (``openg2g.cli.main.main``) and must end with exit
status 1 or 2, one ``error:`` message on stderr naming what is wrong (the fragments listed with
the case: file and field where there is one), and no traceback: an exception escaping ``main``
fails the test. A hostile value that exits 0 is a silent acceptance; the few inputs that look
hostile but are legitimate are listed in ``ACCEPTED``, each with the reason, and must exit 0.

Scenario cases are variants of the bundled ``scenarios/ieee13_none.yaml``: each field is set to
each hostile value that makes sense for its type (numbers get signs, infinities, NaN, huge
values, words, lists, booleans; names get empty and non-text values and unknown names; lists get
scalars and maps). Only ``validate`` and tiny ``run``s (<= 1 s simulated) are used.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from openg2g.cli.main import main
from openg2g.scenario.loader import apply_override
from tests.sampling import sampled

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "scenarios"

Make = Callable[[Path], list[str]]
"""Writes a case's files below the test's tmp_path and returns the command line."""


@dataclass(frozen=True)
class Case:
    """One hostile input: ``make`` writes it and gives the argv; ``expect`` are stderr fragments
    (``{tmp}`` stands for the test's tmp_path); ``accepted`` is the reason when exit 0 is right."""

    id: str
    make: Make
    expect: tuple[str, ...] = ()
    accepted: str = ""


# ---------------------------------------------------------------------------------- helpers


def _base() -> dict[str, Any]:
    """ieee13_none.yaml with its profile paths made absolute (the copy lives in tmp_path)."""
    data = yaml.safe_load((SCENARIOS / "ieee13_none.yaml").read_text())
    for item in (*data["grid"]["pv"], *data["grid"]["extra_loads"]):
        item["profile"] = str(SCENARIOS / item["profile"])
    return data


BASE = _base()


def _dump(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _scenario_file(tmp: Path, *overrides: str, name: str = "scenario.yaml") -> Path:
    """The base scenario with ``--set``-style overrides applied in the file itself."""
    data = copy.deepcopy(BASE)
    for override in overrides:
        apply_override(data, override, "fuzz")
    return _dump(tmp / name, data)


def _text(content: str | bytes, name: str = "scenario.yaml") -> Make:
    def make(tmp: Path) -> list[str]:
        path = tmp / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return ["validate", str(path)]

    return make


def _validate(*overrides: str) -> Make:
    return lambda tmp: ["validate", str(_scenario_file(tmp, *overrides))]


def _run_result(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors: exit 2 with "openg2g ...: error: ..."
        code = exc.code if isinstance(exc.code, int) else 1
    return code, capsys.readouterr().err


# ---------------------------------------------------------------- 1. scenario files, field by field

NUMBER_VALUES = ("-1", "0", ".inf", "-.inf", ".nan", "1e308", "abc", "[1]", "true")
"""Hostile values of a number field (YAML text)."""

# field -> values of NUMBER_VALUES that are legitimate there (see ACCEPTED for some of them)
NUMBER_FIELDS: dict[str, tuple[str, ...]] = {
    "duration_s": (),
    "seed": ("0",),
    "periods.datacenter_s": (),
    "periods.grid_s": (),
    "periods.control_s": (),
    "grid.source_pu": (),
    "grid.v_min_pu": (),
    "grid.v_max_pu": (),
    "grid.load_scale": ("0",),
    "grid.regulators.reg1.max_tap": (),
    "grid.pv.0.kw": (),
    "grid.pv.0.power_factor": (),
    "grid.extra_loads.0.kw_per_phase": ("0",),
    "grid.extra_loads.0.power_factor": (),
    "datacenters.0.power_factor": (),
    "datacenters.0.pue": (),
    "datacenters.0.base_load_kw_per_phase": ("0",),
    "datacenters.0.gpu_capacity": (),
    "datacenters.0.models.0.replicas": ("0",),
    "datacenters.0.models.0.gpus_per_replica": (),
    "datacenters.0.models.0.batch_size": (),
    "datacenters.0.models.0.itl_deadline_s": (),
    "datacenters.0.training.gpus": (),
    "datacenters.0.training.start_s": ("0",),
    "datacenters.0.training.end_s": (),
    "events.0.t_s": ("0",),
    "events.1.fraction": ("0",),
    "events.1.ramp_s": ("0",),
    "outputs.flush_every_s": (),
}

# where a value passes the schema but is refused when the event is fired on the site (preflight),
# the problem is reported on the event as a whole
_EVENT_FIRED = {("events.1.fraction", "-1"), ("events.1.fraction", "1e308"), ("events.1.ramp_s", "-1")}
_EVENT_FIRED |= {("events.1.ramp_s", "1e308")}

NAME_VALUES = ("[]", "{a: 1}", "null", "true", "''", "[671]")
"""Hostile values of a name field."""
NAME_FIELDS = (
    "name",
    "grid.feeder",
    "grid.pv.0.name",
    "grid.pv.0.bus",
    "grid.extra_loads.0.bus",
    "datacenters.0.name",
    "datacenters.0.bus",
    "datacenters.0.models.0.model",
    "events.0.bank",
    "events.1.site",
    "events.0.command",
)
UNKNOWN_NAMES = {
    "grid.feeder": "atlantis",
    "grid.pv.0.bus": "nowhere",
    "grid.extra_loads.0.bus": "nowhere",
    "datacenters.0.bus": "nowhere",
    "datacenters.0.models.0.model": "GPT-5",
    "events.0.bank": "reg9",
    "events.1.site": "dc9",
    "events.0.command": "explode",
    "grid.regulators.reg1.mode": "manual",
    "grid.solver": "opendss",
    "grid.load_aggregation": "median",
    "grid.on_nonconvergence": "ignore",
    "outputs.voltages": "some",
    "datacenters.0.load_model": "zip",
}
_CHOICES = {  # a closed set of words: the message lists the valid ones
    "grid.regulators.reg1.mode": "'fixed' or 'auto'",
    "grid.solver": "'exact' or 'pandapower'",
    "grid.load_aggregation": "'mean' or 'last'",
    "grid.on_nonconvergence": "'stop' or 'flag'",
    "outputs.voltages": "'all' or 'envelope'",
    "datacenters.0.load_model": "'constant_power' or 'opendss'",
}

LIST_VALUES = ("abc", "{a: 1}", "5", "true")
LIST_FIELDS = (
    "grid.monitored_buses",
    "grid.regulators.reg1.taps",
    "datacenters",
    "datacenters.0.models",
    "datacenters.0.models.0.batch_sizes",
    "controllers",
    "events",
    "events.0.taps",
    "grid.pv",
)
MAP_FIELDS = ("periods", "grid", "grid.regulators", "datacenters.0.training", "outputs", "datacenters.0", "events.0")


_SECTION = {
    ("grid.v_min_pu", "1e308"): "grid",  # "need v_min_pu < v_max_pu"
    ("grid.regulators.reg1.max_tap", "-1"): "grid.regulators.reg1",  # the file's taps are then out of range
    ("grid.regulators.reg1.max_tap", "0"): "grid.regulators.reg1",
}


def _field_loc(field: str, value: str) -> str:
    return "events.1" if (field, value) in _EVENT_FIRED else _SECTION.get((field, value), field)


def _field_cases() -> list[Case]:
    cases: list[Case] = []
    for field, legit in NUMBER_FIELDS.items():
        for value in NUMBER_VALUES:
            if value in legit:
                continue
            loc = _field_loc(field, value)
            cases.append(
                Case(f"number:{field}={value}", _validate(f"{field}={value}"), ("{tmp}/scenario.yaml: " + loc,))
            )
    for field in NAME_FIELDS:
        for value in NAME_VALUES:
            if field == "grid.feeder" and value == "[671]":
                continue
            cases.append(Case(f"name:{field}={value}", _validate(f"{field}={value}"), ("{tmp}/scenario.yaml: ",)))
    for field, value in UNKNOWN_NAMES.items():
        loc = "events.0" if field in ("events.0.bank",) else "events.1" if field == "events.1.site" else field
        cases.append(
            Case(
                f"unknown:{field}={value}",
                _validate(f"{field}={value}"),
                ("{tmp}/scenario.yaml: " + loc, _CHOICES.get(field, value)),
            )
        )
    for field in LIST_FIELDS:
        for value in LIST_VALUES:
            cases.append(
                Case(f"list:{field}={value}", _validate(f"{field}={value}"), ("{tmp}/scenario.yaml: " + field,))
            )
    for field in MAP_FIELDS:
        for value in ("abc", "[1, 2]", "7"):
            cases.append(
                Case(f"map:{field}={value}", _validate(f"{field}={value}"), ("{tmp}/scenario.yaml: " + field,))
            )
    for field in ("", "grid.", "datacenters.0.", "datacenters.0.models.0.", "periods.", "outputs.", "grid.pv.0."):
        cases.append(
            Case(f"extra-key:{field}colour", _validate(f"{field}colour=blue"), (f"{field}colour", "Extra inputs"))
        )
    return cases


# ------------------------------------------------------------- 2. scenario files: structure and YAML


def _yaml_text() -> str:
    return (SCENARIOS / "ieee13_none.yaml").read_text().replace("profiles/", f"{SCENARIOS}/profiles/")


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)

RAW_CASES: list[Case] = [
    Case("yaml:empty", _text(""), ("scenario.yaml",)),
    Case("yaml:only-comment", _text("# nothing\n"), ("scenario.yaml",)),
    Case("yaml:top-level-list", _text("- 1\n- 2\n"), ("scenario.yaml",)),
    Case("yaml:top-level-scalar", _text("42\n"), ("scenario.yaml",)),
    Case("yaml:top-level-string", _text("hello\n"), ("scenario.yaml",)),
    Case("yaml:unclosed-flow", _text("name: x\ngrid: {feeder: ieee13\n"), ("not valid YAML",)),
    Case("yaml:bad-indent", _text("name: x\n  grid: 1\n bad: 2\n"), ("not valid YAML",)),
    Case("yaml:tab-indent", _text("name: x\ngrid:\n\tfeeder: ieee13\n"), ("not valid YAML",)),
    Case("yaml:unclosed-quote", _text('name: "x\n'), ("not valid YAML",)),
    Case("yaml:python-tag", _text("name: !!python/object/apply:os.system [echo hi]\n"), ("not valid YAML",)),
    Case("yaml:custom-tag", _text("name: !secret x\n"), ("not valid YAML",)),
    Case("yaml:undefined-alias", _text("name: *nothing\n"), ("not valid YAML",)),
    Case("yaml:latin-1", _text(b"name: caf\xe9\nduration_s: 1\n"), ("not UTF-8",)),
    Case("yaml:binary", _text(bytes(range(256))), ("scenario.yaml",)),
    Case("yaml:nul-bytes", _text(b"name: a\x00b\n"), ("scenario.yaml",)),
    Case("yaml:utf16", _text("name: x\n".encode("utf-16")), ("scenario.yaml",)),
    Case("yaml:duplicate-top-key", _text(_yaml_text() + "duration_s: 5\n"), ("key 'duration_s' appears twice",)),
    Case(
        "yaml:duplicate-nested-key",
        _text(_yaml_text().replace("  v_min_pu: 0.95\n", "  v_min_pu: 0.95\n  v_min_pu: 0.9\n")),
        ("key 'v_min_pu' appears twice",),
    ),
    Case("yaml:deep-list-nesting", _text("name: " + "[" * 20000 + "\n"), ("nested too deeply",)),
    Case("yaml:deep-map-nesting", _text("name: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n"), ("scenario.yaml",)),
    Case("yaml:alias-bomb", _text(ALIAS_BOMB), ("scenario.yaml",)),
    Case(
        "yaml:alias-bomb-in-params",
        _text(
            _yaml_text().replace("controllers: []", "controllers: [{kind: noop, params: {x: *i}}]")
            + ALIAS_BOMB.replace("a:", "xa:", 1).replace("\nb:", "\nxb:")
        ),
        ("scenario.yaml",),
    ),
    Case("yaml:huge-int", _text(_yaml_text().replace("seed: 0", "seed: " + "9" * 5000)), ("scenario.yaml",)),
    Case(
        "yaml:date-as-duration",
        _text(_yaml_text().replace("duration_s: 3600", "duration_s: 2024-01-01")),
        ("duration_s",),
    ),
    Case("yaml:missing-grid", _text(_yaml_text().split("grid:")[0]), ("scenario.yaml: grid",)),
    Case(
        "yaml:missing-duration", _text(_yaml_text().replace("duration_s: 3600\n", "")), ("scenario.yaml: duration_s",)
    ),
    Case(
        "scenario:two-sites-one-name",
        _validate(
            "datacenters=[{name: dc1, bus: '671', models: [{model: Llama-3.1-8B, gpus_per_replica: 1, replicas: 1, batch_size: 8}]}, {name: dc1, bus: '675', models: [{model: Llama-3.1-8B, gpus_per_replica: 1, replicas: 1, batch_size: 8}]}]"
        ),
        ("unique",),
    ),
    Case(
        "scenario:model-listed-twice",
        _validate("datacenters.0.models.1.model=Llama-3.1-8B", "datacenters.0.models.1.gpus_per_replica=1"),
        ("model listed twice",),
    ),
    Case(
        "scenario:pv-profile-missing", _validate("grid.pv.0.profile=no/such.csv"), ("grid.pv.0.profile", "no/such.csv")
    ),
    Case(
        "scenario:pv-profile-not-csv",
        _validate(f"grid.pv.0.profile={SCENARIOS / 'ieee13_none.yaml'}"),
        ("grid.pv.0.profile",),
    ),
    Case("scenario:pv-profile-directory", _validate(f"grid.pv.0.profile={SCENARIOS}"), ("grid.pv.0.profile",)),
    Case("scenario:traces-missing", _validate("datacenters.0.traces=no/such/library"), ("datacenters.0.traces",)),
    Case(
        "scenario:training-end-before-start",
        _validate("datacenters.0.training.end_s=500"),
        ("datacenters.0.training", "end_s"),
    ),
    Case("scenario:over-capacity", _validate("datacenters.0.gpu_capacity=100"), ("datacenters.0", "capacity")),
    Case("scenario:bus-single-phase", _validate("datacenters.0.bus=611"), ("datacenters.0.bus", "phase")),
    Case(
        "scenario:tap-out-of-range",
        _validate("grid.regulators.reg1.taps=[40, 6, 15]"),
        ("grid.regulators.reg1.taps", "40"),
    ),
    Case("scenario:taps-too-few", _validate("grid.regulators.reg1.taps=[1, 2]"), ("grid.regulators.reg1.taps",)),
    Case("scenario:taps-fraction", _validate("grid.regulators.reg1.taps=[1.5, 2, 3]"), ("grid.regulators.reg1.taps",)),
    Case("scenario:max-tap-huge", _validate("grid.regulators.reg1.max_tap=1000"), ("grid.regulators.reg1.max_tap",)),
    Case("scenario:vmin-above-vmax", _validate("grid.v_min_pu=1.06"), ("grid", "v_min_pu < v_max_pu")),
    Case(
        "scenario:vreg-huge",
        _validate("grid.regulators.reg1={mode: auto, vreg_v: 1e9}"),
        ("grid.regulators.reg1.vreg_v",),
    ),
    Case("scenario:grid-period-not-multiple", _validate("periods.grid_s=0.15"), ("periods", "whole multiple")),
    Case("scenario:duration-not-multiple", _validate("duration_s=10.05"), ("whole multiple of periods.grid_s",)),
    Case(
        "scenario:too-many-steps",
        _validate("duration_s=31000000", "periods={datacenter_s: 0.01, grid_s: 0.01, control_s: 1}"),
        ("steps",),
    ),
    Case("scenario:duration-words", _validate("duration_s='1/0'"), ("duration_s",)),
    Case(
        "scenario:storage-soc-outside",
        _validate("grid.storage=[{name: b1, bus: '675', kw: 100, kwh: 50, soc0: 0.95}]"),
        ("grid.storage.0", "soc0"),
    ),
    Case(
        "scenario:storage-kw-huge",
        _validate("grid.storage=[{name: b1, bus: '675', kw: 1e12, kwh: 50}]"),
        ("grid.storage.0.kw",),
    ),
    Case(
        "scenario:storage-unknown-bus",
        _validate("grid.storage=[{name: b1, bus: nowhere, kw: 100, kwh: 50}]"),
        ("grid.storage.0.bus", "nowhere"),
    ),
    Case(
        "scenario:pv-and-storage-one-name",
        _validate("grid.storage=[{name: pv675, bus: '675', kw: 100, kwh: 50}]"),
        ("grid", "unique"),
    ),
    Case("scenario:pv-phase-d", _validate("grid.pv.0.phases=[d]"), ("grid.pv.0.phases",)),
    Case("scenario:pv-scale-negative", _validate("grid.pv.0.scale=-5"), ("grid.pv.0.scale",)),
    Case("scenario:capacitor-unknown", _validate("grid.capacitors={cap9: true}"), ("grid.capacitors", "cap9")),
    Case("scenario:capacitor-not-bool", _validate("grid.capacitors={cap1: maybe}"), ("grid.capacitors.cap1",)),
    Case(
        "scenario:vminpu-low",
        _validate("datacenters.0.load_model=opendss", "datacenters.0.vminpu=0.3"),
        ("datacenters.0.vminpu",),
    ),
    Case(
        "scenario:pandapower-with-opendss-load",
        _validate("grid.solver=pandapower", "datacenters.0.load_model=opendss"),
        ("load_model opendss needs grid.solver exact",),
    ),
    Case(
        "scenario:batch-size-unmeasured",
        _validate("datacenters.0.models.0.batch_size=100"),
        ("datacenters.0.models.0.batch_size", "100"),
    ),
    Case(
        "scenario:gpus-per-replica-unmeasured",
        _validate("datacenters.0.models.0.gpus_per_replica=3"),
        ("datacenters.0.models.0.gpus_per_replica",),
    ),
    Case(
        "scenario:peak-w-huge",
        _validate("datacenters.0.training.peak_w_per_gpu=5000"),
        ("datacenters.0.training.peak_w_per_gpu",),
    ),
]

# ------------------------------------------------------------------------- 3. events and controllers

EVENT_CASES: list[Case] = [
    Case(f"event:{name}", _validate(f"events=[{{t_s: 1, {body}}}]"), ("{tmp}/scenario.yaml: events.0", *frags))
    for name, body, frags in [
        ("tap-40", "command: set_taps, bank: reg1, taps: [40, 6, 15]", ("outside",)),
        ("tap-fraction", "command: set_taps, bank: reg1, taps: [1.5, 6, 15]", ("taps",)),
        ("tap-two", "command: set_taps, bank: reg1, taps: [1, 2]", ()),
        ("tap-word", "command: set_taps, bank: reg1, taps: high", ("taps",)),
        ("no-bank", "command: set_taps, taps: [1, 2, 3]", ("bank",)),
        ("replicas-huge", "command: set_replicas, site: dc1, model: Llama-3.1-8B, replicas: 1000000", ("capacity",)),
        ("replicas-negative", "command: set_replicas, site: dc1, model: Llama-3.1-8B, replicas: -1", (">= 0",)),
        ("replicas-fraction", "command: set_replicas, site: dc1, model: Llama-3.1-8B, replicas: 2.5", ("replicas",)),
        ("replicas-bool", "command: set_replicas, site: dc1, model: Llama-3.1-8B, replicas: true", ("replicas",)),
        ("batch-unmeasured", "command: set_batch_size, site: dc1, model: Llama-3.1-8B, batch_size: 100", ("100",)),
        ("batch-word", "command: set_batch_size, site: dc1, model: Llama-3.1-8B, batch_size: large", ("batch_size",)),
        ("unknown-model", "command: set_batch_size, site: dc1, model: GPT-5, batch_size: 8", ("GPT-5",)),
        ("online-word", "command: set_site_online, site: dc1, online: 'no'", ("online",)),
        ("online-int", "command: set_site_online, site: dc1, online: 0", ("online",)),
        ("scale-inf", "command: set_inference_scale, site: dc1, fraction: .inf", ("fraction",)),
        ("scale-nan", "command: set_inference_scale, site: dc1, fraction: .nan", ("fraction",)),
        ("scale-ramp-inf", "command: set_inference_scale, site: dc1, fraction: 0.5, ramp_s: .inf", ("ramp_s",)),
        ("scale-missing-fraction", "command: set_inference_scale, site: dc1", ("fraction",)),
        ("power-cap-word", "command: set_power_cap, site: dc1, cap_w_per_gpu: '400'", ("cap_w_per_gpu",)),
        ("unknown-field", "command: set_taps, bank: reg1, taps: [1, 2, 3], colour: red", ("colour",)),
        ("storage-unknown", "command: set_storage_power, name: b9, p_w: 10000", ("b9",)),
        ("storage-kw", "command: set_storage_power, name: b9, p_kw: 10", ("p_kw", "renamed to p_w")),
        ("storage-p-word", "command: set_storage_power, name: b9, p_w: lots", ("p_w",)),
        (
            "shift-to-self",
            "command: shift_replicas, site: dc1, to_site: dc1, model: Llama-3.1-8B, replicas: 1",
            ("dc1",),
        ),
        (
            "shift-unknown-site",
            "command: shift_replicas, site: dc1, to_site: dc9, model: Llama-3.1-8B, replicas: 1",
            ("dc9",),
        ),
        ("command-number", "command: 5", ("command",)),
        ("command-empty", "command: ''", ("command",)),
    ]
] + [
    Case("event:t-negative", _validate("events.0.t_s=-1"), ("events.0.t_s", ">= 0")),
    Case("event:t-word", _validate("events.0.t_s=soon"), ("events.0.t_s",)),
    Case("event:not-a-map", _validate("events=[set_taps]"), ("events.0",)),
    Case("event:missing-t", _validate("events=[{command: set_taps, bank: reg1, taps: [1, 2, 3]}]"), ("events.0.t_s",)),
]

CONTROLLER_CASES: list[Case] = [
    Case(
        f"controller:{name}",
        _validate(f"controllers=[{body}]", "events=[]"),
        ("{tmp}/scenario.yaml: controllers.0", *frags),
    )
    for name, body, frags in [
        ("unknown-kind", "{kind: magic}", ("magic",)),
        ("missing-file", "{kind: missing_file.py:Ctrl}", ("not found",)),
        ("file-no-class", f"{{kind: '{SCENARIOS / 'ieee13_none.yaml'}:Ctrl'}}", ()),
        ("kind-empty", "{kind: ''}", ()),
        ("period-zero", "{kind: noop, period_s: 0}", ("> 0",)),
        ("period-negative", "{kind: noop, period_s: -1}", ("> 0",)),
        ("period-not-multiple", "{kind: noop, period_s: 0.05}", ("whole multiple",)),
        ("period-inf", "{kind: noop, period_s: .inf}", ("period_s",)),
        ("period-huge", "{kind: noop, period_s: 1e12}", ("period_s",)),
        ("delay-negative", "{kind: noop, delay_s: -1}", (">= 0",)),
        ("delay-nan", "{kind: noop, delay_s: .nan}", ("delay_s",)),
        ("params-list", "{kind: noop, params: [1, 2]}", ("params",)),
        ("params-unknown", "{kind: ofo, params: {colour: red}}", ("colour",)),
        ("ofo-unknown-bus", "{kind: ofo, params: {buses: [nowhere]}}", ("valid buses",)),
        ("ofo-unknown-site", "{kind: ofo, params: {sites: [dc9]}}", ("dc9",)),
        ("schedule-string", "{kind: tap_schedule, params: {schedule: at noon}}", ("schedule",)),
        (
            "schedule-bank",
            "{kind: tap_schedule, params: {schedule: [{t_s: 1, bank: reg9, taps: [1, 1, 1]}]}}",
            ("reg9",),
        ),
        (
            "schedule-tap-huge",
            "{kind: tap_schedule, params: {schedule: [{t_s: 1, bank: reg1, taps: [99, 1, 1]}]}}",
            ("99",),
        ),
        ("name-empty", "{kind: noop, name: ''}", ("name",)),
        ("extra-key", "{kind: noop, colour: red}", ("colour",)),
    ]
]

# ------------------------------------------------------------------------------- 4. --set overrides


def _set(*overrides: str, command: str = "validate") -> Make:
    def make(tmp: Path) -> list[str]:
        argv = [command, str(_scenario_file(tmp))]
        for override in overrides:
            argv += ["--set", override]
        if command == "run":
            argv += ["--out", str(tmp / "out"), "--no-progress"]
        return argv

    return make


SET_CASES: list[Case] = [
    Case(f"set:{name}", _set(*overrides), frags)
    for name, overrides, frags in [
        ("no-equals", ["duration_s"], ("--set",)),
        ("empty-key", ["=5"], ("--set",)),
        ("empty", [""], ("--set",)),
        ("double-dot", ["grid..feeder=ieee13"], ("grid.", "Extra inputs")),
        ("trailing-dot", ["grid.=1"], ("grid.", "Extra inputs")),
        ("index-out-of-range", ["datacenters.5.bus=671"], ("not an index",)),
        ("index-word", ["datacenters.first.bus=671"], ("datacenters.first",)),
        ("index-negative", ["datacenters.-1.bus=671"], ("datacenters.-1",)),
        ("through-scalar", ["duration_s.x=1"], ("duration_s",)),
        ("unclosed-list", ["duration_s=[1"], ("--set",)),
        ("alias", ["name=*x"], ("--set",)),
        ("python-tag", ["name=!!python/name:os.system"], ("--set",)),
        ("deep-nesting", ["x=" + "[" * 20000], ("--set",)),
        ("alias-bomb", ["x=" + ALIAS_BOMB.replace("\n", ", ").join("{}")], ("--set",)),
        ("latin-1-surrogate", ["name=caf\udce9"], ("name",)),
        ("unknown-key", ["colour=blue"], ("colour", "Extra inputs")),
        ("grid-scalar", ["grid=5"], ("grid",)),
        ("datacenters-null", ["datacenters=null"], ("datacenters",)),
        ("duration-negative", ["duration_s=-1"], ("duration_s", "> 0")),
        ("duration-huge", ["duration_s=1e12"], ("duration_s", "longer than a year")),
        ("duration-inf", ["duration_s=.inf"], ("duration_s",)),
        ("seed-word", ["seed=abc"], ("seed",)),
        ("taps-string", ["grid.regulators.reg1.taps=161"], ("grid.regulators.reg1.taps",)),
        ("bank-new", ["grid.regulators.reg9={taps: [1, 1, 1]}"], ("grid.regulators.reg9",)),
        ("duplicate-key-in-value", ["grid={feeder: ieee13, feeder: ieee34}"], ("--set",)),
        ("one-good-one-bad", ["duration_s=1", "grid.v_max_pu=.inf"], ("grid.v_max_pu",)),
        ("bad-then-fixed-elsewhere", ["duration_s=-1", "seed=1"], ("duration_s",)),
    ]
] + [
    Case("set-run:duration-negative", _set("duration_s=-1", command="run"), ("duration_s",)),
    Case("set-run:unclosed", _set("duration_s=[1", command="run"), ("--set",)),
    Case(
        "set-run:bad-event",
        _set("duration_s=1", "events=[{t_s: 0.5, command: set_taps, bank: reg9, taps: [1, 1, 1]}]", command="run"),
        ("reg9",),
    ),
    Case(
        "set-run:flush-inf",
        _set("duration_s=1", "outputs.flush_every_s=.inf", command="run"),
        ("outputs.flush_every_s",),
    ),
]


# ---------------------------------------------------------------------------- 5. DSS feeder files

TINY_DSS = """Clear
New Circuit.tiny basekv=4.16 pu=1.0 phases=3 bus1=src MVAsc3=2000 MVAsc1=2100
New Linecode.lc nphases=3 r1=0.3 x1=0.6 r0=0.6 x0=1.2 c1=0 c0=0 units=km
New Line.l1 bus1=src bus2=b1 linecode=lc length=1 units=km
New Line.l2 bus1=b1 bus2=b2 linecode=lc length=0.5 units=km
New Load.ld1 bus1=b2 phases=3 conn=wye model=1 kv=4.16 kw=300 kvar=100
Set Voltagebases=[4.16]
Calcvoltagebases
Solve
"""
"""A small valid feeder (source, two lines, one load); the cases edit it."""

_TINY_SITE = {
    "name": "dc1",
    "bus": "b2",
    "models": [{"model": "Llama-3.1-8B", "gpus_per_replica": 1, "replicas": 10, "batch_size": 128}],
}


def _dss_scenario(tmp: Path, dss: str, extra: dict[str, str] | None = None) -> Path:
    folder = tmp / "feeder"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "master.dss").write_text(dss)
    for name, text in (extra or {}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    data = {
        "name": "tiny",
        "duration_s": 1,
        "grid": {"feeder": str(folder / "master.dss")},
        "datacenters": [copy.deepcopy(_TINY_SITE)],
        "outputs": {"plots": False},
    }
    return _dump(tmp / "scenario.yaml", data)


def _dss(old: str, new: str, extra: dict[str, str] | None = None, command: str = "validate") -> Make:
    def make(tmp: Path) -> list[str]:
        assert old in TINY_DSS, old
        path = _dss_scenario(tmp, TINY_DSS.replace(old, new, 1), extra)
        if command == "run":
            return ["run", str(path), "--out", str(tmp / "out"), "--no-progress"]
        return ["validate", str(path)]

    return make


def _add(text: str, extra: dict[str, str] | None = None, command: str = "validate") -> Make:
    return _dss("Set Voltagebases", f"{text}\nSet Voltagebases", extra, command)


def _dss_bytes(data: bytes) -> Make:
    """A scenario whose feeder file is ``data``, byte for byte."""

    def make(tmp: Path) -> list[str]:
        path = _dss_scenario(tmp, "")
        (tmp / "feeder" / "master.dss").write_bytes(data)
        return ["validate", str(path)]

    return make


_DEEP = {f"d{k}.dss": f"Redirect d{k + 1}.dss\n" for k in range(1, 1000)}
"""Files redirecting one to the next, 1000 deep."""


_L2 = "New Line.l2 bus1=b1 bus2=b2 linecode=lc length=0.5 units=km"
_LD = "New Load.ld1 bus1=b2 phases=3 conn=wye model=1 kv=4.16 kw=300 kvar=100"
_SRC = "New Circuit.tiny basekv=4.16 pu=1.0 phases=3 bus1=src MVAsc3=2000 MVAsc1=2100"
_LC = "New Linecode.lc nphases=3 r1=0.3 x1=0.6 r0=0.6 x0=1.2 c1=0 c0=0 units=km"

DSS_CASES: list[Case] = [
    Case(f"dss:{name}", make, ("master.dss", *frags))
    for name, make, frags in [
        ("length-nan", _dss("length=0.5", "length=nan"), ('Line "l2"', "Invalid impedance")),
        ("length-inf", _dss("length=0.5", "length=inf"), ('Line "l2"', "Invalid impedance")),
        ("length-negative", _dss("length=0.5", "length=-0.5"), ("line.l2: length=-0.5", "> 0")),
        ("length-rpn-zero-div", _dss("length=0.5", "length=(5 0 /)"), ('Line "l2"', "Invalid impedance")),
        ("length-empty", _dss("length=0.5", "length="), ("New Line.l2", "line: 5")),
        ("linecode-r1-negative", _dss("r1=0.3", "r1=-0.3"), ("line.l1", "negative eigenvalue")),
        ("linecode-all-zero", _dss("r1=0.3 x1=0.6 r0=0.6 x0=1.2", "r1=0 x1=0 r0=0 x0=0"), ("Invalid impedance",)),
        (
            "linecode-unknown",
            _dss(_L2, _L2.replace("linecode=lc", "linecode=nosuch")),
            ('"nosuch" not found', "line: 5"),
        ),
        ("line-phases-seven", _dss(_L2, _L2 + " phases=7"), ("does not solve",)),
        ("load-pf-zero", _dss("kw=300 kvar=100", "kw=300 pf=0"), ("load.ld1: kvar=inf",)),
        ("load-pf-negative-two", _dss("kw=300 kvar=100", "kw=300 pf=-2"), ("load.ld1: kvar=nan",)),
        ("load-kv-zero", _dss("kv=4.16 kw=300", "kv=0 kw=300"), ("load.ld1: kV=0", "> 0")),
        ("load-kw-word", _dss("kw=300", "kw=lots"), ("New Load.ld1", '"lots"')),
        ("load-kw-huge-rpn", _dss("kw=300", "kw=(10 400 ^)"), ("load.ld1: kW=inf",)),
        (
            "load-model-eight",
            _dss("model=1", "model=8"),
            ("master.dss line 6: load.ld1: load model 8 is not supported",),
        ),
        ("load-conn-star", _dss("conn=wye", "conn=star"), ('"star"',)),
        ("source-mvasc3-zero", _dss("MVAsc3=2000", "MVAsc3=0"), ("Vsource.source",)),
        ("source-basekv-negative", _dss("basekv=4.16", "basekv=-4.16"), ("vsource.source: basekV=-4.16",)),
        ("source-pu-nan", _dss(_SRC, _SRC.replace("pu=1.0", "pu=nan")), ("vsource.source: pu=nan",)),
        ("no-circuit", _dss(_SRC + "\n", ""), ("circuit",)),
        ("voltagebases-word", _dss("Set Voltagebases=[4.16]", "Set Voltagebases=[high]"), ('"high"',)),
        ("voltagebases-zero", _dss("Set Voltagebases=[4.16]", "Set Voltagebases=[0]"), ("voltage base",)),
        ("basefrequency-nan", _add("Set basefrequency=nan"), ("Invalid impedance",)),
        ("redirect-self", _add("Redirect master.dss"), ("redirect cycle: master.dss line 7 -> master.dss, which is",)),
        ("redirect-missing", _add("Redirect gone.dss"), ("gone.dss", "not found")),
        (
            "redirect-up-cycle",
            _add("Redirect sub/a.dss", {"sub/a.dss": "Redirect ../master.dss\n"}),
            ("redirect cycle: master.dss line 7 -> sub/a.dss line 1 -> master.dss, which is still being read",),
        ),
        (
            "compile-cycle-quoted",
            _add(
                "compile (sub/b.dss) ! the rest",
                {"sub/b.dss": '! b\nredirect file="c.dss"\n', "sub/c.dss": "Redirect 'b.dss'\n"},
            ),
            ("redirect cycle: master.dss line 7 -> sub/b.dss line 2 -> sub/c.dss line 1 -> sub/b.dss",),
        ),
        ("redirect-etc-passwd", _add("Redirect /etc/passwd"), ('[file: "/etc/passwd", line: 1]', "Unknown Command")),
        ("compile-directory", _add("Compile sub", {"sub/x.dss": ""}), ("sub",)),
        ("buscoords-missing", _add("Buscoords gone.csv"), ("gone.csv",)),
        ("shell-text", _add("rm -rf /"), ('Unknown Command: "rm"',)),
        ("binary-line", _add("\x01\x02\x03 garbage"), ("Unknown Command",)),
        ("unknown-element", _add("New IndMach012.m1 bus1=b2 kw=100"), ("indmach012.m1: an induction machine",)),
        ("unknown-command", _add("Frobnicate circuit"), ('Unknown Command: "Frobnicate"',)),
        ("element-of-a-million-phases", _add("New Line.big bus1=b2 bus2=b9 phases=1000000"), ("crashed",)),
        ("node-number-overflow", _add("New Load.l9 bus1=b2.999999999 kw=1"), ("bus b2", "out of range")),
        (
            "transformer-kvs-zero",
            _add("New Transformer.t1 phases=3 buses=[b2 t1] kvs=[0 0] kvas=[500 500] xhl=5"),
            ("transformer.t1: winding 1 kV=0",),
        ),
        (
            "regcontrol-no-transformer",
            _add("New RegControl.r1 transformer=nothing winding=2 vreg=120"),
            ('RegControl: "r1"',),
        ),
        (
            "capacitor-kvar-negative-kv",
            _add("New Capacitor.c1 bus1=b2 phases=3 kvar=300 kv=-4.16"),
            ("Capacitor.c1.kV",),
        ),
        ("continuation-first", _dss("Clear\n", "~ kw=1\nClear\n"), ("circuit",)),
        ("empty-file", _dss(TINY_DSS, ""), ("circuit",)),
        ("export-absolute", _add("Export voltages /tmp/openg2g-fuzz.csv"), ("line 7", "writes the file it names")),
        ("export-abbreviated", _add("exp v, /tmp/openg2g-fuzz.csv"), ("line 7: exp v, /tmp", "writes the file")),
        ("save-circuit", _add("Save Circuit dir=/tmp/openg2g-fuzz"), ("line 7", "writes a copy of the circuit")),
        ("set-datapath", _add("Set DataPath=/tmp"), ("line 7: Set DataPath=/tmp: Datapath moves the folder",)),
        ("datapath-by-position", _add("Set Bus=b1 /tmp"), ("Datapath (the value '/tmp', by its position)",)),
        ("solve-datapath", _add("Solve mode=snap datapath=/tmp"), ("Datapath moves the folder",)),
        ("cd", _add("CD /tmp"), ("line 7: CD /tmp: moves the folder",)),
        ("doscmd", _add("DOScmd touch /tmp/openg2g-fuzz"), ("runs a shell command",)),
        ("set-editor", _add("Set Editor=/bin/sh"), ("editor names a program",)),
        ("command-variable", _add("var @e=export\n@e voltages /tmp/x.csv"), ("line 8", "parser variable")),
        ("redirect-variable", _add("Redirect @lastfile"), ("line 7", "parser variable")),
        ("circuit-name-climbs", _dss(_SRC, _SRC.replace("Circuit.tiny", "Circuit.../../x")), ("climbs out",)),
        (
            "usermodel-continuation",
            _add("New Generator.g bus1=b2 kw=10\n~ user=/tmp/evil.so"),
            ("line 8: ~ user=/tmp/evil.so", "a library OpenDSS would load and run"),
        ),
        (
            "redirect-cycle-behind-cd",
            _add("cd sub\nRedirect master.dss", {"sub/master.dss": "Redirect master.dss\n"}),
            ("line 7: cd sub: moves the folder",),
        ),
        (
            "redirect-1000-deep",
            _add("Redirect d1.dss", {**_DEEP, "d1000.dss": ""}),
            ("more than 100 deep (d99.dss line 1 opens the next one)",),
        ),
        ("binary-garbage", _dss_bytes(bytes(range(256)) * 8), ("line: 1]",)),
        (
            "utf16-export",
            _dss_bytes(b"\xff\xfe" + (TINY_DSS + "Export voltages /tmp/x.csv\n").encode("utf-16-le")),
            ("line 10", "writes the file it names"),
        ),
    ]
] + [
    Case(
        "dss:source-single-phase",  # read: a single-phase source drives phase a only, so the site's bus is cut off
        _dss(_SRC, _SRC.replace("phases=3", "phases=1")),
        ("datacenters.0.bus", "'b2' is not connected to the source"),
    ),
    Case(
        "dss:dc-bus-cut-off",
        _dss(_L2, _L2.replace("bus2=b2", "bus2=b2.4.5.6")),
        ("datacenters.0.bus", "'b2' is not connected to the source"),
    ),
    Case(
        "dss:line-self-loop-islands-the-site",
        _dss(_L2, _L2.replace("bus2=b2", "bus2=b1")),
        ("datacenters.0.bus", "'b2' is not connected to the source"),
    ),
    Case(
        "dss:dc-bus-not-in-feeder",
        _dss(_LD, _LD.replace("bus1=b2", "bus1=b1") + "\nEdit Line.l2 bus2=b3"),
        ("datacenters.0.bus", "'b2'"),
    ),
    Case(
        "dss:not-dss-extension",
        lambda tmp: ["validate", str(_scenario_file(tmp, "grid.feeder=/etc/passwd"))],
        ("grid.feeder", ".dss"),
    ),
    Case(
        "dss:missing-file",
        lambda tmp: ["validate", str(_scenario_file(tmp, f"grid.feeder={tmp}/none.dss"))],
        ("grid.feeder", "none.dss"),
    ),
    Case(
        "dss:directory",
        lambda tmp: (
            ["validate", str(_scenario_file(tmp, f"grid.feeder={tmp}/x.dss"))]
            if (tmp / "x.dss").mkdir() is None
            else []
        ),
        ("grid.feeder", "x.dss"),
    ),
    Case(
        "dss-run:zero-length-line",
        _dss("r1=0.3 x1=0.6 r0=0.6 x0=1.2", "r1=0 x1=0 r0=0 x0=0", command="run"),
        ("master.dss", "Invalid impedance"),
    ),
]


# ---------------------------------------------------------------------------------- 6. trace imports

TSV_HEADER = "timestamp\trelative_time_s\tpower_total_W\tmax_num_seqs\tnum_gpus\tfolder_name\n"


def _tsv_rows(n: int = 40, power: str = "{p}", t0: float = 0.06, dt: float = 0.1) -> str:
    return "".join(f"1763561240\t{t0 + dt * i:.3f}\t{power.format(p=400.0 + i % 5)}\t8\t1\trun\n" for i in range(n))


def _import(content: str | bytes | list[str | bytes], fmt: str = "tsv", gpus: int = 1, batch: int = 8) -> Make:
    def make(tmp: Path) -> list[str]:
        files = []
        for i, c in enumerate(content if isinstance(content, list) else [content]):
            f = tmp / f"log{i}.{'tsv' if fmt == 'tsv' else 'csv'}"
            f.write_bytes(c if isinstance(c, bytes) else c.encode())
            files.append(str(f))
        return ["traces", "import", *files, "--library", str(tmp / "lib"), "--model", "M",
                "--gpus", str(gpus), "--batch", str(batch), "--format", fmt]  # fmt: skip

    return make


def _smi(n: int = 30, value: str = "300.00 W", stamp: Callable[[int], str] | None = None) -> str:
    stamp = stamp or (lambda i: f"2025/01/01 12:00:{i // 10:02d}.{(i % 10) * 100:03d}")
    return "timestamp, power.draw [W]\n" + "".join(f"{stamp(i)}, {value}\n" for i in range(n))


def _zeus(n: int = 30, value: str = "300000", start_s: int = 0) -> str:
    rows = "".join(
        f"2025-01-01 12:{(start_s + i // 10) // 60:02d}:{(start_s + i // 10) % 60:02d}.{(i % 10) * 100:03d}000000,{value}\n"
        for i in range(n)
    )
    return "Time,Power\n" + rows


TRACE_CASES: list[Case] = [
    Case(f"trace:{name}", make, frags)
    for name, make, frags in [
        ("tsv-empty", _import(""), ("log0.tsv",)),
        ("tsv-header-only", _import(TSV_HEADER), ("log0.tsv",)),
        ("tsv-no-header", _import(_tsv_rows()), ("log0.tsv",)),
        ("tsv-wrong-header", _import("a\tb\tc\n1\t2\t3\n"), ("log0.tsv",)),
        ("tsv-one-row", _import(TSV_HEADER + _tsv_rows(1)), ("log0.tsv",)),
        ("tsv-power-nan", _import(TSV_HEADER + _tsv_rows(power="nan")), ("log0.tsv",)),
        ("tsv-power-inf", _import(TSV_HEADER + _tsv_rows(power="inf")), ("log0.tsv",)),
        ("tsv-power-negative", _import(TSV_HEADER + _tsv_rows(power="-{p}")), ("log0.tsv",)),
        ("tsv-power-huge", _import(TSV_HEADER + _tsv_rows(power="1e30")), ("log0.tsv",)),
        ("tsv-power-word", _import(TSV_HEADER + _tsv_rows(power="high")), ("log0.tsv",)),
        ("tsv-time-backwards", _import(TSV_HEADER + _tsv_rows(dt=-0.1, t0=10)), ("log0.tsv",)),
        ("tsv-time-constant", _import(TSV_HEADER + _tsv_rows(dt=0.0)), ("log0.tsv",)),
        ("tsv-span-1e9-s", _import(TSV_HEADER + _tsv_rows(2) + "1763561240\t1e9\t400\t8\t1\trun\n"), ("log0.tsv",)),
        ("tsv-gpus-mismatch", _import(TSV_HEADER + _tsv_rows(), gpus=8), ("log0.tsv",)),
        ("tsv-batch-mismatch", _import(TSV_HEADER + _tsv_rows(), batch=64), ("log0.tsv",)),
        ("tsv-short-row", _import(TSV_HEADER + _tsv_rows() + "1763561240\t9.9\n"), ("log0.tsv",)),
        ("tsv-latin-1", _import(TSV_HEADER.encode() + _tsv_rows().encode() + b"caf\xe9\n"), ("log0.tsv",)),
        ("tsv-binary", _import(bytes(range(256)) * 4), ("log0.tsv",)),
        ("smi-empty", _import("", "nvidia-smi"), ("log0.csv",)),
        ("smi-unit-kw", _import(_smi(value="0.3 kW"), "nvidia-smi"), ("log0.csv",)),
        ("smi-not-supported", _import(_smi(value="[Not Supported]"), "nvidia-smi"), ("log0.csv",)),
        ("smi-negative", _import(_smi(value="-300.00 W"), "nvidia-smi"), ("log0.csv",)),
        ("smi-bad-stamp", _import(_smi(stamp=lambda i: "yesterday"), "nvidia-smi"), ("log0.csv",)),
        ("smi-stamp-constant", _import(_smi(stamp=lambda i: "2025/01/01 12:00:00.000"), "nvidia-smi"), ("log0.csv",)),
        ("smi-wrong-header", _import("time,watts\n1,2\n", "nvidia-smi"), ("log0.csv",)),
        ("zeus-empty", _import("", "zeus"), ("log0.csv",)),
        ("zeus-header-only", _import("Time,Power\n", "zeus"), ("log0.csv",)),
        ("zeus-power-word", _import(_zeus(value="lots"), "zeus"), ("log0.csv",)),
        ("zeus-power-negative", _import(_zeus(value="-300000"), "zeus"), ("log0.csv",)),
        ("zeus-power-nan", _import(_zeus(value="nan"), "zeus"), ("log0.csv",)),
        ("zeus-wrong-header", _import("Time,Watts\n" + _zeus().split("\n", 1)[1], "zeus"), ("log0.csv",)),
        ("zeus-bad-time", _import("Time,Power\nnoon,300000\nlater,300000\n", "zeus"), ("log0.csv",)),
        ("zeus-too-few-logs", _import([_zeus()], "zeus", gpus=2), ("one log per GPU",)),
        ("zeus-too-many-logs", _import([_zeus(), _zeus()], "zeus", gpus=1), ("one log per GPU",)),
        ("zeus-no-overlap", _import([_zeus(), _zeus(start_s=100)], "zeus", gpus=2), ("do not overlap",)),
        ("tsv-two-files", _import([TSV_HEADER + _tsv_rows(), TSV_HEADER + _tsv_rows()]), ("one log",)),
    ]
] + [
    Case("trace:gpus-zero", _import(TSV_HEADER + _tsv_rows(), gpus=0), ("--gpus",)),
    Case("trace:batch-negative", _import(TSV_HEADER + _tsv_rows(), batch=-8), ("--batch",)),
    Case(
        "trace:missing-file",
        lambda tmp: [
            "traces",
            "import",
            str(tmp / "none.tsv"),
            "--library",
            str(tmp / "lib"),
            "--model",
            "M",
            "--gpus",
            "1",
            "--batch",
            "8",
        ],
        ("none.tsv",),
    ),
    Case(
        "trace:file-is-directory",
        lambda tmp: [
            "traces",
            "import",
            str(tmp),
            "--library",
            str(tmp / "lib"),
            "--model",
            "M",
            "--gpus",
            "1",
            "--batch",
            "8",
        ],
        ("{tmp}",),
    ),
    Case(
        "trace:library-is-file",
        lambda tmp: (_import(TSV_HEADER + _tsv_rows())(tmp), (tmp / "lib").write_text("x"))[0],
        ("lib",),
    ),
    Case(
        "trace:library-corrupt-index",
        lambda tmp: (
            (tmp / "lib").mkdir(),
            (tmp / "lib" / "index.json").write_text("{not json"),
            _import(TSV_HEADER + _tsv_rows())(tmp),
        )[2],
        ("lib",),
    ),
    Case("trace:format-unknown", lambda tmp: _import(TSV_HEADER + _tsv_rows())(tmp)[:-1] + ["parquet"], ("--format",)),
    Case(
        "trace:gpus-word",
        lambda tmp: ["traces", "import", "x.tsv", "--library", "lib", "--model", "M", "--gpus", "two", "--batch", "8"],
        ("--gpus",),
    ),
    Case("trace:list-missing-library", lambda tmp: ["traces", "list", "--library", str(tmp / "none")], ("none",)),
    Case(
        "trace:list-library-garbage",
        lambda tmp: (
            (tmp / "lib").mkdir(),
            (tmp / "lib" / "index.json").write_text("[1, 2]"),
            ["traces", "list", "--library", str(tmp / "lib")],
        )[2],
        ("lib",),
    ),
    Case(
        "trace:scenario-uses-garbage-library",
        lambda tmp: (
            (tmp / "lib").mkdir(),
            (tmp / "lib" / "index.json").write_text("{}"),
            ["validate", str(_scenario_file(tmp, f"datacenters.0.traces={tmp / 'lib'}"))],
        )[2],
        ("datacenters.0.traces",),
    ),
]


# -------------------------------------------------------------------------- 7. sweep and study files


def _sweep(body: dict[str, Any] | str, command: str = "validate") -> Make:
    def make(tmp: Path) -> list[str]:
        path = tmp / "sweep.yaml"
        if isinstance(body, str):
            path.write_text(body.replace("{base}", str(_scenario_file(tmp))))
        else:
            data = {"name": "fz", "base": str(_scenario_file(tmp)), **body}
            _dump(path, data)
        if command == "sweep":
            return ["sweep", str(path), "--out", str(tmp / "out"), "--engine", "serial", "--no-progress"]
        return ["validate", str(path)]

    return make


def _study(body: dict[str, Any]) -> Make:
    def make(tmp: Path) -> list[str]:
        data = {"name": "fz", "base": str(_scenario_file(tmp)), **body}
        return ["validate", str(_dump(tmp / "study.yaml", data))]

    return make


SWEEP_CASES: list[Case] = [
    Case(f"sweep:{name}", make, ("sweep.yaml", *frags))
    for name, make, frags in [
        ("parameters-scalar", _sweep({"parameters": 5}), ("parameters",)),
        ("parameters-empty-block", _sweep({"parameters": [{}]}), ("parameters",)),
        ("block-unknown-kind", _sweep({"parameters": [{"grid": {"seed": [1]}}]}), ("parameters",)),
        ("product-empty-list", _sweep({"parameters": [{"product": {"seed": []}}]}), ("parameters",)),
        ("product-scalar", _sweep({"parameters": [{"product": {"seed": 5}}]}), ("parameters",)),
        ("zip-unequal", _sweep({"parameters": [{"zip": {"seed": [1, 2], "grid.load_scale": [1]}}]}), ("parameters",)),
        (
            "product-bomb",
            _sweep({"parameters": [{"product": {f"k{i}": list(range(20)) for i in range(8)}}]}),
            ("runs",),
        ),
        (
            "random-n-negative",
            _sweep({"parameters": [{"random": {"n": -1, "seed": 1, "params": {"seed": {"choice": [1]}}}}]}),
            ("n",),
        ),
        (
            "random-n-huge",
            _sweep({"parameters": [{"random": {"n": 10**9, "seed": 1, "params": {"seed": {"choice": [1]}}}}]}),
            ("runs",),
        ),
        (
            "random-unknown-dist",
            _sweep({"parameters": [{"random": {"n": 2, "seed": 1, "params": {"seed": {"gauss": [0, 1]}}}}]}),
            ("gauss",),
        ),
        (
            "random-uniform-reversed",
            _sweep(
                {"parameters": [{"random": {"n": 2, "seed": 1, "params": {"grid.load_scale": {"uniform": [2, 1]}}}}]}
            ),
            ("uniform",),
        ),
        (
            "random-uniform-inf",
            _sweep(
                {
                    "parameters": [
                        {"random": {"n": 2, "seed": 1, "params": {"grid.load_scale": {"uniform": [0, ".inf"]}}}}
                    ]
                }
            ),
            ("uniform",),
        ),
        (
            "random-log-uniform-zero",
            _sweep(
                {
                    "parameters": [
                        {"random": {"n": 2, "seed": 1, "params": {"grid.load_scale": {"log_uniform": [0, 1]}}}}
                    ]
                }
            ),
            ("log_uniform",),
        ),
        (
            "random-choice-empty",
            _sweep({"parameters": [{"random": {"n": 2, "seed": 1, "params": {"seed": {"choice": []}}}}]}),
            ("choice",),
        ),
        (
            "date-value",
            _sweep("name: fz\nbase: {base}\nparameters:\n  - product:\n      name: [2024-01-01]\n"),
            ("date",),
        ),
        (
            "bad-first-point",
            _sweep({"parameters": [{"product": {"datacenters.0.bus": ["nowhere"]}}]}),
            ("datacenters.0.bus",),
        ),
        ("bad-path-point", _sweep({"parameters": [{"product": {"datacenters.7.bus": ["671"]}}]}), ("datacenters.7",)),
        ("set-bad-yaml", _sweep({"set": ["duration_s=[1"], "parameters": [{"product": {"seed": [1]}}]}), ("--set",)),
        ("set-not-list", _sweep({"set": "duration_s=1", "parameters": [{"product": {"seed": [1]}}]}), ("set",)),
        (
            "base-missing",
            _sweep({"base": "no/such.yaml", "parameters": [{"product": {"seed": [1]}}]}),
            ("no/such.yaml",),
        ),
        (
            "base-is-sweep",
            _sweep("name: fz\nbase: sweep.yaml\nparameters:\n  - product: {seed: [1]}\n"),
            ("sweep.yaml",),
        ),
        ("unknown-key", _sweep({"colour": "red", "parameters": [{"product": {"seed": [1]}}]}), ("colour",)),
        ("name-missing", _sweep("base: {base}\nparameters:\n  - product: {seed: [1]}\n"), ("name",)),
        (
            "alias-bomb",
            _sweep("name: fz\nbase: {base}\n" + ALIAS_BOMB + "parameters:\n  - product: {name: *i}\n"),
            ("sweep.yaml",),
        ),
        (
            "duplicate-key",
            _sweep("name: fz\nname: fy\nbase: {base}\nparameters:\n  - product: {seed: [1]}\n"),
            ("appears twice",),
        ),
        ("name-list", _sweep("name: [a, b]\nbase: {base}\nparameters:\n  - product: {seed: [1]}\n"), ("name",)),
        ("base-bad-yaml", _sweep("name: fz\nbase: bad.yaml\nparameters:\n  - product: {seed: [1]}\n"), ("bad.yaml",)),
    ]
] + [
    Case(
        "sweep-run:out-is-file",
        lambda tmp: (
            (tmp / "outfile").write_text("x"),
            _sweep({"parameters": [{"product": {"seed": [1]}}]}, "sweep")(tmp)[:-5]
            + ["--out", str(tmp / "outfile"), "--engine", "serial", "--no-progress"],
        )[1],
        ("outfile",),
    ),
    Case(
        "sweep-run:workers-zero",
        lambda tmp: _sweep({"parameters": [{"product": {"seed": [1]}}]}, "sweep")(tmp) + ["--workers", "0"],
        ("--workers",),
    ),
    Case(
        "sweep-run:bomb",
        _sweep({"parameters": [{"product": {f"k{i}": list(range(20)) for i in range(8)}}]}, "sweep"),
        ("runs",),
    ),
]

_BASE_NAMED = {"siting-unknown-site", "study-set-bad"}
"""Study cases whose problem lies in the base scenario (under the study's overrides): the message names it."""

STUDY_CASES: list[Case] = [
    Case(f"study:{name}", _study(body), frags if name in _BASE_NAMED else ("study.yaml", *frags))
    for name, body, frags in [
        ("unknown-study", {"study": "astrology"}, ("study",)),
        ("study-number", {"study": 5}, ("study",)),
        ("siting-unknown-buses", {"study": "siting", "candidates": ["nowhere", "elsewhere"]}, ("candidates",)),
        ("siting-single-phase-bus", {"study": "siting", "candidates": ["611"]}, ("candidates",)),
        ("siting-empty", {"study": "siting", "candidates": []}, ("candidates",)),
        ("siting-duration-negative", {"study": "siting", "candidates": ["671"], "duration_s": -1}, ("duration_s",)),
        (
            "siting-duration-inf",
            {"study": "siting", "candidates": ["671"], "duration_s": float("inf")},
            ("duration_s",),
        ),
        ("siting-unknown-controller", {"study": "siting", "candidates": ["671"], "controllers": ["magic"]}, ("magic",)),
        ("siting-controllers-empty", {"study": "siting", "candidates": ["671"], "controllers": []}, ("controllers",)),
        ("siting-unknown-site", {"study": "siting", "candidates": ["671"], "site": "dc9"}, ("datacenters", "dc9")),
        ("siting-unknown-key", {"study": "siting", "candidates": ["671"], "colour": "red"}, ("colour",)),
        ("hosting-max-mw-zero", {"study": "hosting_capacity", "max_mw": 0}, ("max_mw",)),
        ("hosting-max-mw-inf", {"study": "hosting_capacity", "max_mw": float("inf")}, ("max_mw",)),
        ("hosting-tolerance-negative", {"study": "hosting_capacity", "tolerance_pu_s": -1}, ("tolerance_pu_s",)),
        ("hosting-unknown-bus", {"study": "hosting_capacity", "buses": ["nowhere"]}, ("buses",)),
        ("hosting-mix-negative", {"study": "hosting_capacity", "mix": {"Llama-3.1-8B": -1}}, ("mix",)),
        ("hosting-mix-unknown-model", {"study": "hosting_capacity", "mix": {"GPT-5": 1}}, ("mix", "GPT-5")),
        ("study-set-bad", {"study": "siting", "candidates": ["671"], "set": ["duration_s=[1"]}, ("--set duration_s",)),
        ("study-base-missing", {"study": "siting", "candidates": ["671"], "base": "none.yaml"}, ("none.yaml",)),
        ("study-retries-negative", {"study": "siting", "candidates": ["671"], "retries": -1}, ("retries",)),
        ("study-retries-unbounded", {"study": "siting", "candidates": ["671"], "retries": 11}, ("retries", "10")),
        ("pv-n-pv-zero", {"study": "pv_placement", "n_pv": 0}, ("n_pv",)),
        ("pv-max-kw-negative", {"study": "pv_placement", "max_kw_per_site": -1}, ("max_kw_per_site",)),
        ("pv-mip-gap-one", {"study": "pv_placement", "mip_gap": 1}, ("mip_gap",)),
        ("pv-days-per-year", {"study": "pv_placement", "days_per_year": 400}, ("days_per_year",)),
        ("pv-unknown-candidate", {"study": "pv_placement", "candidates": ["nowhere"]}, ("nowhere",)),
        (
            "pv-shape-sunset-before-sunrise",
            {"study": "pv_placement", "pv_shape": {"bell": {"sunrise_h": 20, "sunset_h": 6}}},
            ("pv_shape",),
        ),
    ]
]

# ------------------------------------------------------------------------------- 7b. pandapower nets


def _net(edit: Callable[[Any], None], *, pickled: bool = False, **grid: Any) -> Make:
    """The bundled cigre_mv_ofo scenario (1 s) on pandapower's CIGRE MV net after ``edit``, saved as
    JSON (or as a plain pickle with ``pickled``, read with ``trust_pickle``)."""

    def make(tmp: Path) -> list[str]:
        import pickle

        import pandapower as pp
        import pandapower.networks as pn

        net = pn.create_cigre_network_mv()
        edit(net)
        name = "net.p" if pickled else "net.json"
        if pickled:
            (tmp / name).write_bytes(pickle.dumps(net))
        else:
            pp.to_json(net, str(tmp / name))
        data = yaml.safe_load((SCENARIOS / "cigre_mv_ofo.yaml").read_text())
        data["grid"].update(pandapower=name, **({"trust_pickle": True} if pickled else {}), **grid)
        data["duration_s"] = 1
        return ["validate", str(_dump(tmp / "scenario.yaml", data))]

    return make


def _set_cell(table: str, row: int, **values: Any) -> Callable[[Any], None]:
    def edit(net: Any) -> None:
        for column, value in values.items():
            if isinstance(value, str):  # a word in a number column: the column holds objects
                net[table][column] = net[table][column].astype(object)
            net[table].loc[row, column] = value

    return edit


def _rename_buses(net: Any) -> None:
    net.bus.index = [f"b{i}" for i in net.bus.index]


NET_CASES: list[Case] = [
    Case(f"net:{name}", _net(edit, pickled=name.startswith("pickle")), ("net.", "grid.pandapower", *frags))
    for name, edit, frags in [
        ("line-length-zero", _set_cell("line", 0, length_km=0.0), ("line 0: length_km is 0.0",)),
        (
            "line-impedance-zero",
            _set_cell("line", 2, r_ohm_per_km=0.0, x_ohm_per_km=0.0),
            ("line 2: r_ohm_per_km and x_ohm_per_km are 0",),
        ),
        ("line-r-nan", _set_cell("line", 1, r_ohm_per_km=float("nan")), ("line 1: r_ohm_per_km is nan",)),
        ("line-x-inf", _set_cell("line", 1, x_ohm_per_km=float("inf")), ("line 1: x_ohm_per_km",)),
        ("trafo-vk-zero", _set_cell("trafo", 0, vk_percent=0.0), ("trafo 0: vk_percent is 0.0",)),
        ("bus-vn-zero", _set_cell("bus", 3, vn_kv=0.0), ("bus 3: vn_kv is 0.0",)),
        ("ext-grid-vm-nan", _set_cell("ext_grid", 0, vm_pu=float("nan")), ("ext_grid 0: vm_pu is nan",)),
        ("line-rating-zero", _set_cell("line", 4, max_i_ka=0.0), ("line 4: max_i_ka is 0.0",)),
        ("line-rating-nan", _set_cell("line", 4, max_i_ka=float("nan")), ("line 4: max_i_ka is nan",)),
        ("trafo-rating-zero", _set_cell("trafo", 1, sn_mva=0.0), ("trafo 1: sn_mva is 0.0",)),
        ("load-p-word", _set_cell("load", 2, p_mw="lots"), ("load 2: p_mw is 'lots'",)),
        ("line-to-missing-bus", _set_cell("line", 0, to_bus=999), ("line 0: to_bus 999 is not a bus",)),
        ("pickle-string-bus-index", _rename_buses, ("bus: index 'b0' is not an integer",)),
    ]
]
NET_CASES += [
    Case(f"pf:{field}-tiny", _validate(f"{field}=1e-9"), (field, "between 0.5 and 1"))
    for field in ("datacenters.0.power_factor", "grid.pv.0.power_factor", "grid.extra_loads.0.power_factor")
]
NET_CASES += [
    Case(
        "pf:powerflow-dc-tiny",
        lambda tmp: ["powerflow", "ieee13", "--dc", "671=1@1e-9"],
        ("--dc", "power factor must be in [0.5, 1]"),
    ),
    Case(
        "thermal:max-loading-huge",
        lambda tmp: ["validate", "ieee13_thermal_ofo", "--set", "controllers.0.params.max_loading_pct=1e308"],
        ("controllers.0.params.max_loading_pct", "less than or equal to 1000"),
    ),
]
NET_CASES.append(
    Case(
        "net:network-function-returns-a-set",
        lambda tmp: ["validate", str(_scenario_file(tmp, "grid.feeder=null", "grid.pandapower=pp_elements"))],
        ("grid.pandapower", "pp_elements returns a set, not a pandapower net"),
    )
)

# ------------------------------------------------------------------------------- 8. command lines


def _argv(*parts: str) -> Make:
    return lambda tmp: [p.replace("{tmp}", str(tmp)) for p in parts]


def _run_out(out: Callable[[Path], str], *extra: str) -> Make:
    def make(tmp: Path) -> list[str]:
        scenario = _scenario_file(tmp, "duration_s=1", "events=[]", "outputs.plots=false")
        return ["run", str(scenario), "--out", out(tmp), "--no-progress", *extra]

    return make


def _file(tmp: Path, name: str = "afile") -> Path:
    (tmp / name).write_text("x")
    return tmp / name


CLI_CASES: list[Case] = [
    Case(f"cli:{name}", make, frags)
    for name, make, frags in [
        ("no-command", _argv(), ("required",)),
        ("unknown-command", _argv("explode"), ("invalid choice",)),
        ("run-no-scenario", _argv("run"), ("scenario",)),
        ("run-missing-file", _argv("run", "{tmp}/none.yaml", "--out", "{tmp}/out"), ("none.yaml",)),
        ("run-unknown-bundled", _argv("run", "ieee9000_none", "--out", "{tmp}/out"), ("ieee9000_none",)),
        ("run-directory", _argv("run", "{tmp}", "--out", "{tmp}/out"), ("{tmp}",)),
        ("run-unknown-option", _argv("run", "ieee13_none", "--fast"), ("--fast",)),
        ("run-set-missing-value", _argv("run", "ieee13_none", "--set"), ("--set",)),
        ("run-out-missing-value", _argv("run", "ieee13_none", "--out"), ("--out",)),
        ("run-out-is-file", _run_out(lambda t: str(_file(t))), ("afile",)),
        ("run-out-below-file", _run_out(lambda t: str(_file(t) / "sub")), ("afile",)),
        ("run-out-in-proc", _run_out(lambda t: "/proc/openg2g-fuzz"), ("/proc/openg2g-fuzz",)),
        ("run-out-in-dev-null", _run_out(lambda t: "/dev/null/run"), ("/dev/null",)),
        ("run-out-empty", _run_out(lambda t: ""), ("--out",)),
        (
            "run-out-is-scenario",
            lambda tmp: ["run", str(_scenario_file(tmp)), "--out", str(tmp / "scenario.yaml")],
            ("scenario.yaml",),
        ),
        ("validate-no-file", _argv("validate"), ("scenarios",)),
        ("validate-missing-file", _argv("validate", "{tmp}/none.yaml"), ("none.yaml",)),
        ("validate-directory", _argv("validate", "{tmp}"), ("{tmp}",)),
        ("validate-dev-null", _argv("validate", "/dev/null"), ("/dev/null",)),
        ("validate-python-file", _argv("validate", str(REPO / "openg2g" / "__init__.py")), ("__init__.py",)),
        ("validate-set-bad", _argv("validate", "ieee13_none", "--set", "duration_s=[1"), ("--set",)),
        ("compare-missing-dir", _argv("compare", "{tmp}/none"), ("none",)),
        ("compare-empty-dir", _argv("compare", "{tmp}"), ("{tmp}",)),
        (
            "compare-summary-garbage",
            lambda tmp: (
                (tmp / "r").mkdir(),
                (tmp / "r" / "summary.json").write_text("{not json"),
                ["compare", str(tmp / "r")],
            )[2],
            ("summary.json",),
        ),
        (
            "compare-summary-list",
            lambda tmp: (
                (tmp / "r").mkdir(),
                (tmp / "r" / "summary.json").write_text(json.dumps([1])),
                ["compare", str(tmp / "r")],
            )[2],
            ("summary.json",),
        ),
        ("compare-both-formats", _argv("compare", "--json", "--markdown", "{tmp}"), ("not allowed",)),
        ("powerflow-unknown-feeder", _argv("powerflow", "atlantis"), ("atlantis",)),
        ("powerflow-dc-no-equals", _argv("powerflow", "ieee13", "--dc", "671"), ("--dc",)),
        ("powerflow-dc-word", _argv("powerflow", "ieee13", "--dc", "671=lots"), ("--dc",)),
        ("powerflow-dc-nan", _argv("powerflow", "ieee13", "--dc", "671=nan"), ("--dc",)),
        ("powerflow-dc-unknown-bus", _argv("powerflow", "ieee13", "--dc", "nowhere=1"), ("nowhere",)),
        ("powerflow-dc-pf-two", _argv("powerflow", "ieee13", "--dc", "671=1@2"), ("--dc",)),
        ("powerflow-taps-word", _argv("powerflow", "ieee13", "--taps", "reg1=a,b,c"), ("--taps",)),
        ("powerflow-taps-unknown-bank", _argv("powerflow", "ieee13", "--taps", "reg9=1,1,1"), ("reg9",)),
        ("powerflow-taps-huge", _argv("powerflow", "ieee13", "--taps", "reg1=99,1,1"), ("99",)),
        ("powerflow-solver-unknown", _argv("powerflow", "ieee13", "--solver", "magic"), ("--solver",)),
        ("sweep-missing-file", _argv("sweep", "{tmp}/none.yaml", "--out", "{tmp}/out"), ("none.yaml",)),
        ("sweep-no-out", _argv("sweep", str(SCENARIOS / "sweep_ieee13_taps.yaml")), ("--out",)),
        (
            "sweep-engine-unknown",
            _argv("sweep", str(SCENARIOS / "sweep_ieee13_taps.yaml"), "--out", "{tmp}/o", "--engine", "mpi"),
            ("--engine",),
        ),
        (
            "sweep-workers-word",
            _argv("sweep", str(SCENARIOS / "sweep_ieee13_taps.yaml"), "--out", "{tmp}/o", "--workers", "many"),
            ("--workers",),
        ),
        (
            "sweep-on-scenario",
            _argv("sweep", str(SCENARIOS / "ieee13_none.yaml"), "--out", "{tmp}/o"),
            ("ieee13_none.yaml",),
        ),
        ("study-unknown", _argv("study", "astrology"), ("invalid choice",)),
        ("traces-no-action", _argv("traces"), ("required",)),
        ("schema-extra-arg", _argv("schema", "extra"), ("unrecognized",)),
        ("feeders-unknown-action", _argv("feeders", "destroy"), ("invalid choice",)),
        ("evaluate-missing-policy", _argv("evaluate", "{tmp}/none.zip", "--scenarios", "ieee13_none"), ("none.zip",)),
        ("train-steps-negative", _argv("train", "ieee13_none", "--steps", "-5", "--out", "{tmp}/t"), ("steps", "-5")),
        ("train-algo-unknown", _argv("train", "ieee13_none", "--algo", "dqn"), ("--algo",)),
    ]
]

# --------------------------------------------------------------- inputs that look hostile but are fine

ACCEPTED: list[Case] = [
    *(
        Case(f"ok:dss-{name}", make, accepted=f"OpenDSS reads it ({why}), so openg2g reads it as OpenDSS does")
        for name, make, why in [
            ("linecode-five-conductors", _dss("nphases=3", "nphases=5"), "conductors 4 and 5 on nodes of their own"),
            ("length-unit-parsec", _dss("length=0.5 units=km", "length=0.5 units=parsec"), "an unknown unit is none"),
            ("line-bus-node-word", _dss(_L2, _L2.replace("bus2=b2", "bus2=b2.a.b.c")), "a word node is node 0"),
            ("load-orphan-bus", _add("New Load.far bus1=island.1 phases=1 kv=2.4 kw=10"), "a load on an island"),
            ("load-no-bus", _add("New Load.lost kw=10"), "a load on a bus of its own name"),
            (
                "redirect-commented-out",
                _add(
                    "! Redirect master.dss\n// redirect master.dss\n/* Redirect master.dss\n*/\nRedirect sub/ok.dss",
                    {"sub/ok.dss": "! nothing\n"},
                ),
                "a redirect in a comment is not read",
            ),
            ("load-zipv-unused", _dss(_LD, _LD + " zipv=[1 0 0 1 0 0 0.9]"), "ZIPV is used by model 8 only"),
            ("line-duplicate", _add(_L2), "a duplicate New is a warning: the engine keeps the first definition"),
            ("storage-element", _add("New Storage.s1 bus1=b2 kwrated=100"), "a storage element idling at its losses"),
            (
                "transformer-zero-xhl",
                _add("New Transformer.t2 phases=3 buses=[b2 t2] kvs=[4.16 0.48] kvas=[500 500] xhl=0 %rs=[0 0]"),
                "a zero XHL is replaced by its default",
            ),
        ]
    ),
    Case("ok:seed-zero", _validate("seed=0"), accepted="0 is a valid seed"),
    Case(
        "ok:replicas-zero",
        _validate("datacenters.0.models.0.replicas=0"),
        accepted="a model may start with no replicas",
    ),
    Case("ok:load-scale-zero", _validate("grid.load_scale=0"), accepted="0 switches the feeder's own loads off"),
    Case("ok:event-at-zero", _validate("events.0.t_s=0"), accepted="an event may fire at the start"),
    Case("ok:ramp-zero", _validate("events.1.ramp_s=0"), accepted="ramp_s 0 is a step change"),
    Case("ok:scale-zero", _validate("events.1.fraction=0"), accepted="inference scaled to nothing is an outage drill"),
    Case(
        "ok:numeric-pv-name",
        _validate("grid.pv.0.name=0"),
        accepted="names are labels; a YAML number is read as its text (as bus 671)",
    ),
    Case("ok:source-pu-null", _validate("grid.source_pu=null"), accepted="null keeps the feeder file's source voltage"),
    Case(
        "ok:monitored-null",
        _validate("grid.monitored_buses=null"),
        accepted="null monitors every bus past the substation",
    ),
    Case(
        "ok:name-path-escape",
        _validate("name=../../escape"),
        accepted="a name is a label: run keeps its default output under runs/ (runs/escape, with a note)",
    ),
    Case(
        "ok:name-absolute",
        _validate("name=/tmp/escape"),
        accepted="as above: the name never becomes a path outside runs/",
    ),
    Case(
        "ok:dss-plot-command",
        _add("Plot circuit"),
        accepted="Plot is a display command OpenDSS scripts carry; reading a feeder skips it",
    ),
    Case(
        "ok:dss-reports",
        _dss("Solve\n", "Solve\nShow voltages\nExport currents\nExport powers kva\n"),
        accepted="reports the engine writes to its own output folder, the scratch folder deleted after the reading",
    ),
    Case(
        "ok:dss-redirect-sibling",
        _add("Redirect ../common/codes.dss", {"../common/codes.dss": "New Linecode.lc2 nphases=3 r1=0.2 x1=0.5\n"}),
        accepted="reading a sibling folder (../common/, as the OpenDSS test collection does) is reading",
    ),
    Case(
        "ok:dss-latin1-name",
        _dss_bytes(TINY_DSS.encode().replace(b"Load.ld1", b"Load.caf\xe9")),
        accepted="a file saved as Latin-1: its names are read as Latin-1",
    ),
    Case(
        "ok:dss-wire-size-name",
        _add("New Linecode.2/0_acsr nphases=3 r1=0.3 x1=0.6"),
        accepted="a / in a name (a wire size) climbs out of no folder",
    ),
    Case(
        "ok:smi-nounits",
        _import(_smi(value="300.00"), "nvidia-smi"),
        accepted="nvidia-smi --format=csv,nounits writes bare watts",
    ),
    Case(
        "ok:long-name",
        _text(_yaml_text().replace("name: ieee13_none", "name: " + "x" * 300)),
        accepted="a long name is text; run refuses an output folder the disk cannot hold",
    ),
    Case(
        "ok:capacity-null", _validate("datacenters.0.gpu_capacity=null"), accepted="null sizes the site to its models"
    ),
]


GROUPS: list[list[Case]] = [
    _field_cases(),
    RAW_CASES,
    EVENT_CASES,
    CONTROLLER_CASES,
    SET_CASES,
    DSS_CASES,
    TRACE_CASES,
    SWEEP_CASES,
    STUDY_CASES,
    NET_CASES,
    CLI_CASES,
]
ALL: list[Case] = [case for group in GROUPS for case in group]

FAST_EVERY = 20
"""Every twentieth case of each group (its first included) runs in the fast path; the rest are marked slow."""


def _hostile_params() -> list[Any]:
    return [param for group in GROUPS for param in sampled(group, FAST_EVERY, [case.id for case in group])]


def test_the_fuzz_set_is_large_and_its_ids_unique() -> None:
    ids = [c.id for c in (*ALL, *ACCEPTED)]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    assert len(ALL) >= 300


@pytest.mark.slow
def test_the_tiny_feeder_and_base_scenario_are_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The harness itself: unedited, the inputs the cases edit are accepted (so each refusal is the edit's)."""
    assert main(["validate", str(_scenario_file(tmp_path / "a")), str(_dss_scenario(tmp_path / "b", TINY_DSS))]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("case", _hostile_params())
def test_hostile_input_is_refused_clearly(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run_result(case.make(tmp_path), capsys)
    assert code in (1, 2), f"exit {code} (silent acceptance?); stderr: {err}"
    assert "error:" in err, err
    assert "Traceback" not in err, err
    for fragment in case.expect:
        assert fragment.replace("{tmp}", str(tmp_path)) in err, f"{fragment!r} not in {err!r}"


@pytest.mark.parametrize("case", sampled(ACCEPTED, FAST_EVERY, [c.id for c in ACCEPTED]))
def test_legitimate_edge_input_is_accepted(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run_result(case.make(tmp_path), capsys)
    assert code == 0, f"{case.accepted}; yet exit {code}: {err}"
