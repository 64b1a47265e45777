"""``ipusim serve`` from the command line: JSON keys, theory mode, bad input."""

import json
import subprocess
import sys

import pytest

from ipusim import serving


def _run(*args):
    return subprocess.run([sys.executable, "-m", "ipusim", "serve", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def test_serve_json_keys_chip():
    out = _run("--chip", "gc200", "--model", "bert-base", "--rate", "500", "--requests", "2000",
               "--policy", "dynamic", "--max-batch", "16", "--max-delay-ms", "2", "--long-fraction", "0.4",
               "--seed", "3", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    for k in ("throughput_rps", "latency_p50_s", "latency_p99_s", "utilization", "stable"):
        assert k in d
    assert d["stable"] is True and d["served"] == 2000


def test_serve_exponential_matches_mm1():
    out = _run("--service", "exponential", "--service-ms", "10", "--rate", "50", "--requests", "200000",
               "--max-batch", "1", "--max-delay-ms", "0", "--json")
    d = json.loads(out.stdout)
    theory = serving.theory_wait_s(50, 0.01, "mm1")
    # rho = 0.5, 2*10^5 requests: relative standard error about 1%; 5% tolerance
    assert d["queueing_mean_s"] == pytest.approx(theory, rel=0.05)


def test_serve_overload_reports_unstable():
    out = _run("--service", "fixed", "--service-ms", "10", "--rate", "300", "--requests", "20000",
               "--max-batch", "1", "--max-delay-ms", "0", "--json")
    d = json.loads(out.stdout)
    assert d["stable"] is False and d["unstable_reason"]


def test_serve_lengths_file(tmp_path):
    p = tmp_path / "h.csv"
    p.write_text("length,count\n64,5\n300,1\n")
    out = _run("--rate", "200", "--requests", "500", "--lengths", str(p), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["padded_token_waste"] > 0


def test_serve_bad_value_is_one_line():
    out = _run("--rate", "-1")
    assert out.returncode == 2 and "rate_per_s" in out.stderr and "Traceback" not in out.stderr
