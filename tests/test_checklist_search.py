"""The checklist's capacity search against the plain search it speeds up.

The plain search (``checklist_reference.plain_capacity``) is the bisection as the checklist ran it before:
every probe a whole ``search.serve`` run read through its full summary. The fast search
(``search.capacity_search``: ``serving.capacity.CapacitySearch``, and ``Context.best_policy``) must
give the same capacities and pick the same policy; ``CapacitySearch``'s head start is checked on pass/fail
patterns where it holds and where it does not.
"""

from __future__ import annotations

import math

import pytest
from checklist_reference import plain_best_policy, plain_capacity

from ipusim import hardware, workloads
from ipusim.checklist import Context, default_case, search
from ipusim.serving import capacity


@pytest.fixture(autouse=True)
def _quick(monkeypatch):
    monkeypatch.setenv("IPUSIM_QUICK", "1")


def _same_summary(a, b):
    sa, sb = a.summary(), b.summary()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert sa[k] == sb[k] or (
            isinstance(sa[k], float) and math.isnan(sa[k]) and math.isnan(sb[k])
        ), k


@pytest.fixture(scope="module")
def setups():
    c, m = hardware.chip("a100-80gb"), workloads.model("bert-base")
    return {mode: search.setup(c, m, mode, max_batch=16) for mode in ("padded", "packed")}


def _policies(case, su):
    from ipusim.checklist.case import Candidate

    return Context(case).policies(Candidate(hardware.chip("a100-80gb")), su.max_batch, su)


@pytest.mark.parametrize("mode, slo", [("padded", 0.05), ("packed", 0.02), ("padded", 0.004)])
def test_capacity_search_is_the_plain_bisection(setups, mode, slo):
    """Every policy of the quick search, 2,000 requests: the same capacity bit for bit, and the
    same run there (its whole summary); a tight target (4 ms) gives zero capacities too."""
    su = setups[mode]
    lens = search.traffic_lengths(default_case(), 2000)
    caps = []
    for pol in _policies(default_case(), su):
        top = search.rate_bound(
            lens, su, pol, 2.0 * pol.max_batch / su.time_at(pol.max_batch, 200.0)
        )
        want, r_want = plain_capacity(lens, su, pol, slo, top)
        got, r_got = search.capacity_search(lens, su, pol, slo, top, iters=7).run()
        assert got == want, pol.label
        _same_summary(r_got, r_want)
        caps.append(got)
        for above in (
            want * 0.999,
            want,
            want * 1.001,
        ):  # stopped early only when it cannot beat `above`
            c, _ = search.capacity_search(lens, su, pol, slo, top, iters=7).run(above)
            assert (c is None and want <= above) or c == want
    assert any(c > 0 for c in caps) or slo < 0.005


class _Pattern:
    """A stand-in for ``capacity.Probe``: rates pass or fail by a rule, no simulation."""

    def __init__(self, rule):
        self.rule, self.ran = rule, []

    def passes(self, rate):
        self.ran.append(rate)
        return self.rule(rate)

    def result(self, rate):
        return rate


def _search(rule, iters=7, top=1000.0):
    return capacity.CapacitySearch(lambda: _Pattern(rule), top, iters=iters)


@pytest.mark.parametrize("threshold", [0.05, 0.2, 300.0, 561.0, 563.0, 800.0, 999.0, 2000.0])
def test_head_start_is_exact_when_rates_pass_below_a_threshold(threshold):
    plain = _search(lambda r: r < threshold).run()
    fast = _search(lambda r: r < threshold)
    assert fast.run(guess=True) == plain
    assert fast.verify()


@pytest.mark.parametrize("hole", [(0.05, 0.2), (5.0, 20.0), (50.0, 150.0), (200.0, 400.0)])
def test_head_start_never_reports_less_and_its_check_catches_a_failing_low_rate(hole):
    """Rates pass below 900 req/s except in a hole: the plain bisection lands in or below the
    hole when it probes there; the head start skips those probes, reports at least as much, and
    ``verify`` runs them and says the answer cannot be trusted."""

    def rule(r):
        return r < 900.0 and not hole[0] <= r <= hole[1]

    plain, _ = _search(rule).run()  # each hole holds one probe of the rising path 0.1, 10, 100, 316
    fast = _search(rule)
    got, _ = fast.run(guess=True)
    assert got > plain and not fast.verify()


def test_head_start_is_taken_only_when_the_guess_passes():
    fast = _search(lambda r: r < 100.0)
    fast.run(guess=True)
    assert (
        fast.assumed == [] and fast.verify()
    )  # the guess (0.56 x 1000) failed: the plain path ran


def test_best_policy_is_the_plain_searchs_choice(monkeypatch):
    """``Context.best_policy`` (rate bounds first, stopped searches, head starts) picks the policy
    the plain loop over every policy in order picks (first of the highest), with its capacity;
    also when the winner's head start does not check out and the search runs again plainly."""
    case = default_case()
    ctx = Context(case)
    cand = case.candidates[1]  # the A100: one chip, padded and packed
    pl = ctx.fit(cand)["placements"][0]
    for mode in ("padded", "packed"):
        svc = ctx.service(cand, pl, mode)
        lens = ctx.lengths
        best = plain_best_policy(ctx, cand, pl, mode, svc, lens)
        dep = ctx.best_policy(cand, pl, mode, svc, lens)
        assert (dep.policy, dep.capacity_per_replica) == best
        with monkeypatch.context() as m:
            m.setattr(
                capacity.CapacitySearch, "verify", lambda self: not self.assumed
            )  # a head start fails
            again = Context(case).best_policy(cand, pl, mode, svc, lens)
        assert (again.policy, again.capacity_per_replica) == best


def test_policies_with_identical_runs_share_a_key():
    from ipusim import policies as P

    def dyn(b, d):
        return search.Policy("dynamic", b, d, P.Dynamic(max_batch=b, max_delay_s=d))

    assert search.same_runs(dyn(1, 0.0)) == search.same_runs(dyn(1, 0.01))
    assert search.same_runs(dyn(2, 0.0)) != search.same_runs(dyn(2, 0.01))
