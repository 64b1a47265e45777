"""The POC migration checklist: case input, each check against closed forms, verdict, report formats."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from ipusim import arrivals, hardware, machine, workloads
from ipusim.checklist import (
    QUESTIONS,
    Candidate,
    Case,
    Prices,
    Training,
    case_from_dict,
    check_fit,
    check_software,
    default_case,
    load_case,
    parse_candidates,
    run_checklist,
    search,
    train_estimate,
)
from ipusim.serving import capacity, tables

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(
    p for p in (ROOT / "examples").glob("*.toml") if p.name != "my_chip.toml"
)  # my_chip: a chip file


@pytest.fixture(autouse=True)
def _quick(monkeypatch):
    monkeypatch.setenv("IPUSIM_QUICK", "1")


@pytest.fixture(scope="module")
def default_report():
    import os

    old = os.environ.get("IPUSIM_QUICK")
    os.environ["IPUSIM_QUICK"] = "1"
    try:
        return run_checklist(default_case(), show_progress=False)
    finally:
        if old is None:
            del os.environ["IPUSIM_QUICK"]
        else:
            os.environ["IPUSIM_QUICK"] = old


# ------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"model": "bert-huge"}, "valid: bert-base"),
        ({"rate_per_s": 0}, "zero traffic"),
        ({"rate_per_s": -5}, "must be > 0"),
        ({"slo_p99_s": 0}, "slo_p99_s"),
        ({"long_fraction": 1.5}, "long_fraction"),
        ({"candidates": ("tpu-v9:2",)}, "unknown chip preset"),
        ({"task": "generate"}, "needs a decoder"),
        ({"answers": {"vibes": "good"}}, "unknown questionnaire item"),
        ({"answers": {"custom_ops": "lots"}}, "valid: unknown, none, few, many"),
    ],
)
def test_bad_case_input_says_what_is_wrong(kwargs, words):
    with pytest.raises(ValueError, match=words):
        Case(**kwargs)


def test_custom_chip_needs_a_price():
    chip = hardware.chip("gc200").replace(name="my-ipu")
    with pytest.raises(ValueError, match="no price per chip-hour for chip 'my-ipu'"):
        Case(candidates=(Candidate(chip, 1),))
    case = Case(candidates=(Candidate(chip, 1),), prices=Prices().with_prices({"my-ipu": 1.0}))
    assert case.prices.chip_hour(chip) == 1.0 and not case.prices.is_assumed("my-ipu")


def test_parse_candidates():
    cands = parse_candidates("gc200:4,a100-80gb:2:packed")
    assert [(c.chip.name, c.count, c.mode) for c in cands] == [
        ("gc200", 4, "auto"),
        ("a100-80gb", 2, "packed"),
    ]
    with pytest.raises(ValueError, match="not a whole number"):
        parse_candidates("gc200:four")


def test_default_prices_are_marked_assumed():
    p = Prices()
    assert all(p.is_assumed(k) for k in p.usd_per_chip_hour) and p.is_assumed("kwh")
    q = p.with_prices({"gc200": 1.0}, 0.1)
    assert not q.is_assumed("gc200") and not q.is_assumed("kwh") and q.is_assumed("h200")


# ------------------------------------------------------------------------------ config files
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_configs_load(path):
    case = load_case(path)
    assert case.name and (case.candidates or not case.inference)


def test_toml_and_json_give_the_same_case(tmp_path):
    import tomllib

    d = tomllib.loads((ROOT / "examples" / "bert_base_mixed.toml").read_text())
    j = tmp_path / "case.json"
    j.write_text(json.dumps(d))
    assert load_case(j).to_dict() == load_case(ROOT / "examples" / "bert_base_mixed.toml").to_dict()


def test_config_errors_are_clear(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[traffic]\nrate = 3\n")
    with pytest.raises(ValueError, match=r"traffic\.rate: unknown key \(renamed: use rate_per_s\)"):
        load_case(bad)
    bad.write_text("[trafic]\n")
    with pytest.raises(ValueError, match="trafic: unknown key"):
        load_case(bad)
    bad.write_text("not = toml = at all")
    with pytest.raises(ValueError, match="not valid TOML"):
        load_case(bad)
    with pytest.raises(ValueError, match="not found"):
        load_case(tmp_path / "missing.toml")


def test_lengths_file_histogram_and_custom_model(tmp_path):
    hist = tmp_path / "h.csv"
    hist.write_text("length,count\n10,3\n20,1\n")
    case = case_from_dict(
        {
            "model": {
                "name": "tiny",
                "kind": "encoder",
                "layers": 2,
                "d_model": 64,
                "heads": 2,
                "d_ff": 256,
                "vocab": 1000,
                "max_positions": 64,
            },
            "traffic": {"rate_per_s": 10, "slo_p99_ms": 100, "lengths": str(hist)},
        }
    )
    assert set(np.unique(case.lengths)) == {10, 20}
    assert abs(np.mean(case.lengths == 10) - 0.75) < 0.02  # 20,000 draws: 3 std ~ 0.01
    assert case.model.layers == 2


def test_arrival_trace_sets_the_rate():
    arr = np.arange(101) * 0.01  # 100 gaps of 10 ms
    case = Case(arrivals=arr)
    assert case.rate_per_s == pytest.approx(100.0)


# ------------------------------------------------------------------------------ serving adapter
def _service(mode="padded", chip="a100-80gb"):
    c, m = hardware.chip(chip), workloads.model("bert-base")
    # The checklist sizes its tables to the largest batch that fits at the longest length (C1).
    mb = min(16, capacity.largest_batch(tables.Replica(c, m, 1, False), m.max_positions))
    return search.setup(c, m, mode, max_batch=mb)


def _on_chip(chip):
    """Weights held on chip, as the checklist's tables assume for a tile chip."""
    return {"weights": "on_chip"} if hardware.chip(chip).kind == "tile" else {}


def _batch1():
    from ipusim import policies as P

    return search.Policy("dynamic", 1, 0.0, P.Dynamic(max_batch=1, max_delay_s=0.0))


def test_md1_queue_matches_pollaczek_khinchine():
    """Batch 1, no delay, constant service S: mean latency = S + rho S / (2 (1 - rho))."""
    svc = _service()
    lens = np.full(200_000, 128)
    s = svc.batch_time(lens[:1])
    for rho in (0.3, 0.7):
        arr = arrivals.poisson(rho / s, lens.size, seed=1)
        r = search.serve(arr, lens, svc, _batch1(), 1)
        expect = s + rho * s / (2 * (1 - rho))
        assert r.latency_mean_s == pytest.approx(
            expect, rel=0.03
        )  # 200k requests: a few % sampling error
        assert r.utilization == pytest.approx(rho, rel=0.02)  # busy share = offered load
        assert r.served == lens.size  # every request served once


def test_serving_tables_are_the_checklist_tables():
    """The serving table the simulator reads is the checklist's interpolation of the machine grid."""
    for mode in ("padded", "packed"):
        svc = _service(mode)
        sm = svc.service
        if mode == "padded":
            assert sm.time_s([100, 37, 12]) == pytest.approx(
                svc.time_at(3, 100), rel=1e-12
            )  # 3 rows of the longest
        else:  # 1,000 tokens = 2 rows of 512
            assert sm.time_s([500, 300, 200]) == pytest.approx(svc.time_at(2, 512), rel=1e-12)


def test_capacity_search_respects_stability_bound():
    svc = _service()
    lens = np.full(2000, 128)
    s = svc.batch_time(lens[:1])
    top = search.rate_bound(lens, svc, _batch1(), 10 / s)
    cap, res = search.capacity_search(lens, svc, _batch1(), 20 * s, top, iters=12).run()
    assert 0 < cap < 1 / s  # a single server of batch 1 cannot pass 1/S
    assert search.p99_s(res) <= 20 * s


def test_service_table_is_the_machine_time_at_grid_points():
    svc = _service("padded", "gc200")
    assert svc.max_batch >= 8
    for b in (1, 4, 8):
        for ln in (8, 64, 512):
            s = workloads.step("bert-base", [ln] * b)
            t = machine.simulate(
                "gc200", s, weights="on_chip"
            ).time_s  # the machine model the table samples
            assert svc.service.table[b, ln] == pytest.approx(t, rel=1e-9)
    t = svc.service.table[1:, 1:]
    assert np.all(np.diff(t, axis=0) >= -1e-15) and np.all(np.diff(t, axis=1) >= -1e-15)


def test_packing_bounds():
    rng = np.random.default_rng(3)
    lens = rng.integers(1, 513, 500)
    eff, packs, _ = search.pack_efficiency(lens, 512)
    assert packs >= math.ceil(lens.sum() / 512)  # cannot beat the volume bound
    assert eff == pytest.approx(lens.sum() / (packs * 512))


# ------------------------------------------------------------------------------ checks
def test_fit_against_closed_form():
    m = workloads.model("llama-2-70b")
    case = Case(
        model=m,
        rate_per_s=1,
        slo_p99_s=60,
        candidates=(Candidate("gc200", 1), Candidate("a100-80gb", 2)),
    )
    c1 = check_fit(case)
    rows = {r["candidate"]: r for r in c1.tables["fit"]}
    weights_gb = 2 * m.params / 1e9
    assert rows["gc200 x1"]["weights_GB"] == pytest.approx(weights_gb)
    assert rows["gc200 x1"]["placement"] == "does not fit"
    need = rows["gc200 x1"]["need_GB"] * 1e9
    assert rows["gc200 x1"]["chips_to_fit"] == math.ceil(need / hardware.chip("gc200").data_bytes)
    assert (
        rows["a100-80gb x2"]["placement"] == "HBM over 2 chips"
    )  # 138 GB of weights over two 80 GB chips
    assert c1.status == "warn"


def test_training_estimate_comes_from_ipusim_training():
    # C6 is ipusim.training's best placement on TRAIN_CHIPS chips, costed at the case prices.
    from ipusim import training
    from ipusim.checklist.checks import TRAIN_CHIPS

    tr = Training(models=("gpt-3-175b",))
    gpu = hardware.chip("a100-80gb")
    r = train_estimate(workloads.model("gpt-3-175b"), gpu, tr, Prices())
    best = training.best_placement("gpt-3-175b", gpu, TRAIN_CHIPS, seq_len=2048, global_batch=1536)
    assert r["chips"] == TRAIN_CHIPS and r["placement"] == best.placement.label()
    chip_h = tr.token_budget / best.tokens_per_s * TRAIN_CHIPS / 3600
    assert r["chip_hours"] == pytest.approx(chip_h)
    assert r["usd"] == pytest.approx(r["chip_hours"] * (2.0 + 0.4 * 0.15))
    # fewest chips: 16 B/param of 175B params over 80 GB parts needs more than 32 chips
    assert r["chips_min"] > 16 * workloads.model("gpt-3-175b").params / gpu.hbm_bytes / 2


@pytest.mark.parametrize(
    "factor, verdict, given",
    [(0.9, "supported", True), (None, "contradicted", True), (0.9, "depends", False)],
)
def test_training_claim_follows_the_price(factor, verdict, given):
    # Just below the price C6 says the claim needs (for the largest model) the claim holds; at
    # 5 USD/chip-hour it is contradicted. The needed price comes from the machine models (which
    # change); the rule tested is that the verdict follows the price. The rule is the claim's one
    # rule (ipusim.claims.rules.price_claim): decided only when every price is the user's (here the
    # defaults, given explicitly); with the A100 and energy prices assumed it depends on the price.
    tr = Training(models=("llama-2-70b", "gpt-3-175b"))
    price = 5.0
    if factor is not None:
        # the GC200 price at which each model costs 0.85x its A100 cost (closed form in the price)
        gc, a100, p = hardware.chip("gc200"), hardware.chip("a100-80gb"), Prices()
        needs = []
        for m in tr.models:
            t, g = train_estimate(m, gc, tr, p), train_estimate(m, a100, tr, p)
            needs.append(0.85 * g["usd"] / t["chip_hours"] - gc.power_w / 1e3 * p.usd_per_kwh)
        assert min(needs) > 0
        price = factor * min(needs)
    chosen = {"gc200": price, "a100-80gb": 2.0} if given else {"gc200": price}
    prices = Prices().with_prices(chosen, 0.15 if given else None)
    r = run_checklist(Case(inference=False, training=tr, prices=prices), show_progress=False)
    assert r["C6"].data["state"] == verdict
    assert r["C6"].ev("claim_verdict").startswith(verdict)
    assert r["C2"].status == "skipped"


def test_questionnaire_moves_risk_monotonically():
    best = {k: min(v[1], key=lambda a: v[1][a][0]) for k, v in QUESTIONS.items()}
    worst = {k: max(v[1], key=lambda a: v[1][a][0]) for k, v in QUESTIONS.items()}
    lo = check_software(Case(answers=best))
    hi = check_software(Case(answers=worst))
    mid = check_software(Case())
    assert lo.data["points"] == 0 and lo.data["level"] == "low"
    assert hi.data["level"] == "high"
    assert lo.data["points"] < mid.data["points"] < hi.data["points"]
    for key, (_, answers) in QUESTIONS.items():
        for ans, (pts, _) in answers.items():
            c = check_software(Case(answers={**best, key: ans}))
            assert c.data["points"] == pts  # each answer moves the total by its own points


# ------------------------------------------------------------------------------ verdict and report
def test_default_report_is_traceable(default_report):
    r = default_report
    assert r.decision in ("migrate", "pilot", "stay")
    ids = set(r.checks)
    assert ids == {f"C{i}" for i in range(1, 9)}
    for reason in r.verdict.reasons:
        assert set(reason.checks) <= ids
    # The cost reason's saving is C4's evidence, to the printed precision.
    saving = r["C4"].ev("tile_saving")
    cost_reason = next(x for x in r.verdict.reasons if "per million requests" in x.text)
    assert f"{abs(saving):.1f}%" in cost_reason.text
    assert r.verdict.score == pytest.approx(sum(x.weight for x in r.verdict.reasons))
    assert [abs(x.weight) for x in r.verdict.reasons] == sorted(
        (abs(x.weight) for x in r.verdict.reasons), reverse=True
    )


def test_price_crossover_equalises_cost(default_report):
    r = default_report
    k_usd = r["C5"].ev("price_crossover_usd_per_chip_hour")
    tile = r["C4"].data["tile"]["candidate"].split()[0]
    case = r.case.replace(prices=r.case.prices.with_prices({tile: k_usd}))
    again = run_checklist(case, show_progress=False)
    assert again["C4"].ev("tile_saving") == pytest.approx(0.0, abs=1e-6)


def test_report_formats(default_report):
    r = default_report
    md = r.to_markdown()
    assert "Verdict:" in md and all(f"### C{i}" in md for i in range(1, 9)) and "ASSUMPTION" in md
    d = json.loads(r.to_json())
    assert d["verdict"]["decision"] == r.decision and len(d["checks"]) == 8
    assert "ASSUMPTION" in d["assumptions"]["prices"]
    html = r.to_html()
    assert html.startswith("<!DOCTYPE html>") and "data:image/png;base64," in html
    assert "src='http" not in html and 'src="http' not in html  # self-contained
    assert "ASSUMPTION" in html
    assert "<table>" in r._repr_html_()
    assert "C4" in repr(r)


def test_impossible_target_gives_a_report_not_a_crash():
    r = run_checklist(default_case(slo_p99_s=1e-6), show_progress=False)
    assert r.decision == "stay" and "p99 target is below" in r.verdict.veto
    assert r["C2"].status == "fail" and "impossible target" in r["C2"].reason


def test_model_that_fits_nowhere():
    tiny = hardware.chip("gc200").replace(
        name="tiny-ipu",
        tiles=4,
        offchip_bytes=0.0,
        offchip_bandwidth_bytes_per_s=0.0,
        link_bandwidth_bytes_per_s=0.0,
    )
    case = Case(
        model="llama-2-7b",
        rate_per_s=1,
        slo_p99_s=30,
        candidates=(Candidate(tiny, 2),),
        prices=Prices().with_prices({"tiny-ipu": 1.0}),
    )
    r = run_checklist(case, show_progress=False)
    assert r["C1"].status == "fail" and "fits nowhere" in r["C1"].reason
    assert r.decision == "stay" and "fits on no candidate" in r.verdict.veto
    assert "Verdict: STAY" in r.to_markdown()


def test_seeded_runs_are_identical():
    a = run_checklist(default_case(seed=3), show_progress=False).to_json()
    b = run_checklist(default_case(seed=3), show_progress=False).to_json()
    assert a == b


def test_squad_histogram_padding_matches_published():
    """SQuAD v1.1 at 384 tokens: 55.2% padding (docs/facts.md §4.1, recomputed from GC-TUT)."""
    from ipusim.checklist import check_padding
    from ipusim.checklist.config_file import lengths_from_name

    lens, source = lengths_from_name("squad", None, 0)
    assert source == "squad-384"
    case = Case(lengths=lens, length_source=source)
    c3 = check_padding(case)
    assert c3.ev("padding_to_max") == pytest.approx(
        55.2, abs=1.5
    )  # a 2,000-request sample of the histogram


# ------------------------------------------------------------------------------ fit, tables, cost
def _reachable_grid_fits(case):
    """Every (batch, length) grid point the chosen deployments' tables hold, simulated directly."""
    from ipusim import machine, placement
    from ipusim.checklist import Context

    ctx = Context(case)
    bad, n = [], 0
    for cand in case.candidates:
        dep = ctx.best(cand)
        if dep is None:
            continue
        svc, pl = dep.service, dep.placement
        phases = ("prefill", "decode") if svc.generation else ("forward",)
        model = tables.stage_model(case.model, pl.chips)
        for ph in phases:
            for b in svc.b_grid:
                for ln in svc.l_grid:
                    n += 1
                    if (
                        pl.kind == "placed"
                    ):  # a tensor/pipeline placement: its own fit, on the whole model
                        s = workloads.step(case.model, [int(ln)] * int(b), phase=ph)
                        if (
                            placement.assess(
                                cand.chip, s, tensor=pl.placed.tensor, pipeline=pl.placed.pipeline
                            ).fit
                            == "does_not_fit"
                        ):
                            bad.append((cand.label, ph, int(b), int(ln)))
                        continue
                    s = workloads.step(model, [int(ln)] * int(b), phase=ph)
                    kw = (
                        {"weights": "stream" if pl.streaming else "on_chip"}
                        if cand.chip.kind == "tile"
                        else {}
                    )
                    if not machine.simulate(cand.chip, s, **kw).fits:
                        bad.append((cand.label, ph, int(b), int(ln)))
        # and the largest batch a chosen policy can form stays within the table
        assert dep.policy.max_batch <= svc.max_batch or dep.policy.kind == "token"
        if dep.policy.kind == "token":
            assert dep.policy.obj.max_tokens <= svc.max_batch * case.model.max_positions
    return bad, n


def test_every_grid_point_a_chosen_policy_can_reach_fits():
    # A 16 x 512 BERT-base batch does not fit a GC200's tiles: no table the checklist reads may time it.
    bad, n = _reachable_grid_fits(default_case())
    assert n > 0 and bad == []


def test_gc200_bert_max_batch_is_the_tile_simulators():
    from ipusim import tiles
    from ipusim.checklist import Context

    case = default_case()
    f = Context(case).fit(case.candidates[0])
    mb = f["placements"][0].max_batch
    s = workloads.step(case.model, [512] * 128)
    assert mb == tiles.tile_memory_batch_limit(hardware.chip("gc200"), s)
    assert (
        1 <= mb < 128
    )  # serial passes fit 89 x 512; one more is out of tile memory with weights on chip
    assert not tiles.simulate(
        "gc200", workloads.step(case.model, [512] * (mb + 1)), weights="on_chip"
    ).fits


def test_meets_slo_needs_capacity_above_the_offered_rate(default_report):
    for r in default_report["C2"].tables["throughput"]:
        if r["meets_slo"]:
            assert r["capacity_req_s"] >= default_report.case.rate_per_s
    # An offered rate above the capacity must not pass.
    case = default_case(rate_per_s=1e5, candidates=(Candidate("a100-80gb", 1),))
    rep = run_checklist(case, show_progress=False)
    row = rep["C2"].tables["throughput"][0]
    assert row["capacity_req_s"] < 1e5 and row["meets_slo"] is False


def test_busy_energy_is_at_most_full_power_energy(default_report):
    rows = default_report["C4"].tables["cost"]
    assert rows
    for r in rows:
        assert 0 < r["busy_energy_j_per_request"] <= r["energy_j_per_request"] * (1 + 1e-9)


# Touvron et al. 2023 (Llama 2), Table 2: A100-80GB GPU-hours for 2T training tokens.
LLAMA2_GPU_HOURS_2T = {"llama-2-7b": 184_320, "llama-2-70b": 1_720_320}


@pytest.mark.parametrize("name", sorted(LLAMA2_GPU_HOURS_2T))
def test_training_gpu_hours_against_llama2_paper(name):
    # Tolerance: within 25% of the published GPU-hours (out of sample for ipusim.training, whose
    # one GPU efficiency is set from Megatron-LM's GPT-3 175B run).
    tr = Training(models=(name,), token_budget=2e12, seq_len=4096)
    r = train_estimate(workloads.model(name), hardware.chip("a100-80gb"), tr, Prices())
    ratio = r["chip_hours"] / LLAMA2_GPU_HOURS_2T[name]
    assert 0.75 <= ratio <= 1.25, ratio


def test_training_check_uses_the_cases_model():
    case = Case(
        model="llama-2-70b",
        inference=False,
        training=Training(models=("llama-2-7b", "llama-2-70b", "gpt-3-175b")),
    )
    rep = run_checklist(case, show_progress=False)
    assert rep["C6"].data["big"] == "llama-2-70b"
    assert "llama-2-70b" in rep.verdict.to_dict()["reasons"][0]["text"] or any(
        "llama-2-70b" in r["text"] for r in rep.verdict.to_dict()["reasons"]
    )


def test_training_ratio_between_085_and_1_is_contradicted_at_given_prices():
    tr = Training(models=("llama-2-70b",))
    base = Case(inference=False, training=tr)
    rows = {
        c.kind: train_estimate(workloads.model("llama-2-70b"), c, tr, base.prices)
        for c in (hardware.chip("gc200"), hardware.chip("a100-80gb"))
    }
    # a GC200 price putting the ratio at 0.93
    e = hardware.chip("gc200").power_w / 1e3 * base.prices.usd_per_kwh
    price = 0.93 * rows["gpu"]["usd"] / rows["tile"]["chip_hours"] - e
    given = Prices().with_prices(
        {"gc200": price, "a100-80gb": base.prices.chip_hour("a100-80gb")}, base.prices.usd_per_kwh
    )  # every price the user's: the claim is decided
    rep = run_checklist(Case(inference=False, training=tr, prices=given), show_progress=False)
    assert rep["C6"].ev("cost_ratio.llama-2-70b") == pytest.approx(0.93, rel=1e-6)
    assert rep["C6"].ev("claim_verdict") == "contradicted"


def test_interpolation_error_against_direct_machine_calls():
    # Off-grid cells of the log-bilinear table vs the machine model called directly.
    # Stated tolerance: mean |error| <= 10%, worst <= 20% (measured ~7% / 13% on A100).
    rng = np.random.default_rng(0)
    for chip in ("a100-80gb", "gc200"):
        svc = _service("padded", chip)
        errs = []
        for _ in range(12):
            b = int(rng.integers(1, svc.max_batch + 1))
            ln = int(rng.integers(8, 513))
            t = machine.simulate(
                chip, workloads.step("bert-base", [ln] * b), **_on_chip(chip)
            ).time_s
            errs.append(svc.service.table[b, ln] / t - 1)
        errs = np.abs(errs)
        assert errs.mean() <= 0.10 and errs.max() <= 0.20, (chip, errs.mean(), errs.max())


def _cost_reason(rep):
    return next(r for r in rep.verdict.reasons if "C4" in r.checks)


def test_cost_reason_weighs_capacity_and_can_go_either_way(default_report):
    # At 300 req/s both are one chip, so the offered-rate saving is the price ratio only;
    # the points come from the cost with the chips at capacity, and flip with the price.
    c4 = default_report["C4"]
    assert c4.data["minimal"]
    r = _cost_reason(default_report)
    assert "price ratio only" in r.text
    assert r.weight == pytest.approx(
        max(-40, min(40, 100 * c4.data["saving_at_capacity"])), abs=0.06
    )
    cheap = run_checklist(
        default_case(prices=Prices().with_prices({"gc200": 0.4})), show_progress=False
    )
    assert cheap["C4"].data["saving_at_capacity"] > 0 and _cost_reason(cheap).weight > 0
    dear = run_checklist(
        default_case(prices=Prices().with_prices({"gc200": 4.0})), show_progress=False
    )
    assert dear["C4"].data["saving_at_capacity"] < 0 and _cost_reason(dear).weight < 0


def test_verdict_says_how_far_it_is_from_flipping(default_report):
    from ipusim.checklist.verdict import POLICY

    v = default_report.verdict
    assert "points" in v.margin and v.margin in v.headline
    if v.decision == "stay":
        assert f"{POLICY['pilot_at'] - v.score:.1f} points below PILOT" in v.margin


def test_crossings_ignore_ties_within_the_band():
    from ipusim.checklist.checks import TIE_BAND, crossings

    def row(x, t, g):
        return {"x": x, "tile_usd_per_million": t, "gpu_usd_per_million": g}

    # costs equal to 2 s.f. swapping order: no crossing
    assert crossings([row(0, 1.00, 1.01), row(1, 1.01, 1.00), row(2, 1.00, 1.01)], "x") == []
    # a clear crossing is found and interpolated: tile - gpu goes -0.2 -> +0.2 at x = 0.5
    assert crossings([row(0, 0.8, 1.0), row(1, 1.2, 1.0)], "x") == [pytest.approx(0.5)]
    # a tie between two clear sides does not hide the crossing
    got = crossings([row(0, 0.8, 1.0), row(1, 1.0, 1.0 + TIE_BAND / 2), row(2, 1.2, 1.0)], "x")
    assert len(got) == 1 and 0 < got[0] < 2


def test_html_tables_align_text_left_and_colour_status(default_report):
    from ipusim.checklist.report import _html_table

    t = _html_table([{"check": "C1 Fit", "status": "PASS", "value": 1.5}])
    assert "<td class='txt'>C1 Fit</td>" in t and "<td class='num'>1.50</td>" in t
    assert "<span class='status pass'>PASS</span>" in t
    h = default_report.to_html(figures=False)
    assert ".txt{text-align:left}" in h and default_report.verdict.margin in h


def test_every_grid_point_fits_for_generation_too():
    # the chat example: prefill and decode tables of the A100 deployment and of the GC200s' tensor
    # placement (Llama-2-7B needs 16 of the 24 GC200s given)
    bad, n = _reachable_grid_fits(load_case(ROOT / "examples" / "gpt_chat.toml"))
    assert n > 0 and bad == []


def test_every_grid_point_fits_for_spread_and_streamed_placements():
    # A BERT-large twice as deep (48 layers, 1.34 GB of FP16 weights: more than one GC200's
    # 0.9 GB of SRAM, so no single-chip on-chip placement) on GC200s: a 2-chip pipeline
    # (stages of 24 layers) and a streamed single chip. (BERT-large itself fits one GC200
    # with serial passes, so it does not yield these two placements.)
    from ipusim import machine, placement
    from ipusim.checklist import Context

    deep = workloads.model("bert-large").replace(
        name="bert-large x2 depth", layers=48, published_params=0.0
    )
    case = Case(model=deep, rate_per_s=100, slo_p99_s=0.2, candidates=(Candidate("gc200", 2),))
    ctx = Context(case)
    cand = case.candidates[0]
    kinds = set()
    for pl in ctx.fit(cand)["placements"]:
        kinds.add(pl.kind)
        svc = ctx.service(cand, pl, "padded")
        model = tables.stage_model(case.model, pl.chips)
        for b in svc.b_grid:
            for ln in svc.l_grid:
                if (
                    pl.kind == "placed"
                ):  # a tensor/pipeline placement: its own fit, on the whole model
                    a = placement.assess(
                        cand.chip,
                        workloads.step(case.model, [int(ln)] * int(b)),
                        tensor=pl.placed.tensor,
                        pipeline=pl.placed.pipeline,
                    )
                    assert a.fit != "does_not_fit", (pl.kind, int(b), int(ln))
                else:
                    s = workloads.step(model, [int(ln)] * int(b))
                    r = machine.simulate(
                        cand.chip, s, weights="stream" if pl.streaming else "on_chip"
                    )
                    assert r.fits, (pl.kind, int(b), int(ln))
                assert math.isfinite(
                    svc.grid()[list(svc.b_grid).index(b), list(svc.l_grid).index(ln)]
                )
    # the model needs two chips, so the placement search's tensor/pipeline replica is served too
    assert kinds == {"spread", "streaming", "placed"}


def test_parity_price_at_capacity_equalises_the_cost(default_report):
    c4 = default_report["C4"]
    price = c4.data["parity_price_at_capacity"]
    assert price > 0
    again = run_checklist(
        default_case(prices=Prices().with_prices({"gc200": price})), show_progress=False
    )
    assert again["C4"].data["saving_at_capacity"] == pytest.approx(0.0, abs=1e-9)


# ------------------------------------------------------------------------------ C3 per-row limit, C4 views
def test_packing_limit_follows_the_row_length_and_the_traffic():
    # Rule (search.max_per_row): floor(row / 10th-percentile length), between 1 and MAX_PER_ROW_CAP.
    rng = np.random.default_rng(5)
    short = rng.integers(16, 129, 1000)  # chat prompts
    p10 = float(np.quantile(short, 0.1))
    assert search.max_per_row(short, 512) == min(search.MAX_PER_ROW_CAP, int(512 // p10))
    assert search.max_per_row(short, 4096) == search.MAX_PER_ROW_CAP  # a long row is not held to 3
    assert search.max_per_row(np.full(50, 512), 512) == 1  # full-length requests: one a row
    assert search.max_per_row(np.full(50, 300), 512) == 1
    assert search.max_per_row(np.full(50, 200), 512) == 2
    # rows of 4,096 tokens holding short prompts: a fixed limit of 3 would leave most of each row empty
    lens = np.concatenate([short, rng.integers(256, 4097, 250)])
    eff, _, src = search.pack_efficiency(lens, 4096)
    from ipusim import packing

    three = packing.pack(lens, 4096, "spfhp", max_per_row=3).efficiency
    assert three < 0.5 < eff and "at most 16 sequences a row" in src
    with pytest.raises(ValueError, match="lengths must be"):
        search.max_per_row([], 512)
    with pytest.raises(ValueError, match="max_len"):
        search.max_per_row([10], 0)


def test_cost_check_shows_both_views_and_says_which_the_verdict_weighs(default_report):
    c4 = default_report["C4"]
    tile, gpu = c4.data["tile"], c4.data["gpu"]
    from ipusim.checklist.checks import fmt

    for v in (
        tile["usd_per_million"],
        gpu["usd_per_million"],
        tile["usd_per_million_at_capacity"],
        gpu["usd_per_million_at_capacity"],
    ):
        assert fmt(v, "USD") in c4.summary  # both views, both kinds, as printed
    assert "at the offered rate" in c4.summary and "with the chips at capacity" in c4.summary
    expected = (
        c4.data["saving_at_capacity"]
        if c4.data["minimal"]
        else (c4.data["saving"] + c4.data["saving_at_capacity"]) / 2
    )
    assert c4.data["weighed_saving"] == pytest.approx(expected)
    assert ("cost at capacity" if c4.data["minimal"] else "mean of both") in c4.data["weighed_view"]
    reason = _cost_reason(default_report)
    assert reason.text.startswith(
        "with the chips at capacity" if c4.data["minimal"] else "the mean of two views"
    )


def test_cost_figure_draws_both_views(default_report):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ipusim.plots import checklist as views

    ax = views.plot_cost(default_report)
    rows = [r for r in default_report["C4"].tables["cost"] if math.isfinite(r["usd_per_million"])]
    heights = sorted(round(p.get_height(), 9) for p in ax.patches)
    want = sorted(
        round(r[k], 9) for r in rows for k in ("usd_per_million", "usd_per_million_at_capacity")
    )
    assert heights == want
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sum("weighed by the verdict" in t for t in labels) == (
        1 if default_report["C4"].data["minimal"] else 2
    )
    plt.close("all")
