"""Time every Numba kernel against its plain-Python reference, side by side, in one run.

    python benchmarks/run.py            # full sizes
    python benchmarks/run.py --quick    # small sizes (a smoke run; ratios are then noisy)

Each ``benchmarks/bench_*.py`` defines ``rows(quick: bool) -> list[dict]``; a row has
``name``, ``kernel_s``, ``reference_s`` (either may be None), ``goal`` and ``note``.
Kernels are compiled (warmed up) before they are timed, every time with
``_timing.best_of`` (``from _timing import best_of``; this folder is first on ``sys.path``
when a script in it runs); the table prints the ratio reference / kernel. No row asserts
a time: this is a report, not a test.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    return mod


def collect(quick: bool, only: str | None = None) -> list[dict]:
    rows = []
    for path in sorted(HERE.glob("bench_*.py")):
        if only and only not in path.stem:
            continue
        rows += _load(path).rows(quick)
    return rows


def _fmt_s(x):
    if x is None:
        return "-"
    return f"{x * 1e3:,.2f} ms" if x < 1 else f"{x:,.2f} s"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    ap.add_argument("--only", help="run only bench_*.py files whose name contains this")
    args = ap.parse_args(argv)
    rows = collect(args.quick, args.only)
    head = f"{'benchmark':52s} {'kernel':>12s} {'reference':>12s} {'ratio':>9s}  goal / note"
    print(head)
    print("-" * len(head))
    for r in rows:
        k, ref = r.get("kernel_s"), r.get("reference_s")
        ratio = f"{ref / k:,.1f}x" if k and ref else "-"
        extra = "; ".join(x for x in (r.get("goal", ""), r.get("note", "")) if x)
        print(f"{r['name']:52s} {_fmt_s(k):>12s} {_fmt_s(ref):>12s} {ratio:>9s}  {extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
