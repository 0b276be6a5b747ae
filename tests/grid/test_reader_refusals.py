"""What the reader refuses, and how: every element it cannot model named at once with the file
and line that define it, before the engine runs the file when the scan of the files is sure of
them; OpenDSS's warnings read past, as OpenDSS reads past them, and logged."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from openg2g.core.errors import FeederError
from openg2g.grid.feeder.crosscheck import crosscheck
from openg2g.grid.feeder.dss_includes import scan
from openg2g.grid.feeder.opendss import read_opendss

HEAD = """\
Clear
New Circuit.t basekv=12.47 pu=1.0 bus1=src MVAsc3=200 MVAsc1=180
New Line.l1 bus1=src bus2=b phases=3 r1=0.5 x1=1.2 r0=1.5 x0=3.6 c1=0 c0=0 length=3 units=km
"""

TAIL = """\
Set VoltageBases=[12.47, 4.16]
CalcVoltageBases
Solve
"""


def _write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder / "master.dss"


def test_every_element_openg2g_cannot_model_is_named_at_once_with_its_file_and_line(tmp_path: Path) -> None:
    """Four refusals of four kinds in two files, each made by a later command (so left to the
    engine): a load model, a generator model, a PV system's balanced current, a regulator
    control's cogeneration mode; named in the order the files define them. An induction machine
    the file disables is no refusal."""
    master = _write(
        tmp_path,
        {
            "master.dss": HEAD
            + "New Load.l bus1=b phases=3 kV=12.47 kW=2000 kvar=800 model=1\n"  # line 4
            + "Redirect sub/more.dss\n"
            + "New PVSystem.pv bus1=b phases=3 kV=12.47 pmpp=200 kva=220 irradiance=1\n"  # line 6
            + "New IndMach012.m bus1=b kV=12.47 kW=100\n"
            + "IndMach012.m.enabled=no\n"
            + "Load.l.model=3\n"
            + "Edit Generator.g7 model=7\n"
            + "BatchEdit PVSystem..* Balanced=yes\n"
            + TAIL,
            "sub/more.dss": "! generators\n"
            + "New Generator.g7 bus1=b phases=3 kV=12.47 kW=100\n"  # line 2
            + "New Transformer.t1 phases=3 windings=2 buses=[b c] kVs=[12.47 4.16] kVAs=[1000 1000] XHL=6\n"
            + "New RegControl.r1 transformer=t1 winding=2 cogen=yes\n",  # line 4
        },
    )
    with pytest.raises(FeederError) as refused:
        read_opendss(master)
    lines = str(refused.value).splitlines()
    assert lines[0] == (
        f"{master}: openg2g cannot model 4 elements of this circuit; disable them (enabled=no) or remove them:"
    )
    assert lines[1:] == [
        "  master.dss line 4: load.l: load model 3 is not supported (1, 2, 4, 5 are)",
        (
            "  sub/more.dss line 2: generator.g7: generator model 7 (constant kW and kvar with its current limited "
            "below vminpu) is not supported (models 1, 2 and 3 are)"
        ),
        "  sub/more.dss line 4: regcontrol.r1: Cogen=Yes is not supported",
        (
            "  master.dss line 6: pvsystem.pv: Balanced=Yes (its current from the positive sequence of its voltages) "
            "is not supported"
        ),
    ]


def test_elements_refused_whatever_the_engine_makes_of_them_are_refused_before_it_runs(tmp_path: Path) -> None:
    """An exponential volt-var control, an induction machine, a user-written generator model, a
    load model and a PV system's balanced current, as the files give them: named before the engine
    starts, and after them the lines the scan refuses (the library the engine would load as it read
    the model, the redirect of a missing file). Had it run, the missing file would be its error,
    after a year of daily solves."""
    master = _write(
        tmp_path,
        {
            "master.dss": HEAD
            + "New Load.l bus1=b phases=3 kV=12.47 kW=2000 kvar=800 model=8\n"  # line 4
            + "Redirect sub/machines.dss\n"
            + "New ExpControl.e1\n"  # line 6
            + "New PVSystem.pv bus1=b phases=3 kV=12.47 pmpp=200 kva=220 irradiance=1 Balanced=yes\n"
            + "Redirect not_there.dss\n"
            + "Solve mode=daily number=8760\n",
            "sub/machines.dss": "New IndMach012.m bus1=b kV=12.47 kW=100\n"
            + "New Generator.u bus1=b kV=12.47 kW=100 model=6\n"
            + "~ UserModel=mymodel.dll\n",
        },
    )
    with pytest.raises(FeederError) as refused:
        read_opendss(master)
    lines = str(refused.value).splitlines()
    assert "5 elements of this circuit (found before OpenDSS ran the file, whose reading may show more)" in lines[0]
    assert lines[1:] == [
        "  master.dss line 4: load.l: load model 8 is not supported (1, 2, 4, 5 are)",
        (
            "  sub/machines.dss line 1: indmach012.m: an induction machine: its current follows its slip, a state "
            "of its own dynamics openg2g does not solve"
        ),
        (
            "  sub/machines.dss line 2: generator.u: a user-written model (usermodel=mymodel.dll), code openg2g "
            "does not run"
        ),
        (
            "  master.dss line 6: expcontrol.e1: an exponential volt-var control: it changes the output of the "
            "elements it controls with the voltage from one solution to the next, which openg2g does not model"
        ),
        (
            "  master.dss line 7: pvsystem.pv: Balanced=Yes (its current from the positive sequence of its voltages) "
            "is not supported"
        ),
        (
            f"{master}: openg2g refuses 2 lines of this file, before OpenDSS ran it (a .dss file may read any file, "
            "not write one, move OpenDSS's folders, run code or hide what it does from the scan):"
        ),
        (
            "  sub/machines.dss line 3: ~ UserModel=mymodel.dll: UserModel=mymodel.dll may name a user-written "
            "model: a library OpenDSS would load and run"
        ),
        f"  master.dss line 8: Redirect not_there.dss: file not found: {tmp_path / 'not_there.dss'}",
    ]


def test_what_a_later_command_may_change_is_left_to_the_engine(tmp_path: Path) -> None:
    """A scan can only miss a refusal, never invent one: an element a later command names, one
    defined with an enabled property, and one of a circuit a Clear discards are not settled."""
    master = _write(
        tmp_path,
        {
            "master.dss": "New Circuit.old\nNew ExpControl.gone\nClear\n"
            + HEAD
            + "New ExpControl.e1\n"
            + "New ExpControl.e2 enabled=yes\n"
            + "New InvControl.i1\n"
            + "~ mode=voltvar\n"
            + "Edit ExpControl.e1 deltaQ_factor=0.3\n",
        },
    )
    found = scan(master).definitions
    assert "expcontrol.gone" not in found
    assert {e: d.settled for e, d in found.items() if e.split(".")[0] in ("expcontrol", "invcontrol")} == {
        "expcontrol.e1": False,
        "expcontrol.e2": False,
        "invcontrol.i1": True,
    }
    assert (found["invcontrol.i1"].line, found["invcontrol.i1"].properties) == (9, "mode=voltvar")


DUPLICATE = (
    HEAD
    + "New Load.l bus1=b phases=3 kV=12.47 kW=2000 kvar=800 model=1\n"
    + "New Load.l bus1=b phases=3 kV=12.47 kW=9000 kvar=800 model=1\n"  # line 5: the engine warns, keeps the first
    + "New Load.l2 bus1=b.1 phases=1 kV=7.2 kW=300 kvar=100 model=1\n"
    + TAIL
)


def test_an_opendss_warning_is_read_past_and_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A duplicate ``New`` (GRIDAPPSD's IEEE 123 PV feeder has one): OpenDSS warns and ignores it;
    the file reads on, to its last line, and the warning is logged with the file and line."""
    master = _write(tmp_path, {"master.dss": DUPLICATE})
    with caplog.at_level(logging.WARNING, logger="openg2g.grid.feeder.opendss"):
        model = read_opendss(master)
    assert [(ld.name, ld.kw) for ld in model.loads] == [("l", 2000.0), ("l2", 300.0)]
    [record] = caplog.records
    assert record.getMessage() == (
        f'{master}: OpenDSS warning, read on past it: Warning: Duplicate new element definition: "Load.l". '
        f'Element being redefined. [file: "{master}", line: 5]'
    )


@pytest.mark.slow
def test_a_file_read_past_its_warning_matches_opendss(tmp_path: Path) -> None:
    check = crosscheck(_write(tmp_path, {"master.dss": DUPLICATE}))
    assert check.max_dv_pu < 1e-8, check


@pytest.mark.slow
def test_an_error_after_a_warning_is_still_an_error(tmp_path: Path) -> None:
    master = _write(tmp_path, {"master.dss": DUPLICATE.replace("kW=300", "kW=300 kvv=3")})
    with pytest.raises(
        FeederError, match=r'OpenDSS: Unknown parameter "kvv" .*\(the file read on past the warning: Warning: Duplicate'
    ):
        read_opendss(master)
