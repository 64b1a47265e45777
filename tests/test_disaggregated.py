"""Disaggregated generation: TTFT and TPOT of one request, then two, computed by hand from the tables."""

from __future__ import annotations

import numpy as np
import pytest

from ipusim import serving, workloads
from ipusim.serving import disaggregated as D
from ipusim.serving import llm_metrics
from ipusim.serving.service import lookup_s

KVB = workloads.model("gpt2").kv_bytes_per_token()  # bytes of KV cache per token: 2 x 12 x 768 x 2


@pytest.fixture(scope="module")
def pools():
    pre = serving.generation_model("a100-80gb", "gpt2", max_batch=8, mixed=False)
    dec = serving.generation_model("gc200", "gpt2", max_batch=8, mixed=False)
    return pre, dec


def _prefill_s(pre, rows, prompt):
    return float(lookup_s(pre.prefill.table, rows, -(-prompt // pre.prefill.len_step)))


def _decode_s(dec, rows, mean_ctx):
    return float(lookup_s(dec.decode, rows, -(-mean_ctx // dec.ctx_step)))


def test_one_request(pools):
    pre, dec = pools
    p, o, link = 200, 5, 12.5e9
    res, info = D.simulate_disaggregated(
        [0.5],
        [p],
        [o],
        prefill=pre,
        decode=dec,
        kv_bytes_per_token=KVB,
        kv_link_bytes_per_s=link,
        max_batch=8,
    )
    ttft = _prefill_s(pre, 1, p)
    kv = p * KVB / link  # 200 tokens x 36,864 B = 7.37 MB over 12.5 GB/s = 0.59 ms
    decode = sum(_decode_s(dec, 1, p + k) for k in range(1, o))  # tokens 2..5 attend over p+1..p+4
    assert res.first_token_s[0] - 0.5 == pytest.approx(ttft, rel=1e-12)
    assert res.finish_s[0] - 0.5 == pytest.approx(ttft + kv + decode, rel=1e-12)
    m = llm_metrics.llm_metrics(res)
    assert m["mean_tpot_ms"] == pytest.approx((kv + decode) / (o - 1) * 1e3, rel=1e-12)
    assert m["mean_ttft_ms"] == pytest.approx(ttft * 1e3, rel=1e-12)
    assert info["kv_transfer_s"] == pytest.approx(kv, rel=1e-12)


def test_two_requests_share_a_prefill_batch_the_link_and_decode_steps(pools):
    """Both arrive at t = 0 with prompts 100 and 300, outputs 120 and 5: one prefill batch of 2 rows
    padded to 300; caches sent one after the other (the shorter prompt's first: the two prefills
    end together, FIFO by index); the first joins decode alone, the second at the next iteration
    boundary after its cache lands."""
    pre, dec = pools
    pa, pb, oa, ob = 100, 300, 120, 5
    # a link slow enough that the second cache lands about a quarter of the way through the
    # first's decode, whatever the decode chip's step time
    link = pb * KVB / (0.25 * oa * _decode_s(dec, 1, pa + 1))
    res, _ = D.simulate_disaggregated(
        [0.0, 0.0],
        [pa, pb],
        [oa, ob],
        prefill=pre,
        decode=dec,
        kv_bytes_per_token=KVB,
        kv_link_bytes_per_s=link,
        max_batch=8,
    )
    first = _prefill_s(pre, 2, pb)
    np.testing.assert_allclose(res.first_token_s, [first, first], rtol=1e-12)
    ready_a = first + pa * KVB / link
    ready_b = ready_a + pb * KVB / link
    # hand-run the decode loop: A alone until B is ready, then together
    t, ka, kb, fin = ready_a, 1, 0, {}
    while "a" not in fin or "b" not in fin:
        rows = []
        if "a" not in fin:
            rows.append(pa + ka)
        if "b" not in fin and (kb > 0 or ready_b <= t):
            kb = max(kb, 1)
            rows.append(pb + kb)
        if not rows:
            t = ready_b
            continue
        t += _decode_s(dec, len(rows), -(-sum(rows) // len(rows)))
        if "a" not in fin:
            ka += 1
            if ka == oa:
                fin["a"] = t
        if kb > 0:
            kb += 1
            if kb == ob:
                fin["b"] = t
    assert (
        fin["b"] < fin["a"]
    )  # B joined A's running batch and left it first: shared decode steps ran
    np.testing.assert_allclose(res.finish_s, [fin["a"], fin["b"]], rtol=1e-12)
    tpot = llm_metrics.per_request(res)["tpot"]
    np.testing.assert_allclose(
        tpot, [(fin["a"] - first) / (oa - 1), (fin["b"] - first) / (ob - 1)], rtol=1e-12
    )


def test_serve_cli_runs_a_trace_disaggregated(capsys):
    import json
    from pathlib import Path

    from ipusim import cli

    trace = Path(__file__).resolve().parents[1] / "examples" / "traces" / "sample_llm.csv"
    argv = ["serve", "--trace", str(trace), "--prefill-chip", "a100-80gb", "--decode-chip", "gc200"]
    assert cli.main([*argv, "--decode-count", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["prefill_chip"] == "a100-80gb gpt2" and d["decode_count"] == 2
    assert d["completed"] == 500 and 0 < d["p50_ttft_ms"] <= d["p99_ttft_ms"]
    assert d["kv_transfer_s"] > 0 and 0 < d["mean_tpot_ms"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_decode_kernel_equals_its_plain_reference(pools, seed):
    """The decode loop's Numba kernel against the former Python loop (tests/serving_reference.py):
    finish times and every gap, in order, bit for bit; a KV budget small enough to hold requests
    back and a batch cap that binds."""
    import serving_reference as R

    _, dec = pools
    rng = np.random.default_rng(seed)
    n = 300
    ready = np.sort(rng.exponential(2e-3, n)).cumsum()[rng.permutation(n)]
    prompt = rng.integers(1, 400, n)
    out = rng.integers(2, 60, n)
    first = ready - rng.uniform(0, 1e-3, n)
    tab = np.ascontiguousarray(dec.decode[:9])
    want_f, want_g = np.full(n, np.nan), []
    want = R.decode_device_reference(
        ready, prompt, out, tab, dec.ctx_step, 8, 3000, first, want_f, want_g
    )
    got_f, got_g = np.full(n, np.nan), np.empty(int((out - 1).sum()))
    busy, iters, ng, rows, _ = D._decode_device(
        ready,
        np.argsort(ready, kind="stable"),
        prompt,
        out,
        tab,
        dec.ctx_step,
        8,
        3000,
        first,
        got_f,
        got_g,
    )
    assert rows == 0 and (busy, iters) == want
    assert ng == len(want_g) == got_g.size
    np.testing.assert_array_equal(got_f, want_f)
    np.testing.assert_array_equal(got_g, np.asarray(want_g))
