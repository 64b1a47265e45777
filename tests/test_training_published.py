"""The training model against published runs; tolerances are fixed in ipusim.training.calibration
before the comparison (in sample: Megatron-LM GPT-3 175B; out of sample: Llama 2, Bow Pod16 BERT)."""

import pytest

from ipusim import training
from ipusim.training import calibration as cal
from ipusim.training import model as tm


def test_gpu_efficiency_is_what_its_rule_gives():
    assert cal.fit_gpu_matmul_efficiency() == tm.GPU_MATMUL_EFFICIENCY


def test_megatron_best_placement_tflops_per_gpu():
    r = training.best_placement("gpt-3-175b", "a100-80gb", 1024)
    assert r.hardware_flops_per_chip / 1e12 == pytest.approx(140.0, rel=cal.TOL_MEGATRON_TFLOPS)


def test_megatron_days_with_2021_options():
    r = training.best_placement("gpt-3-175b", "a100-80gb", 1024, recompute=("full",), sharding=(0,))
    assert r.run(3e11).days == pytest.approx(cal.MEGATRON_175B["days_300b_tokens"], rel=cal.TOL_MEGATRON_DAYS)


@pytest.mark.parametrize("name", ["llama-2-7b", "llama-2-13b", "llama-2-70b"])
def test_llama2_gpu_hours_out_of_sample(name):
    m = cal.LLAMA2_13B if name == "llama-2-13b" else name
    r = training.best_placement(m, "a100-80gb", cal.LLAMA2_CHIPS, seq_len=4096, global_batch=1024)
    hours = r.run(cal.LLAMA2_TOKENS).chip_hours
    assert hours == pytest.approx(cal.LLAMA2_GPU_HOURS[name], rel=cal.TOL_LLAMA2_GPU_HOURS)


@pytest.mark.xfail(strict=True, reason="held out and missed: the model gives 2.4x Graphcore's published "
                   "16,391 seq/s (one GEMM efficiency, from the largest square GEMM, overstates BERT-base's "
                   "small training matmuls); strict, so the test says when a better tile model closes the gap")
def test_bow_pod16_bert_base_out_of_sample():
    ref = cal.BOW_POD16_BERT_BASE
    r = training.best_placement(ref["model"], ref["chip"], ref["chips"], seq_len=ref["seq_len"])
    seq_per_s = r.tokens_per_s / ref["seq_len"]
    ratio = seq_per_s / ref["seq_per_s"]
    assert 1 / cal.TOL_BOW_BERT_FACTOR <= ratio <= cal.TOL_BOW_BERT_FACTOR
