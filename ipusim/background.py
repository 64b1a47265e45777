"""Work in a second process, so that a command's first run uses the machine's second core.

A command's first run from empty caches is mostly Numba compiling kernels and the machine
models building tables, one piece after another on one core. ``start(function, *args)`` runs
``function(*args)`` (a function of ipusim named ``"ipusim.module:name"``) in a fresh Python
process while the command goes on with the rest; ``Worker.result(fallback)`` then returns its
value, or, when there was no worker or it failed, ``fallback()`` computed here. The value is
the same either way, bit for bit (the worker runs the same code on the same inputs, and its
value comes back pickled); only the time differs. The two processes share the Numba cache,
whose compile lock (``ipusim._numba_cache``) keeps them from compiling a kernel twice.

A worker is started only when it can help: at least two CPUs available to this process, a
writable Numba cache, and ``IPUSIM_WORKERS`` not set to 1 (``IPUSIM_WORKERS=1``: everything in
one process). On Linux, from a process with one thread, the worker is a fork of this one
(``os.fork``): it starts with every module imported and Numba's compiler set up (done here just
before, as this process needs it anyway), about 0.9 s of CPU and of wall time a fresh
interpreter would spend first. Elsewhere, or with other threads running (a fork copies only the
calling thread, and a lock another thread held stays held in the copy), it is a plain
``subprocess`` (``python -c``, arguments and value pickled over its pipes). Not
``multiprocessing``, whose start methods would rerun ``python -m ipusim``'s command in the
child. Either way the worker sees this process's environment (``NUMBA_CACHE_DIR``,
``IPUSIM_CACHE_DIR``, ...) and its tile parameters (``ipusim.tile_params``), its value comes
back pickled over a pipe, and it is always waited for, so its CPU time counts in this
process's children (``RUSAGE_CHILDREN``).
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading

from . import _numba_cache

ENV = "IPUSIM_WORKERS"
"""Environment variable: ``1`` runs every command in one process (no background worker)."""

_CHILD = "from ipusim.background import child_main; child_main()"
_FORK = sys.platform.startswith("linux") and hasattr(os, "fork")
"""Whether a worker may be a fork of this process (``can_fork``); a test sets it False to
exercise the fresh interpreter."""


def cpus() -> int:
    """CPUs this process may run on (its affinity where the system tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def allowed() -> bool:
    """Whether a background worker may be started: see the module's docstring."""
    text = os.environ.get(ENV, "").strip()
    if text:
        try:
            n = int(text)
        except ValueError:
            raise ValueError(
                f"{ENV} must be a whole number of processes (1: no background worker), got {text!r}"
            ) from None
        if n <= 1:
            return False
    return cpus() >= 2 and _numba_cache.ensure() not in ("read-only", "off")


def cached(*dispatchers) -> bool:
    """Whether Numba's cache holds each of these kernels (Numba dispatchers), compiled for at
    least one signature: a command skips a worker that would only load them."""
    return all(_numba_cache.cached(d) for d in dispatchers)


class Worker:
    """A ``function(*args)`` running in a second process (``start``), or none (``proc`` None).
    Use it in a ``with`` block: a worker whose value was not asked for is stopped at its end."""

    def __init__(self):
        self.proc, self.what = None, ""

    def start(self, function: str, *args):
        """Start ``function(*args)`` (``"ipusim.module:name"``, arguments that pickle) in a
        second process when ``allowed()`` (else leave this without one: ``result`` computes
        here); return ``self``."""
        module, _, name = function.partition(":")
        if not (module == "ipusim" or module.startswith("ipusim.")) or not name:
            raise ValueError(f"function must be 'ipusim.module:name', got {function!r}")
        self.close()
        self.what = function
        if not allowed():
            return self
        from . import tile_params

        if can_fork():
            self.proc = _Forked.start(module, name, args)
            if self.proc is not None:
                return self
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, **{ENV: "1"})  # the worker starts none of its own
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        payload = pickle.dumps((module, name, args, tile_params.current()), protocol=-1)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
        except OSError:  # no process could be started (limits, memory): work here
            return self
        self.proc = proc
        try:
            with proc.stdin:
                proc.stdin.write(payload)
        except OSError:  # it died at once: result() says so and works here
            pass
        proc.stdin = None  # written and closed: communicate() has nothing more to send
        return self

    def result(self, fallback):
        """The worker's value; ``fallback()`` (the same work, here) when there is no worker or
        it failed (said once on stderr: only the time differs)."""
        if self.proc is None:
            return fallback()
        proc, self.proc = self.proc, None
        try:
            out, _ = proc.communicate()
            status, value = pickle.loads(out)
        except Exception as err:  # died (killed, out of memory) or wrote no value
            status, value = "died", f"exit status {proc.returncode} ({type(err).__name__})"
        if status == "ok":
            return value
        print(
            f"ipusim: note: the background worker for {self.what} failed ({value}); "
            "doing its work in this process (same results)",
            file=sys.stderr,
        )
        return fallback()

    def close(self) -> None:
        """Stop the worker if it still runs (the command ended without its value), and wait for it."""
        if self.proc is not None:
            proc, self.proc = self.proc, None
            proc.kill()
            proc.communicate()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def start(function: str, *args) -> Worker:
    """``Worker().start(function, *args)``."""
    return Worker().start(function, *args)


def can_fork() -> bool:
    """Whether a worker may be a fork of this process: on Linux, with this thread the only one."""
    return _FORK and threading.active_count() == 1


def _compiler_ready() -> None:
    """Set up Numba's CPU target (its typing and lowering registries, about 0.3 s of CPU on a
    process's first compile) here, before a fork, so that the worker inherits it."""
    try:
        from numba.core.registry import cpu_target

        cpu_target.typing_context.refresh()
        cpu_target.target_context.refresh()
    except Exception:  # another Numba: the worker sets it up itself, only later
        pass


def _answer(module: str, name: str, args) -> bytes:
    """``("ok", value)`` of the call, or ``("error", text)``, pickled: the worker's reply."""
    import importlib

    try:
        return pickle.dumps(
            ("ok", getattr(importlib.import_module(module), name)(*args)), protocol=-1
        )
    except Exception as err:  # the work failed, or its value does not pickle
        return pickle.dumps(("error", f"{type(err).__name__}: {err}"), protocol=-1)


class _Forked:
    """A worker forked from this process, with the two calls ``Worker`` makes of a ``Popen``:
    ``communicate`` (its reply, read from a pipe to its end, then the exit status) and ``kill``."""

    def __init__(self, pid: int, fd: int):
        self.pid, self.fd, self.returncode = pid, fd, None

    @classmethod
    def start(cls, module: str, name: str, args):
        """Fork a worker running ``module.name(*args)``; None if no process could be made."""
        _compiler_ready()
        for f in (sys.stdout, sys.stderr):  # the copy's buffers start empty: no line printed twice
            f.flush()
        try:
            r, w = os.pipe()
        except OSError:
            return None
        try:
            pid = os.fork()
        except OSError:  # no process could be made (limits, memory)
            os.close(r)
            os.close(w)
            return None
        if pid == 0:  # the worker: never returns into the command's code
            code = 1
            try:
                os.close(r)
                os.environ[ENV] = "1"  # it starts none of its own
                os.dup2(2, 1)  # stray prints must not mix with the command's output
                sys.stdout = sys.stderr
                value = _answer(module, name, args)
                with os.fdopen(w, "wb") as out:
                    out.write(value)
                code = 0
            except KeyboardInterrupt:  # Ctrl-C reaches the command and its worker
                code = 130
            finally:
                os._exit(code)
        os.close(w)
        return cls(pid, r)

    def communicate(self):
        with os.fdopen(self.fd, "rb") as f:
            out = f.read()
        _, status = os.waitpid(self.pid, 0)
        self.returncode = os.waitstatus_to_exitcode(status)
        return out, None

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:  # ended already; communicate reaps it
            pass


def child_main() -> None:
    """The worker's side in a fresh interpreter: read the call from stdin, run it, write
    ``("ok", value)`` (or ``("error", text)``) pickled on stdout. Anything the work prints goes
    to stderr."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints must not mix with the pickled value
    module, name, args, params = pickle.loads(sys.stdin.buffer.read())
    try:
        from . import tile_params

        for k, v in params:
            setattr(tile_params, k, v)
        value = _answer(module, name, args)
    except KeyboardInterrupt:  # Ctrl-C reaches the command and its worker: the command says so
        os._exit(130)
    out.write(value)
    out.close()
    import gc

    gc.freeze()  # a quick exit, as the command line's (ipusim.cli.entry)
