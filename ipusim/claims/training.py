"""Claims 11-13 and 15, on training: 70B-175B training cost, the memory wall, sparse embeddings
for recommender training, which models gain most.

Each function runs the fastest placement of a model on a cluster of each kind
(``training.best_placement``; claim 13 the DLRM step of ``embeddings.dlrm``) and judges the
result by its rule in ``ipusim.claims.rules``. Times are seconds, prices USD per chip-hour and
USD/kWh.
"""

from __future__ import annotations

import math

from .. import hardware, limits, workloads
from .._validate import positive
from . import rules
from .common import cached, make_verdict, preset_name, price_set, price_text
from .comparisons import pair, run_break_even
from .verdict import ClaimVerdict

CHIPS_TRAINING = (
    1024  # chips per training cluster (Megatron-LM's GPT-3 run, as notebook 06 and checklist C6)
)
TRAINING_TOKENS = {
    "gpt-3-175b": 3e11,
    "llama-2-70b": 2e12,
}  # tokens each model was trained on (notebook 06)


# 11 -------------------------------------------------------------------------------------
@cached
def _train(name: str, chip: str, chips: int):
    from .. import training

    return training.best_placement(name, chip, chips, explain=False)


def training_cost(prices=None, tile=None, gpu=None) -> ClaimVerdict:
    """Claim 11: 70B-175B pre-training at 15-20% lower cost than on GPU clusters.

    The fastest placement on 1,024 chips of each kind (``training.best_placement``), run for
    each model's token budget; ``prices`` as in ``hardware_cost``."""
    p = price_set(prices)
    tile, gpu = pair(11, tile, gpu)
    text, assumed = price_text(p, tile, gpu)
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
    return make_verdict(
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
    return make_verdict(
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


@cached
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
                hardware.chip(preset_name(c)).name,
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
    return make_verdict(
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
    p = price_set(prices)
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
    text, _ = price_text(p, tile, gpu)
    return make_verdict(
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
