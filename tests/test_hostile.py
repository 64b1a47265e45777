"""Hostile input: hundreds of bad CLI invocations and library calls, each refused with exit 2
(or a ValueError) in one line, no traceback, bounded in memory; plus property tests that
random valid inputs give finite, non-negative results that conserve tokens and requests.

Most invocations run in-process through ``ipusim.cli.main`` (fast); the issue's big examples
also run in a subprocess under an address-space limit (RLIMIT_AS) as a memory guard, with a
timeout as a hang guard only.
"""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest

from ipusim import arrivals, lengths, limits, machine, packing, policies, serving, workloads
from ipusim.checklist import case as C
from ipusim.checklist import config_file as F
from ipusim.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
PEAK_BYTES = 256 * 2**20  # Python/numpy allocations of one refused call, at most (tracemalloc)


@pytest.fixture(autouse=True)
def _quick(monkeypatch):
    monkeypatch.setenv("IPUSIM_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.delenv(limits.ENV_MAX_MEMORY, raising=False)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    f = {}

    def w(name, data):
        p = d / name
        (p.write_bytes if isinstance(data, bytes) else p.write_text)(data)
        f[name] = str(p)

    w("huge_len.csv", "1000000000,1\n")
    w("overflow.csv", "128,100000000000000000\n256,1\n")
    w("inf_count.csv", "128,inf\n")
    w("nan_len.csv", "128,1\nnan,3\n")
    w("neg_count.csv", "128,-3\n")
    w("frac_count.csv", "128,2.5\n")
    w("three_cols.csv", "length,count\n128,1,7\n")
    w("words.csv", "length,count\nabc,def\n")
    w("dup.csv", "128,1\n128,2\n")
    w("empty.csv", "")
    w("blank.csv", "\n\n   \n")
    w("binary.csv", b"\x00\x01\x02\xff" * 10)
    w("latin1.csv", b"128,1\n\xe9\n")
    w("zero_counts.csv", "128,0\n")
    w("lens_words.txt", "12\nhello\n")
    w("lens_zero.txt", "0\n5\n")
    w("lens_huge.txt", "99999999999\n")
    w("trace_noheader.csv", "0.1,128\n0.2,64\n")
    w("trace_nan.csv", "arrival_s,length\nnan,128\n")
    w("trace_neg.csv", "arrival_s,length\n-1,128\n")
    w("trace_huge_len.csv", "arrival_s,length\n0.1,10000000000\n")
    w("trace_short_row.csv", "arrival_s,length\n0.1\n")
    w("times_words.txt", "time_s\n0.1\nsoon\n")
    w("cfg_case5.toml", "case = 5\n")
    w("cfg_prices_null.json", json.dumps({"prices": None}))
    w("cfg_deep.json", "[" * 5000 + "]" * 5000)
    w(
        "cfg_deep_obj.json",
        json.dumps({"case": {"name": {"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}}}}),
    )
    w("cfg_inference_no.toml", '[case]\ninference = "no"\n')
    w("cfg_seed_frac.toml", "[case]\nseed = 1.5\n")
    w("cfg_arrivals_5.toml", "[traffic]\narrivals = 5\n")
    w("cfg_both_slo.toml", "[traffic]\nslo_p99_ms = 50\nslo_p99_s = 0.05\n")
    w("cfg_old_rate.toml", "[traffic]\nrate = 3\n")
    w("cfg_rate_str.toml", '[traffic]\nrate_per_s = "fast"\n')
    w("cfg_rate_huge.toml", "[traffic]\nrate_per_s = 1e12\n")
    w("cfg_rate_inf.toml", "[traffic]\nrate_per_s = inf\n")
    w("cfg_rate_nan.toml", "[traffic]\nrate_per_s = nan\n")
    w("cfg_count_huge.toml", '[[candidates]]\nchip = "gc200"\ncount = 100000000\n')
    w("cfg_count_bool.toml", '[[candidates]]\nchip = "gc200"\ncount = true\n')
    w("cfg_cand_extra.toml", '[[candidates]]\nchip = "gc200"\ncolour = "red"\n')
    w("cfg_cand_int.json", json.dumps({"candidates": [5]}))
    w("cfg_prices_str.toml", '[prices]\nusd_per_kwh = "cheap"\n')
    w("cfg_kwh_huge.toml", "[prices]\nusd_per_kwh = 1e300\n")
    w("cfg_questions_list.json", json.dumps({"questionnaire": [1, 2]}))
    w("cfg_training_models_empty.toml", "[training]\nmodels = []\n")
    w("cfg_training_budget.toml", "[training]\ntoken_budget = -1\n")
    w("cfg_both_models.toml", '[case]\nmodel = "gpt2"\n[model]\nname = "x"\n')
    w("cfg_unknown_section.toml", "[trafic]\n")
    w("cfg_bad_toml.toml", "not = toml = at all")
    w("cfg_bad_json.json", "{")
    w("cfg_rate_and_trace.toml", "[traffic]\nrate_per_s = 3\narrivals = [0.0, 1.0, 2.0]\n")
    w("cfg_lengths_5.toml", "[traffic]\nlengths = 5\n")
    w("cfg_lengths_bad_list.toml", '[traffic]\nlengths = [1, "a"]\n')
    w("cfg_output_tokens_huge.toml", '[case]\nmodel = "gpt2"\noutput_tokens = 100000\n')
    f["dir"] = str(d)
    f["missing"] = str(d / "no_such_file.csv")
    return f


def _bad_cli(argv, capsys, words=None):
    """Run argv in-process: exit 2, one line on stderr, no traceback, little memory."""
    tracemalloc.start()
    try:
        try:
            rc = main(argv)
        except SystemExit as stop:  # argparse usage errors
            rc = stop.code
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    out, err = capsys.readouterr()
    assert rc == 2, (argv, rc, err, out[-300:])
    assert err.count("\n") == 1 and err.startswith("ipusim"), (argv, err)
    assert "Traceback" not in err
    assert peak < PEAK_BYTES, (argv, peak)
    if words:
        assert words in err, (argv, err)
    return err


# ------------------------------------------------------------------------------------------
# Bad values for every numeric option of every command (in-process)
# ------------------------------------------------------------------------------------------
SIM = ["simulate", "--chip", "gc200", "--model", "bert-base", "--batch", "4", "--seq-len", "128"]
ROOF = ["roofline", "--chip", "gc200", "--model", "bert-base", "--batch", "4", "--seq-len", "128"]
PACK = ["pack", "--dataset", "squad-384", "--max-len", "384"]
SERVE = ["serve", "--service", "fixed", "--rate", "100", "--requests", "200"]
CHECK = ["checklist", "--no-progress"]

NONNUMBER = ["", "abc", "1e", "0x10", "--"]
NONFINITE = ["nan", "inf", "-inf", "1e400"]
HUGE_INT = ["99999999999999999999999", str(2**63)]

# (base argv, option, bad values): every value must be refused for that option.
OPTION_CASES = [
    (SIM, "--batch", ["0", "-1", "1.5", "1000000000", "5000000", *NONNUMBER, *HUGE_INT]),
    (SIM, "--seq-len", ["0", "-5", "513", "1000000", "2.5", *NONNUMBER, *HUGE_INT]),
    (SIM, "--chip", ["", "tpu-v9", "GC200 "]),
    (SIM, "--model", ["", "bert-giant", "../etc/passwd"]),
    (SIM, "--phase", ["", "train", "backward"]),
    (ROOF, "--batch", ["0", "-1", "1000000000", *NONNUMBER, *HUGE_INT]),
    (ROOF, "--seq-len", ["0", "-5", "513", "100000", *NONNUMBER]),
    (ROOF, "--pad-to", ["0", "-1", "513", "64", "100000", *NONNUMBER]),
    (ROOF, "--phase", ["", "sideways"]),
    (PACK, "--max-len", ["0", "-1", "100", "2000000", *NONNUMBER, *HUGE_INT]),
    (PACK, "--max-per-row", ["0", "-3", *NONNUMBER]),
    (PACK, "--slack", ["-1", "384", "100000", *NONNUMBER]),
    (PACK, "--strategy", ["", "magic"]),
    (PACK, "--model", ["", "nope"]),
    (SERVE, "--rate", ["0", "-1", *NONNUMBER, *NONFINITE]),
    (SERVE, "--service-ms", ["0", "-1", "1e300", *NONNUMBER, *NONFINITE]),
    (SERVE, "--requests", ["0", "-1", "100000000000", "1.5", *NONNUMBER, *HUGE_INT]),
    (SERVE, "--max-batch", ["0", "-1", *NONNUMBER, *HUGE_INT]),
    (SERVE, "--max-delay-ms", ["-1", *NONNUMBER, *NONFINITE]),
    (SERVE, "--latency-target-ms", ["0", "-1", "1e300", *NONNUMBER, *NONFINITE]),
    (SERVE, "--long-fraction", ["-0.1", "1.5", *NONNUMBER, *NONFINITE]),
    (SERVE, "--seed", ["-1", "1.5", *NONNUMBER, *HUGE_INT]),
    (SERVE, "--policy", ["", "fifo"]),
    (SERVE, "--arrivals", ["", "uniform"]),
    (CHECK, "--rate-per-s", ["0", "-1", "1e12", *NONNUMBER, *NONFINITE]),
    (CHECK, "--slo-p99-ms", ["0", "-1", "1e300", *NONNUMBER, *NONFINITE]),
    (CHECK, "--long-fraction", ["-0.5", "2", *NONNUMBER, *NONFINITE]),
    (CHECK, "--output-tokens", ["0", "-1", "1.5", *NONNUMBER, *HUGE_INT]),
    (CHECK, "--usd-per-kwh", ["0", "-1", "1e300", *NONNUMBER, *NONFINITE]),
    (CHECK, "--seed", ["-1", "1.5", *NONNUMBER, *HUGE_INT]),
    (CHECK, "--model", ["", "bert-giant"]),
    (CHECK, "--task", ["", "translate"]),
    (
        CHECK,
        "--candidates",
        [
            "",
            ",",
            "gc200:x",
            "gc200:0",
            "gc200:-2",
            "gc200:100000000",
            "tpu:1",
            "gc200:1:sideways",
            "gc200:1:packed:extra",
            "gc200:1e3",
        ],
    ),
    (
        CHECK,
        "--price",
        ["gc200", "gc200=", "gc200=abc", "gc200=-1", "gc200=nan", "gc200=inf", "gc200=1e300"],
    ),
    (CHECK, "--answer", ["custom_ops", "custom_ops=lots", "vibes=good"]),
    (CHECK, "--lengths", ["", "/no/such/file.csv", "encyclopaedia"]),
    (CHECK, "--arrivals", ["", "/no/such/trace.txt"]),
    (CHECK, "--format", ["", "pdf"]),
]
OPTION_PARAMS = [(base, opt, v) for base, opt, vals in OPTION_CASES for v in vals]


@pytest.mark.parametrize(
    "base, opt, value", OPTION_PARAMS, ids=[f"{b[0]}{o}={v!r}" for b, o, v in OPTION_PARAMS]
)
def test_bad_option_value_is_one_line_exit_2(base, opt, value, capsys):
    argv = list(base)
    if opt in argv:  # replace the base's value
        i = argv.index(opt)
        del argv[i : i + 2]
    argv.append(f"{opt}={value}")  # the = form: values such as "-1" or "--" stay values
    if opt == "--slack":
        argv += ["--strategy", "nnlshp"]
    _bad_cli(argv, capsys)


def test_option_case_count():
    assert len(OPTION_PARAMS) >= 200


# ------------------------------------------------------------------------------------------
# The issue's examples, files, configs and conventions (in-process)
# ------------------------------------------------------------------------------------------
def _file_cases(f):
    d = f["dir"]
    return [
        (PACK[:1] + ["--histogram", f["huge_len.csv"], "--max-len", "384"], "over the limit"),
        (PACK[:1] + ["--histogram", f["overflow.csv"], "--max-len", "384"], "2**53"),
        (PACK[:1] + ["--histogram", f["inf_count.csv"], "--max-len", "384"], "not a finite number"),
        (PACK[:1] + ["--histogram", f["nan_len.csv"], "--max-len", "384"], "line 2"),
        (PACK[:1] + ["--histogram", f["neg_count.csv"], "--max-len", "384"], "negative count"),
        (PACK[:1] + ["--histogram", f["frac_count.csv"], "--max-len", "384"], "whole"),
        (PACK[:1] + ["--histogram", f["three_cols.csv"], "--max-len", "384"], "line 2"),
        (PACK[:1] + ["--histogram", f["words.csv"], "--max-len", "384"], "line"),
        (PACK[:1] + ["--histogram", f["dup.csv"], "--max-len", "384"], "more than one row"),
        (PACK[:1] + ["--histogram", f["empty.csv"], "--max-len", "384"], "empty"),
        (PACK[:1] + ["--histogram", f["blank.csv"], "--max-len", "384"], "empty"),
        (PACK[:1] + ["--histogram", f["binary.csv"], "--max-len", "384"], "binary"),
        (PACK[:1] + ["--histogram", f["latin1.csv"], "--max-len", "384"], "UTF-8"),
        (PACK[:1] + ["--histogram", f["zero_counts.csv"], "--max-len", "384"], "every count is 0"),
        (PACK[:1] + ["--histogram", f["missing"], "--max-len", "384"], "not found"),
        (PACK[:1] + ["--histogram", d, "--max-len", "384"], "directory"),
        (PACK[:1] + ["--histogram", "", "--max-len", "384"], "is empty"),
        (PACK[:1] + ["--lengths", f["lens_words.txt"], "--max-len", "384"], "line 2"),
        (PACK[:1] + ["--lengths", f["lens_zero.txt"], "--max-len", "384"], ">= 1"),
        (PACK[:1] + ["--lengths", f["lens_huge.txt"], "--max-len", "384"], "over the limit"),
        (PACK[:1] + ["--lengths", f["binary.csv"], "--max-len", "384"], "binary"),
        (PACK[:1] + ["--lengths", d, "--max-len", "384"], "directory"),
        (PACK + ["--strategy", "spfhp", "--max-len", "100000"], "over the memory budget"),
        (PACK + ["--strategy", "bucket", "--buckets", "1000000000"], "over the limit"),
        (PACK + ["--strategy", "bucket", "--buckets", "0"], "buckets"),
        (PACK + ["--strategy", "nnlshp", "--max-len", "100000"], "over the"),
        (PACK + ["--strategy", "ffd", "--max-len", "100"], "longer than the row"),
        (SERVE[:1] + ["--trace", f["missing"]], "not found"),
        (SERVE[:1] + ["--trace", d], "directory"),
        (SERVE[:1] + ["--trace", f["empty.csv"]], "empty"),
        (SERVE[:1] + ["--trace", f["binary.csv"]], "binary"),
        (SERVE[:1] + ["--trace", f["trace_noheader.csv"]], "needs columns"),
        (SERVE[:1] + ["--trace", f["trace_nan.csv"]], "finite"),
        (SERVE[:1] + ["--trace", f["trace_neg.csv"]], ">= 0"),
        (SERVE[:1] + ["--trace", f["trace_huge_len.csv"]], "over the limit"),
        (SERVE[:1] + ["--trace", f["trace_short_row.csv"]], "line 2"),
        (SERVE + ["--lengths", f["missing"]], "not found"),
        (SERVE + ["--lengths", f["overflow.csv"]], "2**53"),
        (SERVE[:1] + ["--rate", "100", "--max-batch", "5000"], "over the limit"),
        (CHECK + ["--rate-per-s", "1e12"], "over the limit"),
        (CHECK + ["--candidates", "gc200:100000000"], "over the limit"),
        (CHECK + ["--usd-per-kwh", "1e300"], "over the limit"),
        (CHECK + ["--rate", "100"], "unrecognized"),  # one vocabulary: the config's key only
        (CHECK + ["--slo-ms", "50"], "unrecognized"),
        (CHECK + ["--rate-per-s", "5", "--arrivals", f["missing"]], "not both"),
        (CHECK + ["--arrivals", f["times_words.txt"]], "not a time"),
        (CHECK + ["--arrivals", f["binary.csv"]], "binary"),
        (CHECK + ["--lengths", f["binary.csv"]], "binary"),
        (CHECK + ["--out", d], "directory"),
        (CHECK + ["--out", "/nonexistent/dir/r.md"], "does not exist"),
        (CHECK + ["--out", ""], "is empty"),
        (CHECK + ["--config", f["missing"]], "not found"),
        (CHECK + ["--config", d], "directory"),
        (CHECK + ["--config", f["empty.csv"]], "empty"),
        (CHECK + ["--config", f["binary.csv"]], "binary"),
        (CHECK + ["--config", f["cfg_case5.toml"]], "case: "),
        (CHECK + ["--config", f["cfg_prices_null.json"]], "prices"),
        (CHECK + ["--config", f["cfg_deep.json"]], "nested"),
        (CHECK + ["--config", f["cfg_deep_obj.json"]], "nested"),
        (CHECK + ["--config", f["cfg_inference_no.toml"]], "case.inference"),
        (CHECK + ["--config", f["cfg_seed_frac.toml"]], "case.seed"),
        (
            CHECK + ["--config", f["cfg_arrivals_5.toml"]],
            "traffic.arrivals: expected a list of times (s) or a file name, got 5",
        ),
        (CHECK + ["--config", f["cfg_both_slo.toml"]], "traffic.slo_p99_s: unknown key"),
        (CHECK + ["--config", f["cfg_old_rate.toml"]], "renamed: use rate_per_s"),
        (CHECK + ["--config", f["cfg_rate_str.toml"]], "traffic.rate_per_s"),
        (CHECK + ["--config", f["cfg_rate_huge.toml"]], "traffic.rate_per_s"),
        (CHECK + ["--config", f["cfg_rate_inf.toml"]], "traffic.rate_per_s"),
        (CHECK + ["--config", f["cfg_rate_nan.toml"]], "traffic.rate_per_s"),
        (CHECK + ["--config", f["cfg_count_huge.toml"]], "candidates[0].count"),
        (CHECK + ["--config", f["cfg_count_bool.toml"]], "candidates[0].count"),
        (CHECK + ["--config", f["cfg_cand_extra.toml"]], "candidates[0].colour: unknown key"),
        (CHECK + ["--config", f["cfg_cand_int.json"]], "candidates[0]"),
        (CHECK + ["--config", f["cfg_prices_str.toml"]], "prices.usd_per_kwh"),
        (CHECK + ["--config", f["cfg_kwh_huge.toml"]], "usd_per_kwh"),
        (CHECK + ["--config", f["cfg_questions_list.json"]], "questionnaire"),
        (CHECK + ["--config", f["cfg_training_models_empty.toml"]], "training.models"),
        (CHECK + ["--config", f["cfg_training_budget.toml"]], "training.token_budget"),
        (CHECK + ["--config", f["cfg_both_models.toml"]], "give it once"),
        (CHECK + ["--config", f["cfg_unknown_section.toml"]], "trafic: unknown key"),
        (CHECK + ["--config", f["cfg_bad_toml.toml"]], "not valid TOML"),
        (CHECK + ["--config", f["cfg_bad_json.json"]], "not valid JSON"),
        (CHECK + ["--config", f["cfg_rate_and_trace.toml"]], "not both"),
        (CHECK + ["--config", f["cfg_lengths_5.toml"]], "traffic.lengths"),
        (CHECK + ["--config", f["cfg_lengths_bad_list.toml"]], "traffic.lengths"),
        (CHECK + ["--config", f["cfg_output_tokens_huge.toml"]], "output_tokens"),
        (
            [
                "simulate",
                "--chip",
                "gc200",
                "--model",
                "bert-base",
                "--batch",
                "1000000000",
                "--seq-len",
                "128",
            ],
            "over the limit",
        ),
        (
            [
                "roofline",
                "--chip",
                "gc200",
                "--model",
                "bert-base",
                "--batch",
                "1000000000",
                "--seq-len",
                "128",
            ],
            "over the limit",
        ),
        (SIM + ["--max-memory", "1M", "--batch", "100000"], "memory budget"),
        (SIM + ["--max-memory", "lots"], "not a size"),
        (SIM + ["--max-memory", "0"], "between"),
        (["--max-memory", "1e30", *SIM], "between"),
        (["presets", "--no-such-flag"], "unrecognized"),
        (["no-such-command"], "invalid choice"),
        (["simulate"], "required"),
    ]


def test_files_configs_and_issue_examples(files, capsys):
    cases = _file_cases(files)
    for argv, words in cases:
        _bad_cli(argv, capsys, words)
    assert len(cases) >= 90


def test_every_command_refuses_nonfinite_and_huge_numbers(capsys):
    """Held-out style: every numeric option of every command (including ones added later)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    n = 0
    for name, p in sub.choices.items():
        for a in p._actions:
            if a.type not in (int, float) or not a.option_strings:
                continue
            for bad in ("nan", "-inf", "1e999", "x", "", "-99999999999999999999"):
                if a.type is int and bad in ("nan", "-inf", "1e999"):
                    continue
                _bad_cli([name, f"{a.option_strings[0]}={bad}"], capsys)
                n += 1
    assert n >= 40


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    import ipusim

    assert capsys.readouterr().out.strip() == f"ipusim {ipusim.__version__}"


def test_ctrl_c_exits_130_with_one_line(monkeypatch, capsys):
    from ipusim.commands import presets

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(presets, "run", interrupted)
    assert main(["presets"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "ipusim presets: interrupted" and "Traceback" not in err


def test_max_memory_env_and_flag(monkeypatch, capsys):
    monkeypatch.setenv(limits.ENV_MAX_MEMORY, "2M")
    assert limits.max_memory_bytes() == 2 * 2**20
    _bad_cli(
        SIM[:-4] + ["--batch", "100000", "--seq-len", "128"], capsys, "memory budget of 2.1 MB"
    )
    monkeypatch.setenv(limits.ENV_MAX_MEMORY, "many")
    with pytest.raises(ValueError, match=limits.ENV_MAX_MEMORY):
        limits.max_memory_bytes()
    monkeypatch.delenv(limits.ENV_MAX_MEMORY)
    assert limits.max_memory_bytes() == limits.DEFAULT_MAX_MEMORY_BYTES


def test_license_matches_pyproject():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License")
    assert 'license = { text = "MIT" }' in (ROOT / "pyproject.toml").read_text()


def test_out_is_checked_before_the_run(tmp_path, capsys, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "r.md").mkdir()  # a directory where the report would go
    import ipusim.checklist as ck

    def never(*a, **k):
        raise AssertionError("the checklist ran before --out was checked")

    monkeypatch.setattr(ck, "run_checklist", never)
    _bad_cli(CHECK + ["--out", str(ro / "r.md")], capsys, "directory")


# ------------------------------------------------------------------------------------------
# Library calls: ValueError naming the argument, bounded
# ------------------------------------------------------------------------------------------
def _raises(fn, words):
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=words):
            fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_BYTES


LIB_CASES = [
    (lambda: lengths.Histogram(np.array([0, 1e17, 1])), "tokens"),
    (lambda: lengths.Histogram(np.array([1.0, np.inf])), "whole"),
    (lambda: lengths.Histogram(np.zeros(2_000_000)), "over the limit"),
    (lambda: lengths.Histogram([[1, 2], [3]]), "counts"),
    (lambda: lengths.Histogram("abc"), "1-D"),
    (lambda: lengths.from_lengths([10**9]), "over the limit"),
    (lambda: lengths.from_lengths([1, 2.5]), "whole"),
    (lambda: lengths.from_lengths("128"), "list"),
    (lambda: lengths.from_lengths([1 + 2j]), "numbers"),
    (lambda: lengths.load_histogram("/no/such.csv"), "histogram file '/no/such.csv' not found"),
    (lambda: lengths.load_histogram("/"), "directory"),
    (lambda: lengths.load_lengths("/no/such.txt"), "lengths file"),
    (lambda: lengths.load_lengths(5), "file path"),
    (lambda: arrivals.load_trace("/no/such.csv"), "trace file '/no/such.csv' not found"),
    (lambda: arrivals.load_trace("/"), "directory"),
    (lambda: arrivals.poisson(float("nan"), 10), "rate_per_s"),
    (lambda: arrivals.poisson(1.0, 0), "n"),
    (lambda: arrivals.on_off(-1.0, 10), "rate_high_per_s"),
    (lambda: arrivals.daily_ramp(1.0, 10, swing=1.0), "swing"),
    (lambda: packing.pack("squad-384", 100_000, "spfhp"), "memory budget"),
    (lambda: packing.pack("squad-384", 100_000, "nnlshp"), "max_len"),
    (lambda: packing.pack("squad-384", 384, "bucket", buckets=10**9), "buckets"),
    (lambda: packing.pack("squad-384", 2_000_000, "pad"), "over the limit"),
    (lambda: packing.pack([5, 10], 384, "magic"), "strategy"),
    (lambda: packing.pack([5, 10], 8, "ffd"), "longer than the row"),
    (lambda: packing.pack([5, 10], 384, "nnlshp", slack=-1), "slack"),
    (lambda: packing.pack([], 384), "empty"),
    (lambda: workloads.step("bert-base", np.full(5_000_000, 8)), "over the limit"),
    (lambda: workloads.step("bert-base", [513]), "513"),
    (lambda: workloads.step("bert-base", [128], phase="sideways"), "phase"),
    (lambda: workloads.step("bert-base", [128], pad_to=10**9), "pad_to"),
    (
        lambda: workloads.TransformerConfig("x", "encoder", 2, 64, 2, 256, 1000, 10**9),
        "max_positions",
    ),
    (lambda: workloads.TransformerConfig("x", "encoder", 10**15, 64, 2, 256, 1000, 64), "layers"),
    (
        lambda: machine.simulate("gc200", workloads.step("bert-base", np.full(100_000, 512))),
        "over the limit",
    ),
    (lambda: machine.simulate("gc200", "not a step"), "Step"),
    (lambda: serving.chip_service("gc200", "bert-base", max_batch=5000), "max_batch"),
    (lambda: serving.fixed_service(1e300), "seconds"),
    (lambda: serving.fixed_service(float("nan")), "seconds"),
    (lambda: serving.exponential_service(-1.0), "mean_s"),
    (
        lambda: serving.simulate(
            [0.0, 1.0],
            [8, 8],
            policies.Dynamic(4, 0.0),
            serving.fixed_service(0.01),
            latency_target_s=1e300,
        ),
        "latency_target_s",
    ),
    (
        lambda: serving.simulate(
            [0.0, float("nan")], [8, 8], policies.Dynamic(4, 0.0), serving.fixed_service(0.01)
        ),
        "finite",
    ),
    (
        lambda: serving.simulate(
            [1.0, 0.0], [8, 8], policies.Dynamic(4, 0.0), serving.fixed_service(0.01)
        ),
        "sorted",
    ),
    (
        lambda: serving.simulate(
            [0.0, 1.0], [8], policies.Dynamic(4, 0.0), serving.fixed_service(0.01)
        ),
        "one length per request",
    ),
    (lambda: lengths.sample_long_text_mix(10, 1.5), "long_fraction"),
    (lambda: policies.Dynamic(32, float("nan")), "max_delay_s"),
    (lambda: policies.Dynamic(32, -1.0), "max_delay_s"),
    (lambda: policies.Static(0), "batch"),
    (lambda: policies.Static(8, float("inf")), "timeout_s"),
    (lambda: policies.TokenBudget(max_tokens=0), "max_tokens"),
    (lambda: policies.make("fifo"), "unknown policy"),
    (lambda: C.Case(rate_per_s=1e12), "rate_per_s"),
    (lambda: C.Case(rate_per_s=float("inf")), "rate_per_s"),
    (lambda: C.Case(slo_p99_s=float("nan")), "slo_p99_s"),
    (lambda: C.Case(seed=1.5), "seed"),
    (lambda: C.Case(seed=True), "seed"),
    (lambda: C.Case(long_fraction=float("nan")), "long_fraction"),
    (lambda: C.Case(arrivals=[0.0, float("inf")]), "arrivals"),
    (lambda: C.Case(arrivals=[0.0, "x"]), "arrivals"),
    (lambda: C.Case(lengths=[10**9]), "over the limit"),
    (lambda: C.Case(model="gpt2", task="generate", output_tokens=10**6), "output_tokens"),
    (lambda: C.Candidate("gc200", 10**8), "candidate count"),
    (lambda: C.Candidate("gc200", 1.5), "candidate count"),
    (lambda: C.Prices(usd_per_kwh=1e300), "usd_per_kwh"),
    (lambda: C.Prices({"gc200": float("nan")}), "gc200"),
    (lambda: C.Training(token_budget=1e300), "token_budget"),
    (lambda: C.Training(seq_len=10**9), "seq_len"),
    (lambda: F.case_from_dict({"case": 5}), "case"),
    (lambda: F.case_from_dict({"prices": None}), "prices"),
    (
        lambda: F.case_from_dict({"traffic": {"arrivals": 5}}),
        r"traffic\.arrivals: expected a list of times \(s\) or a file name, got 5",
    ),
    (
        lambda: F.case_from_dict({"traffic": {"slo_p99_ms": 50, "slo_p99_s": 0.05}}),
        "slo_p99_s: unknown key",
    ),
    (lambda: F.case_from_dict({"case": {"inference": "no"}}), "case.inference"),
    (lambda: F.case_from_dict({"case": {"seed": 1.5}}), "case.seed"),
    (lambda: F.case_from_dict({"a": {"b": {"c": {"d": {"e": {"f": {"g": {}}}}}}}}), "nested"),
    (lambda: F.case_from_dict([]), "table of sections"),
    (lambda: F.load_case("/no/such.toml"), "not found"),
    (lambda: C.parse_candidates("gc200:1:2:3:4"), "CHIP"),
    (lambda: C.parse_prices(["x"]), "CHIP=USD"),
    (lambda: limits.parse_bytes("12Q"), "not a size"),
]


@pytest.mark.parametrize("i", range(len(LIB_CASES)))
def test_library_refuses_with_value_error(i):
    fn, words = LIB_CASES[i]
    _raises(fn, words)


def test_bursty_arrivals_at_a_huge_rate_are_cheap():
    """Issue: on_off at 1e9 req/s allocated 10 GB for the last on-period; now O(n)."""
    tracemalloc.start()
    a = arrivals.on_off(2e9, 10_000, seed=0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 10 * 2**20 and a.size == 10_000
    assert np.all(np.isfinite(a)) and np.all(np.diff(a) >= 0)


# ------------------------------------------------------------------------------------------
# Subprocess: the issue's biggest examples under a hard memory limit; read-only cache
# ------------------------------------------------------------------------------------------
RLIMIT_BYTES = 3 * 2**30  # address space of the child: the command must be refused well below


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (RLIMIT_BYTES, RLIMIT_BYTES))


def _cli_subprocess(args, **kw):
    env = {**os.environ, "IPUSIM_QUICK": "1", "MPLBACKEND": "Agg"}
    env.update(kw.pop("env", {}))
    return subprocess.run(
        [sys.executable, "-m", "ipusim", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        preexec_fn=_limit_memory,
        **kw,
    )


@pytest.mark.parametrize(
    "args",
    [
        [
            "simulate",
            "--chip",
            "gc200",
            "--model",
            "bert-base",
            "--batch",
            "1000000000",
            "--seq-len",
            "128",
        ],
        ["pack", "--dataset", "squad-384", "--max-len", "100000", "--strategy", "spfhp"],
        [
            "pack",
            "--dataset",
            "squad-384",
            "--max-len",
            "384",
            "--strategy",
            "bucket",
            "--buckets",
            "1000000000",
        ],
        ["checklist", "--candidates", "gc200:100000000", "--no-progress"],
    ],
)
def test_issue_examples_under_a_memory_limit(args):
    r = _cli_subprocess(args)
    assert r.returncode == 2, r.stderr[-500:]
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def _readonly_runner(pkg: Path, home: Path):
    """A command prefix that runs with ``pkg`` and ``home`` read-only, or None if this machine
    cannot make them so (root ignores file modes: it needs a read-only bind mount)."""
    if os.geteuid() != 0:
        return []  # file modes suffice (the caller chmods)
    if shutil.which("unshare") is None:
        return None
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        return None
    return [
        "unshare",
        "-m",
        "sh",
        "-c",
        f'mount --bind -o ro "{pkg}" "{pkg}" && mount --bind -o ro "{home}" "{home}" && exec "$@"',
        "sh",
    ]


def test_cli_runs_without_a_writable_cache(tmp_path):
    """Issue: with the package and home read-only and no NUMBA_CACHE_DIR, every command died
    at import ('cannot cache function ...: no locator available')."""
    import ipusim

    src = Path(ipusim.__file__).parent
    pkg = tmp_path / "site" / "ipusim"
    shutil.copytree(src, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    home = tmp_path / "home"
    home.mkdir()
    prefix = _readonly_runner(pkg, home)
    if prefix is None:
        pytest.skip("cannot make a directory read-only for root here (no unshare -m)")
    if os.geteuid() != 0:
        for p in [home, *pkg.rglob("*")]:
            p.chmod(p.stat().st_mode & ~0o222)
        pkg.chmod(0o555)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(HOME=str(home), PYTHONPATH=str(pkg.parent), IPUSIM_QUICK="1", TMPDIR=str(tmp_path))
    try:
        for args in (["--help"], ["pack", "--dataset", "squad-384", "--max-len", "384", "--json"]):
            r = subprocess.run(
                [*prefix, sys.executable, "-m", "ipusim", *args],
                capture_output=True,
                text=True,
                env=env,
                timeout=600,
                cwd=tmp_path,
            )
            assert r.returncode == 0, r.stderr[-800:]
            assert "Traceback" not in r.stderr
            assert r.stderr.count("Numba cache") <= 1 and r.stderr.count("\n") <= 1, r.stderr
        assert json.loads(r.stdout)["sequences"] > 0
        assert "caching compiled kernels in" in r.stderr
    finally:
        if os.geteuid() != 0:
            for p in [pkg, home, *pkg.rglob("*")]:
                p.chmod(p.stat().st_mode | 0o700)


# ------------------------------------------------------------------------------------------
# Property tests: random valid inputs -> finite, non-negative, conserving
# ------------------------------------------------------------------------------------------
SETTINGS = hypothesis.settings(max_examples=25, deadline=None, derandomize=True)


@SETTINGS
@hypothesis.given(
    lens=st.lists(st.integers(1, 64), min_size=1, max_size=200),
    strategy=st.sampled_from(packing.STRATEGIES),
    extra=st.integers(0, 64),
)
def test_packing_conserves_sequences_and_tokens(lens, strategy, extra):
    max_len = max(lens) + extra
    r = packing.pack(lens, max_len, strategy)
    assert r.sequences == len(lens) and r.real_tokens == sum(lens)
    assert r.padded_tokens >= 0 and r.rows >= 1
    assert 0 < r.efficiency <= 1 and math.isfinite(r.speedup_vs_pad())


@SETTINGS
@hypothesis.given(counts=st.lists(st.integers(0, 10**12), min_size=1, max_size=300))
def test_histogram_totals_are_exact_and_non_negative(counts):
    hypothesis.assume(sum(counts) > 0)
    h = lengths.Histogram(np.array(counts))
    exact = sum(c * (i + 1) for i, c in enumerate(counts))
    assert h.n == sum(counts) and h.tokens == exact and h.tokens > 0
    assert 0 <= h.padding_fraction() < 1


@SETTINGS
@hypothesis.given(
    n=st.integers(1, 300),
    rate=st.floats(0.5, 1e4),
    service_ms=st.floats(0.1, 50),
    max_batch=st.integers(1, 64),
    delay_ms=st.floats(0, 100),
    seed=st.integers(0, 2**32),
    kind=st.sampled_from(["poisson", "bursty"]),
)
def test_serving_conserves_requests_and_tokens(
    n, rate, service_ms, max_batch, delay_ms, seed, kind
):
    arr = (
        arrivals.poisson(rate, n, seed=seed)
        if kind == "poisson"
        else arrivals.on_off(2 * rate, n, seed=seed)
    )
    lens = lengths.sample_long_text_mix(n, 0.3, seed=seed + 1)
    r = serving.simulate(
        arr,
        lens,
        policies.Dynamic(max_batch, delay_ms / 1e3),
        serving.fixed_service(service_ms / 1e3, max_batch=max_batch),
        max_waiting=None,
    )
    assert r.finish_s.size == n and np.all(np.isfinite(r.finish_s))
    assert np.all(r.finish_s >= r.arrival_s) and np.all(r.start_s >= r.arrival_s)
    assert int(np.sum(r.device_real_tokens)) == int(lens.sum())
    assert np.all(r.device_computed_tokens >= r.device_real_tokens)
    d = r.to_dict()
    for k in ("throughput_rps", "latency_p50_s", "latency_p99_s", "utilization", "mean_batch"):
        assert math.isfinite(d[k]) and d[k] >= 0, (k, d[k])
    assert d["throughput_rps"] > 0


@SETTINGS
@hypothesis.given(
    batch=st.integers(1, 64),
    seq=st.integers(1, 512),
    chip=st.sampled_from(["gc200", "a100-80gb"]),
    phase=st.sampled_from(["forward", "decode"]),
)
def test_one_step_is_finite_and_positive(batch, seq, chip, phase):
    r = machine.simulate(
        chip,
        workloads.step("bert-base" if phase == "forward" else "gpt2", [seq] * batch, phase=phase),
    )
    # the fit rule: a step fits exactly when its state is not does_not_fit and it has a finite time
    assert r.fit in machine.FIT_STATES
    assert bool(r.fits) == (r.fit != machine.DOES_NOT_FIT) == math.isfinite(r.time_s)
    t = r.time_s if r.fits else r.extra.get("time_if_unlimited_s", 1.0)
    assert math.isfinite(t) and t > 0
    assert all(math.isfinite(v) and v >= 0 for v in r.split.values())


@pytest.mark.parametrize(
    "argv, words",
    [
        (
            [
                "train",
                "--model",
                "gpt-3-175b",
                "--chip",
                "a100-80gb",
                "--chips",
                "100000000",
                "--tokens",
                "3e11",
            ],
            "chips = 100,000,000 is over the limit",
        ),
        (
            [
                "embed",
                "--chip",
                "gc200",
                "--tables",
                "100000000",
                "--rows",
                "1000",
                "--dim",
                "128",
                "--pooling",
                "1",
                "--batch",
                "2048",
            ],
            "tables = 100,000,000 is over the limit",
        ),
        (
            [
                "sweep",
                "--chip",
                "gc200",
                "--vary",
                "tiles=1:1e12:100000000",
                "--model",
                "bert-base",
            ],
            "the number of values = 100,000,000 is over the limit",
        ),
        (
            [
                "sweep",
                "--chip",
                "gc200",
                "--vary",
                "tiles=1:10000:10000",
                "--vary",
                "sram_per_tile_bytes=1:10000:10000",
                "--model",
                "bert-base",
            ],
            "grid points = 100,000,000 is over the limit",
        ),
    ],
)
def test_new_commands_bound_their_sizes(argv, words, capsys):
    """Held-out sizes on train, embed and sweep: refused in one line before any work."""
    from ipusim import cli

    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and err.strip().count("\n") == 0
