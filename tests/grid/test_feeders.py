"""The feeder library: bundled names, the Feeder object, the OpenDSS importer and its errors."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pandapower as pp
import pytest

from openg2g.core.errors import FeederError
from openg2g.grid.feeder.crosscheck import crosscheck
from openg2g.grid.feeder.library import DATA_DIR, list_feeders, load_feeder
from openg2g.grid.feeder.model import FeederModel
from tests.fit_noise import assert_close

BUNDLED = ["ieee123", "ieee13", "ieee34", "ieee37", "ieee8500", "openg2g-ieee123", "openg2g-ieee13", "openg2g-ieee34"]


def test_list_feeders() -> None:
    assert list_feeders() == BUNDLED


def test_unknown_feeder_lists_valid_names() -> None:
    with pytest.raises(FeederError, match="ieee13.*openg2g-ieee123|openg2g-ieee123.*ieee13"):
        load_feeder("ieee14")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "ieee8500" else n for n in BUNDLED])
def test_feeder_contents(name: str) -> None:
    f = load_feeder(name)
    assert f.name == name
    assert isinstance(f.net, pp.pandapowerNet)
    assert len(f.net.bus) == len(f.bus_phases)
    assert len(f.net.line) == len(f.lines) == len(f.net.line_phase)
    assert set(f.coords) <= set(f.bus_phases)
    assert all(set(ph) <= {"a", "b", "c"} and ph for ph in f.bus_phases.values())
    assert f.regulators and all(r.min_tap == -16 and r.max_tap == 16 for r in f.regulators.values())
    assert all(r.step_pu == pytest.approx(0.00625) for r in f.regulators.values())


def test_ieee13_banks_and_elements() -> None:
    for name in ("ieee13", "openg2g-ieee13"):
        f = load_feeder(name)
        assert list(f.regulators) == ["reg1"]
        assert f.regulators["reg1"].phases == ("a", "b", "c")
    f = load_feeder("ieee13")
    assert f.capacitors == ("cap1", "cap2")
    assert f.bus_phases["611"] == ("c",) and f.bus_phases["645"] == ("b", "c")
    assert f.bus_phases["671"] == ("a", "b", "c")
    assert f.coords["671"] == (200.0, 100.0)
    assert "671692" in f.lines
    assert load_feeder("openg2g-ieee13").capacitors == ()


@pytest.mark.slow
def test_ieee123_single_phase_regulators() -> None:
    f = load_feeder("ieee123")
    assert f.regulators["reg2"].phases == ("a",)
    assert f.regulators["reg3"].phases == ("a", "c")
    assert f.regulators["reg4"].phases == ("a", "b", "c")
    assert set(f.net.regulator.bank) == {"reg1", "reg2", "reg3", "reg4"}


def test_bundled_artifact_round_trip() -> None:
    data = json.loads((DATA_DIR / "ieee13.json").read_text())
    model = FeederModel.from_dict(data["feeder"])
    assert FeederModel.from_dict(model.to_dict()) == model
    assert (DATA_DIR / "PROVENANCE.md").read_text().count("Apache-2.0") >= 1


def _refuse_constant(name: str) -> float:
    raise AssertionError(f"{name} in a bundled feeder file: not standard JSON")


@pytest.mark.parametrize("name", list_feeders())
def test_bundled_artifacts_are_standard_json(name: str) -> None:
    path = DATA_DIR / f"{name}.json"
    text = path.read_text() if path.is_file() else gzip.decompress(path.with_suffix(".json.gz").read_bytes()).decode()
    json.loads(text, parse_constant=_refuse_constant)


def test_a_length_without_unit_is_null_in_the_file_and_nan_in_the_model() -> None:
    """IEEE 13's switch 671692 is given without ``units``: its length in km is unknown, not 0; the
    file's number (OpenDSS's 0.001 of a switch) is kept apart, and a line of known unit has none."""
    data = json.loads((DATA_DIR / "ieee13.json").read_text())
    [switch] = [ln for ln in data["feeder"]["lines"] if ln["name"] == "671692"]
    assert switch["length_km"] is None and switch["length_unitless"] == 0.001
    model = FeederModel.from_dict(data["feeder"])
    [line] = [ln for ln in model.lines if ln.name == "671692"]
    assert np.isnan(line.length_km) and line.length_unitless == 0.001
    [written] = [ln for ln in model.to_dict()["lines"] if ln["name"] == "671692"]
    assert written["length_km"] is None and written["length_unitless"] == 0.001
    [other] = [ln for ln in model.to_dict()["lines"] if ln["name"] == "650632"]
    assert other["length_km"] == pytest.approx(2000 * 0.3048e-3) and "length_unitless" not in other


def test_load_feeder_returns_independent_copies() -> None:
    a, b = load_feeder("ieee13"), load_feeder("ieee13")
    a.model.loads[0].kw = 0.0
    assert b.model.loads[0].kw != 0.0


TWO_BUS = """\
Clear
New Circuit.tiny basekv=12.47 pu=1.0 bus1=src  ! stiff source
New Line.l1 Bus1=src Bus2=load phases=3 r1=0.1 x1=0.2 r0=0.3 x0=0.6 c1=0 c0=0 length=2 units=km
~ switch=n
/* a block
   comment */
New Load.ld Bus1=load phases=3 conn=wye kV=12.47 kW=(300 2 *) kvar=200 model=1
Set VoltageBases=[12.47]
CalcVoltageBases
"""


def test_import_a_dss_file(tmp_path: Path) -> None:
    master = tmp_path / "tiny.dss"
    master.write_text(TWO_BUS.replace("\n", "\r\n"))
    f = load_feeder(str(master))
    assert f.name == "tiny"
    assert f.bus_phases == {"src": ("a", "b", "c"), "load": ("a", "b", "c")}
    assert f.model.loads[0].kw == 600.0
    assert f.model.lines[0].r_ohm[0][0] == pytest.approx((2 * 0.1 + 0.3) / 3 * 2)


@pytest.mark.slow
def test_a_file_named_by_a_command_is_found_beside_the_master(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenDSS's ``uuids`` looks for its file in the working folder only (IEEE 9500 names one): it
    is found beside the master from any working folder, and the working folder is left as it was."""
    feeder_dir = tmp_path / "feeder"
    feeder_dir.mkdir()
    (feeder_dir / "ids.dss").write_text("Line.l1\t98490024-C44C-4359-8F78-E2F621B31337\n")
    (feeder_dir / "tiny.dss").write_text(TWO_BUS + "uuids ids.dss\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_feeder(str(feeder_dir / "tiny.dss")).bus_phases["load"] == ("a", "b", "c")
    assert Path.cwd() == elsewhere
    assert sorted(p.name for p in feeder_dir.iterdir()) == ["ids.dss", "tiny.dss"]


@pytest.mark.slow
def test_a_feeder_without_loads_solves_quietly(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """No ports, nothing to factorize: the no-load voltages, equal to OpenDSS's, and no LAPACK
    complaint about an empty matrix (DG_Protection of the OpenDSS collection printed one)."""
    pytest.importorskip("opendssdirect")
    master = tmp_path / "noload.dss"
    master.write_text("\n".join(line for line in TWO_BUS.splitlines() if not line.startswith("New Load")) + "\nSolve\n")
    check = crosscheck(master)
    assert check.max_dv_pu < 1e-8, check
    out, err = capfd.readouterr()
    assert "DGETRF" not in out + err  # LAPACK writes to standard output


@pytest.mark.slow
@pytest.mark.parametrize(
    ("machine", "when"),
    [
        ("", " \\(found before OpenDSS ran the file, whose reading may show more\\)"),
        (" enabled=no\nIndMach012.m1.enabled=yes", ""),
    ],
    ids=["before", "after"],
)
def test_an_element_openg2g_does_not_model_is_refused_by_name(tmp_path: Path, machine: str, when: str) -> None:
    """An induction machine, refused with its file and line: before the engine runs the file, or
    after it when a later command may change it (here, enable it)."""
    master = tmp_path / "bad.dss"
    master.write_text(TWO_BUS + f"New IndMach012.m1 bus1=load kV=12.47 kW=100{machine}\n")
    with pytest.raises(FeederError) as refused:
        load_feeder(str(master))
    head, line = str(refused.value).splitlines()
    assert re.search(rf"bad\.dss: openg2g cannot model 1 element of this circuit{when}; ", head), head
    assert line.startswith("  bad.dss line 10: indmach012.m1: an induction machine: its current follows its slip")


@pytest.mark.slow
def test_an_unknown_property_is_the_engine_s_error_with_file_and_line(tmp_path: Path) -> None:
    master = tmp_path / "bad.dss"
    master.write_text(TWO_BUS.replace("model=1", "model=1 kvv=4"))
    with pytest.raises(FeederError, match=r"bad\.dss: OpenDSS: .*kvv.*bad\.dss\", line: 7\]"):
        load_feeder(str(master))


@pytest.mark.slow
def test_a_load_model_openg2g_does_not_solve_is_refused_by_name(tmp_path: Path) -> None:
    master = tmp_path / "bad.dss"
    master.write_text(TWO_BUS.replace("model=1", "model=8 zipv=[1 0 0 1 0 0 0.9]"))
    with pytest.raises(FeederError, match=r"\n  bad\.dss line 7: load\.ld: load model 8 is not supported"):
        load_feeder(str(master))


@pytest.mark.slow
@pytest.mark.parametrize("band", ["vminpu=0.99 vmaxpu=1.1", "vminpu=0.9 vmaxpu=0.95"], ids=["below", "above"])
def test_a_generator_outside_its_voltage_band_is_the_impedance_opendss_makes_it(tmp_path: Path, band: str) -> None:
    """At 0.97 pu, outside [vminpu, vmaxpu], an OpenDSS model-1 generator turns into the admittance
    that delivers its rating at the band's edge (Yeq / vminpu^2, Yeq / vmaxpu^2): no low band of
    nominal admittance as a load has. Before this was matched, below the band was 1.5e-4 pu off."""
    pytest.importorskip("opendssdirect")
    master = tmp_path / "gen.dss"
    master.write_text(
        TWO_BUS.replace("r1=0.1 x1=0.2", "r1=0.5 x1=1.0").replace("kW=(300 2 *)", "kW=3000 kvar=1000 vminpu=0.5")
        + f"New Generator.g1 bus1=load phases=3 kV=12.47 kW=500 kvar=100 model=1 {band}\nSolve\n"
    )
    check = crosscheck(master)
    assert check.max_dv_pu < 1e-8, check


def test_missing_file() -> None:
    with pytest.raises(FeederError, match="not found"):
        load_feeder("no/such/master.dss")


def test_pandapower_net_saves_and_loads(tmp_path: Path) -> None:
    net = load_feeder("ieee13").net
    assert set(net.bus.phases) <= {"a", "b", "c", "ab", "ac", "bc", "abc"}
    pp.to_json(net, str(tmp_path / "ieee13.json"))
    back = pp.from_json(str(tmp_path / "ieee13.json"))
    assert list(back.regulator.transformer) == ["reg1", "reg2", "reg3"]
    np.testing.assert_allclose(back.line_phase.r_ohm.iloc[0], net.line_phase.r_ohm.iloc[0], rtol=1e-12)


@pytest.mark.slow
def test_build_reproduces_bundled_artifacts(tmp_path: Path) -> None:
    """The committed feeders are what the build makes from the sources, to the last digits a
    small LAPACK inversion (a source's sequence impedances) may change from host to host."""
    from openg2g.grid.feeder.build import SOURCES, build_feeders
    from tests.grid.conftest import shared_data

    written = build_feeders(shared_data(), tmp_path)
    assert {p.name.split(".")[0] for p in written} == set(SOURCES) | {"PROVENANCE"}
    for path in written:
        committed = DATA_DIR / path.name
        if path.suffix == ".md":
            assert path.read_text() == committed.read_text()
            continue
        read = (lambda p: gzip.decompress(p.read_bytes())) if path.suffix == ".gz" else Path.read_bytes
        assert_close(json.loads(read(path)), json.loads(read(committed)), path.name, rtol=1e-12)
