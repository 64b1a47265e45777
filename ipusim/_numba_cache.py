"""Make Numba's on-disk cache work on a read-only install (shared or system-wide).

Every kernel is ``@njit(cache=True)``. Numba looks for a cache directory beside the source
(``ipusim/__pycache__``) and then in the user's cache (``~/.cache/numba``); when neither is
writable and ``NUMBA_CACHE_DIR`` is unset it raises ``RuntimeError: cannot cache function ...:
no locator available`` at import, so nothing of ipusim would import. ``ensure()`` asks Numba's
own locator search before any kernel is defined; if it finds nothing it points Numba at a
per-user temporary directory, or (if even that is not writable) reads the cache beside the
package without writing to it, or (if there is none) turns caching off, and says so in one
line on stderr. A cache file that later fails to load or save (corrupt, a full disk)
is compiled afresh or left unsaved, also in one line. Compiled code is the same either way;
only start-up time differs.

When the cache is writable, a kernel missing from it is compiled under an exclusive lock on
its cache entry (``fcntl.flock`` on a file beside Numba's index; no lock where ``fcntl`` is
missing, as on Windows): two ipusim processes that share a cache (a command and its
background worker, ``pytest -n 2``, two notebooks) never compile the same kernel at once;
the second waits, then loads what the first saved. A lock still held after
``LOCK_TIMEOUT_S`` (a stuck process) is ignored and the kernel compiled anyway, said once.

``interpreted_or_compiled`` runs a kernel's own Python source in the interpreter instead of
compiling it, while the caller's estimates say that costs less (a first run that calls a kernel
only a few times on small inputs).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

try:
    import fcntl
except ImportError:  # Windows: no advisory file locks; processes may then compile a kernel twice
    fcntl = None

LOCK_TIMEOUT_S = 300.0
"""Seconds to wait for another process compiling the same kernel (a cold compile under load
takes well under a minute); then it is compiled here too."""
_POLL_S = 0.02

_STATE = {"checked": False, "where": None, "notes": set()}


def _probe():  # a plain function: Numba's locator search only needs its source file
    return None


def _locator_found() -> bool:
    from numba.core.caching import FunctionCache

    try:
        FunctionCache(_probe)
    except RuntimeError:
        return False
    return True


def _temp_dir() -> str | None:
    """A private per-user directory under the system temp dir, or None if none can be made
    (no usable temp dir at all, as on a read-only root, included)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    try:
        path = os.path.join(tempfile.gettempdir(), f"ipusim-numba-cache-{uid}")
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
        if hasattr(os, "getuid") and st.st_uid != uid:  # someone else's directory: do not trust it
            path = tempfile.mkdtemp(prefix="ipusim-numba-cache-")
        with tempfile.TemporaryFile(dir=path):
            pass
        return path
    except OSError:  # FileNotFoundError from gettempdir: "No usable temporary directory found"
        return None


def _note(tag: str, text: str) -> None:
    if tag not in _STATE["notes"]:
        _STATE["notes"].add(tag)
        print(text, file=sys.stderr)


def _guard_cache_io() -> None:
    """Numba's cache files failing to load or save never stop a run: an entry that cannot be
    read (corrupt, truncated, unreadable) is compiled afresh and its index written anew, and
    one that cannot be written (a full disk, a folder turned read-only) stays uncached; each
    said once on stderr. The compiled code is the same either way."""
    from numba.core.caching import Cache

    if getattr(Cache, "_ipusim_guarded", False):
        return
    load, save = Cache.load_overload, Cache.save_overload

    def load_overload(self, sig, target_context):
        try:
            return load(self, sig, target_context)
        except Exception as err:  # any failure to read the cache: compile instead
            _note(
                "load",
                f"ipusim: note: Numba cache in {self.cache_path} could not be read "
                f"({type(err).__name__}: {err}); compiling afresh",
            )
            return None

    def save_overload(self, sig, data):
        try:
            try:
                save(self, sig, data)
            except OSError:
                raise
            except Exception:  # an index that cannot be read (corrupt): drop it and save afresh
                index = getattr(self._cache_file, "_index_path", None)
                if index:
                    os.unlink(index)
                save(self, sig, data)
        except Exception as err:
            why = (
                err.strerror if isinstance(err, OSError) else None
            ) or f"{type(err).__name__}: {err}"
            _note(
                "save",
                f"ipusim: note: Numba cache in {self.cache_path} cannot be written "
                f"({why}); kernels run uncached (compiled each run)",
            )

    Cache.load_overload, Cache.save_overload = load_overload, save_overload
    Cache._ipusim_guarded = True


_HELD: dict = {}  # lock file path -> its open descriptor, while this process compiles that kernel


def _lock_path(cache) -> str | None:
    index = getattr(getattr(cache, "_cache_file", None), "_index_path", None)
    return None if index is None else index + ".ipusim-lock"


def _acquire(path: str) -> bool:
    """Take the exclusive lock at ``path``; False (and no lock) when it cannot be had: no
    ``fcntl``, a directory that cannot be written, or ``LOCK_TIMEOUT_S`` passed."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _HELD[path] = fd
            return True
        except OSError:
            if time.monotonic() >= deadline:
                os.close(fd)
                _note(
                    "lock",
                    f"ipusim: note: another process has held the Numba cache lock {path} for "
                    f"{LOCK_TIMEOUT_S:g} s; compiling here too",
                )
                return False
            time.sleep(_POLL_S)


def _release(path: str) -> None:
    fd = _HELD.pop(path, None)
    if fd is not None:
        os.close(fd)  # closing the descriptor drops its flock


def _lock_compiles() -> None:
    """A kernel missing from the cache is looked up again under its entry's lock, and compiled
    (and saved) while the lock is held: see the module's docstring. The lock is released when
    the dispatcher's ``compile`` returns or raises, after Numba has saved the entry."""
    from numba.core.caching import Cache
    from numba.core.dispatcher import Dispatcher

    if fcntl is None or getattr(Cache, "_ipusim_locked", False):
        return
    load, compile_ = Cache.load_overload, Dispatcher.compile

    def load_overload(self, sig, target_context):
        got = load(self, sig, target_context)
        path = _lock_path(self)
        if got is not None or path is None or path in _HELD:  # held: a recursive compile
            return got
        if not _acquire(path):
            return None
        got = load(self, sig, target_context)  # another process may have saved it meanwhile
        if got is not None:
            _release(path)
        return got  # None: compiled under the lock, released by compile below

    def compile(self, sig):
        path = _lock_path(getattr(self, "_cache", None))
        held = path in _HELD
        try:
            return compile_(self, sig)
        finally:
            if not held and path is not None:
                _release(path)

    Cache.load_overload, Dispatcher.compile = load_overload, compile
    Cache._ipusim_locked = True


def cached(dispatcher) -> bool:
    """Whether Numba's cache holds a compiled signature of ``dispatcher`` (a fresh index entry
    for its current source); False for one that is not cached at all."""
    try:
        return bool(dispatcher._cache._cache_file._load_index())
    except Exception:  # no cache (NullCache), an unreadable index: as good as not cached
        return False


_INTERPRETED: dict = {}  # kernel -> estimated seconds this process ran it interpreted


def interpreted_or_compiled(kernel, args: tuple, seconds: float, compile_s: float):
    """``kernel(*args)``, or the kernel's own Python source (``kernel.py_func``) run by the
    interpreter: the same code on the same arrays, so the same results, without compiling.

    A kernel that does little work in a run (a few small calls) costs a newcomer more to
    compile than to interpret. So it runs interpreted while this process has neither compiled
    nor loaded it and its interpreted calls, this one's estimated ``seconds`` included, add up
    to at most ``compile_s`` (its cold compile, in the same units); past that it is compiled
    (rent until the rent would exceed the price, then buy: at most about twice the better
    choice in hindsight). Estimates, not clocks, decide: the same calls take the same path on
    every run. A kernel that uses this is held to its interpreted source by its tests."""
    if not kernel.signatures:
        spent = _INTERPRETED.get(kernel, 0.0) + seconds
        if spent <= compile_s:
            _INTERPRETED[kernel] = spent
            return kernel.py_func(*args)
    return kernel(*args)


def _add_read_only_locator() -> bool:
    """Let Numba use the ``__pycache__`` beside each kernel's source read-only, as its last
    choice: kernels cached there (a read-only install, a read-only root) load as usual; a new
    one is compiled and its save fails, which ``_guard_cache_io`` absorbs."""
    from numba.core.caching import CacheImpl, InTreeCacheLocator

    class ReadOnlyInTreeLocator(InTreeCacheLocator):
        def ensure_cache_path(self):  # nothing to create or test: reading needs no write access
            pass

    if not any(c.__name__ == "ReadOnlyInTreeLocator" for c in CacheImpl._locator_classes):
        CacheImpl._locator_classes.append(ReadOnlyInTreeLocator)
    return True


def ensure() -> str:
    """Make sure ``@njit(cache=True)`` can be used; return where the cache lives.

    Returns "default" (Numba's own choice), a temporary directory path, "read-only" (kernels
    cached beside the package are read, new ones not saved) or "off".
    """
    if _STATE["checked"]:
        return _STATE["where"]
    _STATE["checked"] = True
    _guard_cache_io()
    where = "default"
    if not _locator_found():
        from numba.core import config

        tmp = _temp_dir()
        if tmp is not None:
            config.CACHE_DIR = tmp
            os.environ["NUMBA_CACHE_DIR"] = tmp  # child processes (notebook kernels) too
        if tmp is not None and _locator_found():
            where = tmp
            print(
                f"ipusim: note: no writable Numba cache beside the package or in the home directory; "
                f"caching compiled kernels in {tmp} (set NUMBA_CACHE_DIR to choose)",
                file=sys.stderr,
            )
        elif _add_read_only_locator() and _locator_found():
            where = "read-only"
            _STATE["notes"].add("save")  # the line below says it; no second line when a save fails
            print(
                "ipusim: note: no writable directory for Numba's cache (package, home, temp); kernels cached "
                "beside the package are read, others compiled each run (set NUMBA_CACHE_DIR to a writable path)",
                file=sys.stderr,
            )
        else:
            from numba.core.dispatcher import Dispatcher

            Dispatcher.enable_caching = lambda self: None  # compile on every start instead
            where = "off"
            print(
                "ipusim: note: no writable directory for Numba's cache (package, home, temp); "
                "kernels are compiled afresh each run (set NUMBA_CACHE_DIR to a writable path)",
                file=sys.stderr,
            )
    if where not in ("read-only", "off"):
        _lock_compiles()
    _STATE["where"] = where
    return where
