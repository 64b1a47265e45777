"""The per-block, per-wave loop of GPU kernels: the Numba kernel ``_waves`` (its plain-Python
reference is ``tests/gpu_reference.py``, which the tests and the benchmark compare against it), and
``run_waves``, which flattens a list of ``kernels.Kernel`` into their arrays.

Times in seconds, bytes in bytes.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, error_model="numpy")
def _waves(
    g_start,
    g_count,
    g_compute_s,
    g_l2_s,
    g_hbm_bytes,
    k_bps,
    sms,
    hbm_bw,
    sm_bw,
    fill_s,
    out_time,
    out_compute,
    out_memory,
    out_waves,
    out_busy,
):
    """Run every kernel's blocks in waves over ``sms`` SMs (one kernel after another).

    Kernel ``k`` owns block groups ``g_start[k]:g_start[k+1]``; group ``g`` is ``g_count[g]``
    identical blocks, each needing ``g_compute_s[g]`` seconds of SM math, ``g_l2_s[g]`` seconds
    of L2-to-SM traffic and ``g_hbm_bytes[g]`` bytes from HBM. Up to ``sms * k_bps[k]`` blocks
    form a wave; block ``i`` of a wave goes to SM ``i % sms``. A wave lasts
    ``max(slowest SM, bytes / min(hbm_bw, active SMs * sm_bw)) + fill_s``.

    Preconditions: ``len(g_start) == K + 1``, ``g_start`` non-decreasing from 0 to G; counts
    >= 0; times and bytes >= 0; ``k_bps >= 1``; ``sms >= 1``; ``hbm_bw, sm_bw > 0``;
    ``fill_s >= 0``; outputs have length K (``out_busy`` shape (K, sms)) and are zero on entry.
    """
    # np.empty with dtype= and a loop, not np.zeros: the one float allocation the kernels
    # compile (np.zeros adds three overloads to a newcomer's first run)
    sm_c = np.empty(sms, dtype=np.float64)
    sm_l = np.empty(sms, dtype=np.float64)
    for j in range(sms):
        sm_c[j] = 0.0
        sm_l[j] = 0.0
    for k in range(k_bps.size):
        cap = sms * k_bps[k]
        left = 0  # blocks of kernel k not yet in a wave: its last one closes the last wave
        for g in range(g_start[k], g_start[k + 1]):
            left += g_count[g]
        in_wave = 0
        wave_bytes = 0.0
        for g in range(g_start[k], g_start[k + 1]):
            n = g_count[g]
            if in_wave == 0 and n >= cap:
                # Whole waves of identical blocks: every SM holds k_bps[k] of them. Same
                # result as the block loop below, in one step.
                full = n // cap
                own = k_bps[k] * max(g_compute_s[g], g_l2_s[g])
                t_mem = cap * g_hbm_bytes[g] / min(hbm_bw, sms * sm_bw)
                t = max(own, t_mem) + fill_s
                for j in range(sms):
                    out_busy[k, j] += full * t
                out_time[k] += full * t
                out_compute[k] += full * own
                out_memory[k] += full * (t - own)
                out_waves[k] += full
                n -= full * cap
                left -= full * cap
            for _ in range(n):
                s = in_wave % sms
                sm_c[s] += g_compute_s[g]
                sm_l[s] += g_l2_s[g]
                wave_bytes += g_hbm_bytes[g]
                in_wave += 1
                left -= 1
                if in_wave < cap and left > 0:
                    continue
                # close the wave of in_wave blocks (written once: the full wave and the
                # kernel's last one share this code, half the IR of a helper inlined twice)
                active = min(in_wave, sms)
                t_sm = 0.0
                for j in range(active):
                    t_sm = max(t_sm, max(sm_c[j], sm_l[j]))
                t_mem = wave_bytes / min(hbm_bw, active * sm_bw)
                t = max(t_sm, t_mem) + fill_s
                for j in range(active):
                    out_busy[k, j] += max(max(sm_c[j], sm_l[j]), t_mem) + fill_s
                    sm_c[j] = 0.0
                    sm_l[j] = 0.0
                out_time[k] += t
                out_compute[k] += t_sm
                out_memory[k] += t - t_sm
                out_waves[k] += 1
                in_wave = 0
                wave_bytes = 0.0


def run_waves(kernels, r):
    """Flatten ``kernels`` (a list of ``Kernel``) and run the wave loop over them."""
    n_k = len(kernels)
    starts = np.zeros(n_k + 1, dtype=np.int64)
    for i, kern in enumerate(kernels):
        starts[i + 1] = starts[i] + len(kern.groups)
    groups = [g for kern in kernels for g in kern.groups]
    g = np.array(groups, dtype=np.float64).reshape(-1, 4)
    count = g[:, 0].astype(np.int64)
    bps = np.array([kern.blocks_per_sm for kern in kernels], dtype=np.int64)
    sms = r.sms
    args = (
        starts,
        count,
        g[:, 1].copy(),
        g[:, 2].copy(),
        g[:, 3].copy(),
        bps,
        int(sms),
        float(r.hbm_bw),
        float(r.sm_bw),
        float(r.fill_s),
    )
    out = (
        np.zeros(n_k),
        np.zeros(n_k),
        np.zeros(n_k),
        np.zeros(n_k, dtype=np.int64),
        np.zeros((n_k, int(sms))),
    )
    _waves(*args, *out)
    return out
