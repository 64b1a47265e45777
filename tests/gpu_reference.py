"""Plain-Python reference of the GPU wave kernel (``ipusim.gpu.waves._waves``), and ``plain()``
to run ``gpu.simulate`` on it (see ``kernel_swap``). Times in seconds, bytes in bytes."""

from __future__ import annotations

import numpy as np
from kernel_swap import filling, swapped

from ipusim.gpu import autotune
from ipusim.gpu import waves as _waves_module


def waves(g_start, g_count, g_compute_s, g_l2_s, g_hbm_bytes, k_bps, sms, hbm_bw, sm_bw, fill_s):
    """Plain-Python twin of ``_waves``: returns (time, compute, memory, waves, busy)."""
    n_k = len(k_bps)
    time = [0.0] * n_k
    comp = [0.0] * n_k
    mem = [0.0] * n_k
    n_waves = [0] * n_k
    busy = [[0.0] * sms for _ in range(n_k)]
    for k in range(n_k):
        blocks = []
        for g in range(g_start[k], g_start[k + 1]):
            blocks += [(g_compute_s[g], g_l2_s[g], g_hbm_bytes[g])] * int(g_count[g])
        cap = sms * int(k_bps[k])
        for w0 in range(0, len(blocks), cap):
            wave = blocks[w0 : w0 + cap]
            c = [0.0] * sms
            l2 = [0.0] * sms
            for i, (bc, bl, _) in enumerate(wave):
                c[i % sms] += bc
                l2[i % sms] += bl
            active = min(len(wave), sms)
            own = [max(c[j], l2[j]) for j in range(active)]
            t_sm = max(own)
            t_mem = sum(b[2] for b in wave) / min(hbm_bw, active * sm_bw)
            t = max(t_sm, t_mem) + fill_s
            for j in range(active):
                busy[k][j] += max(own[j], t_mem) + fill_s
            time[k] += t
            comp[k] += t_sm
            mem[k] += t - t_sm
            n_waves[k] += 1
    return (
        np.array(time),
        np.array(comp),
        np.array(mem),
        np.array(n_waves, dtype=np.int64),
        np.array(busy).reshape(n_k, sms),
    )


def plain():
    """Run ``ipusim.gpu`` with ``waves`` in place of the ``_waves`` kernel (the memoised kernel
    picks forgotten on entry and exit, so every pick inside comes from the reference)."""
    return swapped({(_waves_module, "_waves"): filling(waves, 5)}, on_enter=autotune.clear_cache)
