"""One byte-size rule for every option: KiB.. and bare K.. are powers of 1024, kB.. powers of 1000."""

from __future__ import annotations

import re

import pytest

from ipusim import limits, sweep, units


@pytest.mark.parametrize(
    "text, expect",
    [
        ("4G", 4 * 2**30),
        ("4GiB", 4 * 2**30),
        ("4gib", 4 * 2**30),
        ("4GB", 4 * 10**9),
        ("4gb", 4 * 10**9),
        ("512M", 512 * 2**20),
        ("512MB", 512 * 10**6),
        ("256KiB", 256 * 1024),
        ("256kB", 256_000),
        ("1e9", 10**9),
        ("1.5T", int(1.5 * 2**40)),
        ("80GB", 80 * 10**9),
        ("100", 100),
        ("100B", 100),
    ],
)
def test_one_rule(text, expect):
    assert units.parse_bytes(text) == expect


@pytest.mark.parametrize("text", ["lots", "4Q", "4 G B", "-4G", "nanG"])
def test_not_a_size(text):
    with pytest.raises(ValueError, match="size"):
        units.parse_bytes(text)


def test_every_option_reads_the_same_way():
    for text in ("4G", "4GB", "256MiB"):
        want = units.parse_bytes(text)
        assert limits.parse_bytes(text) == want  # --max-memory
        assert sweep.parse_value(text, "offchip_bytes") == want  # a sweep's byte parameter
        assert sweep.parse_vary([f"hbm_bytes={text},{text}"])["hbm_bytes"] == [want, want]
    assert sweep.parse_value("1.3G") == 1.3e9  # not a byte size: an SI multiplier (a clock)


def test_markdown_table_escapes_pipes_instead_of_changing_them():
    from ipusim.checklist import report

    md = report._md_table([{"chip": "gc200|x", "note": "a/b"}])
    row = md.splitlines()[2]
    # GitHub/CommonMark: \| is a literal pipe inside a cell, so the row still has two cells
    assert [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] == ["gc200\\|x", "a/b"]
