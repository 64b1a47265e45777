"""``checklist --calibration FILE``: the checklist re-judges its case with a user's calibration and
says which parameters moved, by how much, whether the verdict changed and why."""

import json
from pathlib import Path

import pytest

from ipusim import calibration, gpu, hardware, workloads
from ipusim.checklist import case as C
from ipusim.checklist import config_file as F
from ipusim.checklist import verdict
from ipusim.checklist.recalibrate import recalibrate, rejudge, summary_markdown
from ipusim.cli import main

ROOT = Path(__file__).resolve().parents[1]
POC = ROOT / "examples" / "poc_gpu_measurements.csv"
POC_PYTORCH = ROOT / "examples" / "poc_a100_pytorch.csv"  # with examples/poc_case.toml
POC_CASE = ROOT / "examples" / "poc_case.toml"


@pytest.fixture(scope="module")
def cal_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("cal") / "cal.toml"
    assert main(["calibrate", "--measurements", str(POC), "--out", str(out)]) == 0
    return out


def test_calibrated_chip_times_matmuls_as_the_fitted_efficiency_does(cal_file):
    params = calibration.load(cal_file)
    g = params["gpu"]
    c = calibration.calibrated_chip(params, g["chip"])
    assert c.name == g["chip"] + "*" and c.kernel_launch_s == g["launch_s"]
    for s in (
        workloads.step("bert-base", [128] * 32, pad_to=128),
        workloads.step("llama-2-7b", [1024] * 4, phase="decode"),
    ):
        want = gpu.simulate(
            g["chip"], s, tensor_efficiency=g["tensor_efficiency"], launch_s=g["launch_s"]
        )
        assert gpu.simulate(c, s).time_s == pytest.approx(want.time_s, rel=1e-12)
    assert calibration.calibrated_chip(params, "h100-sxm") == hardware.chip("h100-sxm")


def test_recalibrated_case_prices_the_calibrated_chip_as_its_preset(cal_file):
    case = C.default_case()
    new = recalibrate(case, calibration.load(cal_file))
    names = [c.chip.name for c in new.candidates]
    assert "a100-80gb*" in names and "gc200" in names
    assert new.prices.chip_hour("a100-80gb*") == case.prices.chip_hour("a100-80gb")
    assert new.prices.is_assumed("a100-80gb*")


def test_poc_calibration_moves_the_documented_case_and_says_why(cal_file):
    """The example POC file (a GPU 16% slower in its matmuls than the preset) re-judges the
    documented default case: the GPU's capacity at the latency target falls, so the weighed cost
    reason (C2, C4) moves towards the tile chip; the decision stays (stated, not hidden)."""
    res = rejudge(C.default_case(), calibration.load(cal_file))
    moved = {m["parameter"]: m for m in res["moved"]}
    assert moved["tensor_efficiency"]["change"] < -0.05 and moved["launch_s"]["change"] > 0.05
    cap = {
        k: {r["candidate"].split()[0]: r["capacity_req_s"] for r in rep["C2"].tables["throughput"]}
        for k, rep in (("before", res["before"]), ("after", res["after"]))
    }
    assert cap["after"]["a100-80gb*"] < cap["before"]["a100-80gb"]
    assert cap["after"]["gc200"] == pytest.approx(cap["before"]["gc200"])
    assert res["score_change"] > 0  # the slower GPU moves the verdict towards the tile chip
    assert res["why"] and res["why"][0].startswith("C2, C4:")
    assert res["changed"] == (res["before"].decision != res["after"].decision)
    # docs/validation.md states these numbers for this file and case
    text = (ROOT / "docs" / "validation.md").read_text(encoding="utf-8")
    assert f"{-moved['tensor_efficiency']['change']:.0%} slower in its matmuls" in text
    assert f"{moved['launch_s']['change']:.0%} more per-kernel cost" in text
    assert f"moves {res['score_change']:.1f} points towards the GC200" in text
    assert f"decision stays {res['after'].decision.upper()}" in text and not res["changed"]


def test_poc_example_near_the_threshold_changes_the_decision_and_says_why(tmp_path):
    """examples/poc_a100_pytorch.csv (an A100 running PyTorch without TensorRT; the file says how
    its rows were made: tensor efficiency 0.55 and 10 us per kernel, scattered 1-4%) re-judges
    examples/poc_case.toml, a case a few points below PILOT on the default GPU: calibration
    recovers the parameters the rows were made with, the A100's capacity at the target falls,
    the cost reason moves and the decision goes from STAY to PILOT, with a margin on both sides
    wider than the 5 points of the policy's rate reason; the report names what moved and why."""
    out = tmp_path / "cal.toml"
    assert main(["calibrate", "--measurements", str(POC_PYTORCH), "--out", str(out)]) == 0
    params = calibration.load(out)
    res = rejudge(F.load_case(POC_CASE), params)
    moved = {m["parameter"]: m for m in res["moved"]}
    assert moved["tensor_efficiency"]["calibrated"] == pytest.approx(0.55, rel=0.03)
    assert moved["launch_s"]["calibrated"] == pytest.approx(10e-6, rel=0.10)
    before, after = res["before"].verdict, res["after"].verdict
    assert (before.decision, after.decision) == ("stay", "pilot") and res["changed"]
    pilot = verdict.POLICY["pilot_at"]
    assert before.score <= pilot - 5 and after.score >= pilot + 5, (before.score, after.score)
    cap = {
        k: {r["candidate"].split()[0]: r["capacity_req_s"] for r in rep["C2"].tables["throughput"]}
        for k, rep in (("before", res["before"]), ("after", res["after"]))
    }
    assert cap["after"]["a100-80gb*"] < 0.9 * cap["before"]["a100-80gb"]
    assert cap["after"]["gc200"] == pytest.approx(cap["before"]["gc200"])
    assert res["why"][0].startswith("C2, C4:")  # the cost reason moved most
    drop = cap["after"]["a100-80gb*"] / cap["before"]["a100-80gb"] - 1
    assert f"C2 a100-80gb x1: {cap['after']['a100-80gb*']:,.0f} req/s" in "\n".join(res["why"])
    md = summary_markdown(res, "cal.toml")
    for name in ("tensor_efficiency", "launch_s"):
        assert f"| {name}" in md and f"{moved[name]['change']:+.1%}" in md
    assert f"({drop:+.1%})" in md and "The decision **changed**" in md
    assert "Verdict before: **STAY" in md and "After: **PILOT" in md
    # docs/validation.md states these numbers for this file and case
    text = (ROOT / "docs" / "validation.md").read_text(encoding="utf-8")
    assert f"tensor efficiency {moved['tensor_efficiency']['calibrated']:.2f}" in text
    assert f"{moved['launch_s']['calibrated'] * 1e6:.1f} us per kernel" in text
    assert f"from STAY ({before.score:+.1f}) to PILOT ({after.score:+.1f})" in text
    assert f"{-drop:.0%} fewer requests/s" in text


def test_cli_checklist_calibration_reports_moves_and_verdicts(cal_file, capsys):
    assert main(["checklist", "--calibration", str(cal_file), "--json", "--no-progress"]) == 0
    d = json.loads(capsys.readouterr().out)
    cal = d["calibration"]
    assert {m["parameter"] for m in cal["moved"]} == {"tensor_efficiency", "launch_s"}
    assert cal["after"]["score"] - cal["before"]["score"] == pytest.approx(cal["score_change"])
    assert d["verdict"] == cal["after"]  # the report is the calibrated one
    assert any(c["chip"] == "a100-80gb*" for c in d["case"]["candidates"])
    assert main(["checklist", "--calibration", str(cal_file), "--no-progress"]) == 0
    md = capsys.readouterr().out
    assert "## Calibration" in md and "tensor_efficiency" in md and "Verdict before:" in md


def test_c2_p99_interval_and_a_straddled_target_is_said(monkeypatch):
    """C2 gives the p99 at the offered rate with its replication interval, and says when the
    interval contains the target (whether it meets the target is then within the noise)."""
    from ipusim.checklist import Context
    from ipusim.checklist.throughput import check_throughput

    case = C.default_case()
    c2 = check_throughput(case, Context(case))
    ev = {e.key: e.value for e in c2.evidence}
    lo, hi = ev["p99_lo_at_rate.a100-80gbx1"], ev["p99_hi_at_rate.a100-80gbx1"]
    assert 0 < lo <= hi < case.slo_p99_s * 1e3 and "straddles" not in c2.reason
    slo = case.slo_p99_s
    monkeypatch.setattr(
        Context, "offered_interval", lambda *a, **k: {"lo": slo * 0.9, "hi": slo * 1.1, "n": 5}
    )
    c2 = check_throughput(case, Context(case))
    assert "straddles the 50" in c2.reason and "within the simulation's noise" in c2.reason


def test_reports_say_assumption_only_for_the_prices_that_are_placeholders():
    """C4's reason and the report's Assumptions section name the placeholder prices a case
    uses: all defaults -> the ASSUMPTION text; some -> those by name and value; none -> that
    all are the user's (examples/poc_case.toml quotes both chips and the kWh price)."""
    from pathlib import Path

    from ipusim.checklist import load_case, run_checklist
    from ipusim.prices import PRICE_ASSUMPTION, Prices

    ex = Path(__file__).parent.parent / "examples"
    own = load_case(ex / "poc_case.toml")
    chips = [c.chip for c in own.candidates]
    assert own.prices.assumed(chips) == []
    assert "user values" in own.prices.note(chips) and "ASSUMPTION" not in own.prices.note(chips)
    assert Prices().note(chips) == PRICE_ASSUMPTION
    some = Prices().with_prices({"gc200": 0.9, "a100-80gb": 2.0})  # no kWh quote
    assert some.assumed(chips) == ["kwh"]
    assert some.note(chips).startswith("ASSUMPTION") and "0.15 USD/kWh" in some.note(chips)
    assert "gc200" not in some.note(chips)
    assert some.note(c for c in chips) == some.note(chips)  # a generator of chips reads once
    md = run_checklist(own, show_progress=False).to_markdown()
    assumptions = md.split("## Assumptions", 1)[1]
    assert "placeholders, not sourced" not in md and "user values" in assumptions
