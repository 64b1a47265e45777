"""Byte sizes written as text: one parser for every option that takes one.

The rule: ``KiB``, ``MiB``, ``GiB``, ``TiB`` are IEC powers of 1024; ``kB``, ``MB``, ``GB``, ``TB``
are SI powers of 1000 (as datasheets write HBM and DRAM sizes); a bare ``K``, ``M``, ``G``, ``T``
in a byte size is binary, as memory limits read it (``ulimit``, ``docker --memory``, Java's
``-Xmx``): ``--max-memory 4G`` is 4 GiB. Case does not matter; a plain number is bytes.
"""

from __future__ import annotations

import math
import re

IEC = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
SI = {"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
BARE = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "b": 1, "": 1}
_SIZE = re.compile(r"^\s*((?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z]*)\s*$")


def parse_bytes(text, name: str = "size") -> int:
    """Bytes in ``text`` (``"4G"``, ``"512MiB"``, ``"80GB"``, ``"1e9"``) by the module's rule."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        v = float(text)
    else:
        m = _SIZE.match(str(text))
        unit = m.group(2).lower() if m else None
        scale = IEC.get(unit) or SI.get(unit) or BARE.get(unit) if unit is not None else None
        if scale is None:
            raise ValueError(
                f"{name} {text!r} is not a size; use e.g. 4G or 4GiB (2^30 bytes each), 80GB "
                "(10^9 bytes each), or a number of bytes"
            )
        v = float(m.group(1)) * scale
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} {text!r} must be a finite size >= 0 bytes")
    return int(round(v))
