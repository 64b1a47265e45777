"""``ipusim validate``: every published figure in the registry against ipusim's prediction now."""

from __future__ import annotations

import csv
import math

from ._common import add_json, format_table, print_json

NAME = "validate"
HELP = "predict every published figure ipusim uses (ipusim/data/published.csv) and show the errors"
ORDER = 80

_COLUMNS = [
    ("id", "row", ""),
    ("use", "use", ""),
    ("published", "published", ",.4g"),
    ("predicted", "predicted", ",.4g"),
    ("unit", "unit", ""),
    ("ratio", "ratio", ".3f"),
    ("tol", "tolerance", ""),
    ("ok", "within", ""),
    ("source", "source", ""),
]


def add_arguments(p):
    from ..validation import AREAS

    p.add_argument(
        "--area", choices=AREAS, default=None, help="only the rows of this area (default: all)"
    )
    p.add_argument(
        "--calibration",
        metavar="FILE",
        default=None,
        help="a calibration file (ipusim calibrate --out): show the errors before and after it",
    )
    p.add_argument(
        "--csv", metavar="FILE", default=None, help="also write the rows to this CSV file"
    )
    add_json(p)


def _fmt(x, spec):
    return "n/a" if isinstance(x, float) and not math.isfinite(x) else format(x, spec)


def _summary_table(summary) -> str:
    rows = [
        {
            "area": s["area"],
            "rows": str(s["rows"]),
            "band": _fmt(s["share_within_band"], ".0%"),
            "gm": _fmt(s["geomean_ratio"], ".3f"),
            "in": f"{s['in_rows']}: {_fmt(s['in_geomean_abs_error'], '.1%')}",
            "out": f"{s['out_rows']}: {_fmt(s['out_geomean_abs_error'], '.1%')}",
        }
        for s in summary
    ]
    return format_table(
        rows,
        [
            ("area", "area", ""),
            ("rows", "rows", ""),
            ("band", "within 25%", ""),
            ("gm", "geomean ratio", ""),
            ("in", "in sample: rows, error", ""),
            ("out", "out of sample: rows, error", ""),
        ],
    )


def run(args) -> int:
    from .. import validation

    params = None
    if args.calibration:
        from .. import calibration

        params = calibration.load(args.calibration)
    results = validation.validate(args.area)
    after = validation.validate(args.area, params=params) if params else None
    summary = validation.summary(results)
    if args.csv:
        from .._files import atomic_write

        with atomic_write(args.csv, newline="") as f:
            w = csv.DictWriter(f, list(results[0]), lineterminator="\n")
            w.writeheader()
            w.writerows(after or results)
    if args.json:
        out = {"rows": results, "summary": summary, "band": validation.BAND}
        if after:
            out.update(
                {
                    "calibration": args.calibration,
                    "rows_after": after,
                    "summary_after": validation.summary(after),
                }
            )
        print_json(out)
        return 0
    table = [
        {**r, "tol": f"±{r['tolerance']:.0%}", "ok": "yes" if r["within"] else "NO"}
        for r in results
    ]
    print(format_table(table, _COLUMNS))
    print(
        "\nper area (error: geometric mean of |predicted / published - 1| in log terms, "
        "exp(mean |ln ratio|) - 1; in sample = calibration rows)"
    )
    print(_summary_table(summary))
    if after:
        print(f"\nwith {args.calibration}:")
        print(_summary_table(validation.summary(after)))
    return 0
