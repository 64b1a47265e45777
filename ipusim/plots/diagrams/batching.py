"""Concept diagrams of serving: a queue, a batcher and one timeline per policy (03); the same
requests padded, bucketed and packed into rows (04)."""

from __future__ import annotations

from types import MappingProxyType

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from ..style import sequence_color
from .shapes import FONT, GREY, arrow, box

# --------------------------------------------------------------------------------------------
# 03: a queue with a batcher, and one timeline per policy
# --------------------------------------------------------------------------------------------

TOY_FIXED_S = (
    0.004  # s per batch pass (toy service model for the timelines; ASSUMPTION, illustrative)
)
TOY_PER_TOKEN_S = 5e-6  # s per computed token slot (ditto)
_TOY_LEN_STEP = 32  # tokens per service-table column


def _toy_service(max_rows=16, max_len=512, packed=False):
    """A padded (or packed) ``ServiceModel`` whose batch time is a fixed pass plus a cost per token slot."""
    from ...serving import ServiceModel

    rows = np.arange(max_rows + 1)[:, None]
    if packed:  # one column: rows of max_len tokens
        tab = np.zeros((max_rows + 1, 2))
        tab[1:, 1] = TOY_FIXED_S + TOY_PER_TOKEN_S * rows[1:, 0] * max_len
        return ServiceModel("toy packed", tab, max_len, packed=True, pack_len=max_len, source="toy")
    cols = np.arange(max_len // _TOY_LEN_STEP + 1)[None, :]
    tab = TOY_FIXED_S + TOY_PER_TOKEN_S * rows * cols * _TOY_LEN_STEP
    tab[0, :] = 0.0
    tab[:, 0] = 0.0
    return ServiceModel("toy padded", tab, _TOY_LEN_STEP, source="toy")


def toy_policies(max_batch: int = 4) -> dict:
    """The six policies of ``ipusim.policies``, built by ``policies.make`` with small knobs for a timeline."""
    from ... import policies

    kw = {
        "static": {"timeout_s": 0.010},
        "token": {"max_tokens": 512, "token_max_batch": 8},
        "buckets": {"edges": (128, 512)},
        "adaptive": {"latency_target_s": 0.02},
        "continuous": {"kv_capacity_tokens": 10_000},
    }
    return {
        name: policies.make(name, max_batch=max_batch, max_delay_s=0.004, **kw.get(name, {}))
        for name in policies.POLICIES
    }


def batching_timelines(n_requests: int = 12, rate_per_s: float = 300.0, seed: int = 3, ax=None):
    """A queue and a batcher (top), then when each request waits and is served under each policy.

    The timelines are ``serving.simulate`` (``simulate_generation`` for continuous batching)
    on the same ``n_requests`` Poisson arrivals and lengths, with a toy service model (4 ms per
    pass + 5 µs per computed token slot; an illustration, not a chip). A thin grey line is a
    request waiting in the queue, a coloured bar its batch running (continuous: the request's
    run from its first step to its last token).

    Returns the figure (queue picture on top, one axes per policy below); given ``ax``, draws only
    the queue picture on it and returns ``ax``.
    """
    from ... import arrivals, lengths, policies, serving
    from ...serving.generation import GenerationModel

    n = int(n_requests)
    if n != n_requests or not 2 <= n <= 40:
        raise ValueError(
            f"n_requests must be a whole number in 2..40 (one line each), got {n_requests!r}"
        )
    if not (np.isfinite(rate_per_s) and rate_per_s > 0):
        raise ValueError(
            f"rate_per_s must be a positive number of requests per second, got {rate_per_s!r}"
        )
    arr = arrivals.poisson(rate_per_s, n, seed=seed)
    lens = np.minimum(lengths.sample(n, long_fraction=0.3, seed=seed), 512)
    pol = toy_policies()
    padded, packed = _toy_service(), _toy_service(packed=True)
    runs = {}
    for name, p in pol.items():
        if isinstance(p, policies.Continuous):
            dec = np.full((p.max_batch + 1, 17), 0.0)
            dec[1:, :] = (
                0.001 + 0.0001 * np.arange(1, p.max_batch + 1)[:, None]
            )  # s per decode step (toy)
            gen = GenerationModel("toy", padded, dec, 64, source="toy")
            runs[name] = serving.simulate_generation(arr, lens // 4 + 1, np.full(n, 3), p, gen)
        else:
            runs[name] = serving.simulate(
                arr, lens, p, packed if isinstance(p, policies.TokenBudget) else padded
            )

    if ax is None:
        fig = plt.figure(figsize=(12, 1.9 + 1.15 * len(runs)), layout="constrained")
        gs = fig.add_gridspec(len(runs) + 1, 1, height_ratios=[1.6] + [1] * len(runs))
        top = fig.add_subplot(gs[0])
        axes = [fig.add_subplot(gs[i + 1]) for i in range(len(runs))]
        for a in axes[1:]:
            a.sharex(axes[0])
    else:
        top, axes = ax, None
    _queue_picture(top)
    if axes is None:
        return top
    t_end = max(float(np.max(r.finish_s)) for r in runs.values()) * 1e3
    for a, (name, r) in zip(axes, runs.items(), strict=True):
        y = np.arange(n)[::-1]
        a.hlines(y, arr * 1e3, r.start_s * 1e3, color="#9e9e9e", lw=1.2)
        a.plot(arr * 1e3, y, "|", color="k", ms=6)
        bid = r.batch_id
        for i in range(n):
            col = sequence_color(2 * int(bid[i]) if bid[i] >= 0 else 2 * i)  # dark shades first
            a.barh(
                y[i],
                (r.finish_s[i] - r.start_s[i]) * 1e3,
                left=r.start_s[i] * 1e3,
                height=0.7,
                color=col,
            )
        a.set_yticks([])
        a.set_ylim(-0.8, n - 0.2)
        a.set_xlim(0, t_end * 1.01)
        what = (
            " (bar: a request's run, from its first step to its last token)"
            if name == "continuous"
            else ""
        )
        a.set_title(f"{name}: {pol[name].describe()}{what}", fontsize=FONT, loc="left", pad=2)
        a.tick_params(labelsize=FONT - 1)
        for s in ("top", "right", "left"):
            a.spines[s].set_visible(False)
        if a is not axes[-1]:
            a.tick_params(labelbottom=False)
    axes[-1].set_xlabel(
        "time, ms (| arrival, grey: waiting in the queue, bar: served, one colour per batch)",
        fontsize=FONT,
    )
    return axes[0].figure


def _queue_picture(ax):
    ax.set_xlim(0, 12)
    ax.set_ylim(0, 2)
    ax.set_axis_off()
    for i, x in enumerate(np.linspace(0.3, 1.5, 4)):
        ax.add_patch(Rectangle((x, 0.75), 0.22, 0.5, color=sequence_color(2 * i)))
    ax.text(1.0, 0.35, "requests arrive", ha="center", fontsize=FONT)
    arrow(ax, (1.85, 1.0), (2.6, 1.0))
    box(ax, 2.7, 0.55, 3.0, 0.9, face=GREY)
    for i in range(5):
        ax.add_patch(
            Rectangle((3.0 + i * 0.5, 0.75), 0.35, 0.5, color=sequence_color(2 * i + 8), alpha=0.8)
        )
    ax.text(4.2, 0.25, "queue (first in, first out)", ha="center", fontsize=FONT)
    arrow(ax, (5.8, 1.0), (6.5, 1.0))
    box(
        ax,
        6.6,
        0.45,
        2.2,
        1.1,
        "batcher: when to send,\nhow many together",
        face="#fff2cc",
        fontsize=FONT,
    )
    arrow(ax, (8.9, 1.0), (9.6, 1.0))
    box(
        ax,
        9.7,
        0.45,
        2.1,
        1.1,
        "device runs\none batch",
        face=GREY,
        fontsize=FONT,
    )
    ax.text(
        0.0,
        1.85,
        "A batching server; below, the same 12 arrivals under each policy "
        "(simulated, toy service times)",
        fontsize=FONT,
        va="top",
    )


# --------------------------------------------------------------------------------------------
# 04: padded vs bucketed vs packed rows
# --------------------------------------------------------------------------------------------

ROWS_SAMPLE = MappingProxyType(
    {"n": 10, "long_fraction": 0.3, "seed": 5}
)  # padding_rows' default (lengths.sample)


def padding_rows(lengths=None, max_len: int = 512, buckets=(128, 256, 512), ax=None):
    """The same requests three ways: padded to ``max_len``, padded to their bucket, packed (SPFHP).

    ``lengths`` defaults to ``ROWS_SAMPLE``: 10 requests drawn (seed 5) by ``lengths.sample`` with 30% long texts.
    Each panel's title gives ``Packing.efficiency`` (real tokens / computed slots). Returns the figure
    of three panels; given ``ax``, draws only the packed panel on it and returns ``ax``.
    """
    from ... import lengths as L
    from ... import packing

    lens = L.sample(**ROWS_SAMPLE) if lengths is None else np.asarray(lengths)
    if lens.ndim != 1 or lens.size == 0 or lens.size > 40:
        raise ValueError(f"lengths must be a list of 1-40 request lengths, got {lens.size}")
    runs = [
        packing.pack(lens, max_len, "pad"),
        packing.pack(lens, max_len, "bucket", buckets=list(buckets)),
        packing.pack(lens, max_len, "spfhp"),
    ]
    edges = sorted(set(int(b) for b in buckets) | {max_len})
    titles = [
        f"padded to the row length, {max_len}",
        f"bucketed: padded to its bucket's edge {tuple(edges)}",
        "packed (SPFHP): several requests share a row",
    ]
    if ax is None:
        fig, axes = plt.subplots(
            1, 3, figsize=(13, 0.3 * lens.size + 1.6), sharey=True, layout="constrained"
        )
    else:
        axes = [ax]
        runs, titles = runs[2:], titles[2:]
    order = np.argsort(-lens, kind="stable")
    colors = {int(i): sequence_color(k) for k, i in enumerate(order)}
    for a, p, title in zip(axes, runs, titles, strict=True):
        row_len = p.row_lengths()
        rows = {}
        for i, r in enumerate(p.seq_row):
            rows.setdefault(int(r), []).append(i)
        for y, (r, members) in enumerate(
            sorted(rows.items(), key=lambda kv: -sum(lens[m] for m in kv[1]))
        ):
            yy = lens.size - 1 - y
            a.barh(yy, row_len[r], color="#e0e0e0", height=0.75, edgecolor="#bdbdbd", lw=0.5)
            x = 0
            for m in sorted(members, key=lambda m: -lens[m]):
                a.barh(yy, lens[m], left=x, color=colors[m], height=0.75, edgecolor="white", lw=0.8)
                if lens[m] >= 45:
                    a.text(
                        x + lens[m] / 2,
                        yy,
                        f"{lens[m]}",
                        ha="center",
                        va="center",
                        fontsize=FONT - 2,
                    )
                x += lens[m]
        a.set_title(
            f"{title}\n{p.rows} rows, {p.efficiency:.0%} of slots carry tokens", fontsize=FONT
        )
        a.set_xlim(0, max_len)
        a.set_xlabel("token slots in a row", fontsize=FONT)
        a.set_yticks([])
        a.tick_params(labelsize=FONT - 1)
        if p.strategy == "bucket":
            for b in edges[:-1]:
                a.axvline(b, color="#757575", lw=0.8, ls=":")
        for s in ("top", "right", "left"):
            a.spines[s].set_visible(False)
    axes[0].set_ylim(-0.6, lens.size - 0.4)
    return axes[0].figure if ax is None else axes[0]
