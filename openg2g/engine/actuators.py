"""One owner per setting: which controller writes each actuator, and the refusal of a second.

Two controllers writing one setting (both choosing a model's batch size, say) would leave it to
whichever runs last at each instant. A run refuses it instead: controllers that declare their
settings (:meth:`~openg2g.core.interfaces.Controller.actuators`, every stock controller) are
checked against each other before anything is simulated; the others are checked command by
command, and the first command writing a setting another controller owns stops the run. Scenario
events are no controller's: they may set anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from openg2g.core.commands import Actuator
from openg2g.core.interfaces import Controller

__all__ = ["ONE_OWNER", "ActuatorOwners", "claim_declared", "controller_label"]

ONE_OWNER = (
    "a setting has one owner among a run's controllers: give them disjoint sites, models or "
    "elements, or drop one (docs/controllers.md)"
)
"""The rule every ownership error ends with."""


def controller_label(index: int, name: str) -> str:
    """How ownership errors name the scenario's controller ``index``: ``controllers.1 ('ofo')``."""
    return f"controllers.{index} ({name!r})"


class ActuatorOwners:
    """The owner of every setting written (or declared) so far in one run."""

    def __init__(self) -> None:
        self._owner: dict[Actuator, str] = {}

    def claim(self, owner: str, actuators: Iterable[Actuator]) -> str | None:
        """Record ``owner`` as the writer of ``actuators``.

        :returns: ``None``, or the sentence naming ``owner``, the other owner and the setting when
            another owner holds one of them or a setting overlapping it (that one is not recorded).
        """
        for actuator in actuators:
            holder = self._owner.get(actuator)
            if holder == owner:
                continue
            if holder is None:
                # a new setting: it may still overlap one held under a longer or shorter path
                held = next((a for a, o in self._owner.items() if o != owner and a.overlaps(actuator)), None)
                if held is None:
                    self._owner[actuator] = owner
                    continue
                holder, actuator_held = self._owner[held], held
            else:
                actuator_held = actuator
            also = "" if actuator_held == actuator else f" (it writes {actuator_held})"
            return f"{owner} writes {actuator}, which {holder} already writes{also}"
        return None


def claim_declared(owners: ActuatorOwners, controllers: Sequence[Controller]) -> list[tuple[int, str]]:
    """Claim in ``owners`` the settings each controller (reset for the run) declares, in order.

    :returns: ``(index, sentence)`` of each controller whose settings overlap an earlier one's;
        controllers that declare none (``actuators()`` is ``None``) are skipped.
    """
    problems: list[tuple[int, str]] = []
    for i, controller in enumerate(controllers):
        declared = controller.actuators()
        if declared is not None:
            conflict = owners.claim(controller_label(i, controller.name), declared)
            if conflict is not None:
                problems.append((i, f"{conflict}; {ONE_OWNER}"))
    return problems
