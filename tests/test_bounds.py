"""Bounded by estimate: every command estimates what its arguments cost before it runs
(``ipusim.commands._costs``), every number is checked for meaning, sizes stay inside int64, and
a property test draws random argument sets per command and measures each run's peak memory.

The property test forks one child per drawn argument set from a warmed parent (every command
run once, so imports and compiled kernels are loaded), resets the child's peak resident set
(``/proc/self/clear_refs``), runs ``ipusim.cli.main`` and reports the exit status, standard error
and the growth of the peak resident set over the child's starting one.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import signal
import sys

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest

from ipusim import embeddings, limits, policies, workloads
from ipusim.checklist import case as C
from ipusim.cli import main
from ipusim.commands import _costs
from ipusim.training import search

BUDGET = "256M"
BUDGET_BYTES = limits.parse_bytes(BUDGET)


@pytest.fixture(autouse=True)
def _quick(monkeypatch):
    monkeypatch.setenv("IPUSIM_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.delenv(limits.ENV_MAX_MEMORY, raising=False)


def _cli(argv, capsys):
    try:
        rc = main(argv)
    except SystemExit as stop:  # argparse usage errors
        rc = stop.code
    out, err = capsys.readouterr()
    return rc, out, err


def _refused(argv, capsys, *words):
    rc, out, err = _cli(argv, capsys)
    assert rc == 2, (argv, rc, err, out[-300:])
    assert err.count("\n") == 1 and err.startswith("ipusim") and "Traceback" not in err, err
    for w in words:
        assert w in err, (argv, w, err)
    return err


# ------------------------------------------------------------------------------------------
# 1. The estimate, per command, before anything is built
# ------------------------------------------------------------------------------------------
SERVE_HUGE = [
    "serve",
    "--service",
    "fixed",
    "--service-ms",
    "1",
    "--rate",
    "300",
    "--requests",
    "2000",
    "--max-batch",
    "100000000",
    "--json",
]


def test_every_command_has_an_estimate():
    from ipusim.cli import build_parser

    names = set(build_parser()._subparsers._group_actions[0].choices)
    assert names == set(_costs.ESTIMATES)


@pytest.mark.parametrize(
    "policy", policies.POLICIES[:-1]
)  # continuous serves generation: no table rows
def test_serve_huge_max_batch_is_refused_by_estimate_for_every_policy(policy, capsys, monkeypatch):
    import ipusim.serving.service as service

    def boom(*a, **k):  # the refusal must come before any service table is built
        raise AssertionError("a service table was built")

    monkeypatch.setattr(service, "fixed_service", boom)
    err = _refused(
        [*SERVE_HUGE, "--policy", policy], capsys, "--max-batch = 100,000,000", "memory budget"
    )
    assert "bytes per row" in err


def test_embed_huge_lookups_refused_by_estimate(capsys, monkeypatch):
    monkeypatch.setattr(
        embeddings, "simulate", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran"))
    )
    err = _refused(
        ["embed", "--chip", "gc200", "--tables", "10000", "--batch", "100000", "--json"],
        capsys,
        "--batch = 100,000",
        "1,000,000,000 look-ups",
    )
    assert "96.2 GB" in err  # 1e9 look-ups x 96 bytes + 10,000 tables x 1,472 tiles x 16 bytes


def test_pack_ffd_row_matrix_checked_before_it_is_built(tmp_path, capsys):
    # 5,000 rows filled by pairs of 500,000-token sequences, then one row of 10,000 one-token ones:
    # a 5,001 x 10,000 row matrix (800 MB) from 20,000 sequences (1 MB of work arrays).
    f = tmp_path / "lens.csv"
    f.write_text("length,count\n1,10000\n500000,10000\n")
    _refused(
        [
            "pack",
            "--histogram",
            str(f),
            "--max-len",
            "1000000",
            "--strategy",
            "ffd",
            "--max-memory",
            "64M",
        ],
        capsys,
        "ffd rows x fullest row (5,001 x 10,000)",
        "needs about 801 MB",
    )
    rc, out, err = _cli(
        ["pack", "--histogram", str(f), "--max-len", "1000000", "--strategy", "ffd", "--json"],
        capsys,
    )
    assert rc == 0 and json.loads(out)["rows"] == 5001, err


def test_estimates_scale_with_their_inputs():
    ns = argparse.Namespace
    small = _costs.serve(ns(requests=100, rate=[1.0], max_batch=10, policy="dynamic"))
    big = _costs.serve(ns(requests=100, rate=[1.0], max_batch=10_000, policy="dynamic"))
    assert big[1].bytes == pytest.approx(1000 * small[1].bytes)
    tok = _costs.serve(ns(requests=100, rate=[1.0], max_batch=10, policy="token"))
    assert tok[1].bytes == 4 * small[1].bytes  # the token budget's batch cap is 4x --max-batch
    e = _costs.embed(ns(chip="gc200", chips=1, preset=None, tables=10, batch=100, pooling=2))
    assert e[0].bytes == 10 * 100 * 2 * _costs.EMBED_BYTES_PER_LOOKUP
    assert e[1].bytes == 10 * 1472 * _costs.EMBED_BYTES_PER_TABLE_UNIT


def test_budget_flag_moves_the_limit(capsys):
    ok = [
        "serve",
        "--service",
        "fixed",
        "--rate",
        "100",
        "--requests",
        "200",
        "--max-batch",
        "100000",
        "--json",
    ]
    rc, out, _ = _cli(ok, capsys)
    assert rc == 0 and json.loads(out)["requests"] == 200
    _refused([*ok, "--max-memory", "4M"], capsys, "--max-batch = 100,000")


# ------------------------------------------------------------------------------------------
# 2. Every number checked for meaning
# ------------------------------------------------------------------------------------------
SERVE = ["serve", "--service", "fixed", "--requests", "50"]
MEANING = [
    ([*SERVE, "--rate", "1e-300"], "argument --rate: must lie in 1.11e-10..1e+07"),
    ([*SERVE, "--rate", "1e308"], "argument --rate: must lie in 1.11e-10..1e+07"),
    ([*SERVE, "--rate", "1:inf:1"], "argument --rate: must be finite"),
    ([*SERVE, "--rate", "1:10:0"], "STEP > 0"),
    (
        [*SERVE, "--rate", "10", "--policy", "static", "--max-delay-ms", "-1"],
        "argument --max-delay-ms: must be >= 0",
    ),
    (
        [*SERVE, "--rate", "10", "--policy", "adaptive", "--max-delay-ms", "-1"],
        "argument --max-delay-ms",
    ),
    ([*SERVE, "--rate", "10", "--service-ms", "0"], "argument --service-ms"),
    ([*SERVE, "--rate", "10", "--latency-target-ms", "-5"], "argument --latency-target-ms"),
    (
        [*SERVE, "--rate", "10", "--long-fraction", "1.5"],
        "argument --long-fraction: must lie in 0..1",
    ),
    (
        [*SERVE, "--rate", "10", "--arrivals", "gamma", "--cv", "1e-300"],
        "argument --cv: must lie in 1e-06..3",
    ),
    ([*SERVE, "--rate", "10", "--arrivals", "gamma", "--cv", "1e200"], "argument --cv"),
    ([*SERVE, "--rate", "10", "--arrivals", "gamma", "--cv", "1e5"], "argument --cv"),
    ([*SERVE, "--rate", "1e308", "--arrivals", "ramp"], "argument --rate"),
    (
        [
            "roofline",
            "--chip",
            "gc200",
            "--model",
            "bert-base",
            "--phase",
            "decode",
            "--batch",
            "1",
            "--seq-len",
            "8",
        ],
        "bert-base is an encoder",
    ),
    (
        [
            "simulate",
            "--chip",
            "gc200",
            "--model",
            "bert-base",
            "--phase",
            "prefill",
            "--batch",
            "1",
            "--seq-len",
            "8",
        ],
        "bert-base is an encoder",
    ),
    (
        [
            "train",
            "--chip",
            "a100-80gb",
            "--model",
            "gpt2",
            "--chips",
            "8",
            "--tokens",
            "1e9",
            "--price",
            "=1",
        ],
        "chip name before '=' is empty",
    ),
    (
        ["train", "--chip", "a100-80gb", "--model", "gpt2", "--chips", "8", "--tokens", "5e-324"],
        "argument --tokens: must lie in 1..1e+16",
    ),
    (
        [
            "train",
            "--chip",
            "a100-80gb",
            "--model",
            "gpt2",
            "--chips",
            "8",
            "--tokens",
            "1e9",
            "--usd-per-kwh",
            "-1",
        ],
        "argument --usd-per-kwh",
    ),
    (["checklist", "--price", "=1", "--no-progress"], "chip name before '=' is empty"),
]


@pytest.mark.parametrize(("argv", "words"), MEANING, ids=[" ".join(a[-3:]) for a, _ in MEANING])
def test_numbers_are_checked_for_meaning(argv, words, capsys):
    _refused(argv, capsys, words)


@pytest.fixture
def toml(tmp_path):
    def write(text):
        p = tmp_path / "case.toml"
        p.write_text(text)
        return str(p)

    return write


MODEL_TOML = (
    '[model]\nname = "m"\nkind = "encoder"\nlayers = 1\nd_model = 64\nheads = 1\nd_ff = 64\n'
    "vocab = 100\nmax_positions = 128\n"
)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            MODEL_TOML + 'gated_mlp = "true"\n',
            "TransformerConfig.gated_mlp must be true or false, got 'true'",
        ),
        (MODEL_TOML + "biases = 1\n", "TransformerConfig.biases must be true or false, got 1"),
        ('[case]\ninference = "true"\n', "case.inference"),
        (
            "[traffic]\nrate_per_s = 100\nlengths = { 100000000000000000000 = 3, 10 = 2 }\n",
            "length histogram key 1e+20 is over the limit",
        ),
        ("[case]\ninference = false\n[training]\ntoken_budget = 5e-324\n", "training.token_budget"),
    ],
)
def test_config_numbers_and_booleans_checked(text, words, toml, capsys):
    _refused(["checklist", "--config", toml(text), "--no-progress"], capsys, words)


def test_library_checks_meaning_too():
    with pytest.raises(ValueError, match="max_delay_s must be >= 0"):
        policies.make("static", max_batch=4, max_delay_s=-1e-3)
    with pytest.raises(ValueError, match="max_delay_s must be >= 0"):
        policies.make("adaptive", max_batch=4, max_delay_s=-1e-3)
    with pytest.raises(ValueError, match="is an encoder"):
        workloads.step("bert-base", [8], phase="decode")
    with pytest.raises(ValueError, match="must be true or false"):
        workloads.TransformerConfig("m", "encoder", 1, 64, 1, 64, 100, 128, tied_embeddings="no")
    from ipusim import arrivals

    for fn in (
        arrivals.poisson,
        arrivals.daily_ramp,
        lambda r, n, seed=0: arrivals.gamma(r, n, cv=1.0),
    ):
        with pytest.raises(ValueError, match="must lie in 1.11e-10..1e"):
            fn(1e308, 10)
        with pytest.raises(ValueError, match="must lie in 1.11e-10..1e"):
            fn(1e-300, 10)
    with pytest.raises(ValueError, match="cv must lie"):
        arrivals.gamma(10.0, 10, cv=1e5)
    with pytest.raises(ValueError, match="empty"):
        C.parse_prices([" =2"])


def test_gamma_at_the_edge_of_its_range_keeps_its_cv():
    """At cv = MAX_CV the drawn gaps still have about the asked coefficient of variation (10%)."""
    from ipusim import arrivals

    t = arrivals.gamma(100.0, 200_000, cv=limits.MAX_CV, seed=1)
    gaps = np.diff(t)
    assert gaps.std() / gaps.mean() == pytest.approx(limits.MAX_CV, rel=0.1)
    assert np.mean(gaps == 0) < 0.05


# ------------------------------------------------------------------------------------------
# 3. Arithmetic inside int64, loops bounded
# ------------------------------------------------------------------------------------------
def test_embedding_row_ids_that_overflow_int64_are_refused(capsys):
    _refused(
        [
            "embed",
            "--chip",
            "gc200",
            "--tables",
            "10000",
            "--rows",
            "9007199254740992",
            "--dim",
            "1",
            "--batch",
            "1",
            "--json",
        ],
        capsys,
        "over the 4.61e+18 that int64 arithmetic holds",
    )


def test_embedding_just_inside_int64_is_not_on_chip(capsys):
    rc, out, err = _cli(
        [
            "embed",
            "--chip",
            "gc200",
            "--tables",
            "1",
            "--rows",
            str(2**50),
            "--dim",
            "1",
            "--batch",
            "1",
            "--json",
        ],
        capsys,
    )
    assert rc == 0, err
    d = json.loads(out)
    assert d["fit"] != "on_chip"  # 2^50 rows x 4 bytes = 4.5 PB cannot sit in 900 MB of SRAM


@pytest.mark.parametrize("n", [1, 2, 12, 64, 97, 360, 1024, 1_000_000_007 * 2, 2**53])
@pytest.mark.parametrize("at_most", [None, 1, 7, 64])
def test_bounded_divisors_match_brute_force(n, at_most):
    if at_most is None and n > 10**6:
        pytest.skip("unbounded: O(n) by design, used only for chip counts <= MAX_CHIPS")
    top = n if at_most is None else min(n, at_most)
    assert search._divisors(n, at_most) == [k for k in range(1, top + 1) if n % k == 0]


def test_training_huge_global_batch_takes_micro_batches_that_divide_it(capsys):
    rc, out, err = _cli(
        [
            "train",
            "--chip",
            "a100-80gb",
            "--model",
            "gpt2",
            "--chips",
            "1",
            "--tokens",
            "1e9",
            "--global-batch",
            "1000000000",
            "--json",
        ],
        capsys,
    )
    assert rc == 0, err
    pl = json.loads(out)["placement"]
    assert 1 <= pl["micro_batch"] <= search.MAX_MICRO_BATCH
    assert pl["micro_batch"] * pl["micro_batches"] * pl["data"] == 1_000_000_000


def test_simulated_step_bounded_in_sequences(capsys):
    _refused(
        [
            "simulate",
            "--chip",
            "gc200",
            "--model",
            "bert-base",
            "--batch",
            "4194304",
            "--seq-len",
            "4",
        ],
        capsys,
        "over the limit of 1,048,576",
    )


# ------------------------------------------------------------------------------------------
# 4. A long table build shows progress
# ------------------------------------------------------------------------------------------
def test_table_build_reports_progress(monkeypatch):
    import ipusim.config as config
    from ipusim import hardware
    from ipusim.serving import tables

    seen = []

    def spy(it=None, **kw):
        seen.append(kw)
        return config._NoBar(it)

    monkeypatch.setattr(config, "progress", spy)
    spec = tables.replica(hardware.chip("gc200"), workloads.model("bert-base"), length=32)
    tab = tables._build_fine(spec, "forward", 4, 32, 16, False)
    assert tab.shape == (5, 33) and np.all(tab[1:, 1:] > 0)
    assert seen and all(kw.get("delay", 0) > 0 and kw.get("leave") is False for kw in seen)
    assert any("bert-base forward table" in kw.get("desc", "") for kw in seen)


# ------------------------------------------------------------------------------------------
# 5. Property test: random argument sets per command, peak memory measured in a forked child
# ------------------------------------------------------------------------------------------
# Slack over the budget for what a run loads lazily (a pydantic schema, a cached kernel) and for
# the interpreter's own churn; measured at ~40 MB on the warmed parent.
SLACK_BYTES = 160 * 2**20
HANG_GUARD_S = 600  # a hang detector for a forked child, not a timing assertion

ints = st.one_of(
    st.integers(1, 64), st.integers(-3, 2**62).map(int), st.sampled_from([0, 2**31, 10**9, 2**53])
)
floats = st.one_of(
    st.floats(1e-3, 1e3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -1.0, 1e-300, 5e-324, 1e308]),
)


def _s(x) -> str:
    return repr(x) if isinstance(x, float) else str(x)


def _glued(argv: list[str]) -> list[str]:
    """``--opt -1`` as ``--opt=-1``: argparse reads a value that starts with '-' as an option."""
    out = []
    for tok in argv:
        if (
            out
            and out[-1].startswith("--")
            and "=" not in out[-1]
            and tok.startswith("-")
            and not tok.startswith("--")
        ):
            out[-1] = f"{out[-1]}={tok}"
        else:
            out.append(tok)
    return out


@st.composite
def argsets(draw, command):
    return _glued(draw(_argsets(command)))


@st.composite
def _argsets(draw, command):
    chip = draw(st.sampled_from(["gc200", "a100-80gb", "gc2"]))
    if command == "simulate":
        return [
            "simulate",
            "--chip",
            chip,
            "--model",
            draw(st.sampled_from(["bert-base", "gpt2"])),
            "--batch",
            _s(draw(ints)),
            "--seq-len",
            _s(draw(ints)),
            "--phase",
            draw(st.sampled_from(["forward", "prefill", "decode"])),
        ]
    if command == "roofline":
        return [
            "roofline",
            "--chip",
            chip,
            "--model",
            draw(st.sampled_from(["bert-base", "gpt2"])),
            "--batch",
            _s(draw(ints)),
            "--seq-len",
            _s(draw(ints)),
            "--phase",
            draw(st.sampled_from(["forward", "prefill", "decode", "train"])),
        ]
    if command == "serve":
        a = [
            "serve",
            "--service",
            draw(st.sampled_from(["fixed", "exponential"])),
            "--service-ms",
            _s(draw(floats)),
            "--rate",
            _s(draw(floats)),
            "--requests",
            _s(draw(st.one_of(st.integers(1, 500), ints))),
            "--max-batch",
            _s(draw(ints)),
            "--max-delay-ms",
            _s(draw(floats)),
            "--policy",
            draw(st.sampled_from(policies.POLICIES[:-1])),
            "--json",
        ]
        if draw(st.booleans()):
            a += ["--arrivals", "gamma", "--cv", _s(draw(floats))]
        return a
    if command == "pack":
        return [
            "pack",
            "--dataset",
            draw(st.sampled_from(["squad-384", "wikipedia-512"])),
            "--max-len",
            _s(draw(st.one_of(st.integers(384, 4096), ints))),
            "--strategy",
            draw(st.sampled_from(["pad", "bucket", "spfhp", "bfhp", "nnlshp", "ffd"])),
            "--max-per-row",
            _s(draw(st.integers(1, 8))),
            "--json",
        ]
    if command == "embed":
        return [
            "embed",
            "--chip",
            chip,
            "--tables",
            _s(draw(ints)),
            "--rows",
            _s(draw(ints)),
            "--dim",
            _s(draw(st.one_of(st.integers(1, 256), ints))),
            "--batch",
            _s(draw(ints)),
            "--pooling",
            _s(draw(st.one_of(st.integers(1, 4), ints))),
            "--json",
        ]
    if command == "train":
        return [
            "train",
            "--chip",
            chip,
            "--model",
            draw(st.sampled_from(["gpt2", "bert-base", "llama-2-7b"])),
            "--chips",
            _s(draw(st.one_of(st.integers(1, 64), ints))),
            "--tokens",
            _s(draw(floats)),
            "--global-batch",
            _s(draw(ints)),
            "--json",
        ]
    if command == "checklist":  # a full checklist run takes ~15 s of CPU: mostly drawn out of range
        return [
            "checklist",
            "--no-progress",
            "--json",
            "--rate-per-s",
            _s(draw(floats)),
            "--slo-p99-ms",
            _s(draw(floats)),
            "--candidates",
            f"{chip}:{_s(draw(ints))}",
            "--output-tokens",
            _s(draw(ints)),
        ]
    assert command == "sweep"
    b = draw(ints)
    return [
        "sweep",
        "--task",
        "simulate",
        "--serial",
        "--json",
        "--model",
        "bert-base",
        "--vary",
        f"batch={b},{b + 1}",
        "--seq-len",
        _s(draw(ints)),
    ]


def _run_forked(argv) -> dict:
    """Run ``main(argv)`` in a forked child; its exit status, stderr and peak RSS growth (bytes)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns to pytest
        try:
            os.close(r)
            signal.alarm(HANG_GUARD_S)
            err_r, err_w = os.pipe()
            os.dup2(err_w, 2)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # reset the peak resident set to the current one
            start = _status("VmRSS")
            try:
                rc = main(argv)
            except SystemExit as stop:
                rc = stop.code
            except BaseException as exc:  # noqa: BLE001
                rc = f"raised {type(exc).__name__}: {exc}"
            sys.stderr.flush()
            os.close(err_w)
            os.close(2)
            err = os.read(err_r, 1 << 16).decode(errors="replace")
            out = {"rc": rc, "err": err, "growth": _status("VmHWM") - start}
            os.write(w, pickle.dumps(out))
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    assert data, f"child died without a report: {argv}"
    return pickle.loads(data)


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


WARM = {  # one small run per command: imports and compiled kernels loaded before the forks
    "simulate": [
        "simulate",
        "--chip",
        "gc200",
        "--model",
        "bert-base",
        "--batch",
        "2",
        "--seq-len",
        "8",
    ],
    "roofline": [
        "roofline",
        "--chip",
        "gc200",
        "--model",
        "gpt2",
        "--batch",
        "2",
        "--seq-len",
        "8",
    ],
    "serve": ["serve", "--service", "fixed", "--rate", "10", "--requests", "20", "--json"],
    "pack": ["pack", "--dataset", "squad-384", "--max-len", "384", "--strategy", "ffd", "--json"],
    "embed": [
        "embed",
        "--chip",
        "gc200",
        "--tables",
        "2",
        "--rows",
        "100",
        "--batch",
        "4",
        "--json",
    ],
    "train": [
        "train",
        "--chip",
        "a100-80gb",
        "--model",
        "gpt2",
        "--chips",
        "2",
        "--tokens",
        "1e9",
        "--json",
    ],
    "checklist": ["checklist", "--price", "x=1", "--rate-per-s", "-1", "--no-progress"],
    "sweep": [
        "sweep",
        "--task",
        "simulate",
        "--serial",
        "--json",
        "--model",
        "bert-base",
        "--vary",
        "batch=1,2",
        "--seq-len",
        "8",
    ],
}
EXAMPLES = {
    "simulate": 30,
    "roofline": 30,
    "serve": 30,
    "pack": 25,
    "embed": 30,
    "train": 25,
    "checklist": 15,
    "sweep": 15,
}  # 200 in all


@pytest.fixture(scope="module")
def warmed():
    if not os.path.exists("/proc/self/clear_refs") or not hasattr(os, "fork"):
        pytest.skip("needs Linux /proc (clear_refs, VmHWM) and fork")
    import contextlib
    import io

    for argv in WARM.values():
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                main(argv)
            except SystemExit:
                pass
    return True


@pytest.mark.parametrize("command", list(EXAMPLES))
def test_random_arguments_stay_in_budget_and_end_cleanly(command, warmed, monkeypatch):
    monkeypatch.setenv(limits.ENV_MAX_MEMORY, BUDGET)
    seen = []

    @hypothesis.settings(
        max_examples=EXAMPLES[command],
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    @hypothesis.given(argv=argsets(command))
    def check(argv):
        r = _run_forked(argv)
        seen.append(r["rc"])
        assert r["rc"] in (0, 2), (argv, r)
        if r["rc"] == 2:
            assert r["err"].count("\n") == 1 and r["err"].startswith("ipusim"), (argv, r["err"])
        assert "Traceback" not in r["err"] and "internal error" not in r["err"], (argv, r["err"])
        assert r["growth"] <= BUDGET_BYTES + SLACK_BYTES, (argv, r["growth"] / 2**20)

    check()
    assert (
        len(seen) >= EXAMPLES[command] // 2
    )  # hypothesis ran the draws (it may stop early on duplicates)
    # some draws ran to the end, so the memory bound measured real runs, not only refusals
    assert 0 in seen, f"{command}: every draw was refused; the memory bound tested nothing"


def test_a_run_too_long_for_float64_times_is_refused(capsys):
    """1e-9 req/s for 5 requests spans 5e9 s: still resolved; for 50 requests, 5e10 s: refused."""
    rc, out, err = _cli(
        ["serve", "--service", "fixed", "--rate", "1e-9", "--requests", "5", "--json"], capsys
    )
    assert rc == 0 and json.loads(out)["served"] == 5, err
    _refused(
        ["serve", "--service", "fixed", "--rate", "1e-9", "--requests", "50"],
        capsys,
        "--rate = 1e-09: 50 requests span about 5e+10 s",
    )


def test_forked_measure_sees_an_allocation(monkeypatch):
    """The property test's meter can fail: a child that touches 200 MB reports at least that."""
    if not os.path.exists("/proc/self/clear_refs") or not hasattr(os, "fork"):
        pytest.skip("needs Linux /proc (clear_refs, VmHWM) and fork")

    def fake_main(argv):
        a = np.ones(200 * 2**20 // 8)  # touched: resident
        print("ipusim fake: error: one line", file=sys.stderr)
        return 2 if a.sum() else 0

    monkeypatch.setattr(sys.modules[__name__], "main", fake_main)
    r = _run_forked(["fake"])
    assert r["rc"] == 2 and r["err"] == "ipusim fake: error: one line\n"
    assert 200 * 2**20 <= r["growth"] < 260 * 2**20


@pytest.mark.parametrize("seed", range(40))
def test_ffd_shape_from_counts_matches_the_kernel(seed):
    # first_fit_shape (over the histogram's counts) gives the rows and fullest row that the
    # one-by-one kernel gives, exactly, with and without a cap on sequences per row.
    from ipusim.packing.ffd import first_fit_rows, first_fit_shape

    rng = np.random.default_rng(seed)
    L = int(rng.integers(1, 80))
    K = L if seed % 3 == 0 else int(rng.integers(1, 9))
    counts = rng.integers(0, 7, size=L) * (rng.random(L) < 0.5)
    counts[int(rng.integers(0, L))] += 1
    s = np.repeat(np.arange(1, L + 1), counts)[::-1].copy()
    srow = np.empty(s.size, np.int64)
    rows = first_fit_rows(s, L, K, srow)
    assert first_fit_shape(counts, L, K) == (rows, int(np.bincount(srow).max()))


def test_pack_ffd_refused_before_any_sequence_is_placed(tmp_path, capsys, monkeypatch):
    # The row matrix's shape comes from the histogram, so a too-large one is refused before
    # the sequences are expanded or placed: both raise here if they are reached.
    from ipusim import lengths
    from ipusim.packing import strategies

    def reached(*a, **k):
        raise AssertionError("the one-by-one pass ran before the refusal")

    monkeypatch.setattr(strategies, "first_fit_rows", reached)
    monkeypatch.setattr(lengths.Histogram, "expand", reached)
    f = tmp_path / "lens.csv"
    f.write_text("length,count\n1,10000\n500000,10000\n")
    argv = ["pack", "--histogram", str(f), "--max-len", "1000000", "--strategy", "ffd"]
    _refused([*argv, "--max-memory", "64M"], capsys, "(5,001 x 10,000)", "needs about 801 MB")
    monkeypatch.setenv(limits.ENV_MAX_MEMORY, "64M")
    with pytest.raises(ValueError, match=r"ffd rows x fullest row \(5,001 x 10,000\)"):
        strategies.pack(lengths.load_histogram(f), 1_000_000, "ffd")


def test_ffd_shape_gives_up_past_its_work_limit_and_pack_still_runs():
    # 20,000 distinct lengths, one each: every row differs, so the runs are as many as the rows;
    # the shape pass stops at its step limit (None) and pack checks the row matrix after the pass.
    from ipusim.packing import pack
    from ipusim.packing.ffd import first_fit_shape

    counts = np.ones(20_000, np.int64)
    assert first_fit_shape(counts, 20_000, 20_000) is None
    assert first_fit_shape(counts[:2000], 2000, 2000) == (1001, 2)  # under the limit: exact
    p = pack(np.arange(1, 20_001), 20_000, "ffd")
    assert p.rows == 10_001 and p.compositions.shape == (10_001, 2)
