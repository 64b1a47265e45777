"""``ipusim serve`` from the command line: JSON keys, theory mode, bad input."""

import json
import subprocess
import sys

import pytest

from ipusim import cli, serving


def _run(capsys, *args):
    code = cli.main(["serve", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _json(capsys, *args):
    """``ipusim serve ... --json``: the printed object, after checking the run exited 0."""
    code, out, err = _run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_serve_json_keys_chip_as_a_module():
    """One real ``python -m ipusim`` run, as the issue's command line."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ipusim",
            "serve",
            "--chip",
            "gc200",
            "--model",
            "bert-base",
            "--rate",
            "500",
            "--requests",
            "2000",
            "--policy",
            "dynamic",
            "--max-batch",
            "16",
            "--max-delay-ms",
            "2",
            "--long-fraction",
            "0.4",
            "--seed",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    for k in ("throughput_rps", "latency_p50_s", "latency_p99_s", "utilization", "stable"):
        assert k in d
    assert d["stable"] is True and d["served"] == 2000


def test_serve_exponential_matches_mm1(capsys):
    d = _json(
        capsys,
        "--service",
        "exponential",
        "--service-ms",
        "10",
        "--rate",
        "50",
        "--requests",
        "200000",
        "--max-batch",
        "1",
        "--max-delay-ms",
        "0",
    )
    theory = serving.theory_wait_s(50, 0.01, "mm1")
    # rho = 0.5, 2*10^5 requests: relative standard error about 1%; 5% tolerance
    assert d["queueing_mean_s"] == pytest.approx(theory, rel=0.05)


def test_serve_overload_reports_unstable(capsys):
    d = _json(
        capsys,
        "--service",
        "fixed",
        "--service-ms",
        "10",
        "--rate",
        "300",
        "--requests",
        "20000",
        "--max-batch",
        "1",
        "--max-delay-ms",
        "0",
    )
    assert d["stable"] is False and d["unstable_reason"]


def test_serve_text_output_and_lengths_file(tmp_path, capsys):
    p = tmp_path / "h.csv"
    p.write_text("length,count\n64,5\n300,1\n")
    code, out, _ = _run(
        capsys,
        "--rate",
        "200",
        "--requests",
        "500",
        "--lengths",
        str(p),
        "--policy",
        "buckets",
        "--max-batch",
        "16",
    )
    assert code == 0 and "p99" in out and "length buckets" in out


def test_serve_lengths_takes_a_list_a_csv_or_a_dataset(tmp_path, capsys):
    """--lengths means what it means in simulate and checklist: a list file draws from its
    histogram, so it gives the run the equal CSV gives; a dataset's short name is the dataset."""
    (tmp_path / "h.csv").write_text("length,count\n64,1\n300,1\n")
    (tmp_path / "l.txt").write_text("300\n64\n")
    args = ("--rate", "200", "--requests", "2000", "--max-batch", "16")
    by = {k: _json(capsys, *args, "--lengths", str(tmp_path / k)) for k in ("h.csv", "l.txt")}
    assert by["h.csv"] == by["l.txt"]
    squad, full = (
        _json(capsys, *args, "--lengths", "squad"),
        _json(capsys, *args, "--lengths", "squad-384"),
    )
    assert squad == full and squad != by["h.csv"]
    code, _, err = _run(capsys, *args, "--lengths", "encyclopaedia")
    assert code == 2 and "neither a file nor a dataset name" in err and "squad-384" in err


def test_serve_bad_value_is_one_line(capsys):
    with pytest.raises(SystemExit) as e:  # argparse refuses it: exit 2, one line naming the option
        _run(capsys, "--rate", "-1")
    err = capsys.readouterr().err
    assert e.value.code == 2 and "argument --rate" in err and "Traceback" not in err


def test_serve_trace_replay_and_bursty(tmp_path, capsys):
    from ipusim import arrivals

    p = tmp_path / "trace.csv"
    arrivals.save_trace(p, arrivals.poisson(100, 300, seed=1), [64] * 300)
    d = _json(capsys, "--trace", str(p))
    assert d["served"] == 300 and d["arrivals"] == "trace"
    assert (
        _json(capsys, "--rate", "300", "--requests", "3000", "--arrivals", "bursty")["served"]
        == 3000
    )


def test_serve_needs_rate_or_trace(capsys):
    code, _, err = _run(capsys)
    assert code == 2 and "--rate" in err


def test_serve_caps_requests_and_refuses_huge_lengths(tmp_path, capsys):
    code, _, err = _run(capsys, "--rate", "10", "--requests", "2000000000")
    assert code == 2 and f"{serving.MAX_REQUESTS:,}" in err and "bytes per request" in err
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,length\n0.1,64\n0.2,1000000000000\n")
    for extra in ((), ("--service", "fixed")):
        out = subprocess.run(
            [sys.executable, "-m", "ipusim", "serve", "--trace", str(p), *extra],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert out.returncode == 2 and "Traceback" not in out.stderr and "tokens" in out.stderr


def test_serve_short_trace_row_and_sparse_bursty(tmp_path, capsys):
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,length\n0.1,64\n0.2\n")
    code, _, err = _run(capsys, "--trace", str(p))
    assert code == 2 and "line 3" in err
    assert (
        _json(
            capsys,
            "--rate",
            "1e-9",
            "--arrivals",
            "bursty",
            "--requests",
            "5",
            "--service",
            "fixed",
        )["served"]
        == 5
    )


def test_serve_short_overload_is_unstable(capsys):
    d = _json(
        capsys,
        "--rate",
        "1e6",
        "--requests",
        "99",
        "--service",
        "fixed",
        "--service-ms",
        "10",
        "--max-batch",
        "1",
    )
    assert d["stable"] is False and "exceeds its capacity" in d["unstable_reason"]


def test_serve_refuses_a_model_that_does_not_fit(capsys):
    """Llama-2-70B (138 GB of weights) on a 40 GB A100 has no time: exit 2, one line."""
    code, out, err = _run(
        capsys,
        "--model",
        "llama-2-70b",
        "--chip",
        "a100-40gb",
        "--rate",
        "100",
        "--requests",
        "100",
        "--max-batch",
        "2",
    )
    assert code == 2 and "does not fit" in err and err.strip().count("\n") == 0 and not out


def test_serve_rate_sweep_json_list_and_csv(tmp_path, capsys):
    f = tmp_path / "rates.csv"
    rows = _json(
        capsys,
        "--service",
        "fixed",
        "--service-ms",
        "1",
        "--rate",
        "500:1500:500",
        "--requests",
        "3000",
        "--csv",
        str(f),
    )
    assert [r["rate_rps"] for r in rows] == [500, 1000, 1500]
    assert rows[0]["mean_batch"] < rows[-1]["mean_batch"]  # more load, bigger batches
    lines = f.read_text().splitlines()
    assert len(lines) == 4 and lines[0].startswith("policy,")  # header + one row per rate
    code, out, _ = _run(
        capsys,
        "--service",
        "fixed",
        "--service-ms",
        "1",
        "--rate",
        "500:1500:500",
        "--requests",
        "300",
    )
    assert (
        code == 0
        and len([ln for ln in out.splitlines() if ln.strip().startswith(("500", "1,000", "1,500"))])
        == 3
    )


def test_serve_csv_per_request_and_gamma_arrivals(tmp_path, capsys):
    f = tmp_path / "req.csv"
    d = _json(
        capsys,
        "--service",
        "fixed",
        "--service-ms",
        "1",
        "--rate",
        "500",
        "--requests",
        "400",
        "--arrivals",
        "gamma",
        "--cv",
        "2",
        "--csv",
        str(f),
    )
    assert d["arrivals"] == "gamma" and d["cv"] == 2
    lines = f.read_text().splitlines()
    assert (
        lines[0] == "arrival_s,length,start_s,finish_s,latency_s,device,batch_id"
        and len(lines) == 401
    )
    code, _, err = _run(capsys, "--service", "fixed", "--rate", "500", "--cv", "2")
    assert code == 2 and "--cv" in err
    with pytest.raises(SystemExit) as e:  # argparse refuses a bad --rate: exit 2, one line
        _run(capsys, "--service", "fixed", "--rate", "900:100:50")
    assert e.value.code == 2 and "START <= STOP" in capsys.readouterr().err


def test_a_delay_longer_than_the_run_is_not_stable(capsys):
    """Batches that only leave at the delay: almost nothing is served within the run."""
    d = _json(
        capsys,
        "--service",
        "fixed",
        "--service-ms",
        "1",
        "--rate",
        "100",
        "--requests",
        "1000",
        "--max-delay-ms",
        "1e300",
    )
    assert d["stable"] is False and "offered" in d["unstable_reason"]


def test_serve_generation_prints_ttft_and_per_token_tbt(capsys):
    """``--output-tokens`` serves generation: the table and the JSON carry TTFT and TBT, the
    JSON the same numbers as ``simulate_generation`` on the same seeded inputs."""
    gen = [
        "--chip",
        "a100-80gb",
        "--model",
        "gpt2",
        "--max-batch",
        "8",
        "--rate",
        "20",
        "--requests",
        "300",
    ]
    code, out, _ = _run(capsys, *gen, "--policy", "continuous", "--output-tokens", "8:64")
    assert code == 0 and "TTFT p99 s" in out and "TBT p99 s" in out
    d = _json(
        capsys, *gen, "--policy", "continuous", "--output-tokens", "8:64", "--chunk-tokens", "64"
    )
    assert d["tbt_p99_s"] >= d["tbt_p50_s"] > 0 and "prefill chunks of 64" in d["policy"]
    d = _json(capsys, *gen, "--policy", "static", "--output-tokens", "16")
    assert d["ttft_p50_s"] > 0 and d["served"] == 300
    for bad, msg in (
        (("--policy", "dynamic", "--output-tokens", "4"), "continuous or static"),
        (("--policy", "continuous", "--output-tokens", "9:3"), "LO:HI"),
        (("--policy", "continuous"), "--output-tokens"),
    ):
        code, _, err = _run(capsys, *gen, *bad)
        assert code == 2 and msg in err and "Traceback" not in err


def test_serve_builds_only_the_lengths_it_reads_with_the_same_results(
    tmp_path, monkeypatch, capsys
):
    """With the full table not cached, ``serve`` builds the chip's table only up to its longest
    request (rounded up to the length step): the same cells bit for bit, so the same results."""
    import numpy as np

    from ipusim.serving import tables

    monkeypatch.setenv("IPUSIM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tables, "_memory", {})
    args = ("--rate", "500", "--requests", "3000", "--max-batch", "8")
    short = _json(capsys, *args)
    with tables.only_cached():
        part = serving.chip_service("gc200", "bert-base", max_batch=8, max_len=128)
        with pytest.raises(tables.NotCached):
            serving.chip_service("gc200", "bert-base", max_batch=8)
    full = serving.chip_service("gc200", "bert-base", max_batch=8)  # built now
    assert np.array_equal(full.table[:, :129], part.table)
    assert _json(capsys, *args) == short  # now from the full table


@pytest.mark.parametrize(
    "run",
    [
        ("--chip", "a100-80gb", "--policy", "continuous"),
        ("--chip", "a100-80gb", "--policy", "static"),
        ("--prefill-chip", "a100-80gb", "--decode-chip", "a100-40gb"),
    ],
)
def test_serve_generation_builds_only_the_lengths_it_reads_with_the_same_results(
    run, tmp_path, monkeypatch, capsys
):
    """With the full generation tables not cached, a generation ``serve`` builds them only up to
    its longest prompt and context (``serving.generation.table_lengths``): the same results as
    from the full tables, which it then uses once they are cached."""
    from ipusim.serving import tables

    monkeypatch.setenv("IPUSIM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tables, "_memory", {})
    args = (
        *run,
        "--output-tokens",
        "8:40",
        "--rate",
        "20",
        "--requests",
        "400",
        "--max-batch",
        "4",
    )
    built = []
    real = serving.generation_model
    monkeypatch.setattr(
        serving, "generation_model", lambda *a, **k: built.append(k) or real(*a, **k)
    )
    short = _json(capsys, *args)
    shorts = [k for k in built if "max_ctx" in k]  # the rest: looked up in the cache, not there
    assert len(shorts) == (2 if "--prefill-chip" in run else 1)
    assert all(k["max_ctx"] <= 192 and k["max_prompt"] <= 128 for k in shorts)
    mixed = "--prefill-chip" not in run
    for chip in {run[1], run[3]} - {"continuous", "static"}:  # the full tables, cached now
        real(chip, "gpt2", max_batch=4, mixed=mixed)
    built.clear()
    assert _json(capsys, *args) == short
    assert built and all("max_ctx" not in k for k in built)


def test_table_length_rounds_up_to_the_column_step_and_is_none_for_the_full_table():
    from ipusim.serving.service import LEN_STEP, table_length

    assert LEN_STEP == 16
    assert table_length("bert-base", 128) == 128 and table_length("bert-base", 129) == 144
    assert table_length("bert-base", 500) is None  # 512 = bert-base's max_positions: the full table
    with pytest.raises(ValueError, match="longest"):
        table_length("bert-base", 0)
