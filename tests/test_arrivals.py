"""Arrival processes: rates against their definitions, sortedness, seeds, trace files."""

import numpy as np
import pytest

from ipusim import arrivals as A


def test_poisson_rate_and_exponential_gaps():
    t = A.poisson(250.0, 200_000, seed=3)
    gaps = np.diff(t)
    # mean gap 1/rate within 1% (std error 1/sqrt(n) = 0.22%); CV of exponential gaps is 1
    assert abs(gaps.mean() * 250.0 - 1) < 0.01
    assert abs(gaps.std() / gaps.mean() - 1) < 0.02


def test_two_rate_mean_rate_matches_closed_form():
    rh, rl, mh, ml = 1000.0, 100.0, 0.5, 1.5
    t = A.two_rate(rh, rl, 300_000, mean_high_s=mh, mean_low_s=ml, seed=1)
    expect = (rh * mh + rl * ml) / (mh + ml)
    assert np.all(np.diff(t) >= 0)
    # a few hundred state switches: the rate estimate has a few % noise; 6% tolerance
    assert abs(t.size / t[-1] / expect - 1) < 0.06


def test_on_off_is_burstier_than_poisson():
    t = A.on_off(1000.0, 100_000, mean_on_s=0.2, mean_off_s=0.2, seed=2)
    gaps = np.diff(t)
    assert gaps.std() / gaps.mean() > 1.5  # Poisson gaps have CV 1


def test_daily_ramp_peaks_at_noon():
    day = 100.0
    t = A.daily_ramp(500.0, 100_000, period_s=day, swing=0.8, seed=4)
    phase = (t % day) / day
    noon = np.count_nonzero(np.abs(phase - 0.5) < 0.1)
    night = np.count_nonzero((phase < 0.1) | (phase > 0.9))
    # rate ratio noon/midnight windows is about (1 + 0.8 cos-avg)/(1 - 0.8 cos-avg) ~ 5.5
    assert noon > 3 * night
    assert np.all(np.diff(t) >= 0)


def test_same_seed_same_times_and_different_seed_differs():
    assert np.array_equal(A.poisson(10, 100, seed=7), A.poisson(10, 100, seed=7))
    assert not np.array_equal(A.poisson(10, 100, seed=7), A.poisson(10, 100, seed=8))


def test_trace_round_trip(tmp_path):
    t = A.poisson(50, 20, seed=0)
    lens = np.arange(1, 21)
    p = tmp_path / "trace.csv"
    A.save_trace(p, t, lens)
    t2, l2 = A.load_trace(p)
    assert np.array_equal(t, t2) and np.array_equal(lens, l2)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="rate_per_s"):
        A.poisson(-1, 10)
    with pytest.raises(ValueError, match="swing"):
        A.daily_ramp(10, 10, swing=1.0)


def test_bad_trace_raises(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("foo,bar\n1,2\n")
    with pytest.raises(ValueError, match="arrival_s"):
        A.load_trace(p)


def test_short_trace_row_names_its_line(tmp_path):
    p = tmp_path / "short.csv"
    p.write_text("arrival_s,length\n0.1,64\n0.2\n")
    with pytest.raises(ValueError, match="line 3"):
        A.load_trace(p)
    p.write_text("arrival_s,length\n0.1,64\n0.2,abc\n")
    with pytest.raises(ValueError, match="line 3"):
        A.load_trace(p)


def test_sparse_two_rate_is_fast_and_matches_the_period_by_period_draw(monkeypatch):
    """Rate 1e-9/s: a period-by-period loop would draw ~1e9 empty periods for 5 requests. The
    sparse path skips empty cycles; it must give the same process as the period-by-period draw."""
    t = A.on_off(
        2e-9, 5, seed=0
    )  # returns at once (no wall-clock limit here: the test would hang otherwise)
    assert t.size == 5 and np.all(np.diff(t) >= 0) and t[0] > 1e6  # ~1e9 s between arrivals
    rh, rl, mh, ml, n = 0.3, 0.1, 0.5, 2.0, 200_000  # 0.35 arrivals per cycle: the sparse path
    assert rh * mh + rl * ml < A.SPARSE_ARRIVALS_PER_CYCLE
    sparse = np.diff(A.two_rate(rh, rl, n, mean_high_s=mh, mean_low_s=ml, seed=1))
    monkeypatch.setattr(A, "SPARSE_ARRIVALS_PER_CYCLE", 0.0)  # force the period-by-period draw
    dense = np.diff(A.two_rate(rh, rl, n, mean_high_s=mh, mean_low_s=ml, seed=1))
    expect = (rh * mh + rl * ml) / (mh + ml)
    # 2e5 arrivals over ~6e4 cycles: rate and gap CV within 2% of each other and of the closed form
    assert 1 / sparse.mean() == pytest.approx(expect, rel=0.02)
    assert 1 / dense.mean() == pytest.approx(expect, rel=0.02)
    assert sparse.std() / sparse.mean() == pytest.approx(dense.std() / dense.mean(), rel=0.02)


@pytest.mark.parametrize("cv", [0.5, 1.0, 2.0])
def test_gamma_gaps_have_the_rate_and_cv_asked_for(cv):
    t = A.gamma(400.0, 400_000, cv=cv, seed=2)
    gaps = np.diff(t)
    # 4 x 10^5 gaps: standard errors well under 1% (mean) and 2% (cv at cv = 2); tolerances 2% and 4%
    assert abs(gaps.mean() * 400.0 - 1) < 0.02
    assert abs(gaps.std() / gaps.mean() / cv - 1) < 0.04
    with pytest.raises(ValueError, match="cv"):
        A.gamma(400.0, 10, cv=0)
