"""The comparators: one rule per claim, from computed numbers to a verdict state.

Each rule is a plain function of numbers (no simulation), so a notebook that computes its own
numbers judges them with the same rule the scoreboard uses, and the tests can cross each
threshold on synthetic inputs. Each ``*_RULE`` string states the rule once; the thresholds
are the module constants beside it, taken from the claim's own words (docs/claims.md).
"""

from __future__ import annotations

import math

from ..serving.replications import CONFIDENCE as _CONFIDENCE
from ..serving.replications import WARMUP_FRACTION as _WARMUP
from .verdict import CONTRADICTED, DEPENDS, SUPPORTED

# 1 ------------------------------------------------------------------------------------
CLAIMED_ON_CHIP_BYTES_PER_S = 5e12  # "5 TB/s and more" summed over the tiles (claim 1)
BANDWIDTH_RULE = (
    "supported if the on-chip bandwidth a memory-bound op attains at the MEASURED tile-memory "
    "bandwidth (STREAM Triad, optimised Poplar code) is at least 5 TB/s and above the H100's HBM "
    "peak; contradicted otherwise"
)


def bandwidth(attained_bytes_per_s: float, hbm_bytes_per_s: float) -> str:
    """Claim 1: on-chip memory bandwidth of 5 TB/s and more, against ~3 TB/s of HBM."""
    ok = (
        attained_bytes_per_s >= CLAIMED_ON_CHIP_BYTES_PER_S
        and attained_bytes_per_s > hbm_bytes_per_s
    )
    return SUPPORTED if ok else CONTRADICTED


def _every_or_none(hits) -> str:
    """The rule shared by claims judged on several cases: supported if every case holds,
    contradicted if none does, depends (on the case) otherwise."""
    hits = list(hits)
    return SUPPORTED if all(hits) else CONTRADICTED if not any(hits) else DEPENDS


def _both_at_least(a: float, b: float, floor: float) -> str:
    """The shared rule on two figures against one floor: supported if both reach it, contradicted if
    neither does, depends otherwise."""
    return _every_or_none((a >= floor, b >= floor))


# 2 ------------------------------------------------------------------------------------
CLAIMED_ENERGY_SAVING = 0.40  # the low end of "about 40-60% less" (claim 2)
ENERGY_RULE = (
    "claimed 40-60% less data-movement energy than a GPU; a step supports it if the simulated "
    "saving (1 - tile data J / GPU data J, StepResult.energy_split) is at least 40% (a saving above "
    "60% is more than claimed, and is reported); supported if both the on-chip step and the "
    "weight-streaming step support it, contradicted if neither does, depends (on whether the model's "
    "weights fit in tile SRAM) if only one does"
)


def energy(saving_on_chip: float, saving_streams: float) -> str:
    """Claim 2: the two data savings (fractions; negative when the tile chip spends more)."""
    return _both_at_least(saving_on_chip, saving_streams, CLAIMED_ENERGY_SAVING)


# 3 ------------------------------------------------------------------------------------
FINE_GRAINED_RULE = (
    "speed-up = GPU time / tile-chip time of the same ops of the same step (>1: the tile chip is "
    "faster); supported if the tile chip is faster on both the sparse gather (embedding look-up) "
    "and attention, contradicted if it is slower on both, depends (on the op) otherwise"
)


def fine_grained(gather_speedup: float, attention_speedup: float) -> str:
    """Claim 3: sparse work and attention on thousands of tiles."""
    return _every_or_none((gather_speedup > 1.0, attention_speedup > 1.0))


# 4 ------------------------------------------------------------------------------------
DYNAMIC_GRAPH_RULE = (
    "supported if changing the sequence length leaves every op's tile partition unchanged (one "
    "compiled program serves both); contradicted if any op's partition changes (a new program "
    "must be compiled, or the input padded to the compiled shape)"
)


def dynamic_graph(ops_repartitioned: int) -> str:
    """Claim 4: the number of ops whose compile-time tile partition changes with the shape."""
    return SUPPORTED if ops_repartitioned == 0 else CONTRADICTED


# 5 ------------------------------------------------------------------------------------
CLAIMED_LATENCY_CUT = 0.60  # "over 60%" (claim 5)
LATENCY_RULE = (
    "latency cut = 1 - measured tile-SRAM load latency / measured GPU shared-memory load latency "
    "(the GPU's nearest on-chip level); supported if the cut is over 60%, contradicted otherwise"
)


def latency(cut: float) -> str:
    """Claim 5: memory-access latency cut by over 60%."""
    return SUPPORTED if cut > CLAIMED_LATENCY_CUT else CONTRADICTED


# 6 ------------------------------------------------------------------------------------
BATCH_GROWTH = 1.5  # the mean batch must grow at least this much from light to heavy load (claim 6)
BATCH_LOADS = (0.1, 0.9)  # light and heavy load, fractions of back-to-back batch-32 requests/s
# How claim 6's mean batches are estimated. At 90% load the batcher keeps the device busy ~99.9% of
# the time and each batch's size carries most of the next one's (lag-1 autocorrelation ~0.7), so
# one short run's mean batch moves by +-1.5 with its length and seed (3,000 requests on a GC200:
# 20.5 +- 1.1 over 10 seeds, against 20.8 +- 0.2 at 80,000); the warm-up from an empty queue biases
# it low besides. Hence: independent replications, warm-up discarded, runs doubled until precise.
BATCH_REPLICATIONS = 10  # seeded replications per load (ipusim.serving.replications.seeds)
BATCH_HALF_WIDTH = 0.01  # stop doubling the run once the 95% interval is within +-1% of the mean
BATCH_MAX_REQUESTS = 1_000_000  # requests per replication, at most (the doubling stops there)
BATCHING_RULE = (
    f"growth = mean batch at {BATCH_LOADS[1]:.0%} load / mean batch at {BATCH_LOADS[0]:.0%} load "
    "of one dynamic batcher on the tile chip (the claim is about its serving stack); supported if "
    f"the batch grows at least {BATCH_GROWTH:g}x with the load, contradicted otherwise. Each mean "
    f"batch is the mean over {BATCH_REPLICATIONS} seeded replications, each without its warm-up "
    f"(the requests arriving in the first {_WARMUP:.0%} of its arrival span, the rule of serve "
    f"--replications), with its {_CONFIDENCE:.0%} Student-t interval; the run length doubles from "
    f"the requested one until that interval is within +-{BATCH_HALF_WIDTH:.0%} of the mean at both "
    f"loads (at most {BATCH_MAX_REQUESTS:,} requests)"
)


def batching(growth: float) -> str:
    """Claim 6: a batcher whose batch size follows the request rate."""
    return SUPPORTED if growth >= BATCH_GROWTH else CONTRADICTED


# 7 ------------------------------------------------------------------------------------
CLAIMED_THROUGHPUT_RATIO = {"0% long": 580 / 320, "40% long": 510 / 280}  # 1.81 and 1.82 (claim 7)
THROUGHPUT_TOLERANCE = (
    0.25  # a ratio short of the claimed one by at most 25% counts as the claimed one
)
THROUGHPUT_RULE = (
    "ratio = tile-chip requests/s / GPU requests/s for BERT-base on the same requests; one-sided, as "
    "the claim is (an advantage of at least 1.8x): it meets the claim at a mix unless it falls short of "
    "the article's ratio (580/320 = 1.81 at 0% long, 510/280 = 1.82 at 40% long) by more than 25%, "
    "and a larger advantage is not a miss; supported if it meets the claim at both mixes against every "
    "GPU baseline, contradicted if against none, depends (on the GPU's serving stack) otherwise"
)


def throughput_matches(ratio: float, mix: str) -> bool:
    """Whether one simulated ratio meets the article's ratio at ``mix`` ("0% long" or "40% long"):
    at least ``1 - THROUGHPUT_TOLERANCE`` of it (one-sided)."""
    return ratio >= CLAIMED_THROUGHPUT_RATIO[mix] * (1 - THROUGHPUT_TOLERANCE)


def throughput(ratios: dict) -> str:
    """Claim 7: ``ratios`` maps a GPU baseline to {mix: tile/GPU ratio}."""
    hits = [
        all(throughput_matches(r, mix) for mix, r in by_mix.items()) for by_mix in ratios.values()
    ]
    return _every_or_none(hits)


# 8 ------------------------------------------------------------------------------------
CLAIMED_WASTE_CUT = 0.30  # "30% and more" of the computation (claim 8)
VARIABLE_LENGTH_BASELINES = ("padded to 512", "padded to the batch's longest", "8 length buckets")
"""What computing on the original lengths is compared with: padding every request to 512 tokens
(the articles' implied baseline) and the two a real server uses."""
REALISTIC_BASELINES = VARIABLE_LENGTH_BASELINES[1:]
VARIABLE_LENGTH_RULE = (
    "cut = share of a padded batch's FLOPs that computing on the original lengths removes; a baseline "
    "holds the claim if the cut is at least 30% at both of the articles' mixes (0% and 40% long "
    "texts); judged against the realistic baselines (padding each batch of 64 to its longest, and 8 "
    "equal-width length buckets), padding to 512 reported beside: supported if every realistic "
    "baseline holds it, contradicted if none does, depends (on the baseline) otherwise"
)


def variable_length_holds(cut_0: float, cut_40: float) -> bool:
    """Claim 8 against one baseline: the FLOPs removed at 0% and at 40% long texts both reach 30%."""
    return cut_0 >= CLAIMED_WASTE_CUT and cut_40 >= CLAIMED_WASTE_CUT


def variable_length(cuts: dict) -> str:
    """Claim 8: ``cuts`` maps each baseline of ``VARIABLE_LENGTH_BASELINES`` to its (cut at 0%
    long, cut at 40% long); the realistic baselines decide."""
    missing = [b for b in REALISTIC_BASELINES if b not in cuts]
    if missing:
        raise ValueError(f"cuts must give every realistic baseline; missing {', '.join(missing)}")
    return _every_or_none(variable_length_holds(*cuts[b]) for b in REALISTIC_BASELINES)


# 9 and 11 -----------------------------------------------------------------------------
CLAIMED_COST_SAVING = 0.20  # the low end of "20-30% lower hardware cost" (claim 9)
CLAIMED_TRAINING_SAVING = 0.15  # the low end of "15-20% lower cost" (claim 11; checklist C6 too)
PRICE_RULE = (
    "saving = 1 - tile cost / GPU cost; break-even = the tile chip-hour price at which the saving is the "
    "claimed one; with ASSUMED prices the verdict is depends (on the price) when the break-even price is "
    "positive and contradicted when it is not (no price gives the saving); with prices the user gives, "
    "supported if the saving is at least the claimed one, contradicted otherwise"
)


def price_claim(saving: float, break_even_usd: float, claimed: float, prices_assumed: bool) -> str:
    """Claims 9 and 11: a cost saving that rests on chip prices."""
    if not math.isfinite(break_even_usd) or break_even_usd <= 0:
        return CONTRADICTED
    if prices_assumed:
        return DEPENDS
    return SUPPORTED if saving >= claimed else CONTRADICTED


# 10 -----------------------------------------------------------------------------------
HYBRID_RULE = (
    "three uses: (a) routing: the tile chip's speed relative to the GPU (GPU time / tile time) must be "
    "higher for long texts (8 x 512 tokens) than for short ones (32 x 128), so long texts belong on it; "
    "(b) disaggregated serving: at the same hourly cost, the better split of generation (prefill on one "
    "kind, decode on the other) must carry more requests/s at the p99 target than the better deployment "
    "of one kind; (c) training: moving attention's inputs and outputs between a GPU and a tile chip must "
    "take less time than computing attention on the GPU; supported if all hold, contradicted if none "
    "does, depends (on the use) otherwise"
)


def hybrid(
    speedup_long: float, speedup_short: float, link_over_compute: float, split_gain: float
) -> str:
    """Claim 10: routing long texts to the tile chip, prefill and decode split across the two
    kinds (``split_gain``: capacity over the best one-kind deployment's, x), and attention
    offloaded in training."""
    return _every_or_none((speedup_long > speedup_short, split_gain > 1.0, link_over_compute < 1.0))


# 12 -----------------------------------------------------------------------------------
MEMORY_WALL_RULE = (
    "on the same number of chips, the fastest placement of GPT-3 175B training: supported if the "
    "tile cluster keeps its state on chip (on_chip) at an MFU at least the GPU cluster's; "
    "contradicted if the tile cluster must stream or does not fit where the GPU cluster holds the "
    "state in HBM; depends (on the cluster size) otherwise"
)


def memory_wall(tile_fit: str, gpu_fit: str, tile_mfu: float, gpu_mfu: float) -> str:
    """Claim 12: the 'compute-in-memory' tile chip and the memory wall of >100B training."""
    if tile_fit == "on_chip" and tile_mfu >= gpu_mfu:
        return SUPPORTED
    if tile_fit != "on_chip" and gpu_fit == "on_chip":
        return CONTRADICTED
    return DEPENDS


# 13 -----------------------------------------------------------------------------------
IRREPLACEABLE_RATIO = (
    0.5  # GPUs below half the tile cluster's samples/s per W would make it irreplaceable
)
IRREPLACEABLE_RULE = (
    "ratio = best GPU cluster's DLRM training samples/s per W / best tile cluster's; supported "
    "('irreplaceable') if no GPU cluster fits the step or the ratio is below 0.5, contradicted "
    "otherwise (a GPU cluster does the job at over half the tile cluster's efficiency)"
)


def irreplaceable(gpu_fits: bool, ratio: float) -> str:
    """Claim 13: sparse-embedding training that only the tile chip can do well."""
    return SUPPORTED if (not gpu_fits or ratio < IRREPLACEABLE_RATIO) else CONTRADICTED


# 14 -----------------------------------------------------------------------------------
MARKEDLY = 1.5  # "markedly higher": at least 1.5x the best GPU's throughput per watt (claim 14)
EQUAL_POWER_RULE = (
    "per workload, x = tile chip throughput per watt of board power / best GPU's; a workload "
    "supports the claim if x >= 1.5 ('markedly'); supported if every workload does, contradicted "
    "if none does, depends (on the workload) otherwise"
)


def equal_power_case(x: float) -> str:
    """One workload of claim 14: 'holds', 'higher, not markedly' or 'contradicted'."""
    return "holds" if x >= MARKEDLY else ("contradicted" if x <= 1.0 else "higher, not markedly")


def equal_power(ratios: dict) -> str:
    """Claim 14: ``ratios`` maps a workload to its tile/GPU per-watt ratio."""
    hits = [x >= MARKEDLY for x in ratios.values()]
    return _every_or_none(hits)


# 15 -----------------------------------------------------------------------------------
BOTTLENECK_RULE = (
    "advantage = tile-chip training tokens/s per chip / GPU training tokens/s per chip (fastest placement "
    "on the same number of chips), for a memory-bottlenecked model (Llama-2-7B: 16 bytes of training "
    "state per parameter exceed one GPU's HBM, so the GPUs shard it and the tile chips stream it) and a "
    "small one (BERT-base: its state fits one GPU); at any one pair of chip prices the cost per token "
    "scales with 1 / advantage, so prices cancel; supported if the memory-bottlenecked model's "
    "advantage is the larger, contradicted otherwise"
)


def memory_bottleneck(advantage_bottleneck: float, advantage_small: float) -> str:
    """Claim 15: the model with a severe memory bottleneck gains most from moving."""
    return SUPPORTED if advantage_bottleneck > advantage_small else CONTRADICTED
