"""Helpers shared by the sub-commands: common arguments, JSON output and plain tables."""

from __future__ import annotations

import argparse
import json

from .. import hardware, lengths, texttable, workloads
from .._json import json_safe


def add_chip_and_model(
    p, *, chip: str | None = None, model: str | None = None, model_note: str = ""
) -> None:
    """``--chip`` and ``--model``, listing the presets; each required unless given a default
    (``model_note`` is added to ``--model``'s help)."""
    p.add_argument(
        "--chip", required=chip is None, default=chip, help=_presets("chip", hardware.PRESETS, chip)
    )
    p.add_argument(
        "--model",
        required=model is None,
        default=model,
        help=_presets("model", workloads.MODELS, model) + model_note,
    )


def _presets(what, names, default) -> str:
    files = (
        "a chip file (.toml/.json)"
        if what == "chip"
        else "a model file (.toml/.json) or hf:PATH/config.json"
    )
    return f"{what} preset: {', '.join(names)}; or {files} (python -m ipusim schema {what})" + (
        f" (default {default})" if default else ""
    )


def add_batch_and_seq_len(p) -> None:
    """``--batch`` and ``--seq-len`` (both required): the shape of one step."""
    p.add_argument("--batch", type=int, required=True, help="sequences per step")
    p.add_argument(
        "--seq-len",
        type=int,
        required=True,
        help="tokens per sequence (for --phase decode: context length)",
    )


def add_lengths(p, what: str) -> None:
    """``--lengths``: one option that reads the same names in every command (``lengths.load``);
    ``what`` says what the command does with them (serve and simulate draw from them, pack packs
    them as they are, the checklist samples a CSV or a dataset and takes a list as it is)."""
    names = ", ".join(lengths.DATASET_NAMES)
    p.add_argument(
        "--lengths",
        metavar="NAME|FILE",
        help=f"{what}: a shipped dataset ({names}), a 'length,count' CSV, or a file of lengths "
        "one a line",
    )


def seed_arg(text: str) -> int:
    """argparse type of every ``--seed``: a whole number >= 0 (what numpy's generators take)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a seed is a whole number >= 0, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"a seed is a whole number >= 0, got {v}")
    return v


def number(lo: float, hi: float, unit: str = "", why: str = ""):
    """argparse type of a float option that means something only in ``lo..hi`` (``unit``; ``why``
    that range): a non-number, NaN, an infinity or a value outside is refused naming the option."""
    from .._validate import in_range

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        try:
            return in_range("value", v, lo, hi, why=why, unit=unit)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err).removeprefix("value ")) from None

    parse.__name__ = "number"
    return parse


def add_json(p) -> None:
    """``--json``: the command prints exactly one JSON object (with ``print_json``)."""
    p.add_argument("--json", action="store_true", help="print one JSON object")


def print_json(obj) -> None:
    """Print one JSON object (NaN and infinities become null)."""
    print(json.dumps(json_safe(obj), indent=2, allow_nan=False))


def format_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """A plain-text table; ``columns`` are (key, header, format spec) (``ipusim.texttable``)."""
    return texttable.text(rows, columns)
