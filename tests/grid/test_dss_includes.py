"""The scan of an OpenDSS master before the engine reads it: the files followed as the engine
follows them, redirect cycles named, and every command that would write a file, move OpenDSS's
folders, run code or hide from the scan refused by name, with its file and line, however the file
spells it (abbreviations, positions, quotes, comments, byte-order marks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from openg2g.core.errors import FeederError
from openg2g.grid.feeder import dss_includes
from openg2g.grid.feeder.dss_includes import COMMANDS, EXPORTS, OPTIONS, describe_refused, scan


def _write(folder: Path, files: dict[str, str | bytes]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    return folder / "master.dss"


def _refused(master: Path) -> list[str]:
    return describe_refused(scan(master).refused, master.parent)


def test_a_cycle_through_three_files_is_named_with_its_lines(tmp_path: Path) -> None:
    master = _write(
        tmp_path,
        {
            "master.dss": "Clear\nNew Circuit.c\nRedirect sub/a.dss\n",
            "sub/a.dss": "! a\n\nREDIRECT b.dss\n",
            "sub/b.dss": "redirect ../master.dss ! back\n",
        },
    )
    assert _refused(master) == [
        (
            "sub/b.dss line 1: redirect ../master.dss: redirect cycle: master.dss line 3 -> sub/a.dss line 3 -> "
            "sub/b.dss line 1 -> master.dss, which is still being read"
        )
    ]


def test_a_file_redirected_twice_without_a_cycle_is_no_cycle(tmp_path: Path) -> None:
    master = _write(tmp_path, {"master.dss": "Redirect a.dss\nRedirect a.dss\n", "a.dss": "Redirect b\n", "b.dss": ""})
    assert scan(master).refused == []  # "b" is b.dss, as the engine adds .dss to a name without a dot


def test_a_cycle_behind_a_moved_folder_is_refused_by_the_move(tmp_path: Path) -> None:
    """The engine would recurse until it crashed (sub/master.dss redirects to itself): the move is
    refused, and the scan, which resolves names where the file is, names the cycle it sees."""
    master = _write(
        tmp_path, {"master.dss": "cd sub\nRedirect master.dss\n", "sub/master.dss": "Redirect master.dss\n"}
    )
    assert _refused(master) == [
        "master.dss line 1: cd sub: moves the folder OpenDSS reads from and writes to",
        (
            "master.dss line 2: Redirect master.dss: redirect cycle: master.dss line 2 -> master.dss, which is still "
            "being read"
        ),
    ]


def test_more_files_or_a_deeper_chain_than_the_bounds_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files: dict[str, str | bytes] = {"master.dss": "Redirect f1.dss\n"}
    files.update({f"f{k}.dss": f"Redirect f{k + 1}.dss\n" for k in range(1, 1000)})
    files["f1000.dss"] = ""
    master = _write(tmp_path, files)
    with pytest.raises(FeederError, match=r"more than 100 deep \(f99\.dss line 1 opens the next one\)"):
        scan(master)  # 1000 deep: a clear refusal, no RecursionError
    monkeypatch.setattr(dss_includes, "MAX_DEPTH", 2000)
    monkeypatch.setattr(dss_includes, "MAX_FILES", 500)
    with pytest.raises(FeederError, match="more than 500 files read"):
        scan(master)


def test_commands_that_write_move_folders_or_run_code_are_refused_however_spelled(tmp_path: Path) -> None:
    lines = [
        "exp voltages /c/a.csv",  # 1: an abbreviation of Export, with a file
        "Export powers kva",  # 2: the kind's own option, no file: runs
        "Export powers kva /c/p.csv",  # 3
        "export monitors m1",  # 4: a monitor's name: runs
        'EXPORT Voltages, "/c/q!x.csv"',  # 5: the ! is inside quotes
        "export cim100 subs=s fil=/c/cim.xml",  # 6
        "sa circuit dir=/c",  # 7: Save
        "set datap=/c",  # 8
        "set bus=b1 /c",  # 9: the value after Bus sets DataPath, by position
        'set loadmult="1!" datapath=/c',  # 10: the ! in quotes is no comment
        "solve mode=snap datapath=/c",  # 11
        "c other.dss",  # 12: Compile
        "DOScmd rm -rf /c",  # 13
        "Set Editor=vi ShowExport=yes",  # 14: two options
        "Set CaseName=../../c",  # 15
        "var @e=export",  # 16: a variable, used next
        "@e voltages /c/v.csv",  # 17
        "Redirect @lastfile",  # 18
        "New Circuit.../../c/x",  # 19: the circuit's name climbs out of the output folder
        "New Linecode.2/0_acsr nphases=3",  # 20: a path separator alone stays inside: runs
        "x=export voltages /c/y.csv",  # 21: a property of the active element, not a command: runs
        "AlignFile master.dss",  # 22
        "! export voltages /c/comment.csv",  # 23: a comment
        "Show voltages",  # 24: into the output folder: runs
        "CD /c",  # 25
    ]
    master = _write(tmp_path, {"master.dss": "\n".join(lines) + "\n", "other.dss": ""})
    assert [r.split(": ", 1)[0] for r in _refused(master)] == [
        f"master.dss line {n}" for n in (1, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 14, 15, 17, 18, 19, 22, 25)
    ]
    refused = _refused(master)
    assert refused[0] == "master.dss line 1: exp voltages /c/a.csv: writes the file it names"
    assert refused[6] == (
        "master.dss line 9: set bus=b1 /c: Datapath (the value '/c', by its position) moves the folder OpenDSS "
        "reads from and writes to"
    )
    assert "compiled file's folder" in refused[9] and "runs a shell command" in refused[10]
    assert "editor names a program" in refused[11] and "ShowExport starts the editor" in refused[12]
    assert "parser variable" in refused[14] and "parser variable" in refused[15]
    assert "climbs out of a folder" in refused[16]


def test_block_comments_and_line_ends_are_the_engines(tmp_path: Path) -> None:
    text = (
        "/* a block\nexport voltages /c/1.csv\n*/ export voltages /c/2.csv\n"  # all three lines are the comment's
        "  /* not a block: the line does not begin with it\nexport voltages /c/3.csv\n"
        "! a comment\rexport voltages /c/4.csv\r\n"  # \r ends a line
    )
    master = _write(tmp_path, {"master.dss": text})
    assert [r.split(": ", 1)[0] for r in _refused(master)] == ["master.dss line 5", "master.dss line 7"]


def test_a_utf16_file_is_read_as_the_engine_converts_it(tmp_path: Path) -> None:
    text = "export voltages /c/u.csv\n"
    master = _write(tmp_path, {"master.dss": "\ufeff".encode("utf-16-le") + text.encode("utf-16-le")})
    assert _refused(master) == ["master.dss line 1: export voltages /c/u.csv: writes the file it names"]
    bom = _write(tmp_path / "bom", {"master.dss": b"\xef\xbb\xbf" + text.encode()})
    assert len(_refused(bom)) == 1


def test_a_user_written_model_is_refused_however_it_is_named(tmp_path: Path) -> None:
    """The engine loads the library as it reads the property: by any abbreviation, by position, on
    the element being edited."""
    lines = [
        "New Generator.g1 bus1=b kw=10 UserModel=evil.so",  # 1
        "New Generator.g2 bus1=b kw=10",  # 2
        "~ user=evil.so",  # 3: an abbreviation, on g2
        "New Storage.s1 bus1=b",  # 4
        "~ kwrated=10 50",  # 5: a value by position
        "Select pvsystem.p1",  # 6
        "UserModel=evil.so",  # 7: on the selected element
        "generator.g2.shaftmodel=evil.so",  # 8
        "New Load.l1 bus1=b 4.16 kw=10 usermodel=x",  # 9: a load has no model property: runs
        "BatchEdit Storage..* DynaDLL=evil.so",  # 10
    ]
    master = _write(tmp_path, {"master.dss": "\n".join(lines) + "\n"})
    refused = _refused(master)
    assert [r.split(": ", 1)[0] for r in refused] == [f"master.dss line {n}" for n in (1, 3, 5, 7, 8, 10)]
    assert refused[0].endswith("UserModel=evil.so may name a user-written model: a library OpenDSS would load and run")
    assert "by position" in refused[2]


def test_a_file_that_is_not_utf8_is_flagged_and_scanned(tmp_path: Path) -> None:
    master = _write(tmp_path, {"master.dss": b"New Load.caf\xe9 bus1=b\nexport voltages /c/x.csv\n"})
    found = scan(master)
    assert not found.utf8 and "load.caf\udce9" in found.definitions and len(found.refused) == 1


def test_the_scans_lists_are_the_engines() -> None:
    from dss import DSS

    executive = DSS.NewContext().Executive
    assert tuple(executive.Command(i) for i in range(1, executive.NumCommands + 1)) == COMMANDS
    assert tuple(executive.Option(i) for i in range(1, executive.NumOptions + 1)) == OPTIONS
    # the engine prints its export kinds, from its C library (flushed when the process ends)
    program = "from dss import DSS; DSS.NewContext().Text.Command = 'help export'"
    printed = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True).stdout
    assert set(printed.split()) == set(EXPORTS)
