"""ipusim.sweep on Dask: the same table as serial, a killed worker, a separately started
scheduler and worker, and a scheduler that is not there. One local cluster (the session's
``dask_client``, tests/conftest.py) serves every test that needs one."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import cloudpickle
import pandas as pd
import pytest

from ipusim import sweep
from ipusim.cli import main
from ipusim.sweep import tasks

# a grid with points on chip, streamed, and refused (SRAM below the 48 KiB code reserve)
VARY = {"tiles": [736], "sram_per_tile_bytes": [32768, 262144, 1048576], "batch": [1, 8]}
FIXED = {"chip": "gc200", "seq_len": 128}
SMALL = {
    "tiles": [736],
    "sram_per_tile_bytes": [32768, 262144],
    "batch": [8],
}  # one refused, one that runs
META = ["point_key", "task"]


def _serial(vary):
    return sweep.run("simulate", vary=vary, fixed=FIXED, mode="serial", show_progress=False).table


@pytest.fixture
def client(dask_client):
    dask_client.wait_for_workers(2, timeout=120)  # a worker killed by an earlier test is back
    return dask_client


@pytest.fixture(scope="module")
def serial_table():
    return _serial(VARY)


def _same(a, b, drop=()):
    pd.testing.assert_frame_equal(
        a.drop(columns=list(drop)), b.drop(columns=list(drop)), check_exact=True
    )


def test_two_workers_give_the_serial_table_bit_for_bit(client, serial_table):
    res = sweep.run(
        "simulate", vary=VARY, fixed=FIXED, client=client, batch_size=2, show_progress=False
    )
    assert res.mode == "dask" and res.workers == 2
    refused = res.table[res.table["error"] != ""]
    assert (refused["sram_per_tile_bytes"] == 32768).all() and len(refused) == 2
    assert set(res.table["fit"].dropna()) == {"on_chip", "streams"}
    _same(res.table, serial_table)


def test_cli_sweep_on_a_scheduler_gives_the_serial_rows(client, capsys, tmp_path):
    argv = [
        "sweep",
        "--chip",
        "gc200",
        "--vary",
        "sram_per_tile_bytes=32KiB,256KiB,1MiB",
        "--vary",
        "batch=1,8",
        "--set",
        "tiles=736",
        "--seq-len",
        "128",
        "--json",
    ]
    assert (
        main([*argv, "--scheduler", client.scheduler.address, "--out", str(tmp_path / "d.parquet")])
        == 0
    )
    d = json.loads(capsys.readouterr().out)
    assert d["mode"] == "dask" and d["workers"] == 2 and d["points"] == 6 and d["refused"] == 2
    assert main([*argv, "--serial", "--out", str(tmp_path / "s.parquet")]) == 0
    assert json.loads(capsys.readouterr().out)["best"] == d["best"]
    _same(sweep.read_table(tmp_path / "d.parquet"), sweep.read_table(tmp_path / "s.parquet"))


_SLOW_S = 0.25


@sweep.register("slow_simulate", params=dict(tasks.TASKS["simulate"].params))
def _slow_simulate(point):
    """``simulate`` plus a quarter second of CPU, so that a worker can be killed mid-sweep."""
    tasks.spin({"seconds": _SLOW_S})
    return tasks.simulate(point)


cloudpickle.register_pickle_by_value(sys.modules[__name__])


def test_a_killed_worker_costs_only_its_tasks(client, serial_table):
    pids = client.run(os.getpid)
    victim = sorted(pids.values())[0]
    killed = threading.Event()

    def kill_when_busy():
        deadline = time.time() + 60
        while time.time() < deadline and not any(client.processing().values()):
            time.sleep(0.05)
        time.sleep(2 * _SLOW_S)
        os.kill(victim, signal.SIGKILL)
        killed.at = time.perf_counter()
        killed.set()

    th = threading.Thread(target=kill_when_busy, daemon=True)
    th.start()
    res = sweep.run(
        "slow_simulate", vary=VARY, fixed=FIXED, client=client, batch_size=1, show_progress=False
    )
    done = time.perf_counter()
    th.join(10)
    assert killed.is_set() and killed.at < done  # killed mid-sweep
    assert victim not in client.run(os.getpid).values()
    assert res.table["point"].tolist() == list(range(len(serial_table)))
    _same(
        res.table, serial_table, drop=META
    )  # every point, and the retried ones equal the serial run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_separately_started_scheduler_and_worker(tmp_path):
    dask = str(Path(sys.executable).parent / "dask")
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    procs = []
    try:
        procs.append(
            subprocess.Popen(
                [dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        procs.append(
            subprocess.Popen(
                [
                    dask,
                    "worker",
                    addr,
                    "--nthreads",
                    "1",
                    "--nworkers",
                    "1",
                    "--no-dashboard",
                    "--host",
                    "127.0.0.1",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=tmp_path,
            )
        )
        from distributed import Client

        with Client(addr, timeout="60s") as cl:
            cl.wait_for_workers(1, timeout=120)
        res = sweep.run(
            "simulate",
            vary=SMALL,
            fixed=FIXED,
            scheduler=addr,
            show_progress=False,
            out=tmp_path / "s.parquet",
        )
        assert res.mode == "dask" and res.workers == 1
        assert (res.table["error"] != "").sum() == 1  # a refused point comes back from it too
        _same(res.table, _serial(SMALL))
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()


def test_an_unreachable_scheduler_fails_fast_with_one_line(capsys, monkeypatch):
    port = _free_port()  # nothing listens there
    assert (
        main(["sweep", "--vary", "tiles=736:1472:2", "--scheduler", f"tcp://127.0.0.1:{port}"]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert (
        "cannot reach a Dask scheduler within" not in err and "cannot reach a Dask scheduler" in err
    )
    assert "\n" not in err
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "nonsense")
    assert main(["sweep", "--vary", "tiles=736:1472:2"]) == 2
