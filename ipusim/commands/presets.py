"""``ipusim presets``: list the chip and model presets."""

from __future__ import annotations

from .. import hardware, workloads
from ._common import add_json, format_table, print_json

NAME = "presets"
HELP = "list the chip and model presets"
ORDER = 10


def add_arguments(p):
    add_json(p)
    p.add_argument("--sources", action="store_true", help="show every chip number with its source")


def run(args) -> int:
    chips = hardware.all_chips()
    models = [workloads.model(n) for n in workloads.MODELS]
    if args.json:
        print_json(
            {
                "chips": [
                    {
                        "name": c.name,
                        "kind": c.kind,
                        "peak_flops": c.peak_flops,
                        "power_w": c.power_w,
                        "sources": dict(c.sources),
                    }
                    for c in chips
                ],
                "models": [
                    {
                        "name": m.name,
                        "kind": m.kind,
                        "params": m.params,
                        "layers": m.layers,
                        "d_model": m.d_model,
                        "source": m.source,
                    }
                    for m in models
                ],
            }
        )
        return 0
    print("Chips")
    for c in chips:
        print(hardware.describe_sources(c) if args.sources else f"  {c!r}")
    print("\nModels")
    rows = [
        {
            "name": m.name,
            "kind": m.kind,
            "params": m.params / 1e6,
            "layers": m.layers,
            "d": m.d_model,
            "heads": m.heads,
        }
        for m in models
    ]
    print(
        format_table(
            rows,
            [
                ("name", "name", ""),
                ("kind", "kind", ""),
                ("params", "params (M)", ",.1f"),
                ("layers", "layers", "d"),
                ("d", "d_model", "d"),
                ("heads", "heads", "d"),
            ],
        )
    )
    return 0
