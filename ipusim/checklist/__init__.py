"""The proof-of-concept migration checklist: checks, evidence, verdict, report.

>>> from ipusim.checklist import default_case, run_checklist
>>> report = run_checklist(default_case())        # doctest: +SKIP
>>> report.verdict.decision, report["C4"].summary  # doctest: +SKIP

A case (model, traffic, p99 target, candidate deployments, prices) goes through eight
checks (``C1`` fit, ``C2`` throughput at the target, ``C3`` padding, ``C4`` cost and
energy, ``C5`` sensitivity, ``C6`` training, ``C7`` software readiness, ``C8`` what to
measure), each a function ``check_x(case) -> Check`` with its evidence, then a verdict
(migrate, pilot, stay) whose reasons name the checks they come from. The ``Report`` prints
as Markdown, HTML (one self-contained file) and JSON. Prices are ``ipusim.prices``'s
(re-exported here).
"""

from .case import (
    ASSUMPTIONS,
    DEFAULT_USD_PER_CHIP_HOUR,
    DEFAULT_USD_PER_KWH,
    Candidate,
    Case,
    Prices,
    Training,
    default_case,
    parse_candidates,
)
from .checks import (
    QUESTIONS,
    Check,
    Context,
    Evidence,
    check_cost,
    check_fit,
    check_padding,
    check_poc,
    check_sensitivity,
    check_software,
    check_throughput,
    check_training,
    train_estimate,
)
from .config_file import case_from_dict, load_case
from .report import Report, run_checklist
from .verdict import POLICY, MigrationVerdict, Reason, decide

__all__ = [
    "ASSUMPTIONS",
    "DEFAULT_USD_PER_CHIP_HOUR",
    "DEFAULT_USD_PER_KWH",
    "POLICY",
    "QUESTIONS",
    "Candidate",
    "Case",
    "Check",
    "Context",
    "Evidence",
    "Prices",
    "Reason",
    "Report",
    "Training",
    "MigrationVerdict",
    "case_from_dict",
    "check_cost",
    "check_fit",
    "check_padding",
    "check_poc",
    "check_sensitivity",
    "check_software",
    "check_throughput",
    "check_training",
    "decide",
    "default_case",
    "load_case",
    "parse_candidates",
    "run_checklist",
    "train_estimate",
]
