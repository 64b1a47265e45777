"""``ipusim calibrate``: set the GPU model's efficiency parameters from a user's measurements."""

from __future__ import annotations

from ._common import add_json, print_json

NAME = "calibrate"
HELP = "fit the GPU's (and tile chip's) efficiency parameters to your own measurements (registry CSV format)"
ORDER = 85


def add_arguments(p):
    p.add_argument(
        "--measurements",
        metavar="FILE",
        required=True,
        help="CSV in the format of ipusim/data/published.csv (see published.md): padded GPU "
        "steps of one chip (latency in ms) and/or tile microbenchmarks",
    )
    p.add_argument(
        "--out",
        metavar="FILE",
        default=None,
        help="write the calibration (TOML) here; `--calibration FILE` reads it back",
    )
    add_json(p)


def run(args) -> int:
    from .. import calibration

    result = calibration.calibrate(calibration.measurements(args.measurements))
    if args.out:
        from .._files import atomic_write

        with atomic_write(args.out) as f:
            f.write(calibration.to_toml(result, args.measurements))
    if args.json:
        print_json(result)
        return 0
    g, t = result.get("gpu"), result.get("tile")
    if g:
        print(f"{g['rows']} GPU measurements on {g['chip']}")
        print(
            f"  tensor_efficiency  {g['tensor_efficiency_preset']:.3f} -> {g['tensor_efficiency']:.3f}"
        )
        print(
            f"  launch_s           {g['launch_s_preset'] * 1e6:.2f} us -> {g['launch_s'] * 1e6:.2f} us"
        )
        print(
            f"  rms |ln(predicted / measured)|  {g['rms_log_error_before']:.3f} -> {g['rms_log_error_after']:.3f}"
        )
    if t:
        print(f"{t['rows']} tile microbenchmarks")
        for k, v in t["parameters"].items():
            print(f"  {k}  {t['preset'][k]:.4g} -> {v:.4g}")
        print(
            f"  rms |ln(predicted / measured)|  {t['rms_log_error_before']:.3f} -> {t['rms_log_error_after']:.3f}"
        )
    if args.out:
        print(f"written to {args.out}")
    return 0
