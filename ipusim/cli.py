"""``python -m ipusim`` / ``ipusim``: the command line.

Each sub-command lives in its own module in ``ipusim.commands`` and provides ``NAME``,
``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``; this file finds them.
Bad arguments and bad values exit with status 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import commands


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, status 2 (argparse prints usage too)
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _command_modules():
    mods = []
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mods.append(importlib.import_module(f"{commands.__name__}.{info.name}"))
    return sorted(mods, key=lambda m: getattr(m, "ORDER", 50))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ipusim",
        description="Simulate a tile-based accelerator (IPU style) against a shared-HBM GPU "
        "for transformer inference and training.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 0
    try:
        return int(args._run(args) or 0)
    except ValueError as err:
        print(f"ipusim {args.command}: error: {err}", file=sys.stderr)
        return 2
    except (OSError, KeyboardInterrupt) as err:
        print(f"ipusim {args.command}: error: {err}", file=sys.stderr)
        return 1
