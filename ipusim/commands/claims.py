"""``ipusim claims``: the scoreboard of the vendor claims (docs/claims.md), one verdict each."""

from __future__ import annotations

import os
import shutil
import tempfile

from .. import background
from ._common import add_json, print_json

NAME = "claims"
HELP = "verdicts on the articles' vendor claims (supported / contradicted / depends), with their numbers and rules"
ORDER = 70
EPILOG = (
    "On a first run (compiled kernels not cached yet) with two or more CPUs, a second process "
    "judges claims beside this one (claim 10 first: "
    "its GPT-2 generation tables are the largest piece of a first run; then each process takes "
    "the next claim not yet taken, longest first); the output is the same. "
    "IPUSIM_WORKERS=1 keeps everything in one process."
)
FIRST_HANDED = 10
"""The claim a background worker judges first (``ipusim.background``): the longest to judge
from empty caches (claim 10's generation tables), so it starts at once beside the rest."""

LONGEST_FIRST = (10, 2, 6, 15, 14, 13, 11, 7, 8, 9, 1, 3, 4, 5, 12)
"""The order two processes share a first run's claims in, longest first by the CPU seconds of a
first run on a 2-core machine (2026-12-03): 10 (4-5 s, GPT-2 generation tables); 2 and 6 (3-4 s,
compiling the tile planner's and the event kernels the others use: the command's own process
starts on them); 15, 14, 13, 11 (0.4-1.1 s: training searches, embeddings); the rest under
0.15 s (they read simulations the others ran). Taking the next claim not yet taken from one
list ends both processes within the last short claims of each other, where meeting halfway
through an ascending list could leave one of them a second of claims after the other stopped.
Claims not listed go last, in number order. The order changes no result."""


def add_arguments(p):
    p.add_argument(
        "--claim",
        type=int,
        action="append",
        default=None,
        metavar="N",
        help="only claim N (1-15, docs/claims.md); repeat for several (default: all)",
    )
    p.add_argument(
        "--rules", action="store_true", help="print each verdict's rule and assumptions too"
    )
    p.add_argument(
        "--sensitivity",
        action="store_true",
        help="judge each claim again on the later parts of its comparison-table row (Bow vs H100 "
        "and H200), by the same rule (about twice the time)",
    )
    add_json(p)


def judged(n: int, sensitivity: bool) -> tuple:
    """Claim ``n``'s verdict and, with ``sensitivity``, its sensitivity verdicts (else [])."""
    from .. import claims

    return claims.judge(n), (claims.sensitivity(n) if sensitivity else [])


def warm_kernels() -> None:
    """Compile (or load) the GPU model's wave kernel by one tiny GPU step (claims 2 and 10 both
    need it: the other process then loads it rather than waiting for it halfway through its
    own compiles), then claim 10's continuous-batching kernel by a tiny run through the same
    public call ``serving.deployments.compare`` makes, on tables of one fixed step time
    (``serving.simulate_generation`` hands the kernel one array type whatever the tables and
    replicas: the one signature claim 10 uses), then its disaggregated decode kernel by a
    tiny call of the argument types ``simulate_disaggregated`` gives it (a cached, read-only
    decode table). A worker does this before claim 10: its tile tables then find the tile
    planner's kernels, which this process compiles first (claim 2), in the cache instead of
    waiting for them (about 1.5 s of a first run, then 0.7 s more without the decode kernel)."""
    import numpy as np

    from .. import machine, policies, serving, workloads
    from ..claims.common import GPU
    from ..serving import disaggregated

    machine.step_time_s(GPU, workloads.step("bert-base", [8]))

    table = np.full((3, 3), 1e-3)
    gen = serving.GenerationModel(
        "fixed 1 ms",
        serving.ServiceModel("fixed 1 ms", table, 32, source="fixed"),
        table,
        ctx_step=64,
        mixed=np.full((2, 2, 3), 1e-3),
    )
    n = 4
    ready, prompt, out = np.arange(n) * 1e-3, np.full(n, 16), np.full(n, 2)
    serving.simulate_generation(ready, prompt, out, policies.Continuous(max_batch=2), gen)
    table.flags.writeable = False  # as the generation tables come from the table cache
    disaggregated.decode_kernel()(
        ready,
        np.argsort(ready, kind="stable"),
        prompt,
        out,
        table,
        64,
        2,
        int((prompt + out).sum()),
        ready + 1e-3,
        np.full(n, np.nan),
        np.empty(n),
    )


def judge_share(order, sensitivity: bool, marks: str, warm: bool = False) -> dict:
    """Claim number -> ``judged(n, sensitivity)`` for each claim of ``order`` (in that order)
    that no other process has taken: a claim is taken by creating the file named by its
    number in the folder ``marks``, which two processes share (both going through
    ``shared_order``, a worker from ``FIRST_HANDED``, this one from the claim after it: each
    takes the next claim not yet taken). ``warm`` (the worker): ``warm_kernels`` first when it
    takes ``FIRST_HANDED``."""
    got = {}
    for n in order:
        try:
            os.close(os.open(os.path.join(marks, str(n)), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        if warm and n == FIRST_HANDED:
            warm_kernels()
        got[n] = judged(n, sensitivity)
    return got


def _first_run() -> bool:
    """A background worker may run (``background.allowed``) and Numba's cache lacks the event
    kernel (claim 6's) or the continuous-batching kernel (claim 10's): a first run of
    ``claims``, whose compiles and tables a worker halves, also when ``serve`` and
    ``checklist`` ran before it (they compile the event kernel, not claim 10's). A warm run
    (about 5 s) gains less than a worker costs in CPU (its start and the simulations both
    processes repeat, about 2 s), and on a busy machine loses wall time too."""
    from .. import serving

    return background.allowed() and not background.cached(
        serving.batching.event_kernel(False), serving.generation.continuous_kernel()
    )


def shared_order(todo) -> list:
    """The claims ``todo`` in ``LONGEST_FIRST`` order (those it does not list last, ascending)."""
    listed = [n for n in LONGEST_FIRST if n in todo]
    return listed + sorted(n for n in todo if n not in LONGEST_FIRST)


def _shared(todo, sensitivity: bool) -> dict:
    """``judged`` of the claims ``todo``, shared with a background worker (``judge_share``);
    those a failed worker had taken are missing (then judged here)."""
    try:
        marks = tempfile.mkdtemp(prefix="ipusim-claims-")
    except OSError:  # no temporary folder: one process
        return {}
    try:
        order = shared_order(todo)  # FIRST_HANDED first: LONGEST_FIRST starts with it
        mine = [n for n in order if n != FIRST_HANDED]
        with background.start(f"{__name__}:judge_share", order, sensitivity, marks, True) as worker:
            got = judge_share(mine, sensitivity, marks)
            got.update(worker.result(dict))
        return got
    finally:
        shutil.rmtree(marks, ignore_errors=True)


def run(args) -> int:
    from .. import claims

    nums = sorted(claims.CLAIMS) if args.claim is None else args.claim
    for n in nums:
        if n not in claims.CLAIMS:
            raise ValueError(
                f"--claim must be a claim number {min(claims.CLAIMS)}-{max(claims.CLAIMS)}, got {n}"
            )
    todo = sorted(set(nums))
    got = _shared(todo, args.sensitivity) if len(todo) > 1 and _first_run() else {}
    for n in todo:  # one process, or claims a failed worker had taken
        if n not in got:
            got[n] = judged(n, args.sensitivity)
    verdicts = [got[n][0] for n in nums]
    counts = {s: sum(v.state == s for v in verdicts) for s in claims.STATES}
    sens = {n: got[n][1] for n in nums} if args.sensitivity else {}
    if args.json:
        out = [v.to_dict() for v in verdicts]
        for d in out:
            if d["claim"] in sens:
                d["comparison"]["sensitivity_verdicts"] = [
                    {
                        "tile": s.comparison["tile"],
                        "gpu": s.comparison["gpu"],
                        "state": s.state,
                        "summary": s.summary,
                    }
                    for s in sens[d["claim"]]
                ]
        print_json({"verdicts": out, "counts": counts})
        return 0
    for v in verdicts:
        c = v.comparison
        chips = " vs ".join(x for x in (c["tile"], c["gpu"]) if x) or "no chips"
        print(f"{v.claim:2d}. {v.state.upper():12s} {v.title}")
        print(f"    {v.summary}")
        if v.break_even:
            print(f"    break-even: {v.break_even}")
        print(f"    compares {chips}: {c['why']}")
        for s in sens.get(v.claim, ()):
            print(f"    sensitivity {s.comparison['tile']} vs {s.comparison['gpu']}: {s.state}")
        if args.rules:
            print(f"    rule: {v.rule}")
            for k, a in v.assumptions.items():
                print(f"    assumes {k}: {a}")
        print(f"    judged by {v.function}; notebooks: {', '.join(v.notebooks)}")
    print(", ".join(f"{counts[s]} {s}" for s in claims.STATES))
    return 0
