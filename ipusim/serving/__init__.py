"""Serving simulation: requests through a batching policy onto one or more devices.

The pipeline is ``arrivals`` (when requests come) + ``lengths.sample`` (how long each is)
-> a policy from ``ipusim.policies`` (when and how many leave the queue together) -> a
``ServiceModel`` per device (how long a batch takes) -> a ``ServingResult`` (per-request
start and finish, latency percentiles, throughput, utilization, padding waste).

======================  ==============================================================================
``service``             ``ServiceModel`` and its builders (``chip_service``, ``fixed_service``, ...)
``capacity``            ``largest_batch`` (what fits one step) and ``capacity_at`` (the rate a p99 target allows)
``tables``              service-time tables from the machine model, cached in memory and on disk
``mixed_steps``         the mixed prefill + decode table of continuous batching (on ``tables``)
``plan``                ``make_plan``: a run's inputs checked and turned into the arrays the kernel reads
``batching``            the event kernel and ``simulate`` (static, dynamic, token budget, buckets, ...)
``generation``          continuous and static batching of decoder generation (``simulate_generation``)
``generation_kernels``  its Numba kernels (continuous, chunked and static batching)
``result``              ``ServingResult`` and its summary
``percentiles``         exact percentiles and run totals in Numba kernels (one pass in the usual case)
``theory``              Pollaczek-Khinchine, the closed form the simulator is checked against
``throughput``          ``encoder_throughput``: requests/s of padded, unpadded or packed batches back to back
======================  ==============================================================================
"""

from .batching import simulate, sweep_rates
from .capacity import capacity_at, largest_batch
from .generation import GenerationModel, generation_model, simulate_generation
from .plan import BYTES_PER_REQUEST, DEFAULT_SEED, MAX_REQUESTS, Router
from .result import ServingResult, quantiles, weighted_quantiles
from .service import (
    MAX_LENGTH,
    ServiceModel,
    chip_service,
    exponential_service,
    fixed_service,
    surrogate_error,
)
from .theory import pk_wait_s, theory_wait_s
from .throughput import Throughput, encoder_throughput

__all__ = [
    "BYTES_PER_REQUEST",
    "DEFAULT_SEED",
    "GenerationModel",
    "MAX_LENGTH",
    "MAX_REQUESTS",
    "Router",
    "ServiceModel",
    "ServingResult",
    "Throughput",
    "capacity_at",
    "chip_service",
    "encoder_throughput",
    "exponential_service",
    "fixed_service",
    "generation_model",
    "largest_batch",
    "pk_wait_s",
    "quantiles",
    "simulate",
    "simulate_generation",
    "surrogate_error",
    "sweep_rates",
    "theory_wait_s",
    "weighted_quantiles",
]
