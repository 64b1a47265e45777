"""LLM request traces (CSV and JSON Lines, Azure layout) and the vLLM-named serving metrics."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from ipusim import cli, policies, serving, traffic
from ipusim.serving import llm_metrics

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "traces" / "sample_llm.csv"


def test_azure_csv_dates_become_seconds_from_the_first_request(tmp_path):
    p = tmp_path / "azure.csv"
    p.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n"
        "2023-11-16 18:15:47.0000000,879,20\n"
    )
    t, i, o = traffic.load(p)
    np.testing.assert_allclose(t, [0.0, 0.31941, 4.314579], atol=1e-6)  # sorted by arrival
    assert i.tolist() == [374, 879, 396] and o.tolist() == [44, 20, 109]


def test_jsonl_and_column_mapping(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text(
        '{"timestamp": 1500, "input_length": 10, "output_length": 5}\n'
        '{"timestamp": 500, "input_length": 20, "output_length": 7}\n'
    )
    t, i, o = traffic.load(p, time_unit="ms")
    assert t.tolist() == [0.5, 1.5] and i.tolist() == [20, 10] and o.tolist() == [7, 5]
    q = tmp_path / "odd.csv"
    q.write_text("when,p,g\n0.5,10,3\n")
    cols = traffic.parse_columns("time=when,input=p,output=g")
    assert [x.tolist() for x in traffic.load(q, columns=cols)] == [[0.5], [10], [3]]
    with pytest.raises(ValueError, match="needs columns"):
        traffic.load(q)


def test_the_legacy_layout_has_no_output_lengths(tmp_path):
    p = tmp_path / "old.csv"
    p.write_text("arrival_s,length\n0.0,128\n0.1,64\n")
    t, i, o = traffic.load(p)
    assert t.tolist() == [0.0, 0.1] and i.tolist() == [128, 64] and o is None


@pytest.mark.parametrize(
    "body, match",
    [
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n0,10,5\n1,ten,5\n",
            "line 3: input length 'ten'",
        ),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n0,10,5\n1,10,0\n", "line 3: output length '0'"),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n0,10,5\nyesterday,10,5\n",
            "line 3: arrival time 'yesterday'",
        ),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n0,10\n", "line 2: 2 field"),
    ],
)
def test_a_bad_row_is_refused_with_its_line_number(tmp_path, body, match):
    p = tmp_path / "bad.csv"
    p.write_text(body)
    with pytest.raises(ValueError, match=match):
        traffic.load(p)


def test_the_shipped_sample_is_what_the_seeded_generator_writes(tmp_path):
    p = tmp_path / "s.csv"
    traffic.write_csv(p, traffic.synthetic())
    assert p.read_text() == SAMPLE.read_text(), (
        "regenerate with: python -m ipusim.traffic examples/traces/sample_llm.csv"
    )


def _gen_result(arr, prompts, outs):
    gen = serving.generation_model("gc200", "gpt2", max_batch=8)
    pol = policies.make("continuous", max_batch=8, kv_capacity_tokens=200_000)
    return serving.simulate_generation(
        np.asarray(arr, float), np.asarray(prompts), np.asarray(outs), pol, gen
    )


def test_llm_metrics_hold_their_identities():
    """E2EL = TTFT + TPOT x (output - 1) per request; the token-weighted mean ITL is the total decode
    time over the tokens after the first; goodput counts only requests within every SLO."""
    rng = np.random.default_rng(3)
    n = 60
    arr = np.cumsum(rng.exponential(0.01, n))
    prompts, outs = rng.integers(16, 200, n), rng.integers(1, 60, n)
    res = _gen_result(arr, prompts, outs)
    per = llm_metrics.per_request(res)
    many = outs > 1
    np.testing.assert_allclose(
        per["e2el"][many], per["ttft"][many] + per["tpot"][many] * (outs[many] - 1), rtol=1e-9
    )
    assert np.isnan(per["tpot"][~many]).all()
    d = llm_metrics.llm_metrics(res, goodput_slos_ms={})
    decode_s = np.sum(res.finish_s - res.first_token_s)
    assert d["mean_itl_ms"] == pytest.approx(decode_s / np.sum(outs - 1) * 1e3, rel=1e-9)
    assert d["request_goodput"] == pytest.approx(
        d["request_throughput"], rel=1e-12
    )  # no SLO: all good
    assert d["p50_ttft_ms"] <= d["p90_ttft_ms"] <= d["p95_ttft_ms"] <= d["p99_ttft_ms"]
    assert d["total_output_tokens"] == int(outs.sum())
    assert d["output_throughput"] == pytest.approx(
        outs.sum() / (res.finish_s.max() - arr[0]), rel=1e-12
    )
    cut = float(np.median(per["ttft"])) * 1e3
    strict = llm_metrics.llm_metrics(res, goodput_slos_ms={"ttft": cut})
    within = int(np.sum(per["ttft"] * 1e3 <= cut))
    assert strict["request_goodput"] == pytest.approx(within / d["duration"], rel=1e-12)


def _main(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(list(argv))
    return rc, out.getvalue()


def test_serve_a_trace_reports_vllm_metrics_and_one_csv_row_per_request(tmp_path):
    rows = traffic.synthetic(40, rate_per_s=20.0, seed=1)
    p = tmp_path / "t.csv"
    traffic.write_csv(p, rows)
    rc, out = _main(
        "serve",
        "--trace",
        str(p),
        "--json",
        "--csv",
        str(tmp_path / "r.csv"),
        "--goodput",
        "ttft:500",
        "tpot:50",
    )
    assert rc == 0
    d = json.loads(out)
    for m in llm_metrics.METRICS:
        for s in ("mean", "median", "p90", "p95", "p99"):
            assert np.isfinite(d[f"{s}_{m}_ms"]), (s, m)
    assert d["completed"] == 40 and d["goodput_slos_ms"] == {"ttft": 500.0, "tpot": 50.0}
    assert d["total_output_tokens"] == sum(r["GeneratedTokens"] for r in rows)
    with open(tmp_path / "r.csv") as f:
        got = list(csv.DictReader(f))
    assert len(got) == 40
    assert {
        "arrival_s",
        "start_s",
        "first_token_s",
        "finish_s",
        "input_tokens",
        "output_tokens",
        "device",
    } <= set(got[0])
    for r in got:
        assert (
            float(r["arrival_s"])
            <= float(r["start_s"])
            < float(r["first_token_s"])
            <= float(r["finish_s"])
        )
