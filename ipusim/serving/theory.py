"""Queueing theory the simulator is checked against: Pollaczek-Khinchine for M/G/1."""

from __future__ import annotations

import numpy as np

from .._validate import positive

SERVICE_CV2 = {"mm1": 1.0, "md1": 0.0}  # squared coefficient of variation of the service time


def pk_wait_s(rate_per_s, mean_service_s: float, cv2: float):
    """Mean wait in queue of M/G/1 (Pollaczek-Khinchine): rho s (1 + cv^2) / (2 (1 - rho)), s.

    ``rate_per_s`` may be an array (rates with utilization rho = rate x s < 1); ``cv2`` is
    the squared coefficient of variation of the service time (1 exponential, 0 fixed).
    """
    s = positive("mean_service_s", mean_service_s)
    c = positive("cv2", cv2, allow_zero=True)
    rho = np.asarray(rate_per_s, dtype=float) * s
    if np.any(rho <= 0) or np.any(rho >= 1):
        raise ValueError(
            f"utilization rate x service must lie in (0, 1), got {rho!r}: "
            "at 1 or more the queue has no steady state"
        )
    w = rho * s * (1 + c) / (2 * (1 - rho))
    return float(w) if np.ndim(w) == 0 else w


def theory_wait_s(rate_per_s: float, mean_service_s: float, kind: str) -> float:
    """Mean waiting time in queue for M/M/1 (``kind='mm1'``) or M/D/1 (``'md1'``), Pollaczek-Khinchine."""
    lam = positive("rate_per_s", rate_per_s)
    s = positive("mean_service_s", mean_service_s)
    if kind not in SERVICE_CV2:
        raise ValueError(f"unknown kind {kind!r}; valid: {', '.join(SERVICE_CV2)}")
    if lam * s >= 1:
        raise ValueError(f"utilization {lam * s:.3f} >= 1: the queue has no steady state")
    return pk_wait_s(lam, s, SERVICE_CV2[kind])
