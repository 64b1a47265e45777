"""The on-disk cache of service-time tables: entries that prove what they hold.

One file a table, ``<key>.tab`` in ``cache_dir()``: a magic line, a one-line JSON header
(the key the table was built for, its shape, its dtype, and the SHA-256 of its bytes), then
the table's bytes (little-endian float64, C order). ``load`` trusts an entry only when every
part verifies: a regular file (a FIFO or device in its place is never opened for reading),
the magic, the header, the key (the file's own name), the shape the caller expects, the
exact length, the digest, and then the caller's check of meaning (``times_check``,
``mixed_check``, ``count_check``: finite where a step fits, positive, fit monotone in the
batch). An entry that fails is removed with one line on stderr naming the file and why, and
the caller builds the table again.

``store`` writes through ``_files.atomic_write`` (temporary file beside the entry, then a
rename), so two processes building one table at once, or a writer killed mid-write, never
leave a partial entry; temporaries of killed writers are removed on the first use of the
folder in a process. When the folder cannot be written (read-only, full disk, no home
directory), tables are rebuilt on each run, said once on stderr.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from pathlib import Path

import numpy as np

from .. import _files

MAGIC = b"ipusim service table v1\n"
DTYPE = "<f8"
_MAX_HEADER = 4096  # bytes: the JSON line (a key, a shape and a digest need ~200)
_state: dict = {"notes": set(), "cleaned": set()}


def cache_dir() -> Path | None:
    """Folder of the on-disk table cache: ``$IPUSIM_CACHE_DIR`` (``off`` disables it), else
    ``tables`` in the user's cache folder as ``platformdirs`` finds it (XDG on Linux,
    Library/Caches on macOS, LOCALAPPDATA on Windows);
    None when off or when no home directory can be found."""
    env = os.environ.get("IPUSIM_CACHE_DIR")
    if env:
        return None if env.lower() in ("off", "0", "none") else Path(env)
    import platformdirs

    try:
        base = platformdirs.user_cache_dir("ipusim", appauthor=False)
        if not os.path.isabs(base):  # "~" left unexpanded: no home directory
            raise RuntimeError(base)
    except (RuntimeError, KeyError, OSError):  # no HOME and no password entry
        note_once(
            "home",
            "ipusim: note: no home directory for the table cache; tables are rebuilt each run "
            "(set IPUSIM_CACHE_DIR to a writable folder)",
        )
        return None
    return Path(base) / "tables"


def note_once(tag, text: str) -> None:
    """``text`` on stderr, once per process for each ``tag``."""
    if tag not in _state["notes"]:
        _state["notes"].add(tag)
        print(text, file=sys.stderr)


def entry_path(key: str) -> Path | None:
    d = cache_dir()
    return None if d is None else d / f"{key}.tab"


def encode(key: str, tab: np.ndarray) -> bytes:
    """The bytes of an entry for ``tab`` built for ``key``."""
    data = np.ascontiguousarray(tab, dtype=DTYPE).tobytes()
    head = {
        "key": key,
        "shape": list(tab.shape),
        "dtype": DTYPE,
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    return MAGIC + json.dumps(head, sort_keys=True).encode() + b"\n" + data


def decode(key: str, blob: bytes, shape=None) -> tuple[np.ndarray | None, str]:
    """(table, "") if ``blob`` is a whole entry for ``key`` (of ``shape`` when given), else
    (None, why not)."""
    if not blob:
        return None, "empty"
    if not blob.startswith(MAGIC):
        return None, "not a table cache entry (bad magic)"
    end = blob.find(b"\n", len(MAGIC), len(MAGIC) + _MAX_HEADER)
    if end < 0:
        return None, "truncated or unreadable header"
    try:
        head = json.loads(blob[len(MAGIC) : end])
        got_shape = tuple(int(x) for x in head["shape"])
        got_key, dtype, digest = str(head["key"]), str(head["dtype"]), str(head["sha256"])
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        return None, "unreadable header"
    if got_key != key:
        return None, f"built for another key ({got_key[:12]}...)"
    if dtype != DTYPE:
        return None, f"dtype {dtype!r}, expected {DTYPE!r}"
    if any(n < 0 for n in got_shape) or (shape is not None and got_shape != tuple(shape)):
        return (
            None,
            f"shape {got_shape}, expected {tuple(shape) if shape is not None else 'non-negative'}",
        )
    data = blob[end + 1 :]
    if len(data) != 8 * int(np.prod(got_shape, dtype=object)):
        return None, f"{len(data):,} bytes of data for shape {got_shape} (truncated or padded)"
    if hashlib.sha256(data).hexdigest() != digest:
        return None, "digest mismatch (corrupted)"
    tab = np.frombuffer(data, dtype=DTYPE).reshape(got_shape).astype(np.float64)
    return tab, ""


def _clean(d: Path) -> None:
    if d not in _state["cleaned"]:
        _state["cleaned"].add(d)
        _files.clean_leftovers(d)


def load(key: str, *, shape=None, check=None) -> np.ndarray | None:
    """The cached table for ``key`` if its entry verifies (see the module docstring), else None
    (an entry that fails is removed, saying so in one line)."""
    p = entry_path(key)
    if p is None:
        return None
    _clean(p.parent)
    try:
        st = p.stat()
    except OSError:  # not there (or the folder is unreadable): build it
        return None
    if not stat.S_ISREG(st.st_mode):
        return _discard(p, f"{_files.file_kind(st.st_mode)}, not a regular file")
    want = None if shape is None else len(MAGIC) + 8 * int(np.prod(shape, dtype=object))
    if want is not None and not want < st.st_size <= want + _MAX_HEADER:
        return _discard(p, f"{st.st_size:,} bytes, not an entry of shape {tuple(shape)}")
    try:
        with _files.open_regular("table cache file", p) as f:
            blob = f.read(st.st_size + 1)
    except ValueError:  # replaced by something else since the stat
        return _discard(p, "not a regular file")
    except OSError as err:
        return _discard(p, f"unreadable ({err.strerror or err})")
    tab, why = decode(key, blob, shape)
    if tab is None:
        return _discard(p, why)
    why = check(tab) if check is not None else None
    if why:
        return _discard(p, f"a table that {why}")
    tab.setflags(write=False)
    return tab


def _discard(p: Path, why: str):
    print(
        f"ipusim: note: table cache file {p} is {why}; discarded, rebuilding the table",
        file=sys.stderr,
    )
    try:
        if p.is_dir() and not p.is_symlink():
            os.rmdir(p)
        else:
            os.unlink(p)
    except OSError:
        pass
    return None


def store(key: str, tab: np.ndarray) -> None:
    """Write the entry for ``key`` whole (``_files.atomic_write``); when the folder cannot be
    written, say so once and go on uncached."""
    p = entry_path(key)
    if p is None:
        return
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        _clean(p.parent)
        blob = encode(key, tab)
        with _files.atomic_write(p, "wb", private=True) as f:
            f.write(blob)
    except OSError as err:
        note_once(
            ("store", str(p.parent)),
            f"ipusim: note: cannot write the table cache in {p.parent} "
            f"({err.strerror or err}); running uncached (set IPUSIM_CACHE_DIR to a writable folder)",
        )


def times_check(tab: np.ndarray, *, zero_edges: bool) -> str | None:
    """Why ``tab`` cannot be a table of step times (rows x lengths), or None: every time > 0 or
    ``inf`` (does not fit), no NaN, fit monotone in the batch (a step that does not fit with
    ``r`` rows does not fit with more: the fit rule's assumption, ``serving.capacity.largest_batch``);
    with ``zero_edges`` row 0 and column 0 are the unused zeros."""
    body = tab[1:, 1:] if zero_edges else tab
    if zero_edges and (np.any(tab[0] != 0) or np.any(tab[:, 0] != 0)):
        return "has non-zero values in row 0 or column 0"
    if np.isnan(body).any():
        return "holds NaN"
    if not np.all(body > 0):
        return "holds a step time <= 0"
    inf = np.isinf(body)
    if not np.array_equal(np.logical_or.accumulate(inf, axis=0), inf):
        return "does not fit a batch that a larger batch fits"
    return None


def mixed_check(tab: np.ndarray) -> str | None:
    """Why ``tab`` cannot be a mixed prefill + decode table ``[d, r, column]``, or None: NaN
    exactly where d = 0, r = 0, column 0 or d + r > rows; every other time > 0 or ``inf``."""
    B, _, cols = tab.shape
    d = np.arange(B)[:, None, None]
    r = np.arange(B)[None, :, None]
    j = np.arange(cols)[None, None, :]
    unused = np.broadcast_to((d == 0) | (r == 0) | (j == 0) | (d + r > B), tab.shape)
    if not np.array_equal(np.isnan(tab), unused):
        return "holds NaN in a used cell or a number in an unused one"
    if not np.all(tab[~unused] > 0):
        return "holds a step time <= 0"
    return None


def count_check(tab: np.ndarray, cap: int) -> str | None:
    """Why ``tab`` cannot be one count in 0..``cap``, or None."""
    v = float(tab.reshape(-1)[0]) if tab.size == 1 else float("nan")
    if not (0 <= v <= cap and v == int(v)):
        return f"is not a whole count in 0..{cap}"
    return None
