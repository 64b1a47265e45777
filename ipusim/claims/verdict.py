"""One verdict on one vendor claim: its state, the numbers it rests on, the rule, the assumptions.

A verdict has three states (``STATES``): ``supported`` and ``contradicted`` when the computed
numbers decide the claim by its rule, ``depends`` when the answer moves with something the user
chooses or assumes (a price, the model, the workload); then ``break_even`` says where it flips.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SUPPORTED, CONTRADICTED, DEPENDS = "supported", "contradicted", "depends"
STATES = (SUPPORTED, CONTRADICTED, DEPENDS)


@dataclass(frozen=True)
class ClaimVerdict:
    """The verdict on claim ``claim`` (its number in docs/claims.md); a migration decision on one
    case is ``ipusim.checklist.MigrationVerdict``.

    ``numbers`` maps a name (unit in the name: ``_tb_per_s``, ``_usd``, ``_x`` for ratios,
    fractions without unit) to the computed value the rule reads; ``rule`` states the comparator
    and its thresholds once; ``assumptions`` lists what the numbers take as given (chip, model,
    batch, prices) and which of those are ASSUMPTIONS; ``break_even`` (``depends`` only) is
    the value of the assumption at which the verdict flips; ``function`` is the
    ``ipusim.claims`` function that computed it; ``comparison`` is the claim's row of the one
    comparison table (``ipusim.claims.comparisons``): the chips compared, why, the sensitivity
    pairs and the prices of the pair.
    """

    claim: int
    title: str
    state: str
    summary: str
    rule: str
    numbers: dict = field(default_factory=dict)
    assumptions: dict = field(default_factory=dict)
    break_even: str = ""
    function: str = ""
    notebooks: tuple = ()
    comparison: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.state not in STATES:
            raise ValueError(
                f"verdict state must be one of {', '.join(STATES)}, got {self.state!r}"
            )
        if not 1 <= int(self.claim) <= 99:
            raise ValueError(
                f"claim must be a claim number from docs/claims.md, got {self.claim!r}"
            )
        if self.state == DEPENDS and not self.break_even:
            raise ValueError(
                f"claim {self.claim}: a 'depends' verdict must state its break-even value"
            )

    def __repr__(self):
        nums = ", ".join(f"{k}={_short(v)}" for k, v in self.numbers.items())
        extra = f"; break-even: {self.break_even}" if self.break_even else ""
        return f"Verdict(claim {self.claim}, {self.title!r}: {self.state}; {nums}{extra})"

    def to_dict(self) -> dict:
        return {
            "claim": self.claim,
            "title": self.title,
            "state": self.state,
            "summary": self.summary,
            "rule": self.rule,
            "numbers": dict(self.numbers),
            "assumptions": dict(self.assumptions),
            "break_even": self.break_even,
            "function": self.function,
            "notebooks": list(self.notebooks),
            "comparison": dict(self.comparison),
        }

    def _repr_markdown_(self) -> str:
        nums = "\n".join(f"- `{k}` = {_short(v)}" for k, v in self.numbers.items())
        ass = "\n".join(f"- {k}: {v}" for k, v in self.assumptions.items())
        be = f"\n\n**Break-even:** {self.break_even}" if self.break_even else ""
        return (
            f"**Claim {self.claim}, {self.title}: {self.state}.** {self.summary}\n\n"
            f"**Rule:** {self.rule}{be}\n\n**Numbers:**\n{nums}\n\n**Assumptions:**\n{ass}"
        )


def _short(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)
