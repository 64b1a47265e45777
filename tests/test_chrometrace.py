"""Trace files in the Chrome Trace Event Format: event kinds, monotonic lanes, durations = simulated totals."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from ipusim import chrometrace, cli, machine, policies, serving, workloads


def _check_format(doc: dict) -> list[dict]:
    """The format's rules every trace here follows; returns the complete events."""
    assert set(doc) >= {"traceEvents"} and doc["displayTimeUnit"] in ("ms", "ns")
    json.dumps(doc, allow_nan=False)  # no NaN or infinities: the format is strict JSON
    xs = []
    for e in doc["traceEvents"]:
        assert e["ph"] in ("X", "M"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name") and e["args"]["name"]
            continue
        assert e["name"] and e["cat"] and e["ts"] >= 0 and e["dur"] >= 0, e
        xs.append(e)
    return xs


def _lane(xs, pid, tid):
    lane = [e for e in xs if e["pid"] == pid and e["tid"] == tid]
    ts = [e["ts"] for e in lane]
    assert ts == sorted(ts), "timestamps of a lane are monotonic"
    for a, b in zip(lane, lane[1:], strict=False):  # a lane's events do not overlap
        assert a["ts"] + a["dur"] <= b["ts"] + 1e-6 * max(1.0, b["ts"])
    return lane


@pytest.mark.parametrize(
    "chip, model, batch, seq", [("gc200", "bert-base", 8, 128), ("gc200", "gpt2", 4, 256)]
)
def test_tile_step_trace_adds_up_to_the_steps_time(chip, model, batch, seq):
    s = workloads.step(model, [seq] * batch, pad_to=seq)
    r = machine.simulate(chip, s)
    doc = chrometrace.step_trace(chip, s)
    xs = _check_format(doc)
    chip_lane = _lane(xs, 0, 0)
    assert {e["cat"] for e in chip_lane} >= {"sync", "exchange", "compute"}
    assert sum(e["dur"] for e in chip_lane) / 1e6 == pytest.approx(r.time_s, rel=1e-9)
    ops = _lane(xs, 0, 1)
    assert [e["name"] for e in ops] == list(r.op_names)
    np.testing.assert_allclose([e["dur"] / 1e6 for e in ops], r.op_time_s, rtol=1e-9)
    groups = [e for e in xs if e["tid"] >= 2]
    assert groups and all(e["cat"] in ("compute", "exchange") for e in groups)
    for tid in {e["tid"] for e in groups}:
        _lane(xs, 0, tid)
    # a group's slowest tile fits inside the chip's phase slot (the slot is the slowest tile of all)
    slot_end = max(e["ts"] + e["dur"] for e in chip_lane)
    assert max(e["ts"] + e["dur"] for e in groups) <= slot_end * (1 + 1e-12)


def test_gpu_and_placed_traces_add_up():
    s = workloads.step("bert-base", [128] * 8, pad_to=128)
    r = machine.simulate("a100-80gb", s)
    xs = _check_format(chrometrace.step_trace("a100-80gb", s))
    assert sum(e["dur"] for e in _lane(xs, 0, 1)) / 1e6 == pytest.approx(r.time_s, rel=1e-9)
    s2 = workloads.step("llama-2-7b", [256] * 4, pad_to=256)
    r2 = machine.simulate("gc200", s2, chips=16)
    doc = chrometrace.step_trace("gc200", s2, chips=16)
    xs2 = _check_format(doc)
    assert sum(e["dur"] for e in _lane(xs2, 0, 0)) / 1e6 == pytest.approx(r2.time_s, rel=1e-9)
    stages = [e for e in xs2 if e["pid"] >= 1]
    assert len(stages) == r2.placement.pipeline


def test_serving_trace_has_batches_per_device_and_bounded_request_spans():
    rng = np.random.default_rng(0)
    arr = np.cumsum(rng.exponential(1e-3, 3000))
    res = serving.simulate(
        arr,
        np.full(3000, 128),
        policies.make("dynamic", max_batch=16, max_delay_s=2e-3),
        serving.fixed_service(5e-3, max_batch=16),
    )
    doc = chrometrace.serving_trace(res, max_requests=50)
    xs = _check_format(doc)
    batches = _lane(xs, 0, 0)
    assert len(batches) == res.batches and sum(e["args"]["requests"] for e in batches) == res.served
    spans = [e for e in xs if e["tid"] >= 1]
    assert len({e["tid"] for e in spans}) == 50
    for tid in {e["tid"] for e in spans}:
        q, sv = _lane(xs, 0, tid)
        assert q["ts"] + q["dur"] == pytest.approx(sv["ts"], rel=1e-12)


def test_cli_writes_trace_files(tmp_path):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert (
            cli.main(
                [
                    "simulate",
                    "--chip",
                    "gc200",
                    "--model",
                    "bert-base",
                    "--batch",
                    "2",
                    "--seq-len",
                    "64",
                    "--trace-out",
                    str(tmp_path / "s.json"),
                ]
            )
            == 0
        )
        assert (
            cli.main(
                [
                    "serve",
                    "--service",
                    "fixed",
                    "--rate",
                    "100",
                    "--requests",
                    "300",
                    "--trace-out",
                    str(tmp_path / "v.json"),
                ]
            )
            == 0
        )
    for f in ("s.json", "v.json"):
        _check_format(json.loads((tmp_path / f).read_text()))
