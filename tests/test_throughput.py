"""``serving.encoder_throughput``: padded, unpadded and packed batches timed by the machine model."""

import numpy as np
import pytest

from ipusim import lengths, machine, packing, serving, workloads


def test_encoder_throughput_modes_add_up():
    lens = lengths.long_text_mix(0.4).sample(300, seed=5)
    pad = serving.encoder_throughput("a100-40gb", lens, "pad", batch=64)
    batches = [lens[i : i + 64] for i in range(0, 300, 64)]
    expect = sum(
        machine.step_time_s("a100-40gb", workloads.step("bert-base", b, pad_to=512))
        for b in batches
    )
    assert pad.time_s == pytest.approx(expect, rel=1e-12)
    assert pad.batches == 5 and pad.computed_tokens == 300 * 512
    un = serving.encoder_throughput("a100-40gb", lens, "unpadded", batch=64)
    # unpadded batches of 64 cost what the batches cost run unpadded, pooler and all
    assert un.flops == pytest.approx(
        sum(workloads.step("bert-base", b).flops for b in batches), rel=1e-12
    )
    assert un.computed_tokens == un.real_tokens == int(lens.sum())
    pk = serving.encoder_throughput("gc200", lens, "packed", batch=16, max_per_row=16)
    rows = packing.pack(lens, 512, "spfhp", max_per_row=16).rows
    assert pk.computed_tokens == rows * 512 and pk.batches == -(-rows // 16)
    # packed rows cost the unpadded work plus their padding tails: never less than unpadded
    assert pk.flops >= workloads.step("bert-base", lens).flops
    assert pad.requests_per_s < un.requests_per_s


def test_encoder_throughput_rejects_bad_mode():
    with pytest.raises(ValueError, match="unknown mode"):
        serving.encoder_throughput("gc200", [10, 20], "squeeze")


def test_encoder_throughput_refuses_a_batch_that_does_not_fit():
    """GC200 BERT-base at 128 rows x 512 tokens does not fit (with serial passes 89
    rows fit on chip and 120 with the weights streamed): a ValueError, not a number."""
    with pytest.raises(ValueError, match="does not fit"):
        serving.encoder_throughput("gc200", [512] * 128, "pad", batch=128, max_len=512)
    t = serving.encoder_throughput("gc200", [512] * 16, "pad", batch=16, max_len=512)
    assert np.isfinite(t.time_s) and t.time_s > 0


def test_unpadded_on_a_gpu_pays_bytetransformer_costs():
    """A GPU's unpadded batches cost ``gpu.remove_padding`` with ByteTransformer's kernels, the
    input padded to ``max_len``: more than the bare unpadded step."""
    from ipusim import gpu

    lens = lengths.long_text_mix(0.4).sample(128, seed=5)
    un = serving.encoder_throughput("a100-40gb", lens, "unpadded", batch=64)
    expect = sum(
        gpu.remove_padding("a100-40gb", lens[i : i + 64], 512, "bytetransformer").time_s
        for i in (0, 64)
    )
    bare = sum(
        machine.step_time_s("a100-40gb", workloads.step("bert-base", lens[i : i + 64]))
        for i in (0, 64)
    )
    assert un.time_s == pytest.approx(expect, rel=1e-12) and un.time_s > bare
