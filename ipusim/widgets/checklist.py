"""A form to enter one's own checklist case and run it (button: "Run checklist")."""

from __future__ import annotations

import functools

import ipywidgets as W
import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from .. import texttable, workloads
from ..checklist import (
    DEFAULT_USD_PER_CHIP_HOUR,
    QUESTIONS,
    Prices,
    Training,
    default_case,
    parse_candidates,
    run_checklist,
)
from ..plots import checklist as plots
from .explorer import interactive


def run_form(
    model,
    rate_per_s,
    slo_ms,
    long_fraction,
    candidates,
    tile_usd,
    gpu_usd,
    usd_per_kwh,
    train,
    show_figure=True,
    **answers,
):
    """What the form's button runs: build the case from the controls' values, run the
    checklist, show the verdict, the checks and (``show_figure``) the overview; returns the
    ``Report``. In the form, an error (e.g. an unknown chip in ``candidates``) shows as one
    line under the button (``widgets.explorer``); called directly, it raises."""
    cands = parse_candidates(candidates)
    tile = next((c.chip.name for c in cands if c.chip.kind == "tile"), "gc200")
    gpu = next((c.chip.name for c in cands if c.chip.kind == "gpu"), "a100-80gb")
    # A price counts as the user's only when it differs from the assumed default:
    # the form always shows a value, and leaving it alone must keep the "ASSUMED" mark.
    base = Prices()
    given = {
        k: v
        for k, v in ((tile, tile_usd), (gpu, gpu_usd))
        if k not in base.usd_per_chip_hour or v != base.usd_per_chip_hour[k]
    }
    prices = base.with_prices(given, usd_per_kwh if usd_per_kwh != base.usd_per_kwh else None)
    case = default_case(
        model=model,
        rate_per_s=rate_per_s,
        slo_p99_s=slo_ms / 1e3,
        long_fraction=long_fraction,
        candidates=cands,
        prices=prices,
        training=Training() if train else None,
        answers=answers,
        name="",
    )
    report = run_checklist(case, show_progress=False)
    v = report.verdict
    lines = [f"**{v.headline}**", ""] + [
        f"- ({r.weight:+.0f}) {r.text} [{', '.join(r.checks)}]" for r in v.reasons
    ]
    lines += [
        "",
        texttable.markdown(
            ["check", "status", "headline"],
            [[f"{c.id} {c.name}", c.status.upper(), c.summary] for c in report.checks.values()],
        ),
    ]
    display(Markdown("\n".join(lines)))
    if show_figure and report.case.inference and report.checks["C2"].tables.get("throughput"):
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
        plots.plot_capacity(report, axes[0])
        plots.plot_cost(report, axes[1])
        fig.tight_layout()
        plt.show()
    return report


@functools.wraps(run_form)  # the form's controls follow run_form's signature and order
def _run_from_form(**kwargs):
    """``run_form`` with the log sliders' values read as the 3 significant digits they show
    (a slider's step of 0.001 in the exponent turns 50 into 50.0034)."""
    for key in ("rate_per_s", "slo_ms"):
        kwargs[key] = float(f"{kwargs[key]:.3g}")
    return run_form(**kwargs)


def checklist_form(**defaults):
    """Controls for a case (model, traffic, target, candidates, prices, questionnaire).

    Returns the ``ipywidgets.interactive``; its ``result`` is the last ``Report``. Runs when
    the button is pressed (a run takes a few seconds).
    """
    style = {"description_width": "190px"}
    layout = W.Layout(width="470px")
    controls = {
        "model": W.Dropdown(
            options=list(workloads.MODELS),
            value="bert-base",
            description="model",
            style=style,
            layout=layout,
        ),
        "rate_per_s": W.FloatLogSlider(
            value=300,
            base=10,
            min=-1,
            max=5,
            step=0.001,
            readout_format=".3g",
            description="rate (req/s)",
            style=style,
            layout=layout,
        ),
        "slo_ms": W.FloatLogSlider(
            value=50,
            base=10,
            min=-1,
            max=5,
            step=0.001,
            readout_format=".3g",
            description="p99 target (ms)",
            style=style,
            layout=layout,
        ),
        "long_fraction": W.FloatSlider(
            value=0.4, min=0, max=1, step=0.05, description="long texts", style=style, layout=layout
        ),
        "candidates": W.Text(
            value="gc200:1,a100-80gb:1", description="candidates", style=style, layout=layout
        ),
        "tile_usd": W.FloatText(
            value=DEFAULT_USD_PER_CHIP_HOUR["gc200"],
            description="tile $/chip-h (ASSUMED)",
            style=style,
            layout=layout,
        ),
        "gpu_usd": W.FloatText(
            value=DEFAULT_USD_PER_CHIP_HOUR["a100-80gb"],
            description="GPU $/chip-h (ASSUMED)",
            style=style,
            layout=layout,
        ),
        "usd_per_kwh": W.FloatText(
            value=0.15, description="$/kWh (ASSUMED)", style=style, layout=layout
        ),
        "train": W.Checkbox(value=False, description="training check (7B-175B)", indent=False),
        "show_figure": W.fixed(True),
    }
    for key, (question, answers) in QUESTIONS.items():
        controls[key] = W.Dropdown(
            options=list(answers),
            value="unknown",
            description=key.replace("_", " "),
            tooltip=question,
            style=style,
            layout=layout,
        )
    for k, v in defaults.items():
        if k not in controls:
            raise ValueError(f"unknown control {k!r}; valid: {', '.join(controls)}")
        controls[k] = W.fixed(v) if k == "show_figure" else controls[k]
        if k != "show_figure":
            controls[k].value = v
    w = interactive(_run_from_form, {"manual": True, "manual_name": "Run checklist"}, **controls)
    return w


__all__ = ["checklist_form"]
