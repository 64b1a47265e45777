"""``ipusim calibrate``: set the GPU model's efficiency parameters from a user's measurements."""

from __future__ import annotations

from ._common import add_json, print_json

NAME = "calibrate"
HELP = "fit the GPU's efficiency parameters to your own measured step times (registry CSV format)"
ORDER = 85


def add_arguments(p):
    p.add_argument("--measurements", metavar="FILE", required=True,
                   help="CSV in the format of ipusim/data/published.csv (see published.md): padded GPU "
                        "steps of one chip, latency in ms")
    p.add_argument("--out", metavar="FILE", default=None,
                   help="write the calibration (TOML) here; `--calibration FILE` reads it back")
    add_json(p)


def run(args) -> int:
    from .. import calibration

    result = calibration.fit(calibration.measurements(args.measurements))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(calibration.to_toml(result, args.measurements))
    if args.json:
        print_json(result)
        return 0
    print(f"{result['rows']} measurements on {result['chip']}")
    print(f"  tensor_efficiency  {result['tensor_efficiency_preset']:.3f} -> {result['tensor_efficiency']:.3f}")
    print(f"  launch_s           {result['launch_s_preset'] * 1e6:.2f} us -> {result['launch_s'] * 1e6:.2f} us")
    print(f"  rms |ln(predicted / measured)|  {result['rms_log_error_before']:.3f} -> "
          f"{result['rms_log_error_after']:.3f}")
    if args.out:
        print(f"written to {args.out}")
    return 0
