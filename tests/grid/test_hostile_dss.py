"""Malformed variants of the bundled IEEE 13 OpenDSS feeder: each must fail with a
:class:`FeederError` naming the file and line (and the element and property where there is
one) and saying what is wrong: never a traceback, never accepted. Each case edits the real
feeder file (``IEEE13Nodeckt.dss``) in a temporary copy, then reads it and solves it once."""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

import pytest

from openg2g.core.errors import FeederError, G2GError
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.scenario.schema import GridSpec
from tests.grid.conftest import shared_feeders

MASTER = "IEEE13Nodeckt.dss"

Edit = tuple[str, ...]
"""("sub", old, new): replace the first ``old`` in the master; ("add", text): add lines before
its ``Set Voltagebases``; ("file", name, text): write another file beside it."""

LOAD_671 = "New Load.671 Bus1=671.1.2.3  Phases=3 Conn=Delta Model=1 kV=4.16   kW=1155 kvar=660"
LINE_650632 = "LineCode=mtx601 Length=2000 units=ft"
XFM1 = "New Transformer.XFM1  Phases=3   Windings=2  XHL=2"
CAP1 = "New Capacitor.Cap1 Bus1=675 phases=3 kVAR=600 kV=4.16"
REG1 = "new regcontrol.Reg1  transformer=Reg1 winding=2  vreg=122  band=2  ptratio=20 ctprim=700  R=3   X=9"
SOURCE = "~ MVAsc3=20000 MVASC1=21000"


def sub(old: str, new: str) -> Edit:
    return ("sub", old, new)


def load(props: str) -> Edit:
    return sub(LOAD_671, f"{LOAD_671} {props}")


def line(props: str) -> Edit:
    return sub(LINE_650632, f"{LINE_650632} {props}")


CASES: list[tuple[str, list[Edit], str]] = [
    # in-line RPN arithmetic and numbers
    ("rpn_div_zero", [line("length=(1 0 /)")], r"line\.650632: length=\(1 0 /\): RPN .*division by zero"),
    ("rpn_overflow", [load("kW=(10 400 ^)")], r"load\.671: kw=\(10 400 \^\): RPN .*too large"),
    ("rpn_underflow", [line("length=(1 +)")], r"length=\(1 \+\): RPN .*needs 2 operand"),
    ("rpn_leftover", [line("length=(1 2)")], r"leaves 2 values"),
    ("rpn_sqrt_negative", [line("length=(-4 sqrt)")], r"sqrt of a negative number"),
    ("rpn_word", [line("length=(1 x /)")], r"'x' is not a number"),
    ("number_word", [load("kW=lots")], r"load\.671: kw=lots: .*not a number"),
    ("number_nan", [load("kW=nan")], r"kw=nan: 'nan' is not a finite number"),
    ("number_inf", [load("kvar=inf")], r"kvar=inf: 'inf' is not a finite number"),
    ("rpn_inf", [load("kW=(1e308 10 *)")], r"kw=\(1e308 10 \*\): .*not a finite number"),
    # loads
    ("load_pf_zero", [sub("kW=1155 kvar=660", "kW=1155 pf=0")], r"load\.671: pf=0: a power factor"),
    ("load_pf_two", [sub("kW=1155 kvar=660", "kW=1155 pf=2")], r"load\.671: pf=2: a power factor"),
    ("load_kv_zero", [load("kV=0")], r"load\.671: kv=0: must be > 0"),
    ("load_kv_negative", [load("kV=-4.16")], r"kv=-4.16: must be > 0"),
    ("load_phases_zero", [load("phases=0")], r"load\.671: phases=0: must be one of 1, 2, 3"),
    ("load_phases_four", [load("phases=4")], r"phases=4: must be one of 1, 2, 3"),
    ("load_phases_fraction", [load("phases=1.5")], r"phases=1.5: must be a whole number"),
    ("load_model_three", [load("model=3")], r"load model 3 is not supported"),
    ("load_vminpu_zero", [load("vminpu=0")], r"vminpu=0: must be > 0"),
    ("load_vmin_above_vmax", [load("vminpu=1.1 vmaxpu=1.05")], r"vminpu 1.1 must be below vmaxpu 1.05"),
    ("load_vlowpu_negative", [load("vlowpu=-1")], r"vlowpu=-1: must be >= 0"),
    ("load_conn_bad", [load("conn=star")], r"unknown connection 'star'"),
    ("load_node_five", [sub("Bus1=671.1.2.3  Phases=3 Conn=Delta", "Bus1=671.1.2.5  Phases=3 Conn=Delta")], r"node 5"),
    ("load_bus_word_node", [sub("New Load.634a Bus1=634.1", "New Load.634a Bus1=634.a")], r"node 'a' is not a node"),
    ("load_no_bus", [("add", "New Load.lost kW=10")], r"load\.lost: no bus given"),
    ("load_orphan_bus", [("add", "New Load.far Bus1=nowhere.1 phases=1 kV=2.4 kW=10")], r"not connected.*nowhere"),
    ("load_unknown_property", [load("zipv=[1 0 0 1 0 0 0.9]")], r"unsupported property 'zipv'"),
    ("load_duplicate", [("add", LOAD_671)], r"load\.671 is defined twice \(first at .*IEEE13Nodeckt\.dss:\d+\)"),
    ("load_like_unknown", [("add", "New Load.x like=nothing")], r"like=nothing names no earlier load"),
    # lines
    ("line_negative_length", [line("length=-100")], r"line\.650632: length=-100: must be > 0"),
    ("line_zero_length", [line("length=0")], r"length=0: must be > 0"),
    (
        "line_bus2_bad_nodes",
        [sub("Bus2=632.1.2.3  LineCode=mtx601 Length=2000", "Bus2=b1.x.y  LineCode=mtx601 Length=2000")],
        r"bus2=b1\.x\.y: bus 'b1\.x\.y': node 'x'",
    ),
    ("line_bus_empty", [line("bus1=.1.2.3")], r"bus '\.1\.2\.3' has no name"),
    ("line_phases_zero", [line("phases=0")], r"line\.650632: phases=0: must be one of 1, 2, 3"),
    ("line_phases_mismatch", [line("phases=2")], r"line\.650632: 2 phases but 3x3"),
    (
        "line_zero_impedance",
        [("add", "New Line.z0 Bus1=680 Bus2=z0bus r1=0 x1=0 r0=0 x0=0 c1=0 c0=0 length=1")],
        r"line\.z0: zero or singular impedance",
    ),
    (
        "line_zero_matrix",
        [("add", "New Line.zm Bus1=680.1 Bus2=zm.1 phases=1 rmatrix=[0] xmatrix=[0] length=1")],
        r"line\.zm: zero or singular impedance",
    ),
    (
        "line_negative_r1",
        [("add", "New Line.nr Bus1=680 Bus2=nr r1=-1 x1=1 length=1")],
        r"line\.nr: r1=-1: must be >= 0",
    ),
    (
        "line_self_loop",
        [("add", "New Line.loop Bus1=680 Bus2=680 r1=1 x1=1 length=1")],
        r"line\.loop: bus1 and bus2 are the same bus '680'",
    ),
    ("line_unknown_linecode", [line("linecode=nosuch")], r"unknown linecode 'nosuch'"),
    ("line_unknown_unit", [line("units=furlong")], r"unknown length unit 'furlong'"),
    (
        "line_matrix_ragged",
        [("add", "New Linecode.rag nphases=2 rmatrix=(1 | 2 3 4)")],
        r"linecode\.rag: rmatrix=.*bad matrix row",
    ),
    (
        "line_matrix_word",
        [("add", "New Linecode.w nphases=1 rmatrix=(abc)")],
        r"linecode\.w: rmatrix=\(abc\): 'abc' is not a number",
    ),
    ("line_no_bus", [("add", "New Line.nb Bus1=680 r1=1 x1=1")], r"line\.nb: no bus given"),
    ("line_edit_undefined", [("add", "Edit Line.ghost length=1")], r"line\.ghost is edited before it is defined"),
    (
        "linecode_nphases_zero",
        [("add", "New Linecode.np nphases=0")],
        r"linecode\.np: nphases=0: must be one of 1, 2, 3",
    ),
    # transformers and regulators
    (
        "xfm_kvs_zero",
        [sub("~ Buses=[650.1 RG60.1] kVs=[2.4  2.4]", "~ Buses=[650.1 RG60.1] kVs=[0 0]")],
        r"transformer\.reg1: kvs=\[0 0\]: every value must be > 0",
    ),
    ("xfm_kv_zero", [sub(XFM1, f"{XFM1} wdg=2 kv=0")], r"transformer\.xfm1: kv=0: must be > 0"),
    ("xfm_kva_zero", [sub(XFM1, f"{XFM1} kva=0")], r"kva=0: must be > 0"),
    (
        "xfm_zero_impedance",
        [("add", "New Transformer.tz phases=1 buses=[680.1 tz.1] kvs=[2.4 2.4] xhl=0 %rs=[0 0]")],
        r"transformer\.tz: zero impedance",
    ),
    ("xfm_negative_r", [sub(XFM1, f"{XFM1} %r=-1")], r"%r=-1: must be >= 0"),
    ("xfm_phases_two", [sub(XFM1, XFM1.replace("Phases=3", "Phases=2"))], r"phases=2: must be one of 1, 3"),
    ("xfm_windings_three", [sub(XFM1, XFM1.replace("Windings=2", "Windings=3"))], r"only two-winding"),
    (
        "xfm_numtaps_zero",
        [sub("New Transformer.Reg1 phases=1", "New Transformer.Reg1 phases=1 numtaps=0")],
        r"numtaps=0: must be >= 1",
    ),
    (
        "xfm_taps_inverted",
        [sub("New Transformer.Reg1 phases=1", "New Transformer.Reg1 phases=1 maxtap=0.9 mintap=1.1")],
        r"maxtap 0.9 must exceed mintap 1.1",
    ),
    ("xfm_bus_bad", [sub(XFM1, f"{XFM1} wdg=1 bus=633.q")], r"node 'q'"),
    (
        "reg_ptratio_zero",
        [sub(REG1, REG1.replace("ptratio=20", "ptratio=0"))],
        r"regcontrol\.reg1: ptratio=0: must be > 0",
    ),
    ("reg_band_negative", [sub(REG1, REG1.replace("band=2", "band=-2"))], r"band=-2: must be > 0"),
    ("reg_ptphase_four", [sub(REG1, f"{REG1} ptphase=4")], r"ptphase=4: must be one of 1, 2, 3"),
    (
        "reg_unknown_transformer",
        [sub(REG1, REG1.replace("transformer=Reg1", "transformer=RegX"))],
        r"unknown transformer 'regx'",
    ),
    ("reg_winding_one", [sub(REG1, REG1.replace("winding=2", "winding=1"))], r"only winding=2"),
    # capacitors
    ("cap_kv_zero", [sub(CAP1, CAP1.replace("kV=4.16", "kV=0"))], r"capacitor\.cap1: kv=0: must be > 0"),
    ("cap_phases_zero", [sub(CAP1, CAP1.replace("phases=3", "phases=0"))], r"phases=0: must be one of 1, 2, 3"),
    ("cap_multistep", [sub(CAP1, CAP1.replace("kVAR=600", "kVAR=[300 300]"))], r"multi-step capacitors"),
    # source and options
    ("source_mvasc3_zero", [sub(SOURCE, "~ MVAsc3=0 MVASC1=21000")], r"circuit\.ieee13nodeckt: mvasc3=0: must be > 0"),
    ("source_mvasc1_negative", [sub(SOURCE, "~ MVAsc3=20000 MVASC1=-1")], r"mvasc1=-1: must be > 0"),
    ("source_x1r1_zero", [sub(SOURCE, f"{SOURCE} x1r1=0")], r"x1r1=0: must be > 0"),
    ("source_pu_zero", [sub(SOURCE, f"{SOURCE} pu=0")], r"pu=0: must be > 0"),
    ("source_basekv_word", [sub(SOURCE, f"{SOURCE} basekv=high")], r"basekv=high: 'high' is not a number"),
    ("source_zero_impedance", [sub(SOURCE, "~ r1=0 x1=0 r0=0 x0=0")], r"zero source impedance"),
    ("source_two_phases", [sub(SOURCE, f"{SOURCE} phases=2")], r"only a three-phase source"),
    (
        "linecode_basefreq_zero",
        [sub("New linecode.mtx601 nphases=3 BaseFreq=60", "New linecode.mtx601 nphases=3 BaseFreq=0")],
        r"linecode\.mtx601: basefreq=0: must be > 0",
    ),
    (
        "linecode_basefreq_other",
        [sub("New linecode.mtx601 nphases=3 BaseFreq=60", "New linecode.mtx601 nphases=3 BaseFreq=50")],
        r"line\.650632: impedances given at basefreq 50 Hz but the circuit runs at 60 Hz",
    ),
    ("load_basefreq_negative", [load("basefreq=-60")], r"load\.671: basefreq=-60: must be > 0"),
    ("basefrequency_zero", [("add", "Set basefrequency=0")], r"Set basefrequency=0: must be > 0"),
    ("basefrequency_negative", [("add", "Set defaultbasefrequency=-60")], r"defaultbasefrequency=-60: must be > 0"),
    (
        "voltagebases_word",
        [sub("Set Voltagebases=[115, 4.16, .48]", "Set Voltagebases=[abc]")],
        r"Set voltagebases=\[abc\]: 'abc' is not a number",
    ),
    (
        "voltagebases_zero",
        [sub("Set Voltagebases=[115, 4.16, .48]", "Set Voltagebases=[115 0]")],
        r"every voltage base must be > 0",
    ),
    ("setbusxy_word", [("add", "SetBusXY bus=650 x=left y=1")], r"SetBusXY: 'left' is not a number"),
    ("setbusxy_missing", [("add", "SetBusXY bus=650")], r"SetBusXY needs bus=, x= and y="),
    # commands and files
    (
        "redirect_self",
        [("add", f"Redirect {MASTER}")],
        r"IEEE13Nodeckt\.dss:\d+: redirect cycle: IEEE13Nodeckt\.dss -> IEEE13Nodeckt\.dss",
    ),
    (
        "redirect_cycle",
        [("add", "Redirect a.dss"), ("file", "a.dss", "Redirect b.dss\n"), ("file", "b.dss", "Redirect a.dss\n")],
        r"b\.dss:1: redirect cycle: IEEE13Nodeckt\.dss -> a\.dss -> b\.dss -> a\.dss",
    ),
    ("redirect_missing", [("add", "Redirect nosuch.dss")], r"redirected file 'nosuch\.dss' not found"),
    ("redirect_no_name", [("add", "Redirect")], r"Redirect needs a file name"),
    ("redirect_directory", [("add", "Redirect sub"), ("file", "sub/x.dss", "")], r"'sub' is a directory"),
    ("buscoords_directory", [("add", "Buscoords sub"), ("file", "sub/x.csv", "")], r"'sub' is a directory"),
    ("buscoords_no_name", [("add", "Buscoords")], r"Buscoords needs a file name"),
    ("unknown_command", [("add", "Frobnicate now")], r"unsupported OpenDSS command 'Frobnicate'"),
    ("not_dss_text", [("add", "root:x:0:0:root:/root:/bin/bash")], r"dss:\d+: not an OpenDSS command \(is this"),
    ("unknown_element", [("add", "New PVSystem.pv1 bus1=675 kva=100")], r"unsupported element pvsystem\.pv1"),
    (
        "continuation_first",
        [("file", "c.dss", "~ kw=1\n"), ("add", "Redirect c.dss")],
        r"c\.dss:1: continuation line with nothing to continue",
    ),
    ("new_without_element", [("add", "New")], r"New without an element"),
    ("dotted_edit_short", [("add", "Line.length=5")], r"cannot read 'Line\.length=5'"),
]


def _feeder(tmp_path: Path, edits: list[Edit]) -> Path:
    folder = tmp_path / "ieee13"
    shutil.copytree(shared_feeders() / "ieee13-published", folder)
    master = folder / MASTER
    text = master.read_text()
    for edit in edits:
        if edit[0] == "sub":
            assert edit[1] in text, f"the case's anchor {edit[1]!r} is not in {MASTER}"
            text = text.replace(edit[1], edit[2], 1)
        elif edit[0] == "add":
            text = text.replace("Set Voltagebases", f"{edit[1]}\nSet Voltagebases", 1)
        else:
            extra = folder / edit[1]
            extra.parent.mkdir(parents=True, exist_ok=True)
            extra.write_text(edit[2])
    master.write_text(text)
    return master


def test_the_unedited_copy_reads_and_solves(tmp_path: Path) -> None:
    """The harness itself: with no edit the copy is a valid feeder."""
    master = _feeder(tmp_path, [])
    state = FeederGrid.from_spec(GridSpec(feeder=str(master)), [], tmp_path).solve(0.0, {}, 1.0)
    assert state.converged and 0.9 < min(state.v_pu) < max(state.v_pu) < 1.1


@pytest.mark.parametrize(("edits", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_feeder_file_is_refused_clearly(tmp_path: Path, edits: list[Edit], fragment: str) -> None:
    master = _feeder(tmp_path, edits)
    with pytest.raises(FeederError) as info:
        FeederGrid.from_spec(GridSpec(feeder=str(master)), [], tmp_path).solve(0.0, {}, 1.0)
    msg = str(info.value)
    assert re.search(fragment, msg, flags=re.IGNORECASE), msg
    assert re.search(r"\.dss:\d+|\.dss: ", msg), f"no file:line in {msg!r}"


HOSTILE_VALUES = [
    "0",
    "-1",
    "nan",
    "inf",
    "abc",
    "(1 0 /)",
    "(1e300 1e300 *)",
    "",
    ".",
    "1.5",
    "[0 0]",
    "(",
    "1e400",
    "x.y",
]
"""Values the mutation cases write over randomly chosen ``name=value`` properties."""


@pytest.mark.parametrize("seed", range(60))
def test_mutated_feeder_reads_or_is_refused_clearly(tmp_path: Path, seed: int) -> None:
    """Seeded random mutations (one to three property values replaced by hostile ones): each
    variant either reads and solves, or fails with a :class:`G2GError` naming the file."""
    rng = random.Random(seed)
    master = _feeder(tmp_path, [])
    text = master.read_text()
    for _ in range(rng.randint(1, 3)):
        value = rng.choice(list(re.finditer(r"=\s*([^\s=]+)", text)))
        text = text[: value.start(1)] + rng.choice(HOSTILE_VALUES) + text[value.end(1) :]
    master.write_text(text)
    try:
        FeederGrid.from_spec(GridSpec(feeder=str(master)), [], tmp_path).solve(0.0, {}, 1.0)
    except G2GError as exc:
        assert re.search(r"\.dss:\d+|\.dss: ", str(exc)), f"no file:line in {exc}"
