"""Files in and out: only regular files are read, and every file written appears whole or not at all.

``regular_file`` / ``open_regular``: what a reader opens (a lengths file, a trace, a config, a
cache entry) must be a regular file; a FIFO would block the reader forever, a device could
stream without end and a directory has no text, so each is refused in one line naming the
input before anything reads from it.

``atomic_write``: a file the package writes (``serve --csv``, ``checklist --out``, a sweep's
table and chunks, a cached table) goes to a temporary file beside its target (the same
folder, so the final rename stays on one file system), is flushed to disk, and is renamed
onto the target only when complete. A full disk, a killed process or an exception leaves the
target as it was. A temporary's name carries the writer's host and process id
(``.<name>~<host>~<pid>~<random>.tmp``), so ``clean_leftovers`` can remove those of writers
that no longer run.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import stat
import tempfile
import time
from pathlib import Path

TMP_SUFFIX = ".tmp"
LEFTOVER_AGE_S = (
    3600.0  # a temporary this old is a killed writer's, whoever wrote it (a write takes seconds)
)

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def regular_file(name: str, path) -> Path:
    """``path`` as a ``Path`` if it names a regular file (links followed); else a ValueError
    naming ``name``: not found, or what it is instead (directory, FIFO, device, socket)."""
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"{name} must be a file path, got {path!r} ({type(path).__name__})")
    if str(path) == "":
        raise ValueError(f"{name} is an empty path")
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ValueError(f"{name} {str(path)!r} not found (no such file)") from None
    except OSError as err:
        raise ValueError(f"{name} {str(path)!r} cannot be read: {err.strerror or err}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{name} {str(path)!r} is {file_kind(st.st_mode)}, not a regular file")
    return p


def open_regular(name: str, path):
    """A binary file object reading ``path``, which must be a regular file (``regular_file``);
    opened without blocking and checked again on the open descriptor, so a FIFO swapped in
    between the check and the open is refused too rather than waited on."""
    p = regular_file(name, path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as err:
        raise ValueError(f"{name} {str(path)!r} cannot be read: {err.strerror or err}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ValueError(f"{name} {str(path)!r} is {file_kind(mode)}, not a regular file")
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:32] or "host"


def _tmp_prefix(target: Path) -> str:
    return f".{target.name}~{_host()}~{os.getpid()}~"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def clean_leftovers(folder, name: str | None = None) -> int:
    """Remove the temporaries in ``folder`` (only those for target ``name`` when given) whose
    writer is gone: written on this host by a process that no longer runs, or older than
    ``LEFTOVER_AGE_S``. Returns how many were removed; errors are ignored (cleaning is a courtesy)."""
    removed, host, now = 0, _host(), time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for e in entries:
        if not (e.name.startswith(".") and e.name.endswith(TMP_SUFFIX)):
            continue
        parts = e.name[1 : -len(TMP_SUFFIX)].rsplit("~", 3)
        if len(parts) != 4 or (name is not None and parts[0] != name):
            continue
        try:
            dead = parts[1] == host and parts[2].isdigit() and not _alive(int(parts[2]))
            if dead or now - e.stat(follow_symlinks=False).st_mtime > LEFTOVER_AGE_S:
                os.unlink(e.path)
                removed += 1
        except OSError:
            pass
    return removed


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path, mode: str = "w", *, newline: str | None = None, private: bool = False):
    """Write ``path`` whole or not at all: yields a file (text for ``mode`` "w", binary for "wb")
    on a temporary beside ``path``; on a clean exit it is flushed, synced and renamed onto
    ``path``; on any exception (a full disk among them) it is removed and the exception goes on,
    leaving ``path`` untouched. The file gets ``path``'s permissions when it exists, else the
    usual ones for a new file (0o666 less the umask), or 0o600 with ``private``. A ``path``
    that is a stream (a FIFO, ``/dev/stdout``, ``/dev/null``) is written straight through."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode must be 'w' or 'wb', got {mode!r}")
    target = Path(
        os.path.realpath(path)
    )  # through a symbolic link: the file it names is replaced, not the link
    try:
        st = target.stat()
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        # a stream (/dev/stdout, /dev/null, a FIFO): written straight through, never replaced by a file
        with open(
            target, mode, **({} if mode == "wb" else {"newline": newline, "encoding": "utf-8"})
        ) as f:
            yield f
        return
    folder = target.parent
    clean_leftovers(folder, target.name)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=_tmp_prefix(target), suffix=TMP_SUFFIX)
    try:
        with (
            open(fd, "wb") if mode == "wb" else open(fd, "w", newline=newline, encoding="utf-8")
        ) as f:
            if not private and hasattr(os, "fchmod"):
                try:
                    perm = stat.S_IMODE(target.stat().st_mode)
                except OSError:
                    perm = 0o666 & ~_umask()
                os.fchmod(f.fileno(), perm)
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def check_writable(name: str, path) -> None:
    """Refuse an output ``path`` (the option ``name``) that cannot be written, before a long
    run: an empty path, a missing folder, a directory, or a folder where no file can be made."""
    if not str(path).strip():
        raise ValueError(f"{name} is an empty path")
    p = Path(os.path.realpath(path))
    if p.is_dir():
        raise ValueError(f"{name} {str(path)!r} is a directory; give a file name")
    if not p.parent.is_dir():
        raise ValueError(f"{name} {str(path)!r}: directory {str(p.parent)!r} does not exist")
    if p.exists():
        if not os.access(p, os.W_OK):
            raise ValueError(f"{name} {str(path)!r} is not writable")
        if not stat.S_ISREG(p.stat().st_mode):
            return  # a stream: written straight through
    try:  # the only sure test: make a file beside it (and remove it again)
        with tempfile.NamedTemporaryFile(dir=p.parent, prefix=_tmp_prefix(p), suffix=TMP_SUFFIX):
            pass
    except OSError as err:
        raise ValueError(f"{name} {str(path)!r} cannot be written: {err.strerror or err}") from None
