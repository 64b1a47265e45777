"""What the claims' judges share: the default pair, the verdict, prices, the shared simulations.

``make_verdict`` builds a ``ClaimVerdict`` with its row of the comparison table; ``price_set`` and
``price_text`` read an ``ipusim.prices.Prices``; ``simulate_step`` (and ``bert_short``, the
articles' short-text BERT-base step) is one step on one chip, computed once per process. Every
simulation the judges cache is declared with ``cached`` (``functools.cache``), so that
``clear_cache()`` forgets them all.

Times are seconds, prices USD per chip-hour and USD/kWh.
"""

from __future__ import annotations

import functools

from .. import machine, workloads
from . import comparisons
from .comparisons import SAME_GENERATION
from .verdict import DEPENDS, ClaimVerdict

TILE, GPU = SAME_GENERATION  # "gc200", "a100-80gb": the rule's default pair (claims.comparisons)

_CACHES = []


def cached(f):
    """``functools.cache(f)``, remembered so that ``clear_cache`` forgets it too."""
    f = functools.cache(f)
    _CACHES.append(f)
    return f


def clear_cache() -> None:
    """Forget the shared simulations (after changing a preset in place, say)."""
    for f in _CACHES:
        f.cache_clear()


@cached
def simulate_step(
    chip: str,
    lengths: tuple,
    pad_to: int | None = None,
    phase: str = "forward",
    model: str = "bert-base",
):
    return machine.simulate(chip, workloads.step(model, list(lengths), pad_to=pad_to, phase=phase))


def bert_short(chip):  # BERT-base, 32 requests of 128 tokens: the articles' short texts
    return simulate_step(chip, (128,) * 32, 128)


def make_verdict(*fields, break_even="", chips=(None, None), prices=None):
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


def price_text(prices, *chips) -> tuple[str, bool]:
    assumed = any(prices.is_assumed(c) for c in chips) or prices.is_assumed("kwh")
    text = ", ".join(f"{c} {prices.chip_hour(c):.2f} USD/chip-hour" for c in chips)
    return f"{text}, {prices.usd_per_kwh:.2f} USD/kWh" + (
        " (ASSUMED placeholders)" if assumed else " (given)"
    ), assumed


def preset_name(name):
    if not isinstance(
        name, str
    ):  # results are cached by preset name: a modified chip object would be mistaken
        raise ValueError(f"give a chip preset name, got {type(name).__name__}")
    return name


def price_set(prices):
    if prices is None:
        from ..prices import Prices

        return Prices()
    if not hasattr(prices, "chip_hour") or not hasattr(prices, "is_assumed"):
        raise ValueError(
            f"prices must be an ipusim.prices.Prices (or None for the assumed defaults), "
            f"got {type(prices).__name__}"
        )
    return prices
