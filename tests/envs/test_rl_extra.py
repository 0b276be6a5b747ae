"""Without the RL extra the main job runs and what needs stable-baselines3 says how to install it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from openg2g.cli.main import main


@pytest.fixture
def without_sb3(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import stable_baselines3`` fails, as where the package is not installed."""
    for name in [m for m in sys.modules if m == "stable_baselines3" or m.startswith("stable_baselines3.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "stable_baselines3", None)


def test_train_without_the_rl_extra_says_how_to_install_it(without_sb3: None, tmp_path: Path, capsys) -> None:
    code = main(["train", "ieee13_none", "--steps", "10", "--out", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert code != 0
    assert "openg2g train needs stable-baselines3" in err and "openg2g-cosim[rl]" in err
    assert "download.pytorch.org/whl/cpu" in err
    assert not (tmp_path / "t").exists()


@pytest.mark.slow
def test_the_rl_controller_without_the_extra_stops_with_the_install_line(
    without_sb3: None, tmp_path: Path, capsys
) -> None:
    code = main(["run", "ieee13_rl", "--set", "duration_s=2", "--out", str(tmp_path / "r"), "--no-progress"])
    err = capsys.readouterr().err
    assert code != 0 and "openg2g-cosim[rl]" in err and "Traceback" not in err


@pytest.mark.slow
def test_a_replay_run_needs_no_rl_extra(without_sb3: None, tmp_path: Path) -> None:
    assert main(["run", "ieee13_ofo", "--set", "duration_s=2", "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    assert (tmp_path / "o" / "summary.json").is_file()
