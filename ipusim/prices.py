"""Assumed economics, in the specs layer: chip-hour and energy prices.

There is no sourced price list in this project: every number here is a placeholder of a
plausible order (ASSUMPTION, ``PRICE_ASSUMPTION`` says why), to be replaced by the user's own
quotes. Training (``TrainingStep.run``), the checklist, the claims and the sweep read them here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

from . import limits
from ._validate import positive

# ---------------------------------------------------------------------------------------
# Prices (ASSUMPTION): no sourced price list exists in this project; every number here is a
# placeholder of a plausible order, to be replaced by the user's own quotes.
# ---------------------------------------------------------------------------------------
DEFAULT_USD_PER_CHIP_HOUR = MappingProxyType(
    {
        "gc2": 0.80,
        "gc200": 1.60,
        "bow": 2.00,
        "a100-40gb": 1.60,
        "a100-80gb": 2.00,
        "h100-sxm": 3.50,
        "h200": 4.00,
    }
)
DEFAULT_USD_PER_KWH = 0.15
_REPLACE = "Replace them with your own quotes (config [prices] or --price CHIP=USD, --usd-per-kwh)."
PRICE_ASSUMPTION = (
    "ASSUMPTION: chip-hour and energy prices are placeholders, not sourced (the project has no "
    "price list; prices vary by vendor, contract and year). The articles compare 'an IPU of similar "
    "price' to an A100 without a number; GC200 1.60 and A100-80GB 2.00 USD/chip-hour are 20% apart, "
    "inside the articles' own 20-30% saving claims, so a cost reason at these prices can be the price "
    "gap only (the verdict says when). " + _REPLACE
)


def _price_names(chips) -> list[str]:
    """The prices a comparison of ``chips`` (presets or names) uses: each chip once, then kWh."""
    return [*dict.fromkeys([*(c.name if hasattr(c, "name") else str(c) for c in chips), "kwh"])]


@dataclass(frozen=True)
class Prices:
    """Prices in US dollars. Defaults are ASSUMPTIONS (see ``PRICE_ASSUMPTION``)."""

    usd_per_chip_hour: MappingProxyType = field(
        default_factory=lambda: dict(DEFAULT_USD_PER_CHIP_HOUR)
    )
    usd_per_kwh: float = DEFAULT_USD_PER_KWH
    user_set: tuple = ()  # names of prices the user gave (chip names and/or "kwh")

    def __post_init__(self):
        d = {
            str(k).lower(): positive(
                f"price of {k} per chip-hour", v, at_most=limits.MAX_USD, why="USD"
            )
            for k, v in dict(self.usd_per_chip_hour).items()
        }
        object.__setattr__(self, "usd_per_chip_hour", MappingProxyType(d))
        object.__setattr__(
            self,
            "usd_per_kwh",
            positive(
                "usd_per_kwh",
                self.usd_per_kwh,
                at_most=1e3,
                why="USD per kWh; retail prices are under 1",
            ),
        )
        object.__setattr__(self, "user_set", tuple(self.user_set))

    def chip_hour(self, c) -> float:
        name = c.name if hasattr(c, "name") else str(c)
        if name not in self.usd_per_chip_hour:
            raise ValueError(
                f"no price per chip-hour for chip {name!r}: give one with --price {name}=USD "
                "or in the config's [prices.usd_per_chip_hour] table"
            )
        return self.usd_per_chip_hour[name]

    def is_assumed(self, name: str) -> bool:
        return name not in self.user_set

    def assumed(self, chips) -> list[str]:
        """Which of the prices a comparison of ``chips`` uses (each chip-hour, then ``"kwh"``)
        are placeholders, not the user's: one rule for every report that says ASSUMED."""
        return [n for n in _price_names(chips) if self.is_assumed(n)]

    def note(self, chips) -> str:
        """What a report says about the prices a comparison of ``chips`` uses: the placeholder
        ASSUMPTION (``PRICE_ASSUMPTION``) when all are defaults, the defaulted ones by name and
        value when some are, and that all are the user's own otherwise."""
        names = _price_names(chips)  # once: ``chips`` may be a generator
        missing = self.assumed(names)
        if len(missing) == len(names):
            return PRICE_ASSUMPTION
        if not missing:
            return (
                "Prices: the user's own (every chip-hour price and the energy price used here "
                "are user values, not ipusim's placeholders)"
            )
        shown = ", ".join(
            f"{self.usd_per_kwh:g} USD/kWh"
            if n == "kwh"
            else f"{n} {self.chip_hour(n):g} USD/chip-hour"
            for n in missing
        )
        return (
            f"ASSUMPTION: placeholder price(s), not sourced: {shown}; the other prices used here "
            f"are user values. {_REPLACE}"
        )

    def with_prices(self, chips: dict | None = None, usd_per_kwh: float | None = None) -> Prices:
        d = dict(self.usd_per_chip_hour)
        user = set(self.user_set)
        for k, v in (chips or {}).items():
            d[str(k).lower()] = v
            user.add(str(k).lower())
        kwh = self.usd_per_kwh
        if usd_per_kwh is not None:
            kwh = usd_per_kwh
            user.add("kwh")
        return Prices(d, kwh, tuple(sorted(user)))
