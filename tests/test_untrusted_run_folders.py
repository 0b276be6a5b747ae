"""Viewing a run never runs code (issue 42, part 1): ``openg2g plot``, ``openg2g compare``,
:func:`openg2g.scenario.net_results.to_pandapower_results` and the app's data loading read a run
folder as data. A folder whose ``scenario.yaml`` names a pickle net with ``grid.trust_pickle:
true``, a controller file and a plug-in site's file (each making a marker when it runs,
:mod:`tests.hostile_runs`) leaves no marker; what cannot be shown is said, naming the file and the
field. Only the viewer's own word (``--trust-pickle``, ``trust_pickle=True``) reads a pickle.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from openg2g.cli.main import main
from openg2g.core.errors import FeederError
from tests.hostile_runs import BOMB, Markers, hostile_copy, net_run

pytest.importorskip("pandapower")


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return net_run(tmp_path_factory.mktemp("net_run"))


@pytest.fixture
def markers(tmp_path: Path) -> Markers:
    return Markers(tmp_path)


@pytest.fixture
def hostile(clean_run: Path, tmp_path: Path, markers: Markers) -> Path:
    return hostile_copy(clean_run, tmp_path / "hostile", markers)


def test_openg2g_plot_reads_no_pickle_and_imports_nothing_a_run_folder_names(
    hostile: Path, markers: Markers, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plot", str(hostile)]) == 0
    err = capsys.readouterr().err
    assert markers.made() == []
    assert (hostile / "dc_power.png").is_file()  # the tables are drawn
    skipped = [line for line in err.splitlines() if "feeder_map.png" in line or "voltage_profile.png" in line]
    assert len(skipped) == 2
    for line in skipped:
        assert "skipped" in line and f"{hostile / 'net.p'}" in line and "grid.pandapower" in line
        assert "grid.trust_pickle is the word of whoever wrote the folder" in line and "--trust-pickle" in line


def test_only_the_viewers_own_trust_pickle_reads_a_run_folders_pickle(
    hostile: Path, markers: Markers, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["plot", str(hostile), "--trust-pickle"])
    capsys.readouterr()
    assert markers.made() == ["marker_pickle"]  # the pickle ran, as asked; no file was imported


def test_openg2g_compare_runs_nothing_a_run_folder_names(
    hostile: Path, clean_run: Path, markers: Markers, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(hostile), str(clean_run), "--plot", str(tmp_path / "cmp.png")]) == 0
    capsys.readouterr()
    assert markers.made() == []


def test_to_pandapower_results_reads_no_pickle_unless_the_caller_trusts_it(hostile: Path, markers: Markers) -> None:
    from openg2g.scenario.net_results import to_pandapower_results

    with pytest.raises(FeederError, match="net.p' is a pickle net.*trust_pickle=True in Python"):
        to_pandapower_results(hostile, 0.5)
    assert markers.made() == []
    with pytest.raises(FeederError, match="is not a pandapower net"):  # a pickle of a marker maker, not a net
        to_pandapower_results(hostile, 0.5, trust_pickle=True)
    assert markers.made() == ["marker_pickle"]


def test_to_pandapower_results_imports_no_controller_or_site_file(
    clean_run: Path, tmp_path: Path, markers: Markers
) -> None:
    from openg2g.scenario.net_results import to_pandapower_results

    run = hostile_copy(clean_run, tmp_path / "code", markers, pickle_net=False)
    net = to_pandapower_results(run, 0.5)
    assert markers.made() == []
    assert "openg2g:dc1" in set(net.load.name)


def test_the_apps_data_loading_reads_no_pickle_and_imports_nothing(hostile: Path, markers: Markers) -> None:
    pytest.importorskip("dash")
    from openg2g.app.data import AppError, RunStore, list_runs, map_at

    root = hostile.parent
    assert [(r.run_id, r.status) for r in list_runs(root)] == [("hostile", "complete")]
    store = RunStore(root)
    run = store.get("hostile")
    assert store.positions(run) is None
    with pytest.raises(AppError, match=r"no feeder map: .*net\.p' is a pickle net.*openg2g app --allow-code"):
        map_at(run, 0.5)
    assert store.overview(run).grid_times_s.size > 0  # the tables are shown
    assert markers.made() == []
    RunStore(root, trust_pickle=True).get("hostile").topology  # noqa: B018 (--allow-code: the user's word)
    assert markers.made() == ["marker_pickle"]


def test_an_alias_bomb_in_a_run_folders_scenario_is_refused_at_once(
    clean_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "bomb"

    shutil.copytree(clean_run, run)
    (run / "scenario.yaml").write_text(BOMB + "\n")
    start = time.monotonic()
    assert main(["plot", str(run)]) == 1
    assert time.monotonic() - start < 10
    err = capsys.readouterr().err
    assert f"{run / 'scenario.yaml'}: too big: more than 1,000,000 values once its YAML aliases are expanded" in err
