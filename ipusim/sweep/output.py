"""Where sweep rows go: the tidy table, streamed to Parquet or CSV in chunks, resumable.

While a sweep runs, rows are written every ``chunk_rows`` rows as complete Parquet files in
``<out>.parts/`` (each written to a temporary name and renamed, so a killed sweep leaves only
whole chunks). ``finish`` gathers them into ``out`` (Parquet for ``.parquet``/``.pq``, CSV for
``.csv``, itself written whole) and removes the folder. An existing ``out`` is continued
(resume: the point keys found in it and in the parts are skipped, refused ones too unless
retried) or replaced (overwrite), never merged into a new sweep unasked. A write error (a
full disk) stops the sweep with every chunk written so far kept for the resume, and of the
rows computed since, as many as still fit (written in smaller pieces).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from pathlib import Path

from .. import _files

FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}
META = ("point", "point_key", "task")


def out_format(path) -> str:
    """ "parquet" or "csv" from the file's extension (ValueError otherwise)."""
    ext = Path(path).suffix.lower()
    if ext not in FORMATS:
        raise ValueError(f"output {str(path)!r} must end in .parquet, .pq or .csv")
    return FORMATS[ext]


def tidy(rows_or_frame, params=()):
    """The sweep's table: one row per point in point order; columns: ``point``, ``point_key``,
    ``task``, the parameters (in ``params`` order, then any others), the results (sorted by
    name) and ``error`` ("" for a point that ran, else the reason it was refused)."""
    import pandas as pd

    df = (
        rows_or_frame
        if isinstance(rows_or_frame, pd.DataFrame)
        else pd.DataFrame(list(rows_or_frame))
    )
    if df.empty:
        return pd.DataFrame(columns=[*META, *params, "error"])
    df = df.sort_values("point", kind="stable").reset_index(drop=True)
    if "error" not in df:
        df["error"] = ""
    df["error"] = df["error"].fillna("").astype(str)
    lead = [c for c in (*META, *params) if c in df.columns]
    rest = sorted(c for c in df.columns if c not in lead and c != "error")
    return df[[*lead, *rest, "error"]]


def read_table(path):
    """A sweep table written by ``Sink`` (Parquet or CSV)."""
    import pandas as pd

    fmt = out_format(path)
    if fmt == "parquet":
        return pd.read_parquet(path)
    df = pd.read_csv(path, dtype={"error": object, "point_key": str})
    df["error"] = [e if isinstance(e, str) else "" for e in df["error"]]
    return df


class Sink:
    """Collects rows; with a ``path`` streams them to part files and gathers them at the end.

    ``path`` must be new unless ``resume`` (continue the table there and its parts: the points
    found are skipped; with ``retry_refused`` the refused ones run again and their new rows
    replace the old) or ``overwrite`` (start afresh). Chunks are written every ``chunk_rows``
    rows or ``flush_s`` seconds, each whole (``_files.atomic_write``): a sweep stopped by a full
    disk or any other write error keeps every chunk it wrote and, in smaller pieces, as many of
    the rows it held as still fit (``flush``); a resumed one continues after them."""

    def __init__(
        self,
        path=None,
        *,
        resume: bool = False,
        chunk_rows: int = 1000,
        params=(),
        overwrite: bool = False,
        retry_refused: bool = False,
        flush_s: float = 60.0,
    ):
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
            raise ValueError(f"chunk_rows must be a whole number >= 1, got {chunk_rows!r}")
        self.path = None if path is None else Path(path)
        self.chunk_rows, self.params, self.flush_s = chunk_rows, tuple(params), float(flush_s)
        self.rows: list = []
        self.done_keys: set = set()
        self.written = 0
        self._last = time.monotonic()
        if self.path is None:
            if resume or retry_refused:
                raise ValueError("resume needs an output file (out=...)")
            return
        out_format(self.path)
        if retry_refused and not resume:
            raise ValueError("retry_refused applies to a resumed sweep (resume=True)")
        if resume and overwrite:
            raise ValueError("give resume or overwrite, not both")
        if not self.path.parent.exists():
            raise ValueError(f"output folder {str(self.path.parent)!r} does not exist")
        if self.path.is_dir():
            raise ValueError(f"output {str(self.path)!r} is a directory; give a file name")
        self.parts = Path(str(self.path) + ".parts")
        self._resume = bool(resume)
        if not resume and not overwrite:
            for what in (self.path, self.parts):
                if what.exists():
                    raise ValueError(
                        f"output {str(what)!r} already exists (from an earlier sweep): resume to "
                        "continue it (--resume), overwrite to replace it (--overwrite), or give "
                        "another file"
                    )
        if resume:
            for f in self._existing():
                df = _read(f, own=f != self.path)
                if df is None:
                    continue
                keys = df["point_key"].astype(str)
                if retry_refused and "error" in df:
                    keys = keys[df["error"].fillna("").astype(str) == ""]
                self.done_keys.update(keys)
        else:
            shutil.rmtree(self.parts, ignore_errors=True)
        self.parts.mkdir(exist_ok=True)
        _files.clean_leftovers(self.parts)
        nums = [
            int(f.stem.split("-")[1])
            for f in self.parts.glob("part-*.parquet")
            if f.stem.split("-")[1].isdigit()
        ]
        self._n = max(nums, default=-1) + 1

    def _existing(self):
        found = (
            [self.path] if self._resume and self.path.exists() else []
        )  # overwrite: the old table is not read
        if self.parts.exists():
            found += sorted(self.parts.glob("part-*.parquet"))
        return found

    def write(self, rows) -> None:
        self.rows.extend(rows)
        if self.path is not None and (
            len(self.rows) >= self.chunk_rows or time.monotonic() - self._last >= self.flush_s
        ):
            self.flush()

    def flush(self) -> None:
        """Write the rows held as one part file. On a write error (``OSError``: a full disk)
        they are written in pieces of half the size, then half that, down to one row, so
        every row that fits is kept for ``resume``; the rows that do not stay held and the
        first error is raised (the sweep stops)."""
        self._last = time.monotonic()
        if self.path is None or not self.rows:
            return
        rows, done, size, first_err = self.rows, 0, len(self.rows), None
        while done < len(rows):
            piece = rows[done : done + size]
            try:
                self._write_part(piece)
            except OSError as err:
                first_err = first_err or err
                if size == 1:
                    break
                size //= 2
                continue
            done += len(piece)
        self.rows = rows[done:]
        if first_err is not None:
            raise first_err

    def _write_part(self, rows) -> None:
        """``rows`` as the next part file, whole or not at all (``_files.atomic_write``)."""
        df = tidy(rows, self.params)
        with _files.atomic_write(self.parts / f"part-{self._n:06d}.parquet", "wb") as f:
            df.to_parquet(f, index=False)
        self._n += 1
        self.written += len(rows)

    def finish(self):
        """The whole table (point order); with a path, also written there (whole) and the parts removed."""
        import pandas as pd

        if self.path is None:
            return tidy(self.rows, self.params)
        self.flush()
        frames = [_read(f, own=f != self.path) for f in self._existing()]
        frames = [f for f in frames if f is not None and not f.empty]
        df = tidy(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(), self.params)
        df = df.drop_duplicates("point_key", keep="last").reset_index(drop=True)
        if out_format(self.path) == "parquet":
            with _files.atomic_write(self.path, "wb") as f:
                df.to_parquet(f, index=False)
        else:
            with _files.atomic_write(self.path, "w", newline="") as f:
                df.to_csv(f, index=False)
        shutil.rmtree(self.parts, ignore_errors=True)
        return df


def _read(f, *, own: bool):
    """The rows of the output table (``own`` False: an unreadable one is an error naming it) or
    of one of the sweep's own part files (an unreadable part, which a whole-file write cannot
    leave, is removed with one line on stderr and its points run again: None)."""
    import pandas as pd

    try:
        _files.regular_file("sweep table" if not own else "sweep part", f)
        df = pd.read_parquet(f) if own else read_table(f)
        if "point_key" not in df:
            raise ValueError("no point_key column")
        return df
    except Exception as err:  # pyarrow and pandas raise their own types for a damaged file
        msg = str(err).splitlines()[0] if str(err) else type(err).__name__
        if not own:
            raise ValueError(
                f"output {str(f)!r} cannot be resumed: not a readable sweep table ({msg})"
            ) from None
        print(
            f"ipusim: note: sweep part {f} is unreadable ({msg}); removed, its points run again",
            file=sys.stderr,
        )
        with contextlib.suppress(OSError):
            os.unlink(f)
        return None
