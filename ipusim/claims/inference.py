"""Claims 6-8 and 14, on inference: dynamic batching, BERT-base throughput, variable-length
inference, throughput at equal power.

Each function serves or steps requests on both chips of its comparison-table row (``serving``,
``packing``, ``machine``, ``embeddings``) and judges the result by its rule in
``ipusim.claims.rules``. Times are seconds, rates requests/s.
"""

from __future__ import annotations

from .. import hardware
from .._validate import positive
from . import rules
from .common import bert_short, cached, make_verdict, preset_name, simulate_step
from .comparisons import pair
from .verdict import ClaimVerdict


# 6 --------------------------------------------------------------------------------------
@cached
def _batch_device(chip: str):
    """Claim 6's device (BERT-base on ``chip``, batches up to 64) and its back-to-back batch-32
    requests/s at 128 tokens, the rate the loads are fractions of."""
    from .. import serving

    # every request is 128 tokens: a table up to 128 holds the full table's columns bit for bit
    # (len_step 16 divides 128; each column is computed on its own) at a quarter of the build
    dev = serving.chip_service(chip, "bert-base", max_batch=64, max_len=128)
    return dev, dev.throughput_rps(128, 32)


@cached
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
    dev, rate = _batch_device(preset_name(chip))
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
    return make_verdict(
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
@cached
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
    return make_verdict(
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
    return make_verdict(
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


# 14 -------------------------------------------------------------------------------------
EQUAL_POWER_CASES = (
    "BERT-base encoder",
    "GPT-2 decode",
    "embeddings in SRAM",
    "embeddings 13 GB",
    "GNN gather",
)


@cached
def _per_watt_case(case: str, chip: str) -> float:
    from .. import efficiency, embeddings

    if case == "BERT-base encoder":
        r = bert_short(chip)
    elif case == "GPT-2 decode":
        r = simulate_step(chip, (512,) * 32, None, "decode", "gpt2")
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
    gpus = tuple(hardware.chip(preset_name(g)).name for g in gpus)
    if not gpus or any(hardware.chip(g).kind != "gpu" for g in gpus):
        raise ValueError(f"gpus must name one or more GPU presets, got {gpus}")
    ratios = {c: _per_watt_case(c, tile) / max(_per_watt_case(c, g) for g in gpus) for c in cases}
    state = rules.equal_power(ratios)
    numbers = {
        f"per_w_ratio_{c.replace(' ', '_').replace('-', '_').lower()}_x": x
        for c, x in ratios.items()
    }
    summary = "; ".join(f"{c} {x:.2f}x ({rules.equal_power_case(x)})" for c, x in ratios.items())
    return make_verdict(
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
