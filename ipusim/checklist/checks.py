"""The eight checks, one module each; this module gathers them under their historical names.

Each check is a function ``check_x(case, ctx=None) -> Check`` (``evidence``: ``Check``,
``Evidence``, ``fmt``). Work several checks share (fitting each candidate, searching its
batching policy, pricing) is done once by ``context.Context`` and reused.

=================  ===============================================================
``fit``            C1 fit in on-chip memory
``throughput``     C2 throughput at the latency target
``padding``        C3 padding and packing
``cost``           C4 cost and energy
``sensitivity``    C5 sensitivity (price ratio, rate, long share)
``train``          C6 training
``software``       C7 software readiness (questionnaire)
``poc``            C8 what to measure in a proof of concept
=================  ===============================================================
"""

from __future__ import annotations

from .context import HOUR_S, MAX_SERVING_BATCH, Context, Deployment, ReplicaLayout
from .cost import check_cost
from .evidence import CHECK_NAMES, STATUSES, Check, Evidence, fmt
from .fit import check_fit
from .padding import check_padding
from .poc import check_poc
from .sensitivity import TIE_BAND, check_sensitivity, crossings
from .software import QUESTIONS, RISK_LEVELS, check_software
from .throughput import check_throughput
from .train import (
    TRAIN_CHIPS,
    TRAINING_CLAIM,
    TRAINING_MODEL_NOTE,
    check_training,
    train_estimate,
    training_chips,
)

__all__ = [
    "CHECK_NAMES",
    "HOUR_S",
    "MAX_SERVING_BATCH",
    "QUESTIONS",
    "RISK_LEVELS",
    "STATUSES",
    "TIE_BAND",
    "TRAINING_CLAIM",
    "TRAINING_MODEL_NOTE",
    "TRAIN_CHIPS",
    "Check",
    "Context",
    "Deployment",
    "Evidence",
    "ReplicaLayout",
    "crossings",
    "check_cost",
    "check_fit",
    "check_padding",
    "check_poc",
    "check_sensitivity",
    "check_software",
    "check_throughput",
    "check_training",
    "fmt",
    "train_estimate",
    "training_chips",
]
