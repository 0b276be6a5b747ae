"""The guided tour's stops and moves."""

from __future__ import annotations

import pytest

from openg2g.app.tour import TOUR, tour_move
from openg2g.app.views import page


def test_the_tour_walks_forward_and_back_and_ends_after_its_last_stop() -> None:
    assert tour_move("start", None) == 0
    assert tour_move("start", 3) == 0  # starting again begins at the first stop
    assert tour_move("back", 0) == 0
    assert tour_move("next", 0) == 1 and tour_move("back", 1) == 0
    assert tour_move("next", len(TOUR) - 1) is None
    assert tour_move("close", 2) is None and tour_move("next", None) is None
    with pytest.raises(ValueError, match="unknown tour action 'jump'"):
        tour_move("jump", 0)


def test_every_stop_is_a_section_of_the_page() -> None:
    def ids(component: object) -> set[str]:
        found = {str(component.id)} if getattr(component, "id", None) else set()
        children = getattr(component, "children", None)
        for child in children if isinstance(children, list | tuple) else [children]:
            if child is not None and not isinstance(child, str | int | float):
                found |= ids(child)
        return found

    shown = ids(page(["ieee13_none"], ["ofo"], allow_code=False, runs_dir="runs"))
    assert {stop.section for stop in TOUR} <= shown
    assert [stop.section for stop in TOUR] == ["runs", "series", "feeder", "compare", "whatif"]  # page order
