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
"""

from __future__ import annotations

import os
import sys
import tempfile

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
    _STATE["where"] = where
    return where
