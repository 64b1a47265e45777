"""One function per vendor claim of docs/claims.md: compute the numbers, apply the claim's rule.

Every function calls the library (``machine``, ``placement``, ``packing``, ``serving``,
``training``, ``embeddings``), applies its comparator from ``ipusim.claims.rules`` and returns
a ``ClaimVerdict``. None of them types in a verdict. Simulations several claims share (the BERT-base
step on each chip, the energy comparison) are computed once per process (``functools.cache``);
``clear_cache()`` forgets them.

Times are seconds, energies joules, bandwidths bytes/s, prices USD per chip-hour and USD/kWh.
"""

from __future__ import annotations

import functools
import math

from .. import hardware, limits, machine, workloads
from .._validate import positive
from . import comparisons, rules
from .comparisons import SAME_GENERATION, pair, run_break_even
from .verdict import DEPENDS, ClaimVerdict

# Figures the claims are judged on that are measurements, not presets (source keys, docs/facts.md).
STREAM_OPTIMISED_BYTES_PER_S = (
    7.261e12  # bytes/s, STREAM Triad on a GC2, optimised Poplar code, LOUW (facts §1.3)
)
STREAM_NAIVE_BYTES_PER_S = 3.726e12  # bytes/s, the same with naive C++, LOUW (facts §1.3)
VENDOR_SRAM_BYTES_PER_S = (
    47.5e12  # bytes/s, GC200 vendor aggregate, CBLAKE (facts §1.1): a peak, not used
)
TILE_LOAD_NS, T4_SHARED_NS, T4_L1_NS = (
    3.75,
    11.94,
    20.13,
)  # ns, measured load latencies, JIA-T (facts §1.3)

TILE, GPU = SAME_GENERATION  # "gc200", "a100-80gb": the rule's default pair (claims.comparisons)
CHIPS_TRAINING = (
    1024  # chips per training cluster (Megatron-LM's GPT-3 run, as notebook 06 and checklist C6)
)
TRAINING_TOKENS = {
    "gpt-3-175b": 3e11,
    "llama-2-70b": 2e12,
}  # tokens each model was trained on (notebook 06)
HOUR_S = 3600.0


def clear_cache() -> None:
    """Forget the shared simulations (after changing a preset in place, say)."""
    for f in (
        _sim,
        _scaled,
        _energy,
        _encoder,
        _dlrm,
        _per_watt_case,
        _train,
        _batch_device,
        mean_batches,
        _generation,
    ):
        f.cache_clear()


@functools.cache
def _sim(
    chip: str,
    lengths: tuple,
    pad_to: int | None = None,
    phase: str = "forward",
    model: str = "bert-base",
):
    return machine.simulate(chip, workloads.step(model, list(lengths), pad_to=pad_to, phase=phase))


def _bert_short(chip):  # BERT-base, 32 requests of 128 tokens: the articles' short texts
    return _sim(chip, (128,) * 32, 128)


@functools.cache
def _scaled(
    chip: str,
    chips: int,
    lengths: tuple,
    pad_to: int | None = None,
    phase: str = "forward",
    model: str = "bert-base",
):
    """The step placed on ``chips`` chips of ``chip`` by the library's one scale-out
    (``ipusim.scaleout.scale_out``): throughput, chips used, energy per sequence."""
    from .. import scaleout

    return scaleout.scale_out(
        chip, workloads.step(model, list(lengths), pad_to=pad_to, phase=phase), counts=(chips,)
    )


def _bert_short_scaled(chip):  # the same BERT-base step, one chip per replica
    return _scaled(chip, 1, (128,) * 32, 128)


def _bert_long(chip):  # BERT-base, 8 requests of 512 tokens: long texts (8 rows of 512 fit a GC200)
    return _sim(chip, (512,) * 8)


@functools.cache
def _energy(which: str, tile: str = TILE, gpu: str = GPU) -> dict:
    s = (
        workloads.step("bert-base", [128] * 32, pad_to=128)
        if which == "on_chip"
        else workloads.step("llama-2-7b", [1024], phase="decode")
    )
    return machine.energy_comparison(s, tile, gpu)


def _verdict(*fields, break_even="", chips=(None, None), prices=None):
    """The verdict from ``fields`` (claim, title, state, summary, rule, numbers, assumptions,
    function name, notebooks), with its row of the comparison table (``chips``: the (tile, GPU)
    judged, when a sensitivity row replaces the table's; ``prices``: the price set used)."""
    claim, _, state, *_, function, notebooks = fields
    return ClaimVerdict(
        *fields[:7],
        break_even if state == DEPENDS else "",
        f"ipusim.claims.{function}",
        tuple(notebooks),
        comparisons.TABLE[claim].to_dict(prices, *chips),
    )


def _price_text(prices, *chips) -> tuple[str, bool]:
    assumed = any(prices.is_assumed(c) for c in chips) or prices.is_assumed("kwh")
    text = ", ".join(f"{c} {prices.chip_hour(c):.2f} USD/chip-hour" for c in chips)
    return f"{text}, {prices.usd_per_kwh:.2f} USD/kWh" + (
        " (ASSUMED placeholders)" if assumed else " (given)"
    ), assumed


def _preset(name):
    if not isinstance(
        name, str
    ):  # results are cached by preset name: a modified chip object would be mistaken
        raise ValueError(f"give a chip preset name, got {type(name).__name__}")
    return name


def _prices(prices):
    if prices is None:
        from ..prices import Prices

        return Prices()
    if not hasattr(prices, "chip_hour") or not hasattr(prices, "is_assumed"):
        raise ValueError(
            f"prices must be an ipusim.prices.Prices (or None for the assumed defaults), "
            f"got {type(prices).__name__}"
        )
    return prices


# 1 --------------------------------------------------------------------------------------
def on_chip_bandwidth(tile=None, gpu=None) -> ClaimVerdict:
    """Claim 1: over 1 TB/s, and 5 TB/s and more summed over the tiles, against ~3 TB/s of HBM.

    BERT-base's softmax at 8 x 512 tokens (memory-bound on both chips) timed on the article's
    H100 (``gpu``; comparisons.TABLE) and on a GC200 (``tile``) whose tile memory runs at the
    MEASURED STREAM bandwidth (LOUW, GC2, optimised Poplar code: 7.26 TB/s), not the vendor's
    47.5 TB/s peak."""
    from .. import roofline

    tile, gpu = pair(1, tile, gpu)
    h100, gc200 = hardware.chip(gpu), hardware.chip(tile)
    softmax = next(o for o in workloads.step("bert-base", [512] * 8).ops if o.name == "softmax")
    t_h100 = roofline.op_bound(h100, softmax).time_s
    out = {}
    for label, bw in (
        ("optimised", STREAM_OPTIMISED_BYTES_PER_S),
        ("naive", STREAM_NAIVE_BYTES_PER_S),
    ):
        derated = gc200.replace(sram_bytes_per_cycle_per_tile=bw / (gc200.tiles * gc200.clock_hz))
        out[label] = softmax.bytes / roofline.op_bound(derated, softmax).time_s
    hbm = h100.hbm_bandwidth_bytes_per_s
    state = rules.bandwidth(out["optimised"], hbm)
    numbers = {
        "attained_tb_per_s": out["optimised"] / 1e12,
        "attained_naive_code_tb_per_s": out["naive"] / 1e12,
        "h100_hbm_tb_per_s": hbm / 1e12,
        "speedup_over_h100_x": out["optimised"] / (softmax.bytes / t_h100),
        "vendor_peak_tb_per_s_not_used": VENDOR_SRAM_BYTES_PER_S / 1e12,
    }
    summary = (
        f"at the measured {STREAM_OPTIMISED_BYTES_PER_S / 1e12:.2f} TB/s the softmax moves its bytes at "
        f"{numbers['attained_tb_per_s']:.1f} TB/s, {numbers['speedup_over_h100_x']:.1f}x the {gpu}'s "
        f"{numbers['h100_hbm_tb_per_s']:.2f} TB/s HBM; naive C++ reaches {numbers['attained_naive_code_tb_per_s']:.1f} TB/s"
    )
    return _verdict(
        1,
        "on-chip memory bandwidth",
        state,
        summary,
        rules.BANDWIDTH_RULE,
        numbers,
        {
            "chips": f"{tile} (tile memory at the GC2's measured STREAM Triad bandwidth, LOUW) vs "
            f"{gpu} (HBM peak); the key names say h100 after the article's comparator",
            "op": "BERT-base softmax, 8 x 512 tokens, roofline.op_bound",
            "bandwidth": "the measured one (notebook 01), not the vendor's 47.5 TB/s peak",
        },
        "on_chip_bandwidth",
        ["01_memory_wall.ipynb"],
        chips=(tile, gpu),
    )


# 2 --------------------------------------------------------------------------------------
def data_movement_energy(tile=None, gpu=None) -> ClaimVerdict:
    """Claim 2: about 40-60% less energy moving data than a GPU (``machine.energy_comparison``)."""
    tile, gpu = pair(2, tile, gpu)
    fit, stream = _energy("on_chip", tile, gpu), _energy("streams", tile, gpu)
    d_fit, d_stream = fit["data_saving"], stream["data_saving"]
    state = rules.energy(d_fit, d_stream)
    t = fit["tile"]
    numbers = {
        "data_saving_on_chip": d_fit,
        "data_saving_streams": d_stream,
        "total_saving_on_chip": fit["total_saving"],
        "exchange_share_of_tile_data_energy": t.energy_split["exchange"] / t.data_energy_j,
        "fit_on_chip_step": t.fit,
        "fit_streaming_step": stream["tile"].fit,
    }
    summary = (
        f"BERT-base 32 x 128 on chip: {d_fit:.0%} less data-movement energy than the {gpu} "
        f"({fit['total_saving']:.0%} less in total); Llama-2-7B decode, weights streamed: "
        f"{1 - d_stream:.1f}x the {gpu}'s"
    )
    return _verdict(
        2,
        "data-movement energy",
        state,
        summary,
        rules.ENERGY_RULE,
        numbers,
        {
            "chips": f"{tile} vs {gpu} (claims.comparisons.TABLE)",
            "steps": "BERT-base 32 x 128 tokens (fits on chip); Llama-2-7B decode, 1 x 1,024 tokens of context (streams)",
            "energy": "simulated StepResult.energy_split: bytes priced with the 45 nm table of ipusim.energy, FLOPs "
            "scaled to each chip's process node (energy.flop_scale); the exchange "
            "is one SRAM read + write per byte (wires left out: an upper estimate of the on-chip saving)",
        },
        "data_movement_energy",
        ["01_memory_wall.ipynb", "05_poc_checklist.ipynb"],
        break_even=f"whether the model's weights fit in tile SRAM ({hardware.chip(tile).data_bytes / 1e9:.2f} GB "
        f"per {tile}): on chip the saving is {d_fit:.0%}, streamed {d_stream:+.0%}",
        chips=(tile, gpu),
    )


# 3 --------------------------------------------------------------------------------------
def fine_grained_parallelism(tile=None, gpu=None) -> ClaimVerdict:
    """Claim 3: thousands of cores suit sparse work and attention (per-op times of one step)."""
    tile, gpu = pair(3, tile, gpu)
    g, a = _bert_short(tile), _bert_short(gpu)
    t_gc = dict(zip(g.op_names, g.op_time_s, strict=True))
    kernels = a.extra["kernels"]
    att = ("attn_scores", "softmax", "attn_context")
    att_gpu = sum(k["time_s"] for k in kernels if set(k["ops"]) <= set(att))
    emb_gpu = sum(k["time_s"] for k in kernels if k["ops"] == ["embedding"])
    att_gc, emb_gc = sum(t_gc[o] for o in att), t_gc["embedding"]
    kind = {o.name: o.kind for o in workloads.step("bert-base", [128] * 32, pad_to=128).ops}
    mm_k = [k for k in kernels if any(kind[o] == "matmul" for o in k["ops"])]
    mm_gpu = sum(k["time_s"] for k in mm_k)
    mm_gc = sum(t_gc[o] for k in mm_k for o in k["ops"])
    numbers = {
        "gather_speedup_x": emb_gpu / emb_gc,
        "attention_speedup_x": att_gpu / att_gc,
        "matmul_kernels_speedup_x": mm_gpu / mm_gc,
    }
    state = rules.fine_grained(numbers["gather_speedup_x"], numbers["attention_speedup_x"])
    summary = (
        f"{gpu} time / {tile} time, BERT-base 32 x 128: embedding gather {numbers['gather_speedup_x']:.2f}x, "
        f"attention {numbers['attention_speedup_x']:.2f}x, the matmul kernels {numbers['matmul_kernels_speedup_x']:.2f}x"
    )
    return _verdict(
        3,
        "thousands of cores for sparse work and attention",
        state,
        summary,
        rules.FINE_GRAINED_RULE,
        numbers,
        {
            "chips": f"{tile} vs {gpu}",
            "step": "BERT-base, 32 x 128 tokens (on chip)",
            "times": "tile simulator per op (BSP supersteps) vs GPU simulator per fused kernel",
        },
        "fine_grained_parallelism",
        ["02_tile_local_compute.ipynb", "07_sparse_embeddings.ipynb"],
        break_even=f"the op: the gather runs {numbers['gather_speedup_x']:.2f}x and attention "
        f"{numbers['attention_speedup_x']:.2f}x the GPU's speed",
        chips=(tile, gpu),
    )


# 4 --------------------------------------------------------------------------------------
def dynamic_graphs(tile=None, gpu=None) -> ClaimVerdict:
    """Claim 4: changing the model's shapes needs no recompilation (compile-time tile plans)."""
    from .. import tiles

    tile, _ = pair(4, tile, gpu)
    gc200 = hardware.chip(tile)
    s128 = workloads.step("bert-base", [128] * 8, pad_to=128)
    plan_128 = [p.partition for p in tiles.map_step(gc200, s128)]
    plan_384 = [
        p.partition
        for p in tiles.map_step(gc200, workloads.step("bert-base", [384] * 8, pad_to=384))
    ]
    changed = [s128.ops[i].name for i in range(len(plan_128)) if plan_128[i] != plan_384[i]]
    exact, padded = _sim(tile, (200,) * 8, 200), _sim(tile, (200,) * 8, 384)
    numbers = {
        "ops_repartitioned": len(changed),
        "ops": len(plan_128),
        "repartitioned": ", ".join(changed),
        "padded_to_compiled_shape_time_x": padded.time_s / exact.time_s,
    }
    state = rules.dynamic_graph(len(changed))
    summary = (
        f"{len(changed)} of {len(plan_128)} ops change their tile partition between 128 and 384 tokens; "
        f"200-token requests on the program compiled for 384 take {numbers['padded_to_compiled_shape_time_x']:.2f}x "
        "the time of a program compiled for 200"
    )
    return _verdict(
        4,
        "dynamic graphs without recompiling",
        state,
        summary,
        rules.DYNAMIC_GRAPH_RULE,
        numbers,
        {
            "chip": tile,
            "steps": "BERT-base, 8 sequences of 128, 384 and 200 tokens",
            "compilation": "a program is the set of tile partitions tiles.map_step chooses (facts §1.4: "
            "allocation and exchange are planned at compile time)",
        },
        "dynamic_graphs",
        ["02_tile_local_compute.ipynb"],
        chips=(tile, None),
    )


# 5 --------------------------------------------------------------------------------------
def tile_memory_latency(tile=None, gpu=None) -> ClaimVerdict:
    """Claim 5: data kept in tile memory cuts memory-access latency by over 60% (JIA-T)."""
    tile, gpu = pair(5, tile, gpu)
    cut = 1 - TILE_LOAD_NS / T4_SHARED_NS
    g, a = _bert_short(tile), _bert_short(gpu)
    numbers = {
        "latency_cut_vs_gpu_shared": cut,
        "latency_cut_vs_gpu_l1": 1 - TILE_LOAD_NS / T4_L1_NS,
        "step_exchange_share": g.split["exchange"] / g.time_s,
        "step_time_vs_gpu_x": g.time_s / a.time_s,
    }
    state = rules.latency(cut)
    summary = (
        f"measured load latency {TILE_LOAD_NS} ns on a tile vs {T4_SHARED_NS} ns for a T4's shared memory "
        f"({cut:.0%} less); as a speed-up it does not carry over: the simulated BERT-base step spends "
        f"{numbers['step_exchange_share']:.0%} of its time exchanging between tiles and takes "
        f"{numbers['step_time_vs_gpu_x']:.2f}x the {gpu}'s time"
    )
    return _verdict(
        5,
        "tile-memory latency",
        state,
        summary,
        rules.LATENCY_RULE,
        numbers,
        {
            "latencies": "measured, GC2 vs NVIDIA T4 (JIA-T, facts §1.3; no A100 row exists)",
            "step": f"BERT-base 32 x 128 on {tile} and {gpu} (context only, not in the rule)",
        },
        "tile_memory_latency",
        ["02_tile_local_compute.ipynb"],
        chips=(tile, gpu),
    )


# 6 --------------------------------------------------------------------------------------
@functools.cache
def _batch_device(chip: str):
    """Claim 6's device (BERT-base on ``chip``, batches up to 64) and its back-to-back batch-32
    requests/s at 128 tokens, the rate the loads are fractions of."""
    from .. import serving

    # every request is 128 tokens: a table up to 128 holds the full table's columns bit for bit
    # (len_step 16 divides 128; each column is computed on its own) at a quarter of the build
    dev = serving.chip_service(chip, "bert-base", max_batch=64, max_len=128)
    return dev, dev.throughput_rps(128, 32)


@functools.cache
def mean_batches(chip: str, n_requests: int, seed: int = 0) -> dict:
    """Claim 6's dynamic batcher (up to 32, 2 ms) on ``chip`` at the light and heavy load of
    ``rules.BATCH_LOADS``, with runs of ``n_requests`` 128-token Poisson requests: per load
    (keys ``"light"``, ``"heavy"``) the mean over ``rules.BATCH_REPLICATIONS`` seeded replications
    (``serving.replications.seeds(seed, ...)``, the same seeds at both loads) of the mean batch
    after the warm-up (``serving.replications.mean_batch``), with its 95% Student-t interval
    (``serving.replications.interval``: keys mean, lo, hi, n). One run length: ``dynamic_batching``
    chooses it by ``rules.BATCHING_RULE``."""
    import numpy as np

    from .. import arrivals, policies, serving
    from ..serving import replications

    n = positive("n_requests", n_requests, integer=True, at_most=rules.BATCH_MAX_REQUESTS)
    dev, rate = _batch_device(_preset(chip))
    lens = np.full(n, 128)
    seeds = replications.seeds(seed, rules.BATCH_REPLICATIONS)
    out = {}
    for key, load in zip(("light", "heavy"), rules.BATCH_LOADS, strict=True):
        per = [
            replications.mean_batch(
                serving.simulate(
                    arrivals.poisson(load * rate, n, seed=s),
                    lens,
                    policies.Dynamic(32, 0.002),
                    dev,
                    seed=s,
                )
            )
            for s in seeds
        ]
        out[key] = replications.interval(per)
    return out


def _precise(estimates: dict) -> bool:
    return all(
        e["hi"] - e["mean"] <= rules.BATCH_HALF_WIDTH * e["mean"] for e in estimates.values()
    )


def _batch_growth(chip: str, n_requests: int) -> tuple[dict, int]:
    """``mean_batches`` at the run length of ``rules.BATCHING_RULE``: ``n_requests`` doubled
    until both loads' intervals are within ``rules.BATCH_HALF_WIDTH`` of their means (or the next
    doubling would pass ``rules.BATCH_MAX_REQUESTS``); (estimates, requests per replication)."""
    n = n_requests
    while not _precise(est := mean_batches(chip, n)) and 2 * n <= rules.BATCH_MAX_REQUESTS:
        n *= 2
    return est, n


def dynamic_batching(n_requests: int = 20_000, tile=None, gpu=None) -> ClaimVerdict:
    """Claim 6: the batch size follows the request rate (one dynamic batcher, light vs heavy
    load), judged on the tile chip whose serving stack the claim is about; the GPU of the pair
    beside it (the same batcher). ``n_requests``: requests per replication to start from (the
    rule doubles it until the mean batches are precise, ``rules.BATCHING_RULE``)."""
    from ..serving import replications

    n_requests = positive(
        "n_requests",
        n_requests,
        integer=True,
        at_most=rules.BATCH_MAX_REQUESTS,
        why="requests per replication",
    )
    tile, gpu = pair(6, tile, gpu)
    (est, n), (g_est, g_n) = _batch_growth(tile, n_requests), _batch_growth(gpu, n_requests)
    light, heavy = est["light"], est["heavy"]
    growth = heavy["mean"] / light["mean"]
    # the growth's interval from the ends of the two means' intervals (conservative)
    lo, hi = float(heavy["lo"] / light["hi"]), float(heavy["hi"] / light["lo"])
    numbers = {
        "mean_batch_10pct_load": light["mean"],
        "mean_batch_90pct_load": heavy["mean"],
        "mean_batch_10pct_load_half_width": float(light["hi"] - light["mean"]),
        "mean_batch_90pct_load_half_width": float(heavy["hi"] - heavy["mean"]),
        "growth_x": growth,
        "growth_x_lo": lo,
        "growth_x_hi": hi,
        "gpu_growth_x": g_est["heavy"]["mean"] / g_est["light"]["mean"],
        "requests_per_replication": n,
        "gpu_requests_per_replication": g_n,
    }
    state = rules.batching(growth)
    straddle = (
        f"; its interval {lo:.2f}-{hi:.2f}x straddles the rule's {rules.BATCH_GROWTH}x"
        if rules.batching(lo) != rules.batching(hi)
        else ""
    )
    summary = (
        f"a dynamic batcher (up to 32, 2 ms) on a {tile}: mean batch {light['mean']:.1f} at "
        f"{rules.BATCH_LOADS[0]:.0%} load, {heavy['mean']:.1f} +- {heavy['hi'] - heavy['mean']:.1f} "
        f"at {rules.BATCH_LOADS[1]:.0%} "
        f"({growth:.1f}x{straddle}); the same batcher on an {gpu} grows "
        f"{numbers['gpu_growth_x']:.1f}x: not special to any chip"
    )
    return _verdict(
        6,
        "dynamic batching",
        state,
        summary,
        rules.BATCHING_RULE,
        numbers,
        {
            "service": f"BERT-base on a {tile} and an {gpu} (serving.chip_service), 128-token "
            "requests, Poisson arrivals",
            "policy": "policies.Dynamic(max_batch=32, max_delay_s=0.002)",
            "load": "10% and 90% of back-to-back batch-32 throughput",
            "estimate": f"{rules.BATCH_REPLICATIONS} seeded replications per load of {n:,} requests "
            f"({g_n:,} on the {gpu}), from {n_requests:,} doubled until the 95% interval of each "
            f"mean batch is within +-{rules.BATCH_HALF_WIDTH:.0%}; warm-up: "
            f"{replications.warmup_rule()}",
        },
        "dynamic_batching",
        ["03_dynamic_batching.ipynb"],
        chips=(tile, gpu),
    )


# 7 --------------------------------------------------------------------------------------
@functools.cache
def _encoder(chip: str, mode: str, batch: int, long_fraction: float, n: int) -> float:
    from .. import lengths, serving

    lens = lengths.long_text_mix(long_fraction).sample(n, seed=1)
    return serving.encoder_throughput(
        chip, lens, mode, batch=batch, max_len=512, max_per_row=16
    ).requests_per_s


THROUGHPUT_BASELINES = {
    "A100, padded to 512": ("a100-80gb", "pad", 64),
    "A100, padding removed": ("a100-80gb", "unpadded", 64),
}
"""The GPU serving stacks of claim 7: label -> (chip, mode, batch); the chip is the comparison
table's GPU (``comparisons.TABLE[7]``) unless a sensitivity row replaces it."""
THROUGHPUT_TILE = ("gc200", "packed", 8)  # 8 rows of 512 fit a GC200's tiles (notebook 04)


def bert_throughput(n_requests: int = 256, tile=None, gpu=None) -> ClaimVerdict:
    """Claim 7: BERT-base, A100 ~320 req/s vs an IPU of similar price ~580 (280 vs 510 at 40% long)."""
    mixes = {"0% long": 0.0, "40% long": 0.4}
    n = positive(
        "n_requests",
        n_requests,
        integer=True,
        at_most=100_000,
        why="requests per mix (tile simulations)",
    )
    tile_chip, gpu = pair(7, tile, gpu)
    tile = {m: _encoder(tile_chip, *THROUGHPUT_TILE[1:], f, n) for m, f in mixes.items()}
    ratios = {
        b: {m: tile[m] / _encoder(gpu, *cfg[1:], f, n) for m, f in mixes.items()}
        for b, cfg in THROUGHPUT_BASELINES.items()
    }
    state = rules.throughput(ratios)
    numbers = {
        f"ratio_vs_{b.split(', ')[1].replace(' ', '_')}_{m.split('%')[0]}pct_long_x": r
        for b, by in ratios.items()
        for m, r in by.items()
    }
    numbers.update({f"gc200_req_per_s_{m.split('%')[0]}pct_long": v for m, v in tile.items()})
    hits = [
        b for b, by in ratios.items() if all(rules.throughput_matches(r, m) for m, r in by.items())
    ]
    summary = (
        f"{tile_chip} packed / {gpu} requests/s: "
        + "; ".join(
            f"vs {b.split(', ')[1]} {by['0% long']:.2f}x (0% long), {by['40% long']:.2f}x (40% long)"
            for b, by in ratios.items()
        )
        + " (claimed 1.81, 1.82)"
    )
    return _verdict(
        7,
        "BERT-base throughput, IPU vs A100",
        state,
        summary,
        rules.THROUGHPUT_RULE,
        numbers,
        {
            "tile": f"{tile_chip}, packed rows of 512 (SPFHP, <= 16 per row), 8 rows per batch",
            "gpu": f"{gpu}, 64 requests per batch, padded to 512 or with padding removed as "
            "ByteTransformer does it (gpu.remove_padding)",
            "requests": f"{n:,} from lengths.long_text_mix (seed 1); no queueing (back-to-back batches)",
        },
        "bert_throughput",
        ["03_dynamic_batching.ipynb", "04_unpadded_inference.ipynb", "05_poc_checklist.ipynb"],
        break_even="the GPU baseline: the claimed ratio appears against "
        + (", ".join(hits) or "none"),
        chips=(tile_chip, gpu),
    )


# 8 --------------------------------------------------------------------------------------
BATCH_LONGEST = (
    64  # requests per batch when each batch is padded to its longest (claim 7's GPU batch)
)


def _padding_cut(long_fraction: float, baseline: str = "padded to 512") -> float:
    """Share of the baseline's BERT-base FLOPs that the original lengths do not need."""
    import numpy as np

    from .. import lengths, packing

    h = lengths.long_text_mix(long_fraction, resolution=100_000)
    if baseline == "padded to 512":
        return packing.pack(h, 512, "pad").flops()["wasted_fraction"]
    if baseline == "8 length buckets":
        return packing.pack(h, 512, "bucket", buckets=8).flops()["wasted_fraction"]
    lens = h.sample(1024 * BATCH_LONGEST, seed=1).astype(np.int64)
    longest = np.repeat(lens.reshape(-1, BATCH_LONGEST).max(axis=1), BATCH_LONGEST)
    batches = packing.Packing(
        "pad", 512, 1, lens.reshape(-1, 1), np.ones(lens.size, np.int64), longest
    )
    return batches.flops()["wasted_fraction"]


def variable_length() -> ClaimVerdict:
    """Claim 8: computing on the original lengths cuts 30% and more of the computation, against
    padding to 512 and the two baselines a real server uses (``rules.VARIABLE_LENGTH_BASELINES``)."""
    cuts = {
        b: tuple(_padding_cut(f, b) for f in (0.0, 0.4)) for b in rules.VARIABLE_LENGTH_BASELINES
    }
    cut0, cut40 = cuts["padded to 512"]
    cut100 = _padding_cut(1.0)
    lo, hi = 0.4, 1.0  # the cut falls with the long share; bisect where it crosses 30%
    if cut100 < rules.CLAIMED_WASTE_CUT <= cut40:
        for _ in range(20):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if _padding_cut(mid) >= rules.CLAIMED_WASTE_CUT else (lo, mid)
    key = {b: b.replace("'", "").replace(" ", "_") for b in cuts}
    numbers = {
        "flops_cut_0pct_long": cut0,
        "flops_cut_40pct_long": cut40,
        "flops_cut_100pct_long": cut100,
        "long_share_where_cut_falls_below_30pct": (lo + hi) / 2,
        **{
            f"flops_cut_{key[b]}_{m}pct_long": c[i]
            for b, c in cuts.items()
            for i, m in ((0, 0), (1, 40))
        },
    }
    state = rules.variable_length(cuts)
    holds = [b for b, c in cuts.items() if rules.variable_length_holds(*c)]
    fails = [b for b in cuts if b not in holds]
    summary = (
        "FLOPs that the original lengths remove, at 0% and 40% long texts: "
        + "; ".join(f"{b} {c[0]:.0%} and {c[1]:.0%}" for b, c in cuts.items())
        + f"; 30% and more holds against {', '.join(holds) or 'none'}"
        + (f", not against {', '.join(fails)}" if fails else "")
        + "; GPU kernels without padding remove the same"
    )
    return _verdict(
        8,
        "variable-length inference",
        state,
        summary,
        rules.VARIABLE_LENGTH_RULE,
        numbers,
        {
            "lengths": "lengths.long_text_mix (short 16-128 tokens, long 256-512: an ASSUMPTION, the "
            "articles do not define 'long')",
            "baselines": f"every sequence padded to 512 tokens (beside); each batch of {BATCH_LONGEST} "
            f"padded to its longest ({1024 * BATCH_LONGEST:,} requests, seed 1); 8 equal-width length "
            "buckets (packing.pack 'bucket')",
            "flops": "packing.Packing.flops(): BERT-base FLOPs, attention included",
        },
        "variable_length",
        ["03_dynamic_batching.ipynb", "04_unpadded_inference.ipynb"],
        break_even=f"the baseline: the cut holds against {', '.join(holds) or 'none'}, "
        f"not against {', '.join(fails) or 'none'}",
    )


# 9 --------------------------------------------------------------------------------------
def hardware_cost(prices=None, tile=None, gpu=None) -> ClaimVerdict:
    """Claim 9: for the same throughput, 20-30% lower hardware cost and a lower power bill.

    Throughput per chip of BERT-base (32 x 128 tokens, back-to-back batches; the step fits one
    chip of each kind, so the same throughput takes chips in proportion); cost per sequence =
    (chip-hour price + board power x energy price) / sequences per chip-hour. ``prices``: an
    ``ipusim.prices.Prices`` (None: its ASSUMED placeholders)."""
    p = _prices(prices)
    tile, gpu = pair(9, tile, gpu)
    t, g = _bert_short_scaled(tile), _bert_short_scaled(gpu)
    tc, gc = hardware.chip(tile), hardware.chip(gpu)
    thr_t, thr_g = t.sequences_per_s / t.chips_used, g.sequences_per_s / g.chips_used  # per chip
    e_t, e_g = (
        tc.power_w / 1e3 * p.usd_per_kwh,
        gc.power_w / 1e3 * p.usd_per_kwh,
    )  # USD per chip-hour of energy
    cost_t = (p.chip_hour(tile) + e_t) / (thr_t * HOUR_S) * 1e6
    cost_g = (p.chip_hour(gpu) + e_g) / (thr_g * HOUR_S) * 1e6
    saving = 1 - cost_t / cost_g
    gpu_cost_per_tile_hour = (
        cost_g * thr_t * HOUR_S / 1e6
    )  # the GPUs' cost of one tile chip-hour's work
    claimed = rules.CLAIMED_COST_SAVING
    even = comparisons.break_even_usd_per_chip_hour(gpu_cost_per_tile_hour, 1.0, e_t, claimed)
    equal = comparisons.break_even_usd_per_chip_hour(gpu_cost_per_tile_hour, 1.0, e_t)
    text, assumed = _price_text(p, tile, gpu)
    state = rules.price_claim(saving, even, claimed, assumed)
    numbers = {
        "tile_seq_per_s_per_chip": thr_t,
        "gpu_seq_per_s_per_chip": thr_g,
        "tile_usd_per_million_seq": cost_t,
        "gpu_usd_per_million_seq": cost_g,
        "saving": saving,
        "break_even_tile_usd_per_chip_hour": even,
        "equal_cost_tile_usd_per_chip_hour": equal,
        "board_energy_j_per_seq_tile": t.board_j_per_sequence,
        "board_energy_j_per_seq_gpu": g.board_j_per_sequence,
        "simulated_energy_j_per_seq_tile": t.sim_j_per_sequence,
        "simulated_energy_j_per_seq_gpu": g.sim_j_per_sequence,
    }
    summary = (
        f"at {text}: the {tile} costs {cost_t / cost_g:.2f}x the {gpu} per sequence ({saving:+.0%} saving); "
        f"{claimed:.0%} saving needs the {tile} at {even:.2f} USD/chip-hour; energy per sequence at board power "
        f"{numbers['board_energy_j_per_seq_tile'] * 1e3:.0f} vs {numbers['board_energy_j_per_seq_gpu'] * 1e3:.0f} mJ "
        f"(simulated {numbers['simulated_energy_j_per_seq_tile'] * 1e3:.1f} vs "
        f"{numbers['simulated_energy_j_per_seq_gpu'] * 1e3:.1f} mJ)"
    )
    return _verdict(
        9,
        "same throughput, 20-30% lower hardware cost",
        state,
        summary,
        rules.PRICE_RULE + f"; claimed saving {claimed:.0%}",
        numbers,
        {
            "chips": f"{tile} vs {gpu}, one chip per replica",
            "step": "BERT-base 32 x 128 tokens",
            "prices": text,
            "energy": "board power all the time (PUE 1.0)",
        },
        "hardware_cost",
        ["05_poc_checklist.ipynb"],
        break_even=f"{tile} price {even:.2f} USD/chip-hour (today {p.chip_hour(tile):.2f}, {gpu} "
        f"{p.chip_hour(gpu):.2f}): at or below it the {claimed:.0%} saving holds",
        chips=(tile, gpu),
        prices=p,
    )


# 10 -------------------------------------------------------------------------------------
HYBRID_GENERATION = {
    "model": "gpt2",
    "requests": 3000,
    "long_fraction": 0.4,  # as claim 7's mix: 40% long prompts (256-512 tokens), the rest 16-128
    "output_tokens": (16, 256),  # reply tokens, uniform (notebook 03's generation traffic)
    "slo_p99_s": 1.0,  # ASSUMPTION: an interactive reply within a second at the p99
}


def hybrid_generation(prices=None, tile=None, gpu=None):
    """Claim 10's serving comparison (a ``serving.deployments.Comparison``) of ``gpu`` and ``tile``
    (claim 10's row of the comparison table unless given) at ``prices`` (an ``ipusim.prices.Prices``;
    None: its ASSUMED defaults); computed once per pair of chips and prices."""
    p = _prices(prices)
    tile, gpu = pair(10, tile, gpu)
    return _generation(gpu, tile, p.chip_hour(gpu), p.chip_hour(tile))


@functools.cache
def _generation(gpu: str, tile: str, usd_gpu: float, usd_tile: float):
    import numpy as np

    from .. import lengths
    from ..prices import Prices
    from ..serving import deployments

    g = HYBRID_GENERATION
    n = g["requests"]
    prompts = lengths.sample_long_text_mix(n, g["long_fraction"], seed=1)
    lo, hi = g["output_tokens"]
    outputs = np.random.default_rng(2).integers(lo, hi + 1, n)
    prices = Prices({gpu: usd_gpu, tile: usd_tile})
    return deployments.compare(
        gpu, tile, g["model"], prompts, outputs, prices=prices, slo_p99_s=g["slo_p99_s"], iters=8
    )


def hybrid_deployment(prices=None, tile=None, gpu=None) -> ClaimVerdict:
    """Claim 10: long texts to the tile chip and short ones to the GPU; prefill and decode split
    across the two kinds; attention offloaded in training. ``prices`` as in ``hardware_cost``
    (the serving comparison is at no more than one hourly cost)."""
    from .. import collectives, training
    from .. import gpu as gpu_model

    p = _prices(prices)
    tile, gpu = pair(10, tile, gpu)

    sp_short = _bert_short(gpu).time_s / _bert_short(tile).time_s
    sp_long = _bert_long(gpu).time_s / _bert_long(tile).time_s
    a100 = hardware.chip(gpu)
    link = collectives.inter_node_link(a100).bandwidth_bytes_per_s
    ratios = {}
    for name in TRAINING_TOKENS:
        m = workloads.model(name)
        s, _ = training.recipe(m)
        cross = (
            2 * 2 * (m.d_model + 2 * m.kv_dim + m.d_model)
        )  # bytes per token per layer: Q, K, V, out; fwd + bwd, FP16
        att = (
            3 * 4 * m.heads * m.head_dim * s
        )  # attention-core FLOPs per token per layer, fwd + bwd
        ratios[name] = (cross / link) / (
            att / (a100.peak_flops * gpu_model.TENSOR_EFFICIENCY)
        )  # the GPU model's rate
    best = min(ratios.values())
    cmp = hybrid_generation(p, tile, gpu)
    colo, routed, split = (cmp.best(k) for k in ("co-located", "length-routed", "disaggregated"))
    gain = cmp.gain("disaggregated")
    state = rules.hybrid(sp_long, sp_short, best, gain)
    text, _ = _price_text(p, tile, gpu)
    numbers = {
        "tile_speedup_short_x": sp_short,
        "tile_speedup_long_x": sp_long,
        **{f"link_over_compute_{k}_x": v for k, v in ratios.items()},
        "link_gb_per_s": link / 1e9,
        "usd_per_hour_each_deployment": colo.usd_per_hour,
        **{f"capacity_rps_{d.key}": d.capacity_rps for d in cmp.deployments},
        "disaggregated_over_colocated_x": gain,
        "routed_over_colocated_x": cmp.gain("length-routed"),
    }
    summary = (
        f"the {tile} runs short texts at {sp_short:.2f}x and long ones at {sp_long:.2f}x the {gpu}'s speed, "
        f"so long texts {'do' if sp_long > sp_short else 'do not'} belong on it; at up to {colo.usd_per_hour:.2f} USD/h, "
        f"GPT-2 generation at p99 <= {cmp.slo_p99_s:g} s: {split.name} carries {split.capacity_rps:,.0f} req/s, "
        f"{routed.name} {routed.capacity_rps:,.0f}, {colo.name} {colo.capacity_rps:,.0f} ({gain:.2f}x for the split); "
        f"offloading attention in training moves bytes for {best:.1f}x (at best) the time the GPU needs to compute it"
    )
    g = HYBRID_GENERATION
    return _verdict(
        10,
        "hybrid GPU + tile-chip deployment",
        state,
        summary,
        rules.HYBRID_RULE,
        numbers,
        {
            "routing": f"BERT-base, 32 x 128 and 8 x 512 tokens on {tile} and {gpu}",
            "serving": f"{g['model']} generation, {g['requests']:,} requests, {g['long_fraction']:.0%} long "
            f"prompts (256-512 tokens, else 16-128), replies of {g['output_tokens'][0]}-{g['output_tokens'][1]} "
            f"tokens; continuous batching (max 32); at most the same hourly cost for every deployment, "
            f"every split of it weighed ({text}); "
            "KV cache over one 100 Gb/s port per prefill chip (ASSUMPTION, serving.disaggregated); "
            "serving.deployments.compare",
            "training": "GPT-3 175B and Llama-2-70B recipes; the GPU's share of its node's InfiniBand as "
            "the GPU-tile link (ASSUMPTION, generous: no direct link exists)",
        },
        "hybrid_deployment",
        ["03_dynamic_batching.ipynb", "06_training_at_scale.ipynb"],
        break_even="; ".join(
            [
                "routing long texts holds"
                if sp_long > sp_short
                else "routing long texts does not hold",
                "splitting prefill and decode holds"
                if gain > 1
                else "splitting prefill and decode does not hold",
                "offloading attention holds" if best < 1 else "offloading attention does not hold",
            ]
        ),
        chips=(tile, gpu),
        prices=p,
    )


# 11 -------------------------------------------------------------------------------------
@functools.cache
def _train(name: str, chip: str, chips: int):
    from .. import training

    return training.best_placement(name, chip, chips, explain=False)


def training_cost(prices=None, tile=None, gpu=None) -> ClaimVerdict:
    """Claim 11: 70B-175B pre-training at 15-20% lower cost than on GPU clusters.

    The fastest placement on 1,024 chips of each kind (``training.best_placement``), run for
    each model's token budget; ``prices`` as in ``hardware_cost``."""
    p = _prices(prices)
    tile, gpu = pair(11, tile, gpu)
    text, assumed = _price_text(p, tile, gpu)
    claimed = rules.CLAIMED_TRAINING_SAVING
    numbers, evens, savings = {}, [], []
    for name, tokens in TRAINING_TOKENS.items():
        t = _train(name, tile, CHIPS_TRAINING).run(
            tokens, usd_per_chip_hour=p.chip_hour(tile), usd_per_kwh=p.usd_per_kwh
        )
        g = _train(name, gpu, CHIPS_TRAINING).run(
            tokens, usd_per_chip_hour=p.chip_hour(gpu), usd_per_kwh=p.usd_per_kwh
        )
        even = run_break_even(t, g, claimed)
        numbers[f"cost_ratio_{name}_x"] = t.cost_usd / g.cost_usd
        numbers[f"break_even_usd_per_chip_hour_{name}"] = even
        numbers[f"equal_cost_usd_per_chip_hour_{name}"] = run_break_even(t, g)
        evens.append(even)
        savings.append(1 - t.cost_usd / g.cost_usd)
    even = min(evens)
    state = rules.price_claim(min(savings), even, claimed, assumed)
    summary = (
        f"at {text}: {tile} / {gpu} training cost "
        + ", ".join(
            f"{k[11:-2]} {v:.2f}x" for k, v in numbers.items() if k.startswith("cost_ratio")
        )
        + f"; {claimed:.0%} lower cost on both needs the {tile} at {even:.2f} USD/chip-hour or less"
    )
    return _verdict(
        11,
        "70B-175B training 15-20% cheaper",
        state,
        summary,
        rules.PRICE_RULE + f"; claimed saving {claimed:.0%}",
        numbers,
        {
            "clusters": f"{CHIPS_TRAINING} x {tile} vs {CHIPS_TRAINING} x {gpu}, fastest placement "
            "(training.best_placement)",
            "tokens": ", ".join(f"{k} {v:.0e}" for k, v in TRAINING_TOKENS.items()),
            "prices": text,
            "caveat": "every op is timed by the machine models; checked against two published Bow Pod16 runs (notebook 06)",
        },
        "training_cost",
        ["05_poc_checklist.ipynb", "06_training_at_scale.ipynb"],
        break_even=f"{tile} price {even:.2f} USD/chip-hour (today {p.chip_hour(tile):.2f}): at or below it "
        f"both models train {claimed:.0%} cheaper",
        chips=(tile, gpu),
        prices=p,
    )


# 12 -------------------------------------------------------------------------------------
def memory_wall_training(chips: int = CHIPS_TRAINING, tile=None, gpu=None) -> ClaimVerdict:
    """Claim 12: 'compute in memory' eases the memory wall for training models over 100B parameters."""
    from .. import training

    tile, gpu = pair(12, tile, gpu)
    chips = positive(
        "chips", chips, integer=True, at_most=limits.MAX_CHIPS, why="chips per cluster"
    )
    m = workloads.model("gpt-3-175b")
    t, g = _train(m.name, tile, chips), _train(m.name, gpu, chips)
    states = m.params * training.BYTES_PER_PARAM
    need = math.ceil(states / hardware.chip(tile).data_bytes)
    numbers = {
        "tile_fit": t.fit,
        "gpu_fit": g.fit,
        "tile_mfu": t.mfu,
        "gpu_mfu": g.mfu,
        "training_state_gb": states / 1e9,
        "tile_chips_to_hold_state_in_sram": need,
    }
    state = rules.memory_wall(t.fit, g.fit, t.mfu, g.mfu)
    summary = (
        f"GPT-3 175B on {chips:,} chips: the {tile} cluster {t.fit} (MFU {t.mfu:.1%}), the {gpu} cluster "
        f"{g.fit} (MFU {g.mfu:.1%}); its {states / 1e12:.1f} TB of training state needs {need:,} {tile}s of SRAM"
    )
    return _verdict(
        12,
        "compute-in-memory eases the memory wall",
        state,
        summary,
        rules.MEMORY_WALL_RULE,
        numbers,
        {
            "model": "GPT-3 175B, its recipe (training.recipe)",
            "chips": f"{chips:,} per cluster",
            "streaming": "Streaming Memory bandwidth: the preset's ASSUMPTION (64 GB/s)",
        },
        "memory_wall_training",
        ["01_memory_wall.ipynb", "06_training_at_scale.ipynb"],
        break_even=f"the cluster size: {need:,} {tile}s hold the state on chip",
        chips=(tile, gpu),
    )


# 13 -------------------------------------------------------------------------------------
DLRM_CHIPS = {
    "tile": 4,
    "gpu": 2,
}  # chips per cluster: the most samples/s per W of each kind in notebook 07
DLRM_CONFIGS = (
    ("gc200", DLRM_CHIPS["tile"]),
    ("a100-80gb", DLRM_CHIPS["gpu"]),
)  # the comparison table's pair (claims.comparisons.TABLE[13])


@functools.cache
def _dlrm(chip: str, chips: int):
    from .. import embeddings
    from ..embeddings import dlrm

    return dlrm.training_step(
        chip, embeddings.preset("dlrm-mlperf", batch=16384, training=True), chips=chips
    )


def sparse_embeddings(configs=None, tile=None, gpu=None) -> ClaimVerdict:
    """Claim 13: sparse embedding look-ups on the tile chip, irreplaceable for recommender training.

    ``configs``: (chip, chips) clusters to try (default: ``DLRM_CHIPS`` of the comparison
    table's pair, or of ``tile`` and ``gpu``); the best tile and best GPU cluster by samples/s
    per watt are compared (MLPerf's DLRM on Criteo Terabyte, batch 16,384)."""
    tile, gpu = pair(13, tile, gpu)
    if configs is None:
        configs = ((tile, DLRM_CHIPS["tile"]), (gpu, DLRM_CHIPS["gpu"]))
    try:
        configs = tuple(
            (
                hardware.chip(_preset(c)).name,
                positive("chips", n, integer=True, at_most=limits.MAX_CHIPS),
            )
            for c, n in configs
        )
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"configs must be (chip, chips) pairs, e.g. {DLRM_CONFIGS}: {err}"
        ) from None
    steps = {cfg: _dlrm(*cfg) for cfg in configs}
    tiles_ = [s for (c, _), s in steps.items() if hardware.chip(c).kind == "tile"]
    gpus = [s for (c, _), s in steps.items() if hardware.chip(c).kind == "gpu"]
    if not tiles_ or not gpus:
        raise ValueError(f"configs need at least one tile and one GPU cluster, got {configs}")
    tb = max(tiles_, key=lambda s: s.samples_per_s_per_w)
    gb = max(gpus, key=lambda s: s.samples_per_s_per_w)
    gpu_fits = any(s.fit != "does_not_fit" for s in gpus)
    ratio = gb.samples_per_s_per_w / tb.samples_per_s_per_w
    state = rules.irreplaceable(gpu_fits, ratio)
    numbers = {
        "best_gpu_over_best_tile_per_w_x": ratio,
        "tile_fit": tb.fit,
        "gpu_fits": gpu_fits,
        "tile_samples_per_s_per_w": tb.samples_per_s_per_w,
        "gpu_samples_per_s_per_w": gb.samples_per_s_per_w,
    }
    summary = (
        f"{gb.embedding.chips} x {gb.embedding.chip} reaches {ratio:.2f}x the samples/s per W of "
        f"{tb.embedding.chips} x {tb.embedding.chip} ({tb.fit}: the ~100 GB of tables live in Streaming Memory)"
    )
    return _verdict(
        13,
        "sparse embeddings, irreplaceable for recommenders",
        state,
        summary,
        rules.IRREPLACEABLE_RULE,
        numbers,
        {
            "workload": "dlrm-mlperf (26 tables, 204M rows x 128 FP32), batch 16,384, sparse SGD; "
            "the step of embeddings.dlrm (its host time per step on both kinds)",
            "clusters": ", ".join(f"{n} x {c}" for c, n in configs),
            "power": "board power (efficiency.CAVEAT)",
        },
        "sparse_embeddings",
        ["07_sparse_embeddings.ipynb"],
        chips=(tb.embedding.chip, gb.embedding.chip),
    )


# 14 -------------------------------------------------------------------------------------
EQUAL_POWER_CASES = (
    "BERT-base encoder",
    "GPT-2 decode",
    "embeddings in SRAM",
    "embeddings 13 GB",
    "GNN gather",
)


@functools.cache
def _per_watt_case(case: str, chip: str) -> float:
    from .. import efficiency, embeddings

    if case == "BERT-base encoder":
        r = _bert_short(chip)
    elif case == "GPT-2 decode":
        r = _sim(chip, (512,) * 32, None, "decode", "gpt2")
    elif case == "embeddings in SRAM":
        r = embeddings.simulate(chip, embeddings.preset("medium"))
    elif case == "embeddings 13 GB":
        r = embeddings.simulate(
            chip,
            embeddings.Workload(
                "13 GB", embeddings.uniform_tables(26, 1_000_000, 128), 2048, 4, 0.0
            ),
        )
    elif case == "GNN gather":
        r = embeddings.simulate(chip, embeddings.gnn_products(1024, seed=0))
    else:
        raise ValueError(f"unknown case {case!r}; valid: {', '.join(EQUAL_POWER_CASES)}")
    return efficiency.per_watt(r)["per_w"]


def equal_power(cases=EQUAL_POWER_CASES, gpus=None, tile=None, gpu=None) -> ClaimVerdict:
    """Claim 14: at equal power the tile chip's throughput is markedly higher (notebook 07's cases).

    Against the comparison table's GPU (or ``gpu``); ``gpus``: several GPU presets instead, the
    best of them per case (a user's choice, not the rule's)."""
    tile, gpu = pair(14, tile, gpu)
    gpus = (gpu,) if gpus is None else gpus
    gpus = tuple(hardware.chip(_preset(g)).name for g in gpus)
    if not gpus or any(hardware.chip(g).kind != "gpu" for g in gpus):
        raise ValueError(f"gpus must name one or more GPU presets, got {gpus}")
    ratios = {c: _per_watt_case(c, tile) / max(_per_watt_case(c, g) for g in gpus) for c in cases}
    state = rules.equal_power(ratios)
    numbers = {
        f"per_w_ratio_{c.replace(' ', '_').replace('-', '_').lower()}_x": x
        for c, x in ratios.items()
    }
    summary = "; ".join(f"{c} {x:.2f}x ({rules.equal_power_case(x)})" for c, x in ratios.items())
    return _verdict(
        14,
        "throughput at equal power",
        state,
        summary,
        rules.EQUAL_POWER_RULE,
        numbers,
        {
            "chips": f"{tile} vs "
            + (gpus[0] if len(gpus) == 1 else f"the best of {', '.join(gpus)}"),
            "power": "board power (efficiency.CAVEAT)",
            "cases": "BERT-base 32 x 128; GPT-2 decode 32 x 512; embeddings preset 'medium' (532 MB); "
            "26 x 1M x 128 tables (13 GB); GNN gather (ogbn-products, 1,024 nodes)",
        },
        "equal_power",
        ["07_sparse_embeddings.ipynb"],
        break_even="the workload: "
        + ", ".join(c for c, x in ratios.items() if x >= rules.MARKEDLY)
        + " support it (working set in tile SRAM), the others do not",
        chips=(tile, gpus[0] if len(gpus) == 1 else None),
    )


# 15 -------------------------------------------------------------------------------------
BOTTLENECK_MODELS = {"memory-bottlenecked": "llama-2-7b", "small": "bert-base"}
"""Claim 15's two models. Memory-bottlenecked: its training state (``training.BYTES_PER_PARAM``
= 16 bytes per parameter, before activations) exceeds one GPU's HBM, so the GPU cluster must shard
it (ZeRO) or split the model, and the tile cluster streams it; small: its state fits one GPU."""
CHIPS_BOTTLENECK = 64  # chips per cluster, the same for both kinds and both models


def memory_bottleneck(
    chips: int = CHIPS_BOTTLENECK, prices=None, tile=None, gpu=None
) -> ClaimVerdict:
    """Claim 15: a model with a severe memory bottleneck gains most from moving to the tile chip,
    judged on training (the claim's own subject): the fastest placement of each model of
    ``BOTTLENECK_MODELS`` on ``chips`` chips of each kind (``training.best_placement``), and the
    tile/GPU training throughput per chip. At one pair of chip prices the cost per token scales
    with 1 / that advantage, so which model gains more does not depend on the prices."""
    from .. import training

    chips = positive(
        "chips", chips, integer=True, at_most=limits.MAX_CHIPS, why="chips per placement"
    )
    p = _prices(prices)
    tile, gpu = pair(15, tile, gpu)
    hbm = hardware.chip(gpu).hbm_bytes
    numbers, adv = {}, {}
    for role, name in BOTTLENECK_MODELS.items():
        state_bytes = workloads.model(name).params * training.BYTES_PER_PARAM
        t, g = _train(name, tile, chips), _train(name, gpu, chips)
        adv[role] = t.tokens_per_s / g.tokens_per_s if g.tokens_per_s > 0 else math.inf
        key = name.replace("-", "_")
        numbers.update(
            {
                f"training_advantage_{key}_x": adv[role],
                f"state_over_gpu_hbm_{key}_x": state_bytes / hbm,
                f"tile_fit_{key}": t.fit,
                f"gpu_placement_{key}": g.placement.label() if g.placement else "none",
                f"cost_per_token_ratio_{key}_x": p.chip_hour(tile) / p.chip_hour(gpu) / adv[role],
            }
        )
    big, small = BOTTLENECK_MODELS["memory-bottlenecked"], BOTTLENECK_MODELS["small"]
    state = rules.memory_bottleneck(adv["memory-bottlenecked"], adv["small"])
    over = numbers[f"state_over_gpu_hbm_{big.replace('-', '_')}_x"]
    bottlenecked = over > 1
    summary = (
        f"training on {chips} chips, {tile}/{gpu} tokens/s per chip: {big} "
        f"{adv['memory-bottlenecked']:.2f}x (training state {over:.1f}x one {gpu}'s HBM: "
        + (
            "the GPUs shard it, the tile chips stream it"
            if bottlenecked
            else "NOT a bottleneck on this GPU"
        )
        + f"), {small} {adv['small']:.2f}x; the memory-bottlenecked model gains "
        f"{'more' if state == rules.SUPPORTED else 'less'}"
    )
    text, _ = _price_text(p, tile, gpu)
    return _verdict(
        15,
        "POC: memory-bottlenecked models gain most",
        state,
        summary,
        rules.BOTTLENECK_RULE,
        numbers,
        {
            "models": f"{big} (training state over one GPU's HBM: memory-bottlenecked) and {small} "
            "(state fits one GPU), each with its recipe (training.recipe)",
            "chips": f"{chips} {tile}s vs {chips} {gpu}s, fastest placement (training.best_placement)",
            "prices": f"{text}; they scale both models' cost ratios alike, so they do not move the verdict",
            "advice": "the claim's other half, 'measure memory use and convergence', is advice, not judged "
            "(notebook 06 shows why convergence needs measuring)",
        },
        "memory_bottleneck",
        ["05_poc_checklist.ipynb", "06_training_at_scale.ipynb"],
        chips=(tile, gpu),
        prices=p,
    )
