"""``python -m ipusim`` / ``ipusim``: the command line.

Each sub-command lives in its own module in ``ipusim.commands`` and provides ``NAME``,
``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``; this file finds them.
Bad arguments and bad values exit with status 2 and one line on stderr, never a traceback;
Ctrl-C exits with status 130 and one line; a reader that goes away (``| head``) ends the
command quietly with status 141. ``--max-memory`` (before or after the command)
sets the memory budget of ``ipusim.limits``; ``--version`` prints the version.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import math
import os
import pkgutil
import sys

from . import __version__, commands, limits
from .commands import _costs

_MAX_INT = (
    2**53
)  # any whole-number option: above this it cannot be a count this code can hold exactly


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):  # no prefixes: only the documented spelling of a flag
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):  # one line, status 2 (argparse prints usage too)
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _command_modules(only: str | None = None):
    """The command modules (each file of ``ipusim.commands`` is named after its command), or
    just ``only``'s when it names one: a run imports only what its command needs."""
    names = [i.name for i in pkgutil.iter_modules(commands.__path__) if not i.name.startswith("_")]
    if only in names:
        names = [only]
    mods = [importlib.import_module(f"{commands.__name__}.{name}") for name in sorted(names)]
    return sorted(mods, key=lambda m: getattr(m, "ORDER", 50))


def _command_word(argv) -> str | None:
    """The first word of ``argv`` that is not an option (nor the value of --max-memory)."""
    skip = False
    for tok in argv:
        if skip:
            skip = False
        elif tok == "--max-memory":
            skip = True
        elif tok == "--" or not tok.startswith("-"):
            return None if tok == "--" else tok
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ipusim",
        description="Simulate a tile-based accelerator (IPU style) against a shared-HBM GPU "
        "for transformer inference and training.",
    )
    parser.add_argument("--version", action="version", version=f"ipusim {__version__}")
    parser.add_argument(
        "--max-memory",
        metavar="SIZE",
        default=None,
        help=f"memory budget for one run, e.g. 4G or 512M (default: ${limits.ENV_MAX_MEMORY} "
        f"or {limits.DEFAULT_MAX_MEMORY_BYTES // 2**30}G); inputs that need more are refused",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in _command_modules(only):
        p = sub.add_parser(
            mod.NAME, help=mod.HELP, description=mod.HELP, epilog=getattr(mod, "EPILOG", None)
        )
        mod.add_arguments(p)
        with contextlib.suppress(
            argparse.ArgumentError
        ):  # unless the command has its own --max-memory
            p.add_argument(
                "--max-memory",
                metavar="SIZE",
                default=argparse.SUPPRESS,
                help="memory budget for this run, e.g. 4G (see ipusim --help)",
            )
        p.set_defaults(_run=mod.run, _parser=p)
    return parser


def _check_numbers(args, defaults=None) -> None:
    """Every numeric option: finite, and whole numbers within what the code can count exactly.

    ``defaults`` maps an option to its default; an empty list is refused unless it is that
    option's default (argparse turns ``--batch=--`` into ``[]``)."""
    defaults = defaults or {}
    for key, v in vars(args).items():
        if key.startswith("_") or isinstance(v, bool):
            continue
        flag = "--" + key.replace("_", "-")
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"{flag} must be a finite number, got {v}")
        if isinstance(v, str) and not v.strip():
            raise ValueError(f"{flag} is empty; give a value (see --help)")
        if isinstance(v, list) and (
            (not v and defaults.get(key) != [])
            or any(isinstance(x, str) and not x.strip() for x in v)
        ):
            raise ValueError(f"{flag} needs a value (see --help)")
        if isinstance(v, int) and abs(v) > _MAX_INT:
            raise ValueError(f"{flag} = {v:.3g} is too large (at most {_MAX_INT:.3g})")


def _fail(command, message: str, code: int) -> int:
    where = f"ipusim {command}" if command else "ipusim"
    print(f"{where}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return code


def main(argv=None) -> int:
    command = None
    try:
        parser = build_parser(_command_word(sys.argv[1:] if argv is None else argv))
        args = parser.parse_args(argv)  # usage errors: SystemExit(2) after one line
        command = getattr(args, "command", None)
        limits.set_max_memory(getattr(args, "max_memory", None))
        if not getattr(args, "_run", None):
            parser.print_help()
            return 0
        _check_numbers(args, {key: args._parser.get_default(key) for key in vars(args)})
        _costs.check(command, args)  # the memory the arguments imply, before anything is built
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print(f"\n{'ipusim ' + command if command else 'ipusim'}: interrupted", file=sys.stderr)
        return 130
    except ValueError as err:
        return _fail(command, err, 2)
    except (
        BrokenPipeError
    ):  # the reader went away (``ipusim ... | head``): stop quietly, as Unix tools do
        try:
            os.dup2(
                os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno()
            )  # no second error at exit's flush
        except (OSError, ValueError):  # stdout without a file descriptor (a test's capture)
            pass
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by the broken pipe
    except OSError as err:  # a file the user named: missing, unreadable, a directory, disk full
        name = f" {err.filename!r}" if getattr(err, "filename", None) else ""
        return _fail(command, f"{err.strerror or err}{':' if name else ''}{name}", 2)
    except (MemoryError, RecursionError) as err:
        return _fail(
            command, f"input too large ({type(err).__name__}); lower it or raise --max-memory", 2
        )
    except Exception as err:  # a bug: one line (set IPUSIM_DEBUG=1 for the traceback)
        if os.environ.get("IPUSIM_DEBUG"):
            raise
        return _fail(
            command,
            f"internal error {type(err).__name__}: {err} (please report; "
            "IPUSIM_DEBUG=1 shows the traceback)",
            1,
        )
    finally:
        limits.set_max_memory(None)


def entry() -> int:
    """What ``ipusim`` and ``python -m ipusim`` run: ``main()``, then a quick exit.

    Once Numba is loaded the interpreter holds about 100,000 objects that the cyclic garbage
    collector tracks, and shutdown hands all of them to it, to find and tear down the cycles
    among Numba's and LLVM's objects (``benchmarks/bench_startup.py`` times the exit with and
    without this). The process is about to end, so ``gc.freeze()`` first takes every object out of the
    collector's view; the system reclaims the memory at exit as always. Standard output and
    error are still flushed and ``atexit`` hooks (``weakref.finalize`` among them) still run;
    an object left in a reference cycle is not finalized, so a command must close what it
    opens (each does, with ``with``). ``main()`` itself leaves the collector alone, so a script
    or a test that calls it keeps a normal interpreter.
    """
    try:
        return main()
    finally:
        gc.freeze()
