"""The collection rule of ``tests/conftest.py``: a test that uses a module-scoped fixture is in its
module's pytest-xdist group (one worker builds the fixture once), unless it names its group
itself; any other test is in none."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def built_once() -> int:
    return 1


def test_a_test_using_a_module_fixture_is_in_its_module_group(request: pytest.FixtureRequest, built_once: int) -> None:
    mark = request.node.get_closest_marker("xdist_group")
    assert mark is not None and mark.args == ("tests/test_xdist_groups.py",)


def test_a_test_without_one_is_in_no_group(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("xdist_group") is None


@pytest.mark.xdist_group("named")
def test_a_group_named_by_the_test_is_kept(request: pytest.FixtureRequest, built_once: int) -> None:
    assert [m.args for m in request.node.iter_markers("xdist_group")] == [("named",)]
