"""Measured GPU power: the held signal's averages by hand, a growing log file tailed by a sampler,
refusals of meters that cannot be read, and a sampler that notices a meter that stopped."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from openg2g.datacenter.live.meters import FilePower, NvmlPower, ZeusdPower, power_source
from openg2g.datacenter.live.power import PowerHistory, PowerSampler, PowerSourceError


def _wait_for(condition, timeout_s: float = 2.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


# --- PowerHistory ---------------------------------------------------------------------------------


def test_mean_is_the_held_signals_average():
    history = PowerHistory(["0"])
    history.add("0", 0.0, 100.0)
    history.add("0", 1.0, 300.0)
    assert history.mean_w("0", 0.0, 4.0) == pytest.approx(250.0)  # 100 W for 1 s, 300 W for 3 s
    assert history.mean_w("0", 0.5, 2.0) == pytest.approx((100 * 0.5 + 300 * 1.0) / 1.5)
    assert history.mean_w("0", 2.0, 3.0) == pytest.approx(300.0)  # the last sample holds on
    assert history.mean_w("0", -2.0, 0.5) == pytest.approx(100.0)  # before the first: the first's value
    assert history.mean_w("0", -1.0, 1.0) == pytest.approx(100.0)
    assert history.mean_w("0", 0.0, 1.0) == pytest.approx(100.0)  # a sample holds until the next
    history.add("0", 4.0, 0.0)
    assert history.mean_w("0", 0.0, 5.0) == pytest.approx((100 + 900 + 0) / 5)


def test_held_value_and_latest():
    history = PowerHistory(["0", "1"])
    assert history.latest("0") is None
    history.add("0", 10.0, 50.0)
    history.add("0", 12.0, 70.0)
    assert [history.at_w("0", t) for t in (9.0, 10.0, 11.9, 12.0, 99.0)] == [50.0, 50.0, 50.0, 70.0, 70.0]
    assert history.mean_w("0", 11.0, 11.0) == 50.0
    assert history.latest("0") == (12.0, 70.0)
    with pytest.raises(PowerSourceError, match="GPU 1 has no power sample"):
        history.mean_w("1", 0.0, 1.0)
    with pytest.raises(PowerSourceError, match="GPU 7 is not metered; the metered GPUs are 0, 1"):
        history.add("7", 0.0, 1.0)
    with pytest.raises(PowerSourceError, match="earlier than the last one"):
        history.add("0", 11.0, 1.0)


def test_horizon_keeps_the_sample_holding_at_its_start():
    history = PowerHistory(["0"], horizon_s=10.0)
    for t in range(21):
        history.add("0", float(t), float(t))  # t W from t s on
    assert history.mean_w("0", 10.0, 12.0) == pytest.approx(10.5)
    assert history.at_w("0", 10.5) == 10.0
    with pytest.raises(PowerSourceError, match="samples kept start at 10.000 s"):
        history.mean_w("0", 5.0, 12.0)


# --- FilePower ------------------------------------------------------------------------------------


def test_wide_file_read_line_by_line_a_partial_line_waits(tmp_path: Path):
    path = tmp_path / "power.csv"
    path.write_text("time_s,0,1,note\n100.0,100,200,x\n100.5,1")
    source = FilePower(path)
    source.open(["1", "0"])
    try:
        before = time.monotonic()
        first = source.poll()
        assert [(gpu, w) for gpu, _, w in first] == [("1", 200.0), ("0", 100.0)]
        t_first = first[0][1]
        assert before <= t_first <= time.monotonic()  # the newest row read first is taken as now
        assert source.poll() == []
        with path.open("a") as f:
            f.write("10,210,y\n\n101.5,120,220,z\n")
        rows = source.poll()
        assert [(gpu, w) for gpu, _, w in rows] == [("1", 210.0), ("0", 110.0), ("1", 220.0), ("0", 120.0)]
        assert [t - t_first for _, t, _ in rows] == pytest.approx([0.5, 0.5, 1.5, 1.5])  # the file's own clock
    finally:
        source.close()


def test_long_file_skips_other_gpus(tmp_path: Path):
    path = tmp_path / "power.csv"
    path.write_text("time_s,gpu,power_w\n0,0,100\n0,2,999\n0,1,200\n1,0,150\n")
    source = FilePower(path)
    source.open(["0", "1"])
    rows = source.poll()
    source.close()
    assert [(gpu, w) for gpu, _, w in rows] == [("0", 100.0), ("1", 200.0), ("0", 150.0)]
    assert rows[2][1] - rows[0][1] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("0,100\n1,abc\n", r"power\.csv, line 3, field 0: 'abc' is not a number"),
        ("0,100\n1,-5\n", r"line 3, field 0: -5 W is negative"),
        ("0,100\n1,100,7\n", r"line 3: 3 fields, the header has 2"),
        ("2,100\n1,100\n", r"line 3, field time_s: 1 is earlier than the row before \(2\)"),
        ("nan,100\n", r"line 2, field time_s: 'nan' is not finite"),
    ],
)
def test_bad_row_is_refused_naming_line_and_field(tmp_path: Path, rows: str, message: str):
    path = tmp_path / "power.csv"
    path.write_text("time_s,0\n" + rows)
    source = FilePower(path)
    source.open(["0"])
    with pytest.raises(PowerSourceError, match=message):
        source.poll()
    source.close()


def test_file_refusals_at_open(tmp_path: Path):
    missing = tmp_path / "absent.csv"
    with pytest.raises(
        PowerSourceError, match=r"power file .*absent\.csv: does not exist, so GPUs 0, 1 cannot be read"
    ):
        FilePower(missing).open(["0", "1"])
    path = tmp_path / "power.csv"
    path.write_text("time_s,0\n")
    with pytest.raises(PowerSourceError, match=r"power\.csv: no column for GPU 1 \(the header has time_s, 0;"):
        FilePower(path).open(["0", "1"])
    path.write_text("t,0\n")
    with pytest.raises(PowerSourceError, match="line 1: no time_s column"):
        FilePower(path).open(["0"])
    path.write_text("time_s,0")
    with pytest.raises(PowerSourceError, match="has no header row yet"):
        FilePower(path).open(["0"])


def test_sampler_collects_a_file_another_thread_writes(tmp_path: Path):
    path = tmp_path / "power.csv"
    path.write_text("time_s,0,1\n")
    sampler = PowerSampler(FilePower(path), ["0", "1"], interval_s=0.005, stale_s=2.0)
    sampler.start()

    def write() -> None:
        with path.open("a") as f:
            for k in range(20):
                line = f"{0.01 * k:.2f},{100 + k},{200 + k}\n"
                f.write(line[:5])  # half a line on disk for a while
                f.flush()
                time.sleep(0.003)
                f.write(line[5:])
                f.flush()
                time.sleep(0.002)

    writer = threading.Thread(target=write)
    writer.start()
    writer.join()
    try:
        _wait_for(lambda: sampler.history.latest("1") is not None and sampler.history.latest("1")[1] == 219.0)
        sampler.check()
        t_last, _ = sampler.history.latest("0")
        t_first = t_last - 0.19
        # 100 + k W from 0.01 k s on: the mean over the 20 rows is that of k = 0..18 (the last holds on)
        assert sampler.history.mean_w("0", t_first, t_last) == pytest.approx(109.0)
        assert sampler.history.mean_w("1", t_first, t_last) == pytest.approx(209.0)
    finally:
        sampler.stop()


def test_sampler_raises_a_bad_row_from_check(tmp_path: Path):
    path = tmp_path / "power.csv"
    path.write_text("time_s,0\n0,100\n")
    sampler = PowerSampler(FilePower(path), ["0"], interval_s=0.005)
    sampler.start()
    try:
        _wait_for(lambda: sampler.history.latest("0") is not None)
        with path.open("a") as f:
            f.write("1,oops\n")

        def failed() -> bool:
            try:
                sampler.check()
            except PowerSourceError as exc:
                assert "line 3, field 0: 'oops' is not a number" in str(exc)
                return True
            return False

        _wait_for(failed)
    finally:
        sampler.stop()


def test_sampler_notices_a_file_no_longer_written(tmp_path: Path):
    path = tmp_path / "power.csv"
    path.write_text("time_s,0,1\n0,100,200\n")
    sampler = PowerSampler(FilePower(path), ["0", "1"], interval_s=0.005, stale_s=0.5)
    sampler.start()
    try:
        _wait_for(lambda: sampler.history.latest("0") is not None)
        sampler.check()
        time.sleep(0.6)
        with pytest.raises(
            PowerSourceError, match=r"power\.csv: no new power sample from GPUs 0, 1 for more than 0\.5 s"
        ):
            sampler.check()
    finally:
        sampler.stop()


class _Closes(FilePower):
    closed = 0

    def close(self) -> None:
        self.closed += 1
        super().close()


def test_stop_joins_the_thread_and_closes_once(tmp_path: Path):
    path = tmp_path / "power.csv"
    path.write_text("time_s,0\n0,100\n")
    source = _Closes(path)
    sampler = PowerSampler(source, ["0"], interval_s=0.005)
    sampler.start()
    thread = sampler._thread
    assert thread is not None and thread.is_alive()
    sampler.stop()
    assert not thread.is_alive() and source.closed == 1
    sampler.stop()
    assert source.closed == 1
    with pytest.raises(RuntimeError, match="starts once"):
        sampler.start()


def test_sampler_start_raises_the_refusal(tmp_path: Path):
    sampler = PowerSampler(FilePower(tmp_path / "absent.csv"), ["0"])
    with pytest.raises(PowerSourceError, match="does not exist"):
        sampler.start()
    sampler.stop()


# --- NVML and zeusd on this machine -------------------------------------------------------------


def _nvml_starts() -> bool:
    try:
        import pynvml
    except ImportError:
        return False
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


def test_nvml_without_a_driver_is_refused():
    if _nvml_starts():
        pytest.skip("this machine has an NVIDIA driver: NVML starts")
    with pytest.raises(PowerSourceError) as refusal:
        NvmlPower().open(["0"])
    message = str(refusal.value)
    assert message.startswith("NVML on this machine: cannot read GPU 0: ")
    assert "no NVIDIA driver was found" in message or "nvidia-ml-py package is not installed" in message


def test_zeusd_with_nothing_listening_is_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(PowerSourceError) as refusal:
        ZeusdPower(f"127.0.0.1:{port}").open(["0", "1"])
    message = str(refusal.value)
    assert message.startswith(f"zeusd at http://127.0.0.1:{port}: cannot read GPUs 0, 1: ")
    assert f"Cannot reach Zeusd at 127.0.0.1:{port}" in message or "zeus package is not installed" in message


def test_zeusd_refuses_what_is_not_an_address_or_an_index():
    with pytest.raises(PowerSourceError, match="the url must be host:port"):
        ZeusdPower("https://host:4938")
    with pytest.raises(PowerSourceError, match=r"GPU GPU-1234: zeusd names GPUs by index"):
        ZeusdPower("http://host:4938/").open(["GPU-1234"])


# --- power_source ---------------------------------------------------------------------------------


def test_power_source_from_a_mapping(tmp_path: Path):
    file = power_source({"source": "file", "path": "meter/power.csv"}, tmp_path)
    assert isinstance(file, FilePower) and file.path == tmp_path / "meter" / "power.csv"
    zeusd = power_source({"source": "zeusd", "url": "node1:4938"}, tmp_path)
    assert isinstance(zeusd, ZeusdPower) and zeusd.description == "zeusd at http://node1:4938"
    assert isinstance(power_source({"source": "nvml"}, tmp_path), NvmlPower)
    with pytest.raises(PowerSourceError, match="unknown source 'rapl'; the known sources are file, nvml, zeusd"):
        power_source({"source": "rapl"}, tmp_path)
    with pytest.raises(PowerSourceError, match="source zeusd needs url"):
        power_source({"source": "zeusd"}, tmp_path)
    with pytest.raises(PowerSourceError, match="source nvml takes no other key, not url"):
        power_source({"source": "nvml", "url": "x:1"}, tmp_path)
