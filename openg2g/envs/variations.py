"""Seeded scenario variations: every training episode runs a slightly different scenario.

A :class:`ScenarioGenerator` takes a validated scenario and an episode window and draws
variations from a numpy ``Generator``:

- **seed**: the scenario seed (trace offsets, ITL samples) is drawn anew;
- **load scale**: the feeder's own loads are scaled by a factor, as a ``set_load_scale`` event at
  ``t = 0`` (so the grid is the same object across episodes);
- **PV scale**: each PV plant without a profile gets a PV-scale (``SetPVScale``) event at ``t = 0``;
- **training job**: a site's training job (if any) runs or not, and its start and length are
  drawn as fractions of the episode window;
- **event times**: with ``compress_events`` the scenario's own events (taps, ramps) are moved from
  ``t`` to ``t * window / duration`` (ramp lengths scaled alike), so a short episode still tells the
  scenario's whole story; otherwise events after the window are dropped;
- **replica ramps**: the scenario's own ramp events (``set_replicas``, ``set_inference_scale``) are
  moved in time and their size scaled; with some probability one extra inference ramp (to a drawn
  fraction of the configured replicas, over a drawn ramp time) is added at a drawn time.

Every variation is a valid :class:`~openg2g.scenario.schema.Scenario` (it can be dumped to YAML and
run with ``openg2g run``). :meth:`ScenarioGenerator.evaluation_set` is a fixed list drawn from its
own seed, held out from training draws; :meth:`ScenarioGenerator.validation_set`, drawn from the
same seed on another stream, is the one training selects models on.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from pydantic import Field, field_validator

from openg2g.core.commands import SetInferenceScale, SetLoadScale, SetPVScale, SetReplicas, command_name
from openg2g.core.config import ConfigModel
from openg2g.scenario.schema import Scenario

__all__ = ["ScenarioGenerator", "Variation", "VariationSpec"]

_SET_REPLICAS = command_name(SetReplicas)
_SET_INFERENCE_SCALE = command_name(SetInferenceScale)
_RAMP_COMMANDS = (_SET_REPLICAS, _SET_INFERENCE_SCALE)
# numpy seed-sequence words that keep the fixed sets apart (ASCII "og" and "va")
_HELD_OUT_STREAM = 0x6F67
_VALIDATION_STREAM = 0x7661


class VariationSpec(ConfigModel):
    """Ranges of the randomized scenario variations (each ``(low, high)``, drawn uniformly)."""

    load_scale: tuple[float, float] = Field((0.85, 1.15), description="Factor on the feeder's load scale.")
    pv_scale: tuple[float, float] = Field((0.3, 1.0), description="Factor on each constant PV plant's output.")
    training_probability: float = Field(0.8, ge=0, le=1, description="Chance that a site's training job runs.")
    training_start: tuple[float, float] = Field((0.0, 0.6), description="Training start, fraction of the window.")
    training_length: tuple[float, float] = Field((0.2, 0.8), description="Training length, fraction of the window.")
    compress_events: bool = Field(
        True, description="Map the scenario's own event times (and ramp lengths) onto a shorter episode window."
    )
    ramp_jitter_s: float = Field(60.0, ge=0, description="Scenario ramp events move by up to this many seconds.")
    ramp_size: tuple[float, float] = Field((0.7, 1.0), description="Factor on the scenario ramp events' targets.")
    extra_ramp_probability: float = Field(0.6, ge=0, le=1, description="Chance of one extra inference ramp.")
    extra_ramp_time: tuple[float, float] = Field((0.1, 0.8), description="Extra ramp start, fraction of the window.")
    extra_ramp_fraction: tuple[float, float] = Field((0.4, 1.0), description="Extra ramp target, fraction of replicas.")
    extra_ramp_s: tuple[float, float] = Field((5.0, 60.0), description="Extra ramp duration (s).")

    @field_validator(
        "load_scale",
        "pv_scale",
        "training_start",
        "training_length",
        "ramp_size",
        "extra_ramp_time",
        "extra_ramp_fraction",
        "extra_ramp_s",
    )
    @classmethod
    def _range(cls, v: tuple[float, float]) -> tuple[float, float]:
        lo, hi = v
        if not 0 <= lo <= hi:
            raise ValueError(f"need 0 <= low <= high, got {v}")
        return v


@dataclass(frozen=True)
class Variation:
    """One drawn scenario and a short description of what was drawn (for ``info`` and logs)."""

    scenario: Scenario
    drawn: dict[str, Any]


def _uniform(rng: np.random.Generator, bounds: tuple[float, float]) -> float:
    lo, hi = bounds
    return float(lo if hi == lo else rng.uniform(lo, hi))


def _seconds(value: float, grid_s: Fraction) -> str:
    """A time rounded down to the grid period, as an exact string the schema reads back."""
    return str(Fraction(int(Fraction(repr(float(value))) / grid_s)) * grid_s)


class ScenarioGenerator:
    """Draws scenario variations within an episode window.

    :param base: the validated scenario as written.
    :param spec: the variation ranges; ``None`` returns the scenario unchanged (but with the
        episode's duration).
    :param window_s: episode length (s); the scenario's duration is set to it.
    """

    def __init__(self, base: Scenario, spec: VariationSpec | None, window_s: Fraction):
        if window_s <= 0 or window_s > base.duration_s:
            raise ValueError(f"window_s must lie in (0, {base.duration_s}] s, got {window_s}")
        self.base = base
        self.spec = spec
        self.window_s = Fraction(window_s)
        self._data = base.model_dump(mode="json")
        self._data["duration_s"] = str(self.window_s)
        self._compressed = dict(self._data)
        # events after the window would never fire; drop them so the variation stays valid
        self._data["events"] = [e for e in self._data["events"] if Fraction(e["t_s"]) <= self.window_s]
        factor = self.window_s / base.duration_s
        self._compressed["events"] = [self._compress(e, factor) for e in self._compressed["events"]]

    def _compress(self, event: dict[str, Any], factor: Fraction) -> dict[str, Any]:
        event = dict(event)
        event["t_s"] = _seconds(float(Fraction(event["t_s"]) * factor), self.base.periods.grid_s)
        if "ramp_s" in event:
            event["ramp_s"] = float(event["ramp_s"]) * float(factor)
        return event

    def as_written(self) -> Variation:
        """The scenario itself (episode duration applied), no randomization."""
        return Variation(Scenario.model_validate(self._data), {"seed": self.base.seed})

    def sample(self, rng: np.random.Generator) -> Variation:
        """Draw one variation from ``rng``."""
        spec = self.spec
        if spec is None:
            return self.as_written()
        source = self._compressed if spec.compress_events else self._data
        data = {**source, "grid": dict(source["grid"])}
        data["events"] = [dict(e) for e in source["events"]]
        data["datacenters"] = [dict(s) for s in source["datacenters"]]
        window = float(self.window_s)
        grid_s = self.base.periods.grid_s
        drawn: dict[str, Any] = {"seed": int(rng.integers(0, 2**31 - 1))}
        data["seed"] = drawn["seed"]

        f_load = _uniform(rng, spec.load_scale)
        drawn["load_scale"] = f_load
        new_events: list[dict[str, Any]] = [
            {"t_s": "0", "command": command_name(SetLoadScale), "scale": float(self.base.grid.load_scale) * f_load}
        ]
        for pv in self.base.grid.pv:
            if pv.profile is None:
                f_pv = _uniform(rng, spec.pv_scale)
                drawn[f"pv_scale.{pv.name}"] = f_pv
                new_events.append(
                    {"t_s": "0", "command": command_name(SetPVScale), "scale": pv.scale * f_pv, "pv": pv.name}
                )

        for site in data["datacenters"]:
            if site.get("training") is None:
                continue
            if rng.uniform() >= spec.training_probability:
                site["training"] = None
                drawn[f"training.{site['name']}"] = None
                continue
            start = _uniform(rng, spec.training_start) * window
            length = max(_uniform(rng, spec.training_length) * window, float(grid_s))
            training = dict(site["training"])
            training["start_s"] = start
            training["end_s"] = start + length
            site["training"] = training
            drawn[f"training.{site['name']}"] = (round(start, 3), round(start + length, 3))

        for event in data["events"]:
            if event["command"] not in _RAMP_COMMANDS:
                continue
            t = float(Fraction(event["t_s"])) + rng.uniform(-spec.ramp_jitter_s, spec.ramp_jitter_s)
            event["t_s"] = _seconds(min(max(t, 0.0), window), grid_s)
            factor = _uniform(rng, spec.ramp_size)
            if event["command"] == _SET_REPLICAS:
                event["replicas"] = round(event["replicas"] * factor)
            else:
                event["fraction"] = event["fraction"] * factor

        if self.base.datacenters and rng.uniform() < spec.extra_ramp_probability:
            site = self.base.datacenters[int(rng.integers(len(self.base.datacenters)))]
            t = _uniform(rng, spec.extra_ramp_time) * window
            fraction = _uniform(rng, spec.extra_ramp_fraction)
            ramp_s = _uniform(rng, spec.extra_ramp_s)
            new_events.append(
                {
                    "t_s": _seconds(t, grid_s),
                    "command": _SET_INFERENCE_SCALE,
                    "site": site.name,
                    "fraction": fraction,
                    "ramp_s": ramp_s,
                }
            )
            drawn["extra_ramp"] = (site.name, round(t, 3), round(fraction, 3), round(ramp_s, 3))
        data["events"] = new_events + data["events"]
        return Variation(Scenario.model_validate(data), drawn)

    def evaluation_set(self, n: int, seed: int) -> list[Variation]:
        """``n`` variations drawn from their own seed: the same list every time, held out from training."""
        return self._fixed_set(n, seed, _HELD_OUT_STREAM)

    def validation_set(self, n: int, seed: int) -> list[Variation]:
        """``n`` variations for choosing among a run's models (periodic evaluation in training), drawn
        from the same seed as :meth:`evaluation_set` but another stream: the model is chosen on these
        and reported on the held-out ones, which it was not chosen on."""
        return self._fixed_set(n, seed, _VALIDATION_STREAM)

    def _fixed_set(self, n: int, seed: int, stream: int) -> list[Variation]:
        return [self.sample(np.random.default_rng([seed, i, stream])) for i in range(n)]
