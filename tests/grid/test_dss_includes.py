"""The redirect scan before OpenDSS's engine reads a file: cycles named, and left to the engine
wherever the scan cannot know what the engine would read."""

from __future__ import annotations

from pathlib import Path

from openg2g.grid.feeder import dss_includes
from openg2g.grid.feeder.dss_includes import redirect_cycle


def _write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder / "master.dss"


def test_a_cycle_through_three_files_is_named_with_its_lines(tmp_path):
    master = _write(
        tmp_path,
        {
            "master.dss": "Clear\nNew Circuit.c\nRedirect sub/a.dss\n",
            "sub/a.dss": "! a\n\nREDIRECT b.dss\n",
            "sub/b.dss": "redirect ../master.dss ! back\n",
        },
    )
    cycle = redirect_cycle(master)
    assert cycle is not None
    assert [(f.relative_to(tmp_path).as_posix(), n) for f, n in cycle.chain] == [
        ("master.dss", 3),
        ("sub/a.dss", 3),
        ("sub/b.dss", 1),
    ]
    assert cycle.describe(tmp_path) == (
        "master.dss line 3 -> sub/a.dss line 3 -> sub/b.dss line 1 -> master.dss, which is still being read"
    )


def test_a_file_redirected_twice_without_a_cycle_is_no_cycle(tmp_path):
    master = _write(
        tmp_path,
        {"master.dss": "Redirect a.dss\nRedirect a.dss\nRedirect gone.dss\n", "a.dss": "Redirect b.dss\n", "b.dss": ""},
    )
    assert redirect_cycle(master) is None


def test_a_moved_folder_leaves_the_file_to_the_engine(tmp_path):
    # after Set DataPath the engine resolves names elsewhere: the scan cannot tell, so it says nothing
    master = _write(tmp_path, {"master.dss": "Set DataPath=other\nRedirect master.dss\n"})
    assert redirect_cycle(master) is None
    cd = _write(tmp_path / "cd", {"master.dss": "cd sub\nRedirect master.dss\n"})
    assert redirect_cycle(cd) is None


def test_more_files_than_the_bound_are_left_to_the_engine(tmp_path, monkeypatch):
    files = {"master.dss": "Redirect f1.dss\n"}
    files.update({f"f{k}.dss": f"Redirect f{k + 1}.dss\n" for k in range(1, 6)})
    files["f6.dss"] = "Redirect master.dss\n"
    master = _write(tmp_path, files)
    assert redirect_cycle(master) is not None
    monkeypatch.setattr(dss_includes, "MAX_FILES", 5)
    assert redirect_cycle(master) is None
