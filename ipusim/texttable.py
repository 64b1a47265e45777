"""Text and Markdown tables, all through one formatter (``tabulate``).

``text`` lays out rows for a terminal (cells right-aligned under their headers); ``markdown``
writes a GitHub/CommonMark table, a ``|`` inside a cell escaped as ``\\|`` (a literal pipe) and a
line break turned into a space, so any text survives as one cell.
"""

from __future__ import annotations

from tabulate import tabulate


def text(rows: list[dict], columns: list[tuple], *, rule: bool = True, left=()) -> str:
    """A plain-text table of ``rows`` (dicts); ``columns`` are (key, header, format), format a
    format spec (``",.3f"``; ``""``: ``str``) or a function of the value returning its text.
    Cells are right-aligned, those of the keys in ``left`` left-aligned; a dashed rule under the
    headers unless ``rule`` is False."""
    heads = [h for _, h, _ in columns]
    cells = [[_text(r[k], f) for k, _, f in columns] for r in rows]
    return tabulate(
        cells,
        headers=heads,
        tablefmt="simple" if rule else "plain",
        colalign=["left" if k in left else "right" for k, _, _ in columns],
        disable_numparse=True,
    )


def _text(v, f) -> str:
    if callable(f):
        return f(v)
    return format(v, f) if f else str(v)


def markdown_cell(value) -> str:
    """A value as the text of one Markdown table cell: ``|`` escaped, line breaks as spaces."""
    return str(value).replace("|", "\\|").replace("\r\n", " ").replace("\n", " ")


def markdown(headers: list, rows: list[list]) -> str:
    """A GitHub/CommonMark table of ``rows`` (lists of cell values, text as it should read)."""
    return tabulate(
        [[markdown_cell(c) for c in r] for r in rows],
        headers=[markdown_cell(h) for h in headers],
        tablefmt="github",
        disable_numparse=True,
    )
