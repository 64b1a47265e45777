"""Plain-Python reference of the embedding look-up tally kernel (``ipusim.embeddings.access._tally``),
and ``plain()`` to run ``embeddings.simulate`` and ``access.tally`` on it (see ``kernel_swap``)."""

from __future__ import annotations

import numpy as np
from kernel_swap import filling, swapped

from ipusim.embeddings import access as _access


def tally(
    sample, table, rank, rows, offsets, cached, rot, n_units, units_per_chip, batch, by_lookup, mult
):
    """Plain-Python twin of ``_tally``; returns the seven count arrays, the row ids and owners."""
    chips = n_units // units_per_chip
    miss, hit, req_, req_hit, local = ([0] * n_units for _ in range(5))
    send, recv = [0] * chips, [0] * chips
    row_ids, owners = [], []
    n = len(sample)
    for i, (s, t, r) in enumerate(zip(sample.tolist(), table.tolist(), rank.tolist(), strict=True)):
        j = r * mult % int(rows[t])
        row_ids.append(int(offsets[t]) + j)
        owner = (j * n_units // int(rows[t]) + int(rot[t])) % n_units
        owners.append(owner)
        req = i * n_units // n if by_lookup else s * n_units // batch
        if r < cached[t]:
            hit[owner] += 1
        else:
            miss[owner] += 1
        req_[req] += 1
        req_hit[req] += r < cached[t]
        local[req] += owner == req
        if owner // units_per_chip != req // units_per_chip:
            send[owner // units_per_chip] += 1
            recv[req // units_per_chip] += 1
    counts = (miss, hit, req_, req_hit, local, send, recv, row_ids, owners)
    return tuple(np.array(x, dtype=np.int64) for x in counts)


def plain():
    """Run ``ipusim.embeddings`` with ``tally`` in place of the ``_tally`` kernel."""
    return swapped({(_access, "_tally"): filling(tally, 9)})
