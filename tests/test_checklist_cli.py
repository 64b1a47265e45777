"""``python -m ipusim checklist``: formats, options, config file, bad input (exit 2, one line)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ipusim.cli import main

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _quick(monkeypatch):
    monkeypatch.setenv("IPUSIM_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")


def test_default_run_prints_a_markdown_report(capsys):
    assert main(["checklist", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# POC migration checklist: Default")
    assert "**Verdict:" in out and "ASSUMPTION" in out


def test_options_reach_the_case(capsys):
    rc = main(
        [
            "checklist",
            "--model",
            "gpt2",
            "--rate-per-s",
            "20",
            "--slo-p99-ms",
            "3000",
            "--long-fraction",
            "0.1",
            "--candidates",
            "gc200:2,a100-80gb:1",
            "--price",
            "gc200=1.1",
            "--usd-per-kwh",
            "0.2",
            "--answer",
            "custom_ops=none",
            "--json",
            "--no-progress",
        ]
    )
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    case = d["case"]
    assert case["model"] == "gpt2" and case["task"] == "generate" and case["rate_per_s"] == 20
    assert case["slo_p99_s"] == pytest.approx(3.0) and case["lengths"] == {"long_fraction": 0.1}
    assert [c["count"] for c in case["candidates"]] == [2, 1]
    assert (
        case["prices"]["usd_per_chip_hour"]["gc200"] == 1.1 and case["prices"]["usd_per_kwh"] == 0.2
    )
    assert sorted(case["prices"]["user_set"]) == ["gc200", "kwh"]
    assert case["answers"] == {"custom_ops": "none"}


def test_config_and_html_out(tmp_path, capsys):
    out = tmp_path / "r.html"
    rc = main(
        [
            "checklist",
            "--config",
            str(ROOT / "examples" / "train_70b.toml"),
            "--format",
            "html",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and "data:image/png;base64," in html
    assert "report written to" in capsys.readouterr().err


def test_lengths_file(tmp_path, capsys):
    f = tmp_path / "lens.txt"
    f.write_text("\n".join(["30", "60", "300"] * 10))
    assert main(["checklist", "--lengths", str(f), "--json", "--no-progress"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["case"]["lengths"]["max"] == 300


def test_arrival_trace(tmp_path, capsys):
    f = tmp_path / "trace.csv"
    f.write_text("arrival_s,length\n" + "\n".join(f"{i * 0.005},100" for i in range(401)))
    assert main(["checklist", "--arrivals", str(f), "--json", "--no-progress"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["case"]["arrivals"] == "trace" and d["case"]["rate_per_s"] == pytest.approx(200.0)


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--model", "bert-giant"], "unknown model preset"),
        (["--rate-per-s", "0"], "zero traffic"),
        (["--candidates", "gc200:x"], "not a whole number"),
        (["--price", "gc200"], "CHIP=USD"),
        (["--lengths", "/no/such/file.csv"], "neither a file nor a dataset name"),
        (["--config", "/no/such.toml"], "not found"),
        (["--answer", "custom_ops=lots"], "valid: unknown, none, few, many"),
        (["--rate-per-s", "-1"], "--rate-per-s must be a finite number > 0"),
        (["--out", "/nonexistent/dir/r.md"], "does not exist"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv, words, capsys):
    assert main(["checklist", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err


def test_module_entry_point_runs_from_a_shell(tmp_path):
    env = {"IPUSIM_QUICK": "1", "MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin"}
    import os

    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    r = subprocess.run(
        [sys.executable, "-m", "ipusim", "checklist", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verdict"]["decision"] in ("migrate", "pilot", "stay")


@pytest.mark.parametrize(
    "text, suffix, words",
    [
        (
            '[[candidates]]\nchip = {base = "gc200", nonsense = 1}\n',
            ".toml",
            "custom chip based on 'gc200'",
        ),
        ("[1, 2]", ".json", "top level must be an object"),
        ('"hello"', ".json", "top level must be an object"),
        ("[]", ".json", "top level must be an object"),
        ('[case]\nseed = "abc"\n', ".toml", "case.seed: expected a valid integer, got 'abc'"),
        (
            '[traffic]\nlengths = {"abc" = 1}\n',
            ".toml",
            "traffic.lengths: histogram keys must be whole token lengths",
        ),
        ('[traffic]\nlong_fraction = 0.4\nlengths = {"128" = 1}\n', ".toml", "not both"),
    ],
)
def test_bad_config_files_are_one_line_exit_2(tmp_path, capsys, text, suffix, words):
    # Each is refused in one line naming the input and what is allowed.
    f = tmp_path / f"bad{suffix}"
    f.write_text(text)
    assert main(["checklist", "--no-progress", "--config", str(f)]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err


def test_arrival_trace_one_time_a_line_with_header(tmp_path, capsys):
    f = tmp_path / "times.txt"
    f.write_text("time_s\n" + "\n".join(f"{i * 0.01}" for i in range(201)))
    assert main(["checklist", "--arrivals", str(f), "--json", "--no-progress"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["case"]["rate_per_s"] == pytest.approx(100.0)
