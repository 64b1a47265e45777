"""``python -m ipusim embed``: fit states, JSON keys, and one-line errors for bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ipusim import cli, embeddings

KEYS = {"lookups_per_s", "samples_per_s", "time_s", "fit", "samples_per_s_per_w"}


def _json(capsys, *argv):
    code = cli.main(["embed", *argv, "--json"])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_tables_that_fit_in_sram_are_on_chip(capsys):
    d = _json(
        capsys,
        "--chip",
        "gc200",
        "--tables",
        "26",
        "--rows",
        "4000",
        "--dim",
        "128",
        "--batch",
        "2048",
    )
    assert KEYS <= set(d)
    assert d["fit"] == "on_chip" and d["samples_per_s"] > 0
    assert d["samples_per_s_per_w"] == pytest.approx(d["samples_per_s"] / 300.0)


def test_tens_of_gb_stream_on_one_gc200_and_match_the_library(capsys):
    d = _json(
        capsys,
        "--chip",
        "gc200",
        "--tables",
        "26",
        "--rows",
        "4000000",
        "--dim",
        "128",
        "--pooling",
        "1",
        "--batch",
        "2048",
        "--zipf",
        "1.05",
    )
    assert d["fit"] == "streams"
    w = embeddings.Workload("w", embeddings.uniform_tables(26, 4_000_000, 128, 1), 2048, 4, 1.05)
    r = embeddings.simulate("gc200", w)
    assert d["time_s"] == pytest.approx(r.time_s, rel=1e-12)
    assert d["lookups_per_s"] == pytest.approx(26 * 2048 / r.time_s, rel=1e-12)


def test_does_not_fit_has_zero_throughput_and_null_time(capsys):
    d = _json(capsys, "--chip", "gc2", "--tables", "26", "--rows", "4000000")
    assert d["fit"] == "does_not_fit" and d["time_s"] is None and d["samples_per_s"] == 0.0


def test_text_output_names_the_parts(capsys):
    assert (
        cli.main(
            ["embed", "--chip", "a100-80gb", "--preset", "medium", "--chips", "2", "--training"]
        )
        == 0
    )
    out = capsys.readouterr().out
    for word in (
        "look-ups/s",
        "samples/s",
        "fit",
        "on_chip",
        "samples/s/W",
        "board power",
        "links",
    ):
        assert word in out


@pytest.mark.parametrize(
    "argv",
    [
        ["--chip", "gc200", "--rows", "0"],
        ["--chip", "gc200", "--zipf", "-1"],
        ["--chip", "gc200", "--chips", "0"],
        ["--chip", "tpu"],
        ["--chip", "gc200", "--batch", "x"],
    ],
)
def test_bad_input_exits_2_with_one_line(argv, capsys):
    try:
        code = cli.main(["embed", *argv])
    except SystemExit as e:  # argparse's own errors
        code = e.code
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "error" in err


def test_the_module_runs_as_a_command():
    p = subprocess.run(
        [sys.executable, "-m", "ipusim", "embed", "--chip", "gc200", "--rows", "-3"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and p.stderr.count("\n") == 1
