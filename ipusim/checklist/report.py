"""Run the checks on a case and hold the result as a report (Markdown, HTML, JSON)."""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass

from .. import texttable
from ..config import progress
from .case import ASSUMPTIONS, Case
from .context import Context
from .cost import check_cost
from .evidence import Check, fmt
from .fit import check_fit
from .padding import check_padding
from .poc import check_poc
from .sensitivity import check_sensitivity
from .software import check_software
from .throughput import check_throughput
from .train import check_training
from .verdict import POLICY, MigrationVerdict, decide

INFERENCE_CHECKS = (check_fit, check_throughput, check_padding, check_cost, check_sensitivity)
STATUS_MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "info": "INFO", "skipped": "SKIPPED"}


def run_checklist(case: Case | None = None, *, show_progress: bool = True) -> Report:
    """Run every check on ``case`` (the documented default case if None) and decide."""
    from .case import default_case

    case = default_case() if case is None else case
    ctx = Context(case)
    steps = list(INFERENCE_CHECKS) if case.inference else []
    steps += [check_training, check_software]
    checks: dict[str, Check] = {}
    kw = (
        {} if show_progress else {"disable": True}
    )  # else: shown unless IPUSIM_QUICK (config.progress)
    bar = progress(total=len(steps) + 1, desc="checklist", leave=False, **kw)
    try:
        for fn in steps:
            bar.set_postfix_str(fn.__name__.removeprefix("check_"))
            c = fn(case, ctx)
            checks[c.id] = c
            bar.update(1)
        checks["C8"] = check_poc(case, ctx, checks)
        bar.update(1)
    finally:
        bar.close()
    if not case.inference:
        for cid, name in (
            ("C1", "Fit in on-chip memory"),
            ("C2", "Throughput at the latency target"),
            ("C3", "Padding and packing"),
            ("C4", "Cost and energy"),
            ("C5", "Sensitivity"),
        ):
            checks[cid] = Check(
                cid, name, "skipped", "training-only case", "inference = false", [], {}, ""
            )
    ordered = {k: checks[k] for k in sorted(checks)}
    return Report(case, ordered, decide(case, ordered))


def _cell(v) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        return fmt(v)
    return str(v)


def _md_table(rows: list[dict]) -> str:
    if not rows:
        return ""
    cols = list(rows[0])
    return texttable.markdown(
        [c.replace("_", " ") for c in cols], [[_cell(r.get(c, "")) for c in cols] for r in rows]
    )


def _html_table(rows: list[dict]) -> str:
    if not rows:
        return ""
    cols = list(rows[0])
    # Text columns left-aligned, numbers right-aligned; a status cell is coloured by its status.
    text_col = {c: any(isinstance(r.get(c), str) for r in rows) for c in cols}
    head = "".join(
        f"<th class='{'txt' if text_col[c] else 'num'}'>{html.escape(c.replace('_', ' '))}</th>"
        for c in cols
    )
    marks = {m: k for k, m in STATUS_MARK.items()}

    def td(c, v):
        text = html.escape(_cell(v))
        if c == "status" and v in marks:
            text = f"<span class='status {marks[v]}'>{text}</span>"
        return f"<td class='{'txt' if text_col[c] else 'num'}'>{text}</td>"

    body = "".join("<tr>" + "".join(td(c, r.get(c, "")) for c in cols) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f3f3f3}.txt{text-align:left}.num{text-align:right}
.verdict{font-size:1.3em;padding:.6em 1em;border-radius:6px;margin:1em 0}
.migrate{background:#dff3df}.pilot{background:#fff3cd}.stay{background:#f8dada}
.status{font-weight:bold;padding:1px 6px;border-radius:4px;font-size:.85em}
.pass{background:#dff3df}.warn{background:#fff3cd}.fail{background:#f8dada}.info,.skipped{background:#e8eef8}
.assume{color:#7a4b00;font-size:.9em}img{max-width:100%}
"""


@dataclass
class Report:
    """The checklist's result: the case, each check (C1-C8) and the verdict."""

    case: Case
    checks: dict  # id -> Check
    verdict: MigrationVerdict

    def __getitem__(self, cid: str) -> Check:
        return self.checks[cid]

    @property
    def decision(self) -> str:
        return self.verdict.decision

    # ------------------------------------------------------------------ plain forms
    def to_dict(self) -> dict:
        return {
            "case": self.case.to_dict(),
            "verdict": self.verdict.to_dict(),
            "checks": [c.to_dict() for c in self.checks.values()],
            "assumptions": self._assumptions(),
        }

    def to_json(self, indent: int = 2) -> str:
        from .._json import json_safe

        return json.dumps(json_safe(self.to_dict()), indent=indent, allow_nan=False)

    def __repr__(self):
        lines = [f"Report({self.case.name}): {self.verdict.headline}"]
        lines += [
            f"  {c.id} {c.name}: {c.status.upper()} - {c.summary}" for c in self.checks.values()
        ]
        return "\n".join(lines)

    # ------------------------------------------------------------------ Markdown
    def to_markdown(self) -> str:
        v = self.verdict
        case = self.case
        out = [f"# POC migration checklist: {case.name}", ""]
        out += [
            f"**Verdict: {v.decision.upper()}**"
            + (
                f" - {v.veto}"
                if v.veto
                else f" (score {v.score:+.1f} points; "
                f"migrate at >= {POLICY['migrate_at']}, pilot at >= {POLICY['pilot_at']}; {v.margin})"
            ),
            "",
        ]
        if v.reasons:
            out += ["Reasons, ranked by weight (points > 0 favour moving to the tile chip):", ""]
            out += [
                f"{i}. ({r.weight:+.0f}) {r.text} [{', '.join(r.checks)}]"
                for i, r in enumerate(v.reasons, 1)
            ]
            out.append("")
        out += ["## The case", "", _md_table(_case_rows(case)), ""]
        if self.sources():
            out += [f"*Timing models:* {self.sources()}", ""]
        out += [
            "## Checks",
            "",
            _md_table(
                [
                    {
                        "check": f"{c.id} {c.name}",
                        "status": STATUS_MARK[c.status],
                        "headline": c.summary,
                    }
                    for c in self.checks.values()
                ]
            ),
            "",
        ]
        for c in self.checks.values():
            out += [
                f"### {c.id} {c.name}: {STATUS_MARK[c.status]}",
                "",
                c.summary,
                "",
                f"*Why:* {c.reason}",
                "",
            ]
            if c.evidence:
                out += [
                    _md_table(
                        [
                            {"evidence": f"{c.id}.{e.key}", "value": e.text(), "note": e.note}
                            for e in c.evidence
                        ]
                    ),
                    "",
                ]
            for title, rows in c.tables.items():
                out += [f"*{title.replace('_', ' ')}*", "", _md_table(rows), ""]
            if c.source:
                out += [f"*Source of the numbers:* {c.source}", ""]
        out += ["## Prices", "", _md_table(self._price_rows()), ""]
        out += (
            ["## Assumptions", ""]
            + [f"- **{k}**: {a}" for k, a in self._assumptions().items()]
            + [""]
        )
        out += [f"Verdict policy (ASSUMPTION): {json.dumps(POLICY)}", ""]
        return "\n".join(out)

    def _repr_markdown_(self):
        return self.to_markdown()

    def sources(self) -> str:
        """The models that timed the steps and served the requests (C2's source)."""
        c2 = self.checks.get("C2")
        return c2.source if c2 is not None and c2.status != "skipped" else ""

    def _assumptions(self) -> dict:
        """``ASSUMPTIONS`` as this report's case meets them: the prices entry says which of the
        prices the candidates use are placeholders (``Prices.note``), as C4 does."""
        chips = [c.chip for c in self.case.candidates]
        return {**ASSUMPTIONS, "prices": self.case.prices.note(chips)}

    def _price_rows(self):
        p = self.case.prices
        rows = [
            {
                "item": f"{k} per chip-hour",
                "USD": v,
                "status": "ASSUMPTION" if p.is_assumed(k) else "user value",
            }
            for k, v in p.usd_per_chip_hour.items()
        ]
        rows.append(
            {
                "item": "energy per kWh",
                "USD": p.usd_per_kwh,
                "status": "ASSUMPTION" if p.is_assumed("kwh") else "user value",
            }
        )
        return rows

    # ------------------------------------------------------------------ HTML
    def figures(self) -> dict:
        """Figures of the report as matplotlib Figure objects (imports matplotlib)."""
        from ..plots import checklist as plots

        return plots.report_figures(self)

    def to_html(self, *, figures: bool = True) -> str:
        """One self-contained HTML page; figures embedded as base64 PNG."""
        v = self.verdict
        case = self.case
        parts = [
            f"<h1>POC migration checklist</h1><p>{html.escape(case.name)}</p>",
            f"<div class='verdict {v.decision}'><b>Verdict: {v.decision.upper()}</b> "
            + (
                html.escape(f"- {v.veto}")
                if v.veto
                else f"(score {v.score:+.1f} points; migrate at &ge; "
                f"{POLICY['migrate_at']}, pilot at &ge; {POLICY['pilot_at']}; {html.escape(v.margin)})"
            )
            + "</div>",
        ]
        if v.reasons:
            parts.append(
                "<p>Reasons, ranked by weight (points &gt; 0 favour moving to the tile chip):</p><ol>"
                + "".join(
                    f"<li>({r.weight:+.0f}) {html.escape(r.text)} [{_links(r.checks)}]</li>"
                    for r in v.reasons
                )
                + "</ol>"
            )
        parts.append(
            "<h2>Checks</h2>"
            + _html_table(
                [
                    {
                        "check": f"{c.id} {c.name}",
                        "status": STATUS_MARK[c.status],
                        "headline": c.summary,
                    }
                    for c in self.checks.values()
                ]
            )
        )
        imgs = self._figure_pngs() if figures else {}
        if "overview" in imgs:
            parts.append(f"<img alt='overview' src='data:image/png;base64,{imgs['overview']}'>")
        parts.append("<h2>The case</h2>" + _html_table(_case_rows(case)))
        if self.sources():
            parts.append(f"<p class='assume'>Timing models: {html.escape(self.sources())}</p>")
        for c in self.checks.values():
            parts.append(
                f"<h3 id='{c.id}'>{c.id} {html.escape(c.name)} <span class='status {c.status}'>"
                f"{STATUS_MARK[c.status]}</span></h3><p>{html.escape(c.summary)}</p>"
                f"<p><i>Why:</i> {html.escape(c.reason)}</p>"
            )
            if c.evidence:
                parts.append(
                    _html_table(
                        [
                            {"evidence": f"{c.id}.{e.key}", "value": e.text(), "note": e.note}
                            for e in c.evidence
                        ]
                    )
                )
            for title, rows in c.tables.items():
                parts.append(
                    f"<p><i>{html.escape(title.replace('_', ' '))}</i></p>" + _html_table(rows)
                )
            if c.id in imgs:
                parts.append(f"<img alt='{c.id}' src='data:image/png;base64,{imgs[c.id]}'>")
            if c.source:
                parts.append(
                    f"<p class='assume'>Source of the numbers: {html.escape(c.source)}</p>"
                )
        parts.append("<h2>Prices</h2>" + _html_table(self._price_rows()))
        parts.append(
            "<h2>Assumptions</h2><ul>"
            + "".join(
                f"<li class='assume'><b>{k}</b>: {html.escape(a)}</li>"
                for k, a in self._assumptions().items()
            )
            + "</ul>"
        )
        parts.append(
            f"<p class='assume'>Verdict policy (ASSUMPTION): {html.escape(json.dumps(POLICY))}</p>"
        )
        body = "\n".join(parts)
        return (
            f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>ipusim checklist: "
            f"{html.escape(case.name)}</title><style>{_CSS}</style></head><body>{body}</body></html>"
        )

    def _figure_pngs(self) -> dict:
        import base64
        import io

        out = {}
        for key, fig in self.figures().items():
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
            out[key] = base64.b64encode(buf.getvalue()).decode("ascii")
            import matplotlib.pyplot as plt

            plt.close(fig)
        return out

    def _repr_html_(self):
        return self.to_html(figures=False)


def _case_rows(case) -> list[dict]:
    m = case.model
    if case.lengths is not None:
        lens = (
            f"{case.length_source or 'given'}: {case.lengths.size:,} lengths, mean "
            f"{case.lengths.mean():.0f}, max {int(case.lengths.max())} tokens"
        )
    else:
        lens = f"{case.long_fraction:.0%} long texts (short 16-128, long 256-{m.max_positions} tokens, uniform; ASSUMPTION)"
    rows = [
        {"item": "model", "value": f"{m.name} ({m.kind}, {m.params / 1e6:,.1f}M parameters)"},
        {
            "item": "task",
            "value": case.task
            + (f", {case.output_tokens} reply tokens" if case.task == "generate" else ""),
        },
    ]
    if case.inference:
        rows += [
            {
                "item": "traffic",
                "value": f"{fmt(case.rate_per_s, 'req/s')}, "
                + ("arrival trace" if case.arrivals is not None else "Poisson arrivals"),
            },
            {"item": "lengths", "value": lens},
            {"item": "p99 target", "value": fmt(case.slo_p99_s * 1e3, "ms")},
            {
                "item": "candidates",
                "value": "; ".join(
                    f"{c.label} ({c.chip.kind}, mode {c.mode}, policy {c.policy})"
                    for c in case.candidates
                ),
            },
        ]
    tr = case.training
    rows.append(
        {
            "item": "training",
            "value": "not asked"
            if tr is None
            else f"{', '.join(x.name for x in tr.models)}; {tr.token_budget / 1e9:g}B tokens of {tr.seq_len}",
        }
    )
    rows.append({"item": "questionnaire", "value": f"{len(case.answers)} of 5 answered"})
    rows.append({"item": "seed", "value": str(case.seed)})
    return rows


def _links(ids) -> str:
    return ", ".join(f"<a href='#{c}'>{c}</a>" for c in ids)
