"""Transformer shapes and step op lists: parameter counts, closed-form FLOPs, scaling properties.

Expected values are typed in from the papers and model cards (or written as closed forms of
the shape numbers here), never computed by ``ipusim.workloads``' own helpers.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ipusim import footprint, workloads
from ipusim.workloads import TransformerConfig

# ---------------------------------------------------------------------------------------------
# Parameter counts
# ---------------------------------------------------------------------------------------------

PUBLISHED = {  # name: published total parameters (source)
    "bert-base": 110e6,  # Devlin et al. 2019
    "bert-large": 340e6,  # Devlin et al. 2019
    "gpt2": 124e6,  # Radford et al. 2019, as released
    "llama-2-7b": 6.74e9,  # Touvron et al. 2023, model card
    "llama-2-70b": 68.98e9,  # Touvron et al. 2023, model card
    "gpt-3-175b": 175.0e9,  # Brown et al. 2020, Table 2.1
}

# Exact counts of the released checkpoints (Hugging Face transformers' num_parameters() for
# bert-base-uncased with pooler, gpt2, meta-llama/Llama-2-7b-hf and -70b-hf).
EXACT = {
    "bert-base": 109_482_240,
    "gpt2": 124_439_808,
    "llama-2-7b": 6_738_415_616,
    "llama-2-70b": 68_976_648_192,
}


def test_all_presets_are_listed():
    assert set(workloads.MODELS) == set(PUBLISHED)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_within_2_percent_of_published(name):
    m = workloads.model(name)
    assert m.params == pytest.approx(PUBLISHED[name], rel=0.02)


@pytest.mark.parametrize("name", sorted(EXACT))
def test_parameter_count_equals_released_checkpoint(name):
    assert workloads.model(name).params == EXACT[name]


def _blocks_matmul_params(L, d, f, kvd=None, gated=False):
    """Closed form of the blocks' matrix weights: Q, O (d x d), K, V (d x kvd), MLP (2 or 3 d x f)."""
    kvd = d if kvd is None else kvd
    return L * (2 * d * d + 2 * d * kvd + (3 if gated else 2) * d * f)


SHAPES = {  # name: (layers, d_model, d_ff, kv width, gated MLP), from the papers
    "bert-base": (12, 768, 3072, 768, False),
    "bert-large": (24, 1024, 4096, 1024, False),
    "gpt2": (12, 768, 3072, 768, False),
    "llama-2-7b": (32, 4096, 11008, 4096, True),
    "llama-2-70b": (80, 8192, 28672, 1024, True),  # 8 KV heads x 128
    "gpt-3-175b": (96, 12288, 49152, 12288, False),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("seq_len", [128, 512])
def test_forward_flops_per_token_match_closed_form(name, seq_len):
    """FLOPs/token = 2 N + 4 L l d (Kaplan et al. 2020 with both attention products over the
    full l x l square). Tolerance 1 %: the op list also counts embeddings, norms, softmax and
    the heads, which the closed form leaves out."""
    L, d, f, kvd, gated = SHAPES[name]
    seq_len = min(seq_len, workloads.model(name).max_positions)
    closed = 2.0 * _blocks_matmul_params(L, d, f, kvd, gated) + 4.0 * L * seq_len * d
    s = workloads.step(name, [seq_len])
    assert s.flops / seq_len == pytest.approx(closed, rel=0.01)
    assert workloads.forward_flops_closed_form(name, seq_len) == pytest.approx(closed, rel=1e-12)
    # and ~2 x parameters: the blocks are (nearly) all the parameters of the large models
    if name in ("llama-2-70b", "gpt-3-175b"):
        assert s.flops / seq_len == pytest.approx(2 * PUBLISHED[name], rel=0.03)


def test_kv_cache_bytes_per_token_closed_form():
    # 2 (K and V) x layers x kv width x 2 bytes: Llama-2-7B 512 KiB/token, Llama-2-70B (GQA) 320 KiB
    assert workloads.model("llama-2-7b").kv_bytes_per_token() == 2 * 32 * 4096 * 2 == 512 * 1024
    assert workloads.model("llama-2-70b").kv_bytes_per_token() == 2 * 80 * 1024 * 2 == 320 * 1024
    assert workloads.model("gpt-3-175b").kv_bytes_per_token(dtype_bytes=1) == 2 * 96 * 12288


# ---------------------------------------------------------------------------------------------
# Properties of the op list
# ---------------------------------------------------------------------------------------------

SMALL_MODELS = ["bert-base", "gpt2", "llama-2-7b"]
lengths_st = st.lists(st.integers(1, 512), min_size=1, max_size=12)


def _non_weight_bytes(s):
    return sum(o.bytes - o.weight_bytes for o in s.ops)


def _matmul_weight_bytes(s):
    return sum(o.weight_bytes for o in s.ops if o.kind == "matmul")


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(SMALL_MODELS),
    lens=lengths_st,
    k=st.integers(2, 5),
    phase=st.sampled_from(["forward", "prefill", "decode", "train"]),
)
def test_flops_and_activation_bytes_scale_linearly_with_batch(name, lens, k, phase):
    """Repeating the batch k times multiplies FLOPs and activation/KV bytes by k and leaves
    the matrix weights read once (relative tolerance 1e-12: float rounding only)."""
    assume(
        not (phase in ("prefill", "decode") and workloads.model(name).kind == "encoder")
    )  # no KV cache
    one = workloads.step(name, lens, phase=phase)
    many = workloads.step(name, lens * k, phase=phase)
    assert many.flops == pytest.approx(k * one.flops, rel=1e-12)
    assert _non_weight_bytes(many) == pytest.approx(k * _non_weight_bytes(one), rel=1e-12)
    assert many.kv_bytes == pytest.approx(k * one.kv_bytes, rel=1e-12)
    assert _matmul_weight_bytes(many) == _matmul_weight_bytes(one)
    assert many.batch == k * one.batch


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(SMALL_MODELS), lens=lengths_st, extra=st.integers(0, 64))
def test_padded_costs_at_least_unpadded(name, lens, extra):
    pad = min(max(lens) + extra, 512)
    unp = workloads.step(name, lens)
    pad_s = workloads.step(name, lens, pad_to=pad)
    assert pad_s.flops >= unp.flops
    assert pad_s.bytes >= unp.bytes
    assert pad_s.tokens == len(lens) * pad
    assert pad_s.real_tokens == unp.real_tokens == sum(lens)
    assert pad_s.padding_fraction == pytest.approx(1 - sum(lens) / (len(lens) * pad), abs=1e-12)
    if all(x == pad for x in lens):
        assert pad_s.flops == pytest.approx(unp.flops, rel=1e-12)
        assert pad_s.padding_fraction == 0


@settings(max_examples=40, deadline=None)
@given(lens=lengths_st)
def test_attention_flops_are_the_sum_of_squares(lens):
    """BERT-base: scores and context each cost 2 d sum(l_i^2) per layer (12 layers, d = 768)."""
    s = workloads.step("bert-base", lens)
    att = {o.name: o.flops for o in s.ops if o.kind == "attention"}
    sq = float(np.sum(np.asarray(lens, dtype=np.float64) ** 2))
    assert att["attn_scores"] == pytest.approx(12 * 2 * 768 * sq, rel=1e-12)
    assert att["attn_context"] == pytest.approx(12 * 2 * 768 * sq, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(a=st.integers(2, 256), b=st.integers(2, 256))
def test_same_tokens_more_spread_costs_more_attention_only(a, b):
    """Two batches with the same token count: the one with the larger sum of squares costs more
    attention FLOPs; every other op costs the same."""
    even = workloads.step("gpt2", [a, b])
    skew = workloads.step("gpt2", [a + b - 1, 1])
    for o_e, o_s in zip(even.ops, skew.ops, strict=True):
        if o_e.kind in ("attention", "softmax"):
            assert o_s.flops >= o_e.flops
        else:
            assert o_s.flops == pytest.approx(o_e.flops, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(["gpt2", "llama-2-7b", "llama-2-70b"]),
    ctx=st.lists(st.integers(1, 1000), min_size=1, max_size=8),
    grow=st.integers(1, 1000),
)
def test_decode_kv_bytes_grow_with_context(name, ctx, grow):
    """Decode reads every cached K and V and writes one new token's: kv bytes =
    bytes_per_token x (sum(ctx) + batch); longer contexts read more."""
    m = workloads.model(name)
    per_tok = 2 * m.layers * m.kv_dim * 2
    s = workloads.step(name, ctx, phase="decode")
    assert s.kv_bytes == pytest.approx(per_tok * (sum(ctx) + len(ctx)), rel=1e-12)
    longer = workloads.step(name, [min(c + grow, m.max_positions) for c in ctx], phase="decode")
    if sum(longer.lengths) > sum(ctx):
        assert longer.kv_bytes > s.kv_bytes
        assert longer.flops > s.flops
    assert s.tokens == s.real_tokens == len(ctx)


def test_decode_flops_per_token_closed_form():
    """One new token against a context of c: 2 N + 4 L c d (+ LM head and small ops; 2 %)."""
    L, d, f, kvd, gated = SHAPES["llama-2-7b"]
    c = 1000
    s = workloads.step("llama-2-7b", [c] * 4, phase="decode")
    closed = 2.0 * _blocks_matmul_params(L, d, f, kvd, gated) + 4.0 * L * c * d + 2.0 * d * 32000
    assert s.flops / 4 == pytest.approx(closed, rel=0.01)


def test_prefill_writes_the_kv_cache_forward_does_not():
    pre = workloads.step("llama-2-7b", [100, 300], phase="prefill")
    fwd = workloads.step("llama-2-7b", [100, 300], phase="forward")
    assert pre.kv_bytes == 512 * 1024 * 400
    assert fwd.kv_bytes == 0
    assert pre.flops == pytest.approx(fwd.flops, rel=1e-12)


def test_decoder_generation_needs_last_token_logits_only():
    fwd = workloads.step("gpt2", [64, 64])
    head = [o for o in fwd.ops if o.name == "lm_head"][0]
    assert head.flops == 2 * 2 * 768 * 50257  # two sequences, one row each


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bert-base", "gpt2", "llama-2-7b"])
def test_training_step_is_three_forward_passes(name):
    fwd = workloads.step(name, [128, 64])
    tr = workloads.step(name, [128, 64], phase="train")
    head_f = [o for o in fwd.ops if o.name != "lm_head"]
    head_t = [o for o in tr.ops if o.name != "lm_head"]
    assert sum(o.flops for o in head_t) == pytest.approx(
        3 * sum(o.flops for o in head_f), rel=1e-12
    )


def test_training_footprint_closed_forms():
    """GPT-3 175B, seq 2048: weights+grads 2+2 bytes/param, Adam 12 bytes/param (ZeRO §3.1);
    activations d (34 + 5 a s / d) bytes per token per layer (Korthikanti et al. 2022)."""
    p = workloads.model("gpt-3-175b").params
    tf = footprint.training_footprint("gpt-3-175b", seq_len=2048, tokens_per_step=2048)
    assert tf.weight_bytes == 2 * p and tf.gradient_bytes == 2 * p and tf.optimizer_bytes == 12 * p
    assert tf.weight_bytes + tf.gradient_bytes + tf.optimizer_bytes == pytest.approx(
        16 * 175e9, rel=0.01
    )
    per_layer_token = 12288 * (34 + 5 * 96 * 2048 / 12288)
    assert tf.activation_bytes == pytest.approx(per_layer_token * 96 * 2048, rel=1e-12)
    # FLOPs/token ~ 6 N + 12 L l d (3 x the forward closed form), 1 %
    closed = 3 * (2.0 * _blocks_matmul_params(96, 12288, 49152) + 4.0 * 96 * 2048 * 12288)
    assert tf.flops_per_token == pytest.approx(closed, rel=0.01)
    assert tf.flops_for(1e9) == pytest.approx(1e9 * tf.flops_per_token)
    re = footprint.training_footprint(
        "gpt-3-175b", seq_len=2048, tokens_per_step=2048, recompute=True
    )
    assert re.activation_bytes == pytest.approx(2 * 12288 * 96 * 2048, rel=1e-12)
    assert re.total_bytes < tf.total_bytes
    assert "GB" in repr(tf)


@settings(max_examples=30, deadline=None)
@given(seq=st.integers(1, 1024), tokens=st.integers(1, 10**6), k=st.integers(2, 8))
def test_training_activation_memory_scales_with_tokens(seq, tokens, k):
    a = footprint.training_footprint("gpt2", seq_len=seq, tokens_per_step=tokens)
    b = footprint.training_footprint("gpt2", seq_len=seq, tokens_per_step=k * tokens)
    assert b.activation_bytes == pytest.approx(k * a.activation_bytes, rel=1e-12)
    assert b.optimizer_bytes == a.optimizer_bytes


# ---------------------------------------------------------------------------------------------
# Custom configs, results, validation
# ---------------------------------------------------------------------------------------------


def _tiny(**kw):
    base = dict(
        name="tiny",
        kind="decoder",
        layers=2,
        d_model=64,
        heads=4,
        d_ff=256,
        vocab=1000,
        max_positions=128,
        biases=False,
        learned_positions=False,
        tied_embeddings=False,
    )
    base.update(kw)
    return TransformerConfig(**base)


def test_custom_model_counts_and_runs():
    m = _tiny()
    # embeddings 1000x64, 2 blocks x (4 x 64^2 + 2 x 64 x 256 + two RMSNorms 2 x 64), final norm 64, head 1000x64
    assert m.params == 64_000 + 2 * (4 * 64 * 64 + 2 * 64 * 256 + 2 * 64) + 64 + 64_000
    assert workloads.model(m) is m
    s = workloads.step(m, [10, 20], phase="decode")
    assert s.batch == 2 and s.real_tokens == 2
    assert m.replace(layers=4).params > m.params


def test_step_results_have_a_readable_face():
    s = workloads.step("bert-base", [100, 128], pad_to=128)
    assert "bert-base" in repr(s) and "padded to 128" in repr(s)
    d = s.to_dict()
    assert d["tokens"] == 256 and d["real_tokens"] == 228 and len(d["ops"]) == len(s.ops)
    assert set(s.by_kind()) <= set(workloads.OP_KINDS)
    assert sum(v["flops"] for v in s.by_kind().values()) == pytest.approx(s.flops)
    one = s.ops[1].per_instance()
    assert one.count == 1 and one.flops == pytest.approx(s.ops[1].flops / s.ops[1].count)


@pytest.mark.parametrize(
    ("kwargs", "msg"),
    [
        (dict(lengths=[]), "empty"),
        (dict(lengths=[0, 3]), ">= 1"),
        (dict(lengths=[1.5]), "whole"),
        (dict(lengths=[600]), "longer than the maximum 512"),
        (dict(lengths=[100], pad_to=64), "does not fit pad_to=64"),
        (dict(lengths=[100], pad_to=1024), "exceeds"),
        (dict(lengths=[100], phase="backward"), "unknown phase"),
        (dict(lengths=[100], dtype_bytes=0), "dtype_bytes"),
        (dict(lengths=[[1, 2]]), "one-dimensional"),
        (dict(lengths=[np.nan]), "NaN"),
    ],
)
def test_bad_step_inputs_raise_clearly(kwargs, msg):
    lengths = kwargs.pop("lengths")
    with pytest.raises(ValueError, match=msg):
        workloads.step("bert-base", lengths, **kwargs)


def test_decode_cannot_be_padded():
    with pytest.raises(ValueError, match="decode"):
        workloads.step("gpt2", [10], phase="decode", pad_to=16)


def test_unknown_model_lists_the_valid_names():
    with pytest.raises(ValueError, match="unknown model preset") as err:
        workloads.model("gpt-5")
    for n in workloads.MODELS:
        assert n in str(err.value)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        (dict(layers=0), "layers"),
        (dict(d_model=-64), "d_model"),
        (dict(heads=5), "divisible"),
        (dict(kv_heads=3), "kv_heads"),
        (dict(kind="vision"), "kind"),
        (dict(name=""), "name"),
        (dict(vocab=1.5), "vocab"),
        (dict(d_ff=float("nan")), "d_ff"),
    ],
)
def test_bad_configs_raise_naming_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        _tiny(**kw)


def test_training_footprint_validates():
    with pytest.raises(ValueError, match="seq_len"):
        footprint.training_footprint("bert-base", seq_len=0, tokens_per_step=10)
    with pytest.raises(ValueError, match="max_positions"):
        footprint.training_footprint("bert-base", seq_len=1024, tokens_per_step=1024)


@pytest.mark.parametrize("bad", [0, -2, 1.5, float("nan")])
def test_training_footprint_rejects_bad_dtype_bytes(bad):
    with pytest.raises(ValueError, match="dtype_bytes"):
        footprint.training_footprint("gpt2", seq_len=128, tokens_per_step=128, dtype_bytes=bad)


# ---------------------------------------------------------------------------------------------
# Shortcuts on the per-step path: the same values as the long way
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lengths",
    [[1], [128] * 8, [37, 200, 90, 512], list(range(1, 300, 7)), [5] * 64, [5] * 65],
)
def test_lengths_array_shortcut_equals_the_checked_path(lengths):
    """A list of Python ints or a 1-D integer array in range takes a shortcut (only the range
    checked); it returns what the full checks return for the same lengths as a tuple."""
    from ipusim._validate import lengths_array

    full = lengths_array("lengths", tuple(lengths), max_len=512)
    for form in (
        lengths,
        np.array(lengths, dtype=np.int64),
        np.array(lengths, dtype=np.int32),
        np.array(lengths, dtype=np.uint16),
    ):
        got = lengths_array("lengths", form, max_len=512)
        assert got.dtype == np.int64 and np.array_equal(got, full)
        if isinstance(form, np.ndarray):
            assert got is not form  # a copy, as before: the caller's array is not kept
    assert np.array_equal(lengths_array("lengths", lengths), full)  # no max_len: the global cap


@pytest.mark.parametrize(
    "bad",
    [
        [0, 5],
        [5, 513],
        [True, False],
        [],
        [[1, 2]],
        [1.5, 2.0],
        np.array([0, 3]),
        np.array([3, 600]),
    ],
)
def test_lengths_array_refuses_what_the_shortcut_does_not_take(bad):
    """Out-of-range, boolean, empty, nested or fractional lengths fail with the same message
    whether given as a list or array (the shortcut's entry form) or as a tuple."""
    from ipusim._validate import lengths_array

    with pytest.raises(ValueError) as as_given:
        lengths_array("lengths", bad, max_len=512)
    as_tuple = bad.tolist() if isinstance(bad, np.ndarray) else bad
    with pytest.raises(ValueError) as as_checked:
        lengths_array("lengths", tuple(as_tuple), max_len=512)
    assert str(as_given.value) == str(as_checked.value)


def test_step_ops_are_the_same_values_whatever_was_built_before():
    """``step`` shares the ops of equal shapes between steps (the op builders are memoised):
    every op equals one built afresh, field by field and of the same types."""
    import dataclasses

    cases = [
        ("gpt2", [300, 17, 1], "prefill", None),
        ("gpt2", [64] * 4, "decode", None),
        ("bert-base", [128] * 8, "forward", 128),
        ("bert-base", [128] * 8, "train", 128),
        ("llama-2-7b", [100, 28], "prefill", None),
    ]
    warm = [workloads.step(m, lens, phase=ph, pad_to=pad).ops for m, lens, ph, pad in cases]
    workloads.clear_op_cache()
    for (m, lens, ph, pad), ops in zip(cases, warm, strict=True):
        fresh = workloads.step(m, np.array(lens), phase=ph, pad_to=pad).ops
        assert ops == fresh
        for a, b in zip(ops, fresh, strict=True):
            for f in dataclasses.fields(a):
                assert type(getattr(a, f.name)) is type(getattr(b, f.name)), (a.name, f.name)


def test_counts_are_remembered_per_config_and_follow_its_fields():
    """A config's shape helpers and parameter counts are worked out once (it is frozen): a
    replaced config has its own, and a pickled one the same, equal and hashing alike."""
    import pickle

    m = workloads.model("llama-2-7b")
    assert (m.params, m.kv_dim, m.head_dim) == (m.params, 32 * 128, 128)
    half = m.replace(layers=16, kv_heads=8)
    assert half.kv_dim == 8 * 128 and half.params < m.params
    assert half.params == half.embedding_params + 16 * half.layer_params + half.head_params
    back = pickle.loads(pickle.dumps(m))
    assert back == m and hash(back) == hash(m) and back.params == m.params
