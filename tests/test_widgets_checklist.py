"""The checklist form: build it, set controls, run, check the report reflects the controls."""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")


@pytest.fixture(autouse=True)
def _quick(monkeypatch):
    monkeypatch.setenv("IPUSIM_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")


def _control(w, name):
    return next(c for c in w.children if getattr(c, "description", None) == name)


def test_form_runs_with_the_values_set():
    from ipusim.widgets.checklist import checklist_form

    w = checklist_form(show_figure=False)
    _control(w, "rate (req/s)").value = 50.0
    _control(w, "p99 target (ms)").value = 20.0
    _control(w, "candidates").value = "gc200:2,a100-80gb:1"
    _control(w, "custom ops").value = "many"
    w.update()
    r = w.result
    assert r.case.rate_per_s == pytest.approx(50.0)
    assert r.case.slo_p99_s == pytest.approx(0.020)
    assert [c.count for c in r.case.candidates] == [2, 1]
    assert r["C7"].ev("risk.custom_ops") == 25
    assert r.decision in ("migrate", "pilot", "stay")


def test_form_prices_are_user_values():
    from ipusim.widgets.checklist import checklist_form

    w = checklist_form(show_figure=False, tile_usd=0.5, gpu_usd=3.0)
    w.update()
    p = w.result.case.prices
    assert p.chip_hour("gc200") == 0.5 and not p.is_assumed("gc200")
    assert p.chip_hour("a100-80gb") == 3.0


def test_form_default_prices_stay_assumed():
    from ipusim.checklist.case import DEFAULT_USD_PER_CHIP_HOUR, DEFAULT_USD_PER_KWH
    from ipusim.widgets.checklist import checklist_form

    w = checklist_form(
        show_figure=False,
        tile_usd=DEFAULT_USD_PER_CHIP_HOUR["gc200"],
        gpu_usd=DEFAULT_USD_PER_CHIP_HOUR["a100-80gb"],
        usd_per_kwh=DEFAULT_USD_PER_KWH,
    )
    w.update()
    p = w.result.case.prices
    assert p.is_assumed("gc200") and p.is_assumed("a100-80gb") and p.is_assumed("kwh")


def test_form_rejects_unknown_defaults():
    from ipusim.widgets.checklist import checklist_form

    with pytest.raises(ValueError, match="unknown control"):
        checklist_form(colour="red")


def test_run_form_called_directly_matches_the_form():
    from ipusim.widgets.checklist import checklist_form, run_form

    direct = run_form(
        "bert-base",
        50.0,
        20.0,
        0.4,
        "gc200:1,a100-80gb:1",
        1.6,
        2.0,
        0.15,
        False,
        show_figure=False,
    )
    w = checklist_form(show_figure=False, rate_per_s=50.0, slo_ms=20.0)
    w.update()
    assert direct.verdict.to_dict() == w.result.verdict.to_dict()


def test_form_reads_log_sliders_as_the_digits_they_show(monkeypatch):
    """A log slider snaps 50 to 10**1.699 = 50.0034; the case gets the 50 the readout shows."""
    from ipusim.widgets import checklist as wc

    seen = {}
    monkeypatch.setattr(wc, "run_form", lambda **kw: seen.update(kw))
    wc._run_from_form(model="bert-base", rate_per_s=10**2.477, slo_ms=10**1.699, long_fraction=0.4)
    assert (seen["rate_per_s"], seen["slo_ms"]) == (300.0, 50.0)
    assert 10**2.477 != 300.0 and 10**1.699 != 50.0
    w = wc.checklist_form()
    names = [getattr(c, "description", None) for c in w.children]
    assert names[:3] == ["model", "rate (req/s)", "p99 target (ms)"]  # run_form's order
