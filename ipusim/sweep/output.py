"""Where sweep rows go: the tidy table, streamed to Parquet or CSV in chunks, resumable.

While a sweep runs, rows are written every ``chunk_rows`` rows as complete Parquet files in
``<out>.parts/`` (each written to a temporary name and renamed, so a killed sweep leaves only
whole chunks). ``finish`` gathers them into ``out`` (Parquet for ``.parquet``/``.pq``, CSV for
``.csv``) and removes the folder. On resume, the point keys found in ``out`` and in the parts
are skipped.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}
META = ("point", "point_key", "task")


def out_format(path) -> str:
    """"parquet" or "csv" from the file's extension (ValueError otherwise)."""
    ext = Path(path).suffix.lower()
    if ext not in FORMATS:
        raise ValueError(f"output {str(path)!r} must end in .parquet, .pq or .csv")
    return FORMATS[ext]


def tidy(rows_or_frame, params=()):
    """The sweep's table: one row per point in point order; columns: ``point``, ``point_key``,
    ``task``, the parameters (in ``params`` order, then any others), the results (sorted by
    name) and ``error`` ("" for a point that ran, else the reason it was refused)."""
    import pandas as pd

    df = rows_or_frame if isinstance(rows_or_frame, pd.DataFrame) else pd.DataFrame(list(rows_or_frame))
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
    """Collects rows; with a ``path`` streams them to part files and gathers them at the end."""

    def __init__(self, path=None, *, resume: bool = False, chunk_rows: int = 1000, params=()):
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
            raise ValueError(f"chunk_rows must be a whole number >= 1, got {chunk_rows!r}")
        self.path = None if path is None else Path(path)
        self.chunk_rows, self.params = chunk_rows, tuple(params)
        self.rows: list = []
        self.done_keys: set = set()
        self.written = 0
        if self.path is None:
            if resume:
                raise ValueError("resume needs an output file (out=...)")
            return
        out_format(self.path)
        if not self.path.parent.exists():
            raise ValueError(f"output folder {str(self.path.parent)!r} does not exist")
        self.parts = Path(str(self.path) + ".parts")
        if resume:
            for f in self._existing():
                self.done_keys.update(read_table(f)["point_key"].astype(str)) if f == self.path else \
                    self.done_keys.update(_read_part(f)["point_key"].astype(str))
        else:
            shutil.rmtree(self.parts, ignore_errors=True)
        self.parts.mkdir(exist_ok=True)
        self._n = len(list(self.parts.glob("part-*.parquet")))

    def _existing(self):
        found = [self.path] if self.path.exists() else []
        if self.parts.exists():
            found += sorted(self.parts.glob("part-*.parquet"))
        return found

    def write(self, rows) -> None:
        self.rows.extend(rows)
        if self.path is not None and len(self.rows) >= self.chunk_rows:
            self.flush()

    def flush(self) -> None:
        if self.path is None or not self.rows:
            return
        df = tidy(self.rows, self.params)
        tmp = self.parts / f".tmp-{self._n:06d}.parquet"
        df.to_parquet(tmp, index=False)
        os.replace(tmp, self.parts / f"part-{self._n:06d}.parquet")
        self._n += 1
        self.written += len(self.rows)
        self.rows = []

    def finish(self):
        """The whole table (point order); with a path, also written there and the parts removed."""
        import pandas as pd

        if self.path is None:
            return tidy(self.rows, self.params)
        self.flush()
        frames = [read_table(f) if f == self.path else _read_part(f) for f in self._existing()]
        frames = [f for f in frames if not f.empty]
        df = tidy(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(), self.params)
        df = df.drop_duplicates("point_key", keep="last").reset_index(drop=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        if out_format(self.path) == "parquet":
            df.to_parquet(tmp, index=False)
        else:
            df.to_csv(tmp, index=False)
        os.replace(tmp, self.path)
        shutil.rmtree(self.parts, ignore_errors=True)
        return df


def _read_part(f):
    import pandas as pd

    return pd.read_parquet(f)
