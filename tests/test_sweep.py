"""ipusim.sweep in one process: parameters, samples, tasks, refused rows, resume, analysis, CLI."""

from __future__ import annotations

import math
import pickle
import time

import numpy as np
import pandas as pd
import pytest

from ipusim import machine, sweep, workloads
from ipusim.cli import main
from ipusim.sweep import runner, tasks

# ------------------------------------------------------------------------------ parameters


@pytest.mark.parametrize(
    "text, value",
    [
        ("256KiB", 262144),
        ("2MiB", 2 * 1024**2),
        ("64GB/s", 64e9),
        ("1.5GHz", 1.5e9),
        ("300W", 300),
        ("736", 736),
        ("0.25", 0.25),
        ("2e-3", 2e-3),
        ("bert-base", "bert-base"),
        ("true", True),
    ],
)
def test_parse_value_units(text, value):
    assert sweep.parse_value(text) == value


def test_parse_values_ranges_and_lists():
    assert sweep.parse_values("256KiB:2MiB:8") == [k * 256 * 1024 for k in range(1, 9)]
    assert sweep.parse_values("736:5888:8") == [736 * k for k in range(1, 9)]
    assert sweep.parse_values("1:1000:4:log") == [1, 10, 100, 1000]
    assert sweep.parse_values("bert-base,gpt2") == ["bert-base", "gpt2"]


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("5:1:3", "below lo"),
        ("1:2", "lo:hi:n"),
        ("1:2:0", ">= 1"),
        ("0:8:3:log", "lo > 0"),
        ("1:2:3:cubic", "lo:hi:n"),
        ("3furlongs", "unknown unit"),
        ("1:5:1", "n >= 2"),
    ],
)
def test_parse_values_refuses_bad_ranges(spec, fragment):
    with pytest.raises(ValueError, match=fragment):
        sweep.parse_values(spec)


def test_grid_order_and_size():
    vary = {"a": [1, 2], "b": ["x", "y", "z"]}
    pts = list(sweep.grid(vary, {"c": 0}))
    assert len(pts) == sweep.grid_size(vary) == 6
    assert (
        pts[0] == {"c": 0, "a": 1, "b": "x"}
        and pts[1]["b"] == "y"
        and pts[3] == {"c": 0, "a": 2, "b": "x"}
    )


@pytest.mark.parametrize("n", [1, 7, 50])
def test_latin_hypercube_puts_one_point_in_each_stratum(n):
    pts = sweep.sample({"x": (0.0, 1.0), "y": (10.0, 20.0)}, n, method="lhs", seed=3)
    for name, (lo, hi) in (("x", (0.0, 1.0)), ("y", (10.0, 20.0))):
        strata = np.floor((np.array([p[name] for p in pts]) - lo) / (hi - lo) * n).astype(int)
        assert sorted(strata) == list(range(n))


def test_samples_are_seeded_and_respect_bounds():
    a = sweep.sample(
        {"t": (736, 5888), "m": ["bert-base", "gpt2"], "c": (1e9, 2e9)},
        40,
        method="random",
        seed=5,
        log=("c",),
    )
    assert a == sweep.sample(
        {"t": (736, 5888), "m": ["bert-base", "gpt2"], "c": (1e9, 2e9)},
        40,
        method="random",
        seed=5,
        log=("c",),
    )
    assert all(
        736 <= p["t"] <= 5888 and isinstance(p["t"], int) and 1e9 <= p["c"] <= 2e9 for p in a
    )
    assert {p["m"] for p in a} == {"bert-base", "gpt2"}


def test_point_key_is_stable_and_order_free():
    a = sweep.point_key({"tiles": 736, "chip": "gc200"}, "simulate")
    assert a == sweep.point_key({"chip": "gc200", "tiles": 736.0}, "simulate")
    assert a != sweep.point_key({"chip": "gc200", "tiles": 737}, "simulate")
    assert a != sweep.point_key({"tiles": 736, "chip": "gc200"}, "serve")
    assert len(a) == 16


# ------------------------------------------------------------------------------ tasks


def test_simulate_row_matches_the_machine_model():
    pt = {"chip": "gc200", "sram_per_tile_bytes": 1024**2, "tiles": 736, "batch": 8, "seq_len": 128}
    row = tasks.simulate(pt)
    c = tasks.make_chip(pt)
    assert (c.tiles, c.sram_per_tile_bytes, c.name) == (736, 1024**2, "gc200*")
    r = machine.simulate(c, workloads.step("bert-base", [128] * 8, pad_to=128))
    assert row["time_s"] == r.time_s and row["fit"] == r.fit
    assert row["throughput_per_s"] == pytest.approx(8 / r.time_s, rel=1e-12)
    price = 1.60  # gc200's placeholder chip-hour price (checklist DEFAULT_USD_PER_CHIP_HOUR)
    assert row["per_usd"] == pytest.approx(row["throughput_per_s"] * 3600 / price, rel=1e-12)
    assert row["per_j"] == pytest.approx(row["throughput_per_s"] / 300.0, rel=1e-12)
    assert row["split_compute_s"] + row["split_sync_s"] + row["split_exchange_s"] == pytest.approx(
        r.time_s, rel=1e-9
    )


def test_invalid_chip_and_raising_points_become_refused_rows():
    res = sweep.run(
        "simulate",
        points=[
            {"chip": "gc200", "sram_per_tile_bytes": 32 * 1024},  # below the 48 KiB code reserve
            {"chip": "a100-80gb", "tiles": 736},  # a GPU has no tiles
            {"chip": "gc200", "batch": 2, "seq_len": 4096},  # longer than BERT's positions
            {"chip": "gc200", "batch": 2, "seq_len": 64},
        ],
        mode="serial",
        show_progress=False,
    )
    err = res.table["error"].tolist()
    assert (
        "code_bytes_per_tile" in err[0]
        and "no field 'tiles'" in err[1]
        and "longer than the maximum 512" in err[2]
    )
    assert err[3] == "" and res.refused == 3 and res.table["fit"].iloc[3] == "on_chip"


def test_unknown_parameter_is_refused_before_running():
    with pytest.raises(ValueError, match="unknown parameter 'sram_kib'"):
        sweep.run("simulate", vary={"sram_kib": [1, 2]}, mode="serial")
    with pytest.raises(ValueError, match="unknown task"):
        sweep.run("teleport", vary={"tiles": [1]})


def test_does_not_fit_rows_have_no_time_and_no_throughput():
    # half the tiles with 256 KiB each: 64 rows of 512 tokens fit neither on chip nor streamed
    row = tasks.simulate(
        {
            "chip": "gc200",
            "sram_per_tile_bytes": 256 * 1024,
            "tiles": 736,
            "batch": 64,
            "seq_len": 512,
        }
    )
    assert row["fit"] == "does_not_fit" and math.isinf(row["time_s"])
    assert (
        row["throughput_per_s"] == 0.0
        and row["per_usd"] == 0.0
        and math.isinf(row["usd_per_million"])
    )


def test_serve_meets_its_target_below_the_table_capacity():
    row = tasks.serve(
        {"chip": "a100-80gb", "max_batch": 8, "seq_len": 128, "n_requests": 800, "search_steps": 5}
    )
    assert row["meets_slo"] and row["latency_p99_s"] <= 0.05
    assert (
        0 < row["throughput_per_s"] <= row["peak_rps"] * 1.05
    )  # 5%: a finite run's rate vs its mean
    assert row["largest_batch"] == 8 and row["fit"] == "on_chip"


def test_service_table_interpolates_only_within_a_fit_state():
    from ipusim import hardware

    c = hardware.chip("a100-80gb")
    svc, fit = tasks.service_table(c, "bert-base", 64, 10)
    for b in (1, 4, 6, 8, 10):  # grid rows are simulated exactly
        r = machine.simulate(c, workloads.step("bert-base", [64] * b, pad_to=64))
        assert svc.table[b, 1] == r.time_s
    t5 = svc.table[5, 1]
    assert min(svc.table[4, 1], svc.table[6, 1]) <= t5 <= max(svc.table[4, 1], svc.table[6, 1])


def test_spin_task_and_registry():
    assert set(sweep.TASKS) >= {"simulate", "serve", "embed", "checklist", "spin", "train"}
    assert tasks.spin({"seconds": 0.0}) == {"spun_s": 0.0}
    with pytest.raises(ValueError, match="seconds"):
        tasks.spin({"seconds": -1})
    t0 = time.thread_time()
    assert tasks.spin({"seconds": 0.005}) == {"spun_s": 0.005}
    assert (
        time.thread_time() - t0 >= 0.005
    )  # at least the CPU time asked for (it checks the clock in chunks)


# ------------------------------------------------------------------------------ batches


@pytest.mark.parametrize("n, workers", [(1, 1), (7, 2), (40, 2), (400, 2), (4000, 2), (100_000, 8)])
def test_guided_batches_cover_every_point_and_shrink_at_the_end(n, workers):
    sizes = runner.guided_sizes(n, workers)
    first = min(runner.BATCH_MAX, math.ceil(n / (4 * workers)))
    assert sum(sizes) == n and min(sizes) >= 1 and sizes[0] == first
    assert all(a >= b for a, b in zip(sizes[:-1], sizes[1:], strict=True))  # never grows
    # a batch started with R points left holds at most R / (2 workers): the others have work for
    # twice as long, so a slower worker's last batch does not leave them idle
    left = n
    for b in sizes:
        assert b <= max(math.ceil(left / (2 * workers)), first // 8, 1)
        left -= b
    got = [len(b) for b in runner._guided_chunks(iter(range(n + 3)), n, workers)]
    assert (
        got[: len(sizes)] == sizes and sum(got) == n + 3
    )  # more points than announced still all run


def test_a_packed_batch_gives_the_rows_of_an_unpacked_one():
    pts = [
        {"chip": "gc200", "batch": 2, "seq_len": 64},
        {"chip": "gc200", "batch": 2, "seq_len": 4096},
        {"chip": "nope"},
    ]
    batch = [(i + 10, sweep.point_key(p, "simulate"), p) for i, p in enumerate(pts)]
    blob = runner._run_packed(tasks.simulate, pickle.dumps(pts))
    assert isinstance(blob, bytes)
    rows = runner._rows("simulate", batch, pickle.loads(blob))
    pd.testing.assert_frame_equal(
        pd.DataFrame(rows),
        pd.DataFrame(runner.run_batch(tasks.simulate, "simulate", batch)),
        check_exact=True,
    )  # (NaN split times: compared as frames, not dicts)
    assert [r["point"] for r in rows] == [10, 11, 12] and rows[0]["error"] == ""
    assert rows[1]["error"] and rows[2]["error"].startswith("ValueError")


# ------------------------------------------------------------------------------ output and resume

_STOP = {"at": None}


@sweep.register("stoppable", params={"seconds": 0.0}, takes_chip=False)
def _stoppable(point):
    if _STOP["at"] is not None and point["seconds"] == _STOP["at"]:
        raise KeyboardInterrupt  # a killed driver: not a refused point
    return {"twice": 2 * point["seconds"]}


@pytest.mark.parametrize("ext", ["parquet", "csv"])
def test_resume_from_a_partial_file(tmp_path, ext):
    out = tmp_path / f"s.{ext}"
    vary = {"seconds": [i / 1000 for i in range(20)]}
    _STOP["at"] = 0.013
    try:
        with pytest.raises(KeyboardInterrupt):
            sweep.run(
                "stoppable",
                vary=vary,
                mode="serial",
                out=out,
                chunk_rows=5,
                batch_size=1,
                show_progress=False,
            )
    finally:
        _STOP["at"] = None
    assert (
        not out.exists() and len(list((tmp_path / f"s.{ext}.parts").glob("part-*"))) == 2
    )  # 10 rows kept
    res = sweep.run(
        "stoppable",
        vary=vary,
        mode="serial",
        out=out,
        resume=True,
        chunk_rows=5,
        show_progress=False,
    )
    assert (res.skipped, res.computed) == (10, 10)
    fresh = sweep.run("stoppable", vary=vary, mode="serial", show_progress=False).table
    back = sweep.read_table(out)
    assert back["point"].tolist() == list(range(20)) and not (tmp_path / f"s.{ext}.parts").exists()
    pd.testing.assert_series_equal(back["twice"], fresh["twice"], check_exact=True)
    assert back["point_key"].tolist() == fresh["point_key"].tolist()


def test_output_extension_is_checked(tmp_path):
    with pytest.raises(ValueError, match=r"\.parquet"):
        sweep.run("spin", vary={"seconds": [0.0]}, out=tmp_path / "x.xlsx", mode="serial")
    with pytest.raises(ValueError, match="resume needs"):
        sweep.run("spin", vary={"seconds": [0.0]}, resume=True, mode="serial")


# ------------------------------------------------------------------------------ analysis


def _brute_front(x, y):
    keep = []
    for i in range(len(x)):
        if not any(
            (x[j] >= x[i] and y[j] >= y[i]) and (x[j] > x[i] or y[j] > y[i]) for j in range(len(x))
        ):
            keep.append(i)
    return keep


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pareto_front_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 60
    df = pd.DataFrame(
        {
            "per_usd": rng.integers(1, 20, n).astype(float),
            "per_j": rng.random(n) + 0.01,
            "error": [""] * n,
        }
    )
    front = sweep.pareto_front(df)
    assert sorted(front.index) == sorted(
        _brute_front(df["per_usd"].to_numpy(), df["per_j"].to_numpy())
    )


def test_break_even_interpolates_a_linear_ratio():
    # ratio = x / 1000 on two groups of tiles; level 1 at x = 1000 (closed form), 2 at x = 2000
    xs = [256, 768, 1280, 1792]
    rows = [
        {
            "task": "simulate",
            "point_key": f"k{t}-{x}",
            "tiles": t,
            "sram_per_tile_bytes": x,
            "ratio": x / 1000 * (t / 736),
            "error": "",
        }
        for t in (736, 1472)
        for x in xs
    ]
    be = sweep.break_even(pd.DataFrame(rows), "sram_per_tile_bytes")
    assert be["value"].tolist() == pytest.approx([1000.0, 500.0], rel=1e-12)
    assert (
        be["below_key"].tolist() == ["k736-768", "k1472-256"]
        and be["above_key"].iloc[0] == "k736-1280"
    )
    never = sweep.break_even(pd.DataFrame(rows), "sram_per_tile_bytes", level=10.0)
    assert never["value"].isna().all() and never["note"].str.startswith("below").all()


def test_against_gpu_ratio_is_tile_over_gpu():
    res = sweep.run(
        "simulate",
        vary={"tiles": [736, 1472]},
        fixed={"chip": "gc200", "batch": 4, "seq_len": 64},
        mode="serial",
        show_progress=False,
    )
    a = sweep.against_gpu(res.table, "a100-80gb")
    g = tasks.simulate({"chip": "a100-80gb", "batch": 4, "seq_len": 64})
    assert a["ratio"].tolist() == pytest.approx(
        (res.table["throughput_per_s"] / g["throughput_per_s"]).tolist(), rel=1e-12
    )
    assert a["ratio_per_j"].tolist() == pytest.approx(
        (res.table["per_j"] / g["per_j"]).tolist(), rel=1e-12
    )
    assert a["gpu_point_key"].nunique() == 1
    with pytest.raises(ValueError, match="GPU preset"):
        sweep.against_gpu(res.table, "gc200")


# ------------------------------------------------------------------------------ command line


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--vary", "sram_kib=1:2:2"], "unknown parameter 'sram_kib'"),
        (["--vary", "tiles=5888:736:8"], "below lo"),
        (["--vary", "tiles"], "NAME=lo:hi:n"),
        (["--vary", "tiles=736:1472:2", "--scheduler", "not an address"], "tcp://HOST:PORT"),
        (["--vary", "tiles=736:1472:2", "--out", "x.xlsx"], ".parquet"),
        (
            ["--task", "serve", "--vary", "tiles=736:1472:2", "--batch", "4"],
            "--batch does not apply",
        ),
        ([], "at least one --vary"),
    ],
)
def test_cli_bad_inputs_exit_2_with_one_line(capsys, argv, fragment):
    assert main(["sweep", "--serial", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert fragment in err and "\n" not in err


def test_cli_serial_json(capsys, tmp_path):
    out = tmp_path / "s.csv"
    assert (
        main(
            [
                "sweep",
                "--serial",
                "--chip",
                "gc200",
                "--vary",
                "tiles=736:1472:2",
                "--batch",
                "4",
                "--seq-len",
                "64",
                "--out",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    import json

    d = json.loads(capsys.readouterr().out)
    assert d["points"] == 2 and d["computed"] == 2 and d["best"]["tiles"] == 1472
    assert len(sweep.read_table(out)) == 2


# ------------------------------------------------------------------------------ plots and widget


def _ratio_table():
    rows = [
        {
            "task": "simulate",
            "point_key": f"k{t}-{s}",
            "tiles": t,
            "sram_per_tile_bytes": s,
            "fit": "on_chip",
            "ratio": t * s / (1472 * 2**20),
            "error": "",
        }
        for t in (736, 1472, 2944)
        for s in (2**19, 2**20, 2**21)
    ]
    return pd.DataFrame(rows)


def test_heatmap_draws_the_break_even_contour():
    import matplotlib

    matplotlib.use("Agg")
    from ipusim.plots import sweep as ps

    ax = ps.ratio_heatmap(_ratio_table(), "tiles", "sram_per_tile_bytes")
    assert ax.collections, "the ratio crosses 1 inside the grid: a contour must be drawn"
    x, y, z = ps.ratio_grid(_ratio_table(), "tiles", "sram_per_tile_bytes")
    assert list(x) == [736, 1472, 2944] and z[1, 1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="more than one row"):
        ps.ratio_grid(pd.concat([_ratio_table()] * 2), "tiles", "sram_per_tile_bytes")


def test_pair_explorer_redraws_on_a_new_pair():
    import matplotlib

    matplotlib.use("Agg")
    from ipusim.widgets import sweep as ws

    t = _ratio_table().assign(batch=1)
    w = ws.pair_explorer(t, ["tiles", "sram_per_tile_bytes", "batch"])
    assert w.children[0].options == ("tiles", "sram_per_tile_bytes")
    w.children[0].value, w.children[1].value = "sram_per_tile_bytes", "tiles"
    assert len(w.result) == 9
    with pytest.raises(ValueError, match="fewer than two"):
        ws.pair_explorer(t, ["tiles", "batch"])


def test_embed_row_matches_the_embeddings_model():
    from ipusim import embeddings

    pt = {"chip": "gc200", "n_tables": 4, "rows": 10_000, "dim": 64, "batch": 256, "zipf": 1.0}
    row = tasks.embed(pt)
    w = embeddings.Workload(
        "4 x 10000 x 64", embeddings.uniform_tables(4, 10_000, 64, 1), 256, zipf=1.0
    )
    r = embeddings.simulate("gc200", w)
    assert row["time_s"] == r.time_s and row["fit"] == r.fit
    assert row["throughput_per_s"] == pytest.approx(r.samples_per_s, rel=1e-12)
    assert row["per_j"] == pytest.approx(r.samples_per_s_per_w, rel=1e-12)
    assert row["lookups_per_s"] == pytest.approx(r.lookups_per_s, rel=1e-12)


def test_embed_row_on_several_chips_keeps_the_price_of_one_chip():
    """``usd_per_chip_hour`` is an input: a 4-chip row keeps it and prices the cluster as 4 of them."""
    pt = {
        "chip": "gc200",
        "n_tables": 4,
        "rows": 10_000,
        "dim": 64,
        "batch": 256,
        "zipf": 1.0,
        "chips": 4,
        "usd_per_chip_hour": 3.0,
    }
    row = tasks.embed(pt)
    assert row["usd_per_chip_hour"] == 3.0
    assert row["per_usd"] == pytest.approx(row["throughput_per_s"] * 3600.0 / (3.0 * 4), rel=1e-12)


# ------------------------------------------------------------------------------ train


def test_train_row_equals_a_direct_training_call_bit_for_bit():
    from ipusim import hardware, training

    pts = [
        {
            "chip": "gc200",
            "model": "llama-2-70b",
            "chips": 256,
            "link_bandwidth_bytes_per_s": 640e9,
            "tokens": 1e12,
        },
        {"chip": "a100-80gb", "model": "llama-2-70b", "chips": 256, "tokens": 1e12},
    ]
    table = sweep.run("train", points=pts, mode="serial", show_progress=False).table
    chips = [
        hardware.chip("gc200").replace(name="gc200*", link_bandwidth_bytes_per_s=640e9),
        "a100-80gb",
    ]
    prices = [1.60, 2.00]  # the checklist's placeholder chip-hour prices of gc200 and a100-80gb
    for (_, row), c, price in zip(table.iterrows(), chips, prices, strict=True):
        r = training.best_placement(
            "llama-2-70b", c, 256
        )  # what a user calls, explanations and all
        run = r.run(1e12, usd_per_chip_hour=price)
        assert row["error"] == "" and row["fit"] == r.fit != "does_not_fit"
        assert row["step_time_s"] == r.step_time_s and row["tokens_per_s"] == r.tokens_per_s
        assert row["throughput_per_s"] == r.tokens_per_s and row["mfu"] == r.mfu
        assert (row["days"], row["chip_hours"], row["cost_usd"], row["energy_kwh"]) == (
            run.days,
            run.chip_hours,
            run.cost_usd,
            run.energy_kwh,
        )
        assert {k: row[k] for k in ("data", "tensor", "pipeline", "micro_batch")} == {
            k: getattr(r.placement, k) for k in ("data", "tensor", "pipeline", "micro_batch")
        }
        assert (row["recompute_used"], row["sharding_used"]) == (
            r.placement.recompute,
            r.placement.sharding,
        )
        assert row["per_usd"] == pytest.approx(r.tokens_per_s * 3600 / (256 * price), rel=1e-12)
        assert row["usd_per_chip_hour"] == price
    # the changed chip's link rate reaches the model: the preset's own search is a different step
    preset = training.best_placement("llama-2-70b", "gc200", 256)
    assert table["step_time_s"].iloc[0] != preset.step_time_s


def test_train_points_that_do_not_fit_or_are_refused_are_rows():
    res = sweep.run(
        "train",
        points=[
            {
                "chip": "gc200",
                "model": "llama-2-70b",
                "chips": 8,
            },  # states need 138 GB of 112 GB Streaming Memory
            {
                "chip": "gc200",
                "model": "llama-2-70b",
                "chips": 4,
                "link_bandwidth_bytes_per_s": 0.0,
            },  # no links
            {"chip": "gc200", "model": "bert-base", "chips": 1, "global_batch": 64, "seq_len": 128},
        ],
        mode="serial",
        show_progress=False,
    )
    t = res.table
    assert len(t) == 3 and res.refused == 1
    nofit = t.iloc[0]
    assert nofit["error"] == "" and nofit["fit"] == "does_not_fit"
    assert (
        "smallest chip count that fits" in nofit["message"]
        and "Streaming Memory" in nofit["message"]
    )
    assert (
        nofit["throughput_per_s"] == 0.0
        and math.isinf(nofit["cost_usd"])
        and math.isinf(nofit["step_time_s"])
    )
    assert "no chip-to-chip link" in t["error"].iloc[1]
    assert (
        t["error"].iloc[2] == ""
        and t["fit"].iloc[2] in ("on_chip", "streams")
        and t["tokens_per_s"].iloc[2] > 0
    )


def test_train_modes_are_checked():
    with pytest.raises(ValueError, match="sharding must be"):
        tasks.train({"chip": "a100-80gb", "model": "gpt2", "chips": 8, "sharding": 7})
    with pytest.raises(ValueError, match="unknown recompute"):
        tasks.train({"chip": "a100-80gb", "model": "gpt2", "chips": 8, "recompute": "some"})


def test_simulate_on_several_chips_matches_the_placement_model():
    pt = {
        "chip": "gc200",
        "model": "llama-2-7b",
        "phase": "decode",
        "batch": 1,
        "seq_len": 256,
        "chips": 4,
    }
    row = tasks.simulate(pt)
    r = machine.simulate("gc200", workloads.step("llama-2-7b", [256], phase="decode"), chips=4)
    assert (
        row["time_s"] == r.time_s
        and row["fit"] == r.fit
        and row["chips_used"] == r.placement.chips_used
    )
    n = r.placement.chips_used
    assert row["power_w"] == 300.0 * n and row["usd_per_hour"] == pytest.approx(1.60 * n, rel=1e-12)
    assert row["split_link_s"] == r.split["link"]


def test_a_changed_chip_keeps_its_presets_node_fabric():
    from ipusim import collectives, hardware

    c = hardware.chip("gc200").replace(name="gc200*", link_bandwidth_bytes_per_s=640e9)
    assert collectives.inter_node_link(c) == collectives.inter_node_link("gc200")
    assert (
        collectives.fabric(c, 16).chips_per_node == collectives.fabric("gc200", 16).chips_per_node
    )
    # so a sweep is continuous through the preset's own values (64 GB/s is the GC200's): more
    # Streaming Memory bandwidth never slows a step
    tps = [
        tasks.train(
            {
                "chip": "gc200",
                "model": "llama-2-70b",
                "chips": 1024,
                "offchip_bandwidth_bytes_per_s": bw,
            }
        )["tokens_per_s"]
        for bw in (32e9, 64e9, 256e9)
    ]
    assert tps == sorted(tps)
