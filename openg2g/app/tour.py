"""The guided tour: a short walk through the page's views, one panel of text per view, the view
scrolled to and outlined."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TOUR", "TourStop", "tour_move"]


@dataclass(frozen=True)
class TourStop:
    """One stop of the tour: the page section (its element id), its name and what to do there."""

    section: str
    title: str
    text: str


TOUR = (
    TourStop(
        "runs",
        "Runs",
        "Every run folder under the runs folder, your own runs first, then what-ifs and studies, "
        "with status, progress and key figures. Tick one run to open it, two or more to compare "
        "them; a run still running is followed as it writes. The filter boxes keep matching rows.",
    ),
    TourStop(
        "series",
        "Over time",
        "The ticked runs on one time axis: power, batch sizes, ITL against each deadline, "
        "throughput, voltages, substation power, taps, commands. Zoom one panel and all follow; "
        "click a legend entry to hide that model everywhere. The pink line is the slider's time.",
    ),
    TourStop(
        "feeder",
        "Feeder",
        "The feeder at the slider's time: each bus coloured by its voltage, a bus beyond a limit "
        "ringed in red, branch loading in purples when recorded. Step with previous / next, jump "
        "to the worst step, or play. Click a bus for its voltage over the whole run; copy the link "
        "to share this run at this time.",
    ),
    TourStop(
        "compare",
        "Compare",
        "Tick two runs or more: their violation integral, throughput, ITL misses and batch "
        "changes against the baseline you choose, and their curves over time.",
    ),
    TourStop(
        "whatif",
        "What if",
        "Change a bundled scenario (the site's bus, replicas and batch sizes, controller, "
        "duration) and run it here; it appears in the runs view under what-if, with its progress "
        "and an open button when done.",
    ),
)
"""The tour's stops, in page order."""


def tour_move(action: str, step: int | None) -> int | None:
    """The tour's stop after ``action`` (``start``, ``next``, ``back``, ``close``) from stop ``step``
    (``None``: not touring): ``next`` past the last stop ends it, ``back`` stays at the first."""
    if action == "start":
        return 0
    if action == "close" or step is None:
        return None
    if action == "next":
        return step + 1 if step + 1 < len(TOUR) else None
    if action == "back":
        return max(step - 1, 0)
    raise ValueError(f"unknown tour action {action!r}")
