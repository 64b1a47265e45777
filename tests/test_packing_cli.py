"""``python -m ipusim pack``: each source, JSON keys, one-line errors with status 2."""

import json
import subprocess
import sys

import pytest

from ipusim import cli


def _json(capsys, argv):
    assert cli.main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_dataset_json(capsys):
    d = _json(
        capsys,
        [
            "pack",
            "--dataset",
            "wikipedia-512",
            "--max-len",
            "512",
            "--strategy",
            "spfhp",
            "--max-per-row",
            "3",
            "--json",
        ],
    )
    for key in ("efficiency", "rows", "real_tokens", "padded_tokens", "wasted_flops"):
        assert key in d
    assert d["efficiency"] == pytest.approx(0.8944, abs=0.001)  # published SPFHP, 3 per row


def test_lengths_and_histogram_files(tmp_path, capsys):
    f = tmp_path / "lens.txt"
    f.write_text("100\n200\n300\n412\n")
    d = _json(
        capsys, ["pack", "--lengths", str(f), "--max-len", "512", "--strategy", "ffd", "--json"]
    )
    assert d["rows"] == 2 and d["real_tokens"] == 1012 and d["padded_tokens"] == 12
    h = tmp_path / "h.csv"
    h.write_text("length,count\n64,10\n128,5\n")
    d = _json(
        capsys, ["pack", "--histogram", str(h), "--max-len", "128", "--strategy", "pad", "--json"]
    )
    assert d["rows"] == 15 and d["padded_tokens"] == 10 * 64


def test_text_output(capsys):
    assert (
        cli.main(["pack", "--dataset", "squad-384", "--max-len", "384", "--strategy", "bucket"])
        == 0
    )
    assert "efficiency" in capsys.readouterr().out


def test_error_is_one_line_status_2(tmp_path):
    f = tmp_path / "lens.txt"
    f.write_text("100\n900\n")
    out = subprocess.run(
        [sys.executable, "-m", "ipusim", "pack", "--lengths", str(f), "--max-len", "512"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "900 tokens is longer than the row" in out.stderr


def test_slack_is_range_checked(capsys):
    assert (
        cli.main(
            [
                "pack",
                "--dataset",
                "squad-384",
                "--max-len",
                "384",
                "--strategy",
                "nnlshp",
                "--slack",
                "1000000",
            ]
        )
        == 2
    )
    assert "slack must lie in 0..383" in capsys.readouterr().err


def test_lengths_takes_a_dataset_or_a_csv_exactly(tmp_path, capsys):
    """pack --lengths reads what serve, simulate and checklist read (``lengths.load``) and packs it
    exactly: a dataset gives the --dataset result, a CSV the --histogram result."""
    args = ["--max-len", "384", "--strategy", "spfhp", "--json"]
    named = _json(capsys, ["pack", "--lengths", "squad", *args])
    assert named == _json(capsys, ["pack", "--dataset", "squad-384", *args])
    assert named["sequences"] == 88_641  # the whole histogram, not a draw from it
    h = tmp_path / "h.csv"
    h.write_text("length,count\n100,3\n300,2\n")
    assert _json(capsys, ["pack", "--lengths", str(h), *args]) == _json(
        capsys, ["pack", "--histogram", str(h), *args]
    )
