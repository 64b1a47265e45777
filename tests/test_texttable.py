"""ipusim.texttable: every text and Markdown table through one formatter."""

from __future__ import annotations

import re

from ipusim import claims, texttable
from ipusim.claims.verdict import ClaimVerdict


def _cells(row: str) -> list[str]:
    """The cells of a Markdown table row, split at the pipes that are not escaped."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]


def test_text_table_right_aligns_under_a_rule_and_formats_each_column():
    rows = [{"part": "compute", "ms": 0.0261}, {"part": "exchange", "ms": 12.5}]
    out = texttable.text(rows, [("part", "split", ""), ("ms", "ms", ",.3f")]).splitlines()
    assert [ln.split() for ln in out] == [
        ["split", "ms"],
        ["--------", "------"],
        ["compute", "0.026"],
        ["exchange", "12.500"],
    ]
    assert len({len(ln) for ln in out}) == 1  # right-aligned: every line ends at one column
    plain = texttable.text(rows, [("part", "p", str.upper)], rule=False, left=("part",))
    assert plain.splitlines() == ["p", "COMPUTE", "EXCHANGE"]


def test_markdown_escapes_pipes_and_line_breaks_so_each_value_stays_one_cell():
    md = texttable.markdown(["a|b", "c"], [["x | y", "two\nlines"], [3, "`z|w`"]]).splitlines()
    assert _cells(md[0]) == ["a\\|b", "c"]
    assert set(md[1]) <= set("|-: ")
    assert _cells(md[2]) == ["x \\| y", "two lines"]
    assert _cells(md[3]) == ["3", "`z\\|w`"]


def test_scoreboard_markdown_keeps_a_pipe_in_a_summary_inside_its_cell():
    v = ClaimVerdict(
        1,
        "t",
        claims.SUPPORTED,
        "ratio a|b = 2",
        "rule",
        {},
        {},
        "",
        "ipusim.claims.x",
        ("01_x.ipynb",),
    )
    md = claims.scoreboard_markdown([v], links=True).splitlines()
    assert len(_cells(md[0])) == 6 and len(_cells(md[2])) == 6
    assert _cells(md[2])[3] == "ratio a\\|b = 2."
