"""Views of padding and packing: length histograms, pictures of rows, efficiency and throughput bars."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from .style import SEQUENCE_COLORS as _SEQ_COLORS

_PAD = "#d9d9d9"


def _ax(ax, figsize=(7, 4)):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def length_histogram(
    hist, *, max_len: int | None = None, ax=None, label: str | None = None, color=None
):
    """Share of sequences at each length, with the mean (dashed) and the row length marked.

    A spike far above the rest (Wikipedia: 23% of sequences cut at 512) is drawn off scale
    and labelled, so the shape of the rest stays visible.
    """
    ax = _ax(ax)
    share = hist.counts / hist.n
    ax.fill_between(hist.lengths, share, step="mid", alpha=0.35, color=color)
    ax.step(
        hist.lengths,
        share,
        where="mid",
        lw=1,
        color=color,
        label=label or f"{hist.name} (mean {hist.mean:.0f} tokens)",
    )
    ax.axvline(hist.mean, ls="--", lw=1, color=color or "k")
    top = int(np.argmax(share))
    rest = float(np.delete(share, top).max()) if share.size > 1 else float(share[top])
    spike = share[top] > 4 * rest
    ymax = max(getattr(ax, "_ipusim_ymax", 0.0), 1.6 * rest if spike else 1.1 * float(share[top]))
    ax._ipusim_ymax = ymax  # several histograms on one axes share the limit
    ax.set_ylim(0, ymax)
    if spike:
        ax.annotate(
            f"{share[top]:.0%} at {top + 1} (off scale)",
            xy=(top + 1, 0.99),
            xytext=(top + 1 - 0.5 * hist.max_len, 0.75),
            fontsize=8,
            color=color,
            xycoords=("data", "axes fraction"),
            textcoords=("data", "axes fraction"),
            arrowprops={"arrowstyle": "->", "color": color},
        )
    L = max_len or hist.max_len
    ax.axvline(L, color="k", lw=1.5)
    ax.text(
        L,
        0.3,
        f"row = {L} ",
        ha="right",
        va="center",
        fontsize=8,
        rotation=90,
        transform=ax.get_xaxis_transform(),
    )
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("share of sequences")
    ax.set_title("Sequence-length distribution (dashed: mean)")
    ax.legend(fontsize=8, loc="best")
    return ax


def _sample_rows(result, n_rows, seed):
    """Up to ``n_rows`` rows (lists of lengths) and their row lengths, drawn in proportion."""
    reps = result.repeats
    if result.rows <= n_rows:
        return result.rows_as_lists(limit=n_rows), result.row_lengths()
    rng = np.random.default_rng(seed)
    groups = rng.choice(reps.size, size=n_rows, p=reps / reps.sum())
    groups.sort()
    rows = [[int(v) for v in result.compositions[g] if v > 0] for g in groups]
    return rows, result.row_len[groups]


def rows_picture(result, *, n_rows: int = 24, ax=None, seed: int = 0, title: str | None = None):
    """Each row a horizontal bar: its sequences in colour, padding in grey.

    Histogram results show ``n_rows`` rows drawn in proportion to how often each
    composition occurs (seeded), sorted by composition.
    """
    ax = _ax(ax, (7, 0.22 * n_rows + 1.2))
    rows, row_len = _sample_rows(result, n_rows, seed)
    for y, (row, rl) in enumerate(zip(rows, row_len, strict=True)):
        x = 0
        for j, v in enumerate(row):
            ax.barh(
                y,
                v,
                left=x,
                height=0.8,
                color=_SEQ_COLORS[(y + 3 * j) % len(_SEQ_COLORS)],
                edgecolor="white",
                lw=0.5,
            )
            x += v
        if rl > x:
            ax.barh(
                y, rl - x, left=x, height=0.8, color=_PAD, hatch="///", edgecolor="#a0a0a0", lw=0
            )
    ax.set_xlim(0, result.max_len)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("token position in the row")
    ax.set_ylabel("row")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(
        title
        or f"{result.strategy}: {result.efficiency:.1%} efficient, "
        f"{result.sequences_per_row:.2f} seqs/row (grey: padding)",
        fontsize=10,
    )
    return ax


def efficiency_bars(results, *, published: dict | None = None, ax=None, title: str | None = None):
    """Packing efficiency of several results; ``published`` maps a label to a published value."""
    ax = _ax(ax)
    labels = [_label(r) for r in results]
    eff = [r.efficiency for r in results]
    bars = ax.bar(labels, eff, color=[_SEQ_COLORS[2 * i % 20] for i in range(len(results))])
    for b, e in zip(bars, eff, strict=True):
        ax.text(b.get_x() + b.get_width() / 2, e + 0.01, f"{e:.1%}", ha="center", fontsize=8)
    if published:
        for i, lab in enumerate(labels):
            if lab in published:
                ax.plot(
                    [i - 0.4, i + 0.4],
                    [published[lab]] * 2,
                    color="k",
                    lw=2,
                    label="published"
                    if i == min(j for j, x in enumerate(labels) if x in published)
                    else None,
                )
        ax.legend(fontsize=8, loc="lower right")
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("efficiency (real tokens / token slots)")
    ax.set_title(title or f"Padding vs packing, rows of {results[0].max_len} tokens")
    ax.tick_params(axis="x", labelrotation=20)
    return ax


def _label(r):
    if r.strategy in ("pad", "bucket"):
        return r.strategy
    return f"{r.strategy} <={r.max_per_row}" if r.max_per_row < r.max_len else r.strategy


_CONFIG_MARKERS = ("o", "s", "D", "^", "v", "P", "X")


def throughput_bars(
    table,
    *,
    claims: dict | None = None,
    references: dict | None = None,
    ax=None,
    title: str | None = None,
    chips: dict | None = None,
):
    """Requests/s per configuration and scenario on a log axis, one marker each (a bar's length
    on a log axis would depend on where the axis starts).

    ``table`` maps a scenario (e.g. "0% long") to {configuration label: requests/s}; a label
    that names a chip ("A100, ...", "IPU GC200, ...") takes the series' chip colour
    (``plots.style``), or ``chips`` maps a label to the preset it runs on ("a100-80gb"). ``claims`` maps the same scenarios to the articles' figures (black
    crosses); ``references`` maps a label to a published requests/s drawn as a horizontal line.
    """
    from .style import chip_color, label_color

    ax = _ax(ax, (10, 4.5))
    scenarios = list(table)
    configs = list(dict.fromkeys(k for s in scenarios for k in table[s]))
    ckeys = list(dict.fromkeys(k for s in scenarios for k in (claims or {}).get(s, {})))
    slots = len(configs) + len(ckeys)
    w = 0.8 / max(slots, 1)
    x = np.arange(len(scenarios))
    for i, cfg in enumerate(configs):
        vals = [table[s].get(cfg, np.nan) for s in scenarios]
        if chips and cfg in chips:
            col = chip_color(chips[cfg])
        else:
            col = label_color(cfg, _SEQ_COLORS[(2 * i) % 20])
        ax.plot(
            x + i * w,
            vals,
            _CONFIG_MARKERS[i % len(_CONFIG_MARKERS)],
            ms=9,
            ls="none",
            color=col,
            label=cfg,
        )
        for xi, v in zip(x + i * w, vals, strict=True):
            if np.isfinite(v):
                ax.annotate(
                    f"{v:,.0f}",
                    (xi, v),
                    xytext=(0, 7),
                    textcoords="offset points",
                    ha="center",
                    fontsize=7,
                )
    for j, ck in enumerate(ckeys):
        vals = [claims.get(s, {}).get(ck, np.nan) for s in scenarios]
        ax.plot(
            x + (len(configs) + j) * w,
            vals,
            "x" if j == 0 else "+",
            ms=10,
            mew=2,
            ls="none",
            color="k",
            label=f"article: {ck}",
        )
    for j, (lab, val) in enumerate((references or {}).items()):
        ax.axhline(val, color="k", lw=1, ls=(0, (4, 2 + 2 * j)))
        ax.text(x[-1] + 0.8, val * 1.05, lab, ha="right", va="bottom", fontsize=7)
    ax.set_xticks(x + w * (slots - 1) / 2, scenarios)
    ax.set_xlim(-0.5, len(scenarios) - 0.1)
    ax.set_yscale("log")
    ax.set_ylabel("requests per second (log)")
    ax.set_title(title or "BERT-base inference throughput")
    ax.grid(alpha=0.3, axis="y", which="both")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax


def waste_vs_long_share(long_fractions, series: dict, *, ax=None):
    """Wasted share of FLOPs (or tokens) vs the share of long texts; ``series`` maps label -> values."""
    ax = _ax(ax)
    for i, (label, vals) in enumerate(series.items()):
        ax.plot(
            np.asarray(long_fractions) * 100,
            np.asarray(vals) * 100,
            marker="o",
            ms=3,
            label=label,
            color=_SEQ_COLORS[(2 * i) % 20],
        )
    ax.axhline(30, ls=":", color="k", lw=1)
    ax.text(0, 31, "claim: 'cuts 30% and more'", fontsize=8)
    ax.set_xlabel("long texts in the mix (%)")
    ax.set_ylabel("compute wasted on padding (%)")
    ax.set_ylim(0, 100)
    ax.set_title("Padding waste vs the share of long texts")
    ax.legend(fontsize=8)
    return ax
