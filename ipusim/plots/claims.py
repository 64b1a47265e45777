"""The claims' scoreboard as a picture: which notebook teaches which claim, and its verdict.

Verdict states have their own palette and markers (never a chip's colour: blue and red mean
chips in this series), and each state is also written beside its row, so the figure reads in
grey too. The states are ``ipusim.claims.STATES``, spelled here so that importing this module
(the concept diagrams do) does not import the claims' simulations (tests/test_claims_plots.py
checks the two agree).
"""

from __future__ import annotations

from .style import axes

VERDICT_COLORS = {"supported": "#1b9e77", "contradicted": "#d95f02", "depends": "#e6ab02"}
VERDICT_MARKERS = {"supported": "o", "contradicted": "X", "depends": "D"}
STATES = tuple(VERDICT_COLORS)


def verdict_color(state: str) -> str:
    """The colour of a verdict state (supported, contradicted, depends)."""
    if state not in VERDICT_COLORS:
        raise ValueError(f"verdict state must be one of {', '.join(STATES)}; got {state!r}")
    return VERDICT_COLORS[state]


def scoreboard_map(verdicts, notebooks, ax=None):
    """One row per claim (``ipusim.claims.ClaimVerdict``), one column per notebook of
    ``notebooks`` (file names, in series order): a marker where the notebook teaches the claim,
    in the verdict's colour and shape, and the verdict written at the row's end."""
    verdicts = list(verdicts)
    notebooks = list(notebooks)
    if not verdicts or not notebooks:
        raise ValueError("scoreboard_map needs at least one verdict and one notebook")
    col = {nb: i for i, nb in enumerate(notebooks)}
    unknown = sorted({nb for v in verdicts for nb in v.notebooks if nb not in col})
    if unknown:
        raise ValueError(
            f"verdicts name notebooks not in notebooks: {', '.join(unknown)} "
            f"(notebooks: {', '.join(notebooks)})"
        )
    ax = axes(ax, size=(9.5, 0.36 * len(verdicts) + 1.6))
    n = len(notebooks)
    for row, v in enumerate(verdicts):
        y = len(verdicts) - 1 - row
        ax.axhline(y, color="0.92", lw=0.8, zorder=0)
        xs = [col[nb] for nb in v.notebooks]
        ax.plot(
            xs,
            [y] * len(xs),
            ls="-" if len(xs) > 1 else "none",
            lw=1,
            color=verdict_color(v.state),
            marker=VERDICT_MARKERS[v.state],
            ms=9,
            mec="black",
            mew=0.5,
        )
        ax.text(n - 0.45, y, v.state, va="center", fontsize=9, color="black")
    for x in range(n):
        ax.axvline(x, color="0.92", lw=0.8, zorder=0)
    ax.set_xticks(range(n), [nb[:2] for nb in notebooks])
    ax.set_yticks(
        range(len(verdicts)), [f"{v.claim}. {v.title}" for v in reversed(verdicts)], fontsize=8
    )
    ax.set_xlim(-0.6, n + 0.9)
    ax.set_ylim(-0.7, len(verdicts) - 0.3)
    ax.set_xlabel("notebook that teaches the claim")
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    handles = [
        ax.plot(
            [],
            [],
            ls="none",
            marker=VERDICT_MARKERS[s],
            color=VERDICT_COLORS[s],
            mec="black",
            mew=0.5,
            ms=8,
            label=s,
        )[0]
        for s in STATES
    ]
    ax.legend(
        handles=handles,
        title="verdict",
        fontsize=8,
        title_fontsize=8,
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        frameon=False,
    )
    ax.set_title(
        f"The {len(verdicts)} claims: where the series teaches each, and its verdict", loc="left"
    )
    return ax
