"""The one comparison rule of the claims: which chips each claim compares, at which prices, and
its one break-even.

The rule: a claim compares the chips the articles compare. Where an article names a part (claim
1: "the H100 reaches 3 TB/s"), that part; otherwise the same-generation pair ``SAME_GENERATION``
(GC200 against A100-80GB: both 7 nm parts of 2020, the A100 the articles name), never the best of
several GPUs. Later parts (Bow against H100 and H200) are a stated sensitivity row,
``SENSITIVITY``, that ``ipusim.claims.sensitivity`` judges by the same rule. Prices come from one
``ipusim.prices.Prices`` (its ASSUMED placeholders unless the user gives quotes), and a claim that
rests on prices has one break-even price, ``break_even_usd_per_chip_hour``, computed here and
quoted by the notebooks.
"""

from __future__ import annotations

from dataclasses import dataclass

SAME_GENERATION = ("gc200", "a100-80gb")
"""(tile chip, GPU): the default pair, both 7 nm parts of 2020 (hardware presets' sources)."""

SENSITIVITY = (("bow", "h100-sxm"), ("bow", "h200"))
"""Later parts, judged by the same rule as a sensitivity row: Bow (2022) against H100 and H200."""


@dataclass(frozen=True)
class Comparison:
    """The chips claim ``claim`` compares and why. ``tile`` or ``gpu`` is None when the claim's
    numbers do not involve that kind (claim 8 counts FLOPs, chip-independent)."""

    claim: int
    tile: str | None
    gpu: str | None
    why: str
    sensitivity: tuple = SENSITIVITY

    def to_dict(self, prices=None, tile=None, gpu=None) -> dict:
        """The pair (``tile``, ``gpu`` when a sensitivity row replaces the table's), why, the
        sensitivity pairs and the pair's prices (``prices``: an ``ipusim.prices.Prices``; None:
        its ASSUMED defaults)."""
        if prices is None:
            from ..prices import Prices

            prices = Prices()
        tile = self.tile if tile is None else tile
        gpu = self.gpu if gpu is None else gpu
        chips = [c for c in (tile, gpu) if c is not None]
        return {
            "tile": tile,
            "gpu": gpu,
            "table_pair": [self.tile, self.gpu],
            "why": self.why,
            "sensitivity": [list(p) for p in self.sensitivity],
            "prices": {
                **{f"{c}_usd_per_chip_hour": prices.chip_hour(c) for c in chips},
                "usd_per_kwh": prices.usd_per_kwh,
                "assumed": any(prices.is_assumed(c) for c in chips) or prices.is_assumed("kwh"),
            },
        }


_T, _G = SAME_GENERATION
_SAME = "same generation (the rule's default): GC200 vs A100-80GB, both 7 nm parts of 2020"
TABLE = {
    c.claim: c
    for c in (
        Comparison(
            1,
            _T,
            "h100-sxm",
            "the article's own comparator: 'the H100 reaches 3 TB/s'",
            (("bow", "h100-sxm"), (_T, _G)),
        ),
        Comparison(2, _T, _G, _SAME),
        Comparison(3, _T, _G, _SAME),
        Comparison(
            4, _T, None, "the tile chip's compiler alone (no GPU in the claim)", (("bow", None),)
        ),
        Comparison(
            5,
            _T,
            _G,
            _SAME + "; the latency cut itself is the only measurement there is, GC2 vs T4 (JIA-T)",
        ),
        Comparison(6, _T, _G, _SAME + "; the batcher is PoplarML's, so the tile chip is judged"),
        Comparison(7, _T, _G, _SAME + "; the article's 'A100' and 'IPU of the same price'"),
        Comparison(
            8,
            None,
            None,
            "none: FLOPs of padded vs unpadded batches are the same on every chip",
            (),
        ),
        Comparison(9, _T, _G, _SAME),
        Comparison(10, _T, _G, _SAME),
        Comparison(11, _T, _G, _SAME),
        Comparison(12, _T, _G, _SAME),
        Comparison(13, _T, _G, _SAME + " (was: the best of A100 and H100)"),
        Comparison(14, _T, _G, _SAME + " (was: the best of A100 and H100)"),
        Comparison(15, _T, _G, _SAME),
    )
}
"""Claim number -> its ``Comparison``: the one table every judge reads its chips from."""


def pair(claim: int, tile: str | None = None, gpu: str | None = None) -> tuple:
    """(tile, GPU) claim ``claim`` is judged on: the table's, or the ones given (a sensitivity
    row); each must be a preset of its kind."""
    from .. import hardware

    row = TABLE[claim]
    tile = row.tile if tile is None else tile
    gpu = row.gpu if gpu is None else gpu
    for name, kind, presets in (
        (tile, "tile", hardware.TILE_PRESETS),
        (gpu, "GPU", hardware.GPU_PRESETS),
    ):
        if name is not None and name not in presets:
            raise ValueError(
                f"claim {claim}: {kind} must be a {kind} preset ({', '.join(presets)}), got {name!r}"
            )
    return tile, gpu


def break_even_usd_per_chip_hour(
    gpu_cost_usd: float, tile_chip_hours: float, tile_energy_usd: float, saving: float = 0.0
) -> float:
    """The tile chip-hour price at which the tile side costs ``1 - saving`` times the GPU side
    for the same work: ``((1 - saving) x gpu_cost - tile_energy) / tile_chip_hours``. Claims 9 and
    11 use it with their claimed savings (20%, 15%); ``saving=0`` is the equal-cost price."""
    if not 0 <= saving < 1:
        raise ValueError(f"saving must be a fraction in [0, 1), got {saving!r}")
    if not tile_chip_hours > 0:
        raise ValueError(f"tile_chip_hours must be > 0, got {tile_chip_hours!r}")
    return ((1 - saving) * gpu_cost_usd - tile_energy_usd) / tile_chip_hours


def run_break_even(tile_run, gpu_run, saving: float = 0.0) -> float:
    """``break_even_usd_per_chip_hour`` for two ``training.TrainingRun``s of the same tokens."""
    return break_even_usd_per_chip_hour(
        gpu_run.cost_usd, tile_run.chip_hours, tile_run.energy_kwh * tile_run.usd_per_kwh, saving
    )
