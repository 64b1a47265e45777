"""The command line, run as a user runs it: ``python -m ipusim`` in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _run(*args):
    return subprocess.run(
        [sys.executable, "-m", "ipusim", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_roofline_prints_per_op_and_total_bounds():
    out = _run(
        "roofline", "--chip", "gc200", "--model", "bert-base", "--batch", "8", "--seq-len", "128"
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for op in ("qkv", "attn_scores", "softmax", "ffn_up", "ffn_down", "pooler"):
        assert op in text
    assert "total (unfused bound): >=" in text and "fits in tile SRAM" in text and "energy:" in text
    assert out.stderr == ""


def test_roofline_json_is_one_object_with_consistent_totals():
    out = _run(
        "roofline",
        "--chip",
        "a100-80gb",
        "--model",
        "llama-2-7b",
        "--batch",
        "4",
        "--seq-len",
        "1024",
        "--phase",
        "decode",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)  # fails unless stdout is exactly one JSON document
    assert d["chip"] == "a100-80gb" and d["model"] == "llama-2-7b" and d["phase"] == "decode"
    assert d["time_s"] == pytest.approx(sum(o["time_s"] for o in d["ops"]), rel=1e-9)
    # decode at batch 4 streams the 13.5 GB of weights from HBM at 2.039 TB/s: >= 6.6 ms
    assert d["time_s"] >= 2 * 6.7e9 / 2.039e12
    assert d["fits"] is True and d["capacity"]["chips_needed"]["HBM"] == 1


def test_roofline_reports_a_model_that_does_not_fit():
    out = _run(
        "roofline",
        "--chip",
        "gc200",
        "--model",
        "llama-2-7b",
        "--batch",
        "1",
        "--seq-len",
        "256",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["fits"] is False and d["weights_in"] == "streaming DRAM"
    assert d["capacity"]["chips_needed"]["tile SRAM"] > 10


def test_roofline_fused_bound_and_kv_from_dram():
    """--fused gives the fused-kernel bound, below the unfused one (BERT-large 32 x 512 on
    H100: 12.4 vs 22.1 ms, see tests/test_roofline.py); GPT-2 decode 256 x 1024 on GC200
    reads weights and KV cache from off-chip DRAM."""
    base = [
        "--chip",
        "h100-sxm",
        "--model",
        "bert-large",
        "--batch",
        "32",
        "--seq-len",
        "512",
        "--json",
    ]
    unf, fus = (
        json.loads(_run("roofline", *base).stdout),
        json.loads(_run("roofline", *base, "--fused").stdout),
    )
    assert fus["fused"] is True and unf["fused"] is False
    assert fus["time_s"] < 0.6 * unf["time_s"]
    kv = _run(
        "roofline",
        "--chip",
        "gc200",
        "--model",
        "gpt2",
        "--batch",
        "256",
        "--seq-len",
        "1024",
        "--phase",
        "decode",
    )
    assert kv.returncode == 0 and "from off-chip DRAM: weights, kv" in kv.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["--chip", "tpu", "--model", "bert-base", "--batch", "8", "--seq-len", "128"],
            "unknown chip preset 'tpu'",
        ),
        (
            ["--chip", "gc200", "--model", "bert", "--batch", "8", "--seq-len", "128"],
            "unknown model preset",
        ),
        (
            ["--chip", "gc200", "--model", "bert-base", "--batch", "0", "--seq-len", "128"],
            "--batch must be >= 1",
        ),
        (
            ["--chip", "gc200", "--model", "bert-base", "--batch", "x", "--seq-len", "128"],
            "invalid int value",
        ),
        (
            ["--chip", "gc200", "--model", "bert-base", "--batch", "8", "--seq-len", "1000"],
            "max_positions 512",
        ),
        (["--chip", "gc200", "--model", "bert-base", "--batch", "8"], "required: --seq-len"),
        (
            [
                "--chip",
                "gc200",
                "--model",
                "bert-base",
                "--batch",
                "8",
                "--seq-len",
                "8",
                "--phase",
                "x",
            ],
            "unknown phase",
        ),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args, needle):
    out = _run("roofline", *args)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert needle in lines[0]
    assert "Traceback" not in out.stderr


def test_presets_still_listed():
    out = _run("presets", "--json")
    assert out.returncode == 0, out.stderr
    assert {c["name"] for c in json.loads(out.stdout)["chips"]} >= {"gc200", "h100-sxm"}


@pytest.mark.parametrize("outcome", [0, 2, SystemExit(2)])
def test_entry_returns_mains_code_and_freezes_the_collector_last(monkeypatch, outcome):
    """The console script freezes the collector on the way out, whatever main() did, and only then."""
    from ipusim import cli

    calls = []

    def fake_main():
        calls.append("main")
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    monkeypatch.setattr(cli, "main", fake_main)
    monkeypatch.setattr(cli.gc, "freeze", lambda: calls.append("freeze"))
    if isinstance(outcome, BaseException):
        with pytest.raises(SystemExit):
            cli.entry()
    else:
        assert cli.entry() == outcome
    assert calls == ["main", "freeze"]


def test_console_script_and_module_run_the_same_entry():
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"ipusim": "ipusim.cli:entry"}
    assert "entry()" in (root / "ipusim" / "__main__.py").read_text()


def test_csv_written_by_the_command_line_is_complete(tmp_path):
    """Files a command writes are whole when the process has exited (entry() skips the final collection)."""
    path = tmp_path / "rows.csv"
    out = _run("serve", "--rate", "1000", "--requests", "2000", "--csv", str(path))
    assert out.returncode == 0, out.stderr
    lines = path.read_text().splitlines()
    assert len(lines) == 2001 and lines[-1].count(",") == lines[0].count(",")


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """``ipusim presets | head -0``: no 'Broken pipe' error line, status 141 (128 + SIGPIPE) as Unix tools give."""
    p = subprocess.Popen(
        [sys.executable, "-m", "ipusim", "presets", "--sources"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    p.stdout.close()  # before the child has printed anything: its first write finds no reader
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141, err
    assert err == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--rate", "10"],
        [
            "simulate",
            "--chip",
            "gc200",
            "--model",
            "bert-base",
            "--batch",
            "2",
            "--seq-len",
            "64",
            "--lengths",
            "squad",
        ],
        [
            "embed",
            "--chip",
            "gc200",
            "--tables",
            "2",
            "--rows",
            "100",
            "--dim",
            "8",
            "--batch",
            "4",
        ],
        ["checklist"],
    ],
)
@pytest.mark.parametrize("bad", ["-1", "x", "1.5"])
def test_every_seed_option_names_itself_when_refused(capsys, argv, bad):
    from ipusim import cli

    with pytest.raises(SystemExit) as stop:
        cli.main([*argv, "--seed", bad])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1
    assert "argument --seed: a seed is a whole number >= 0" in err
