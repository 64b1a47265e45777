"""C7: software readiness, a scored questionnaire."""

from __future__ import annotations

import math

from .case import ANSWERS, ASSUMPTIONS, Case
from .context import Context
from .evidence import Check, Evidence

# ---------------------------------------------------------------------------------------
# C7 Software readiness
# ---------------------------------------------------------------------------------------
# Risk points per answer (ASSUMPTION: a judgement that ranks answers) and the reason.
QUESTIONS = {
    "custom_ops": (
        "Does the model use custom operators (hand-written CUDA kernels, fused ops)?",
        {
            "none": (0, "no custom operators to port"),
            "few": (
                10,
                "each custom operator must be rewritten for the tile chip's SDK (as codelets)",
            ),
            "many": (25, "many custom operators: a porting project of its own"),
            "unknown": (8, "not answered: assumed a few custom operators"),
        },
    ),
    "dynamic_shapes": (
        "Do input shapes change at run time (lengths, batch sizes)?",
        {
            "none": (0, "fixed shapes compile once"),
            "bucketed": (
                8,
                "each bucket is a separately compiled graph: compile time and memory per bucket",
            ),
            "arbitrary": (
                25,
                "the tile chip compiles a static graph ahead of time and memory is allocated "
                "at compile time (out-of-memory is a compile error, GC-OOM); arbitrary shapes "
                "force padding, packing or recompilation",
            ),
            "unknown": (8, "not answered: assumed bucketed shapes"),
        },
    ),
    "framework_support": (
        "Is your framework and version supported by the tile chip's SDK?",
        {
            "yes": (0, "supported framework"),
            "partly": (12, "part of the framework's operator set is missing or slower"),
            "no": (30, "no framework support: a rewrite"),
            "unknown": (10, "not answered: assumed partial support"),
        },
    ),
    "library_support": (
        "Do the libraries you depend on (kernels, serving, quantisation) run on the tile chip?",
        {
            "yes": (0, "libraries available"),
            "partly": (10, "some libraries need replacements"),
            "no": (20, "key libraries have no tile-chip version"),
            "unknown": (8, "not answered: assumed some replacements"),
        },
    ),
    "team_experience": (
        "Has the team shipped on the tile chip's SDK before?",
        {
            "experienced": (0, "the team knows the SDK"),
            "some": (5, "some experience"),
            "none": (15, "a learning curve for the team"),
            "unknown": (6, "not answered: assumed some experience"),
        },
    ),
}
RISK_LEVELS = ((20, "low"), (45, "medium"), (math.inf, "high"))

assert set(QUESTIONS) == set(ANSWERS)


def check_software(case: Case, ctx: Context | None = None) -> Check:
    """C7: software readiness from the questionnaire answers (risk points, with reasons)."""
    rows, ev, total = [], [], 0
    for key, (question, answers) in QUESTIONS.items():
        ans = case.answers.get(key, "unknown")
        pts, why = answers[ans]
        total += pts
        rows.append({"question": question, "answer": ans, "risk_points": pts, "reason": why})
        ev.append(Evidence(f"risk.{key}", pts, "points", f"answer '{ans}': {why}"))
    level = next(name for bound, name in RISK_LEVELS if total < bound)
    ev.append(
        Evidence("risk_total", total, "points", f"level {level} (low < 20 <= medium < 45 <= high)")
    )
    unanswered = [r["question"] for r in rows if r["answer"] == "unknown"]
    status = {"low": "pass", "medium": "warn", "high": "fail"}[level]
    summary = f"software risk {level} ({total} points)" + (
        f"; {len(unanswered)} of {len(rows)} questions unanswered" if unanswered else ""
    )
    reason = (
        "; ".join(
            f"{r['reason']} (+{r['risk_points']})"
            for r in sorted(rows, key=lambda r: -r["risk_points"])
            if r["risk_points"]
        )
        or "no risk points"
    )
    return Check(
        "C7",
        "Software readiness",
        status,
        summary,
        reason + ". " + ASSUMPTIONS["questionnaire_points"],
        ev,
        {"questionnaire": rows},
        "questionnaire answers",
        {"points": total, "level": level},
    )
