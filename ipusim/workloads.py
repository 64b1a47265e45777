"""Transformer shapes and the op list of one step (forward, decode, or training).

A *step* is what a machine runs for one batch: a list of ops, each with its FLOPs
and the bytes it moves (weights, activations read and written, KV cache). The
machine models (``roofline``, ``tiles``, ``gpu``) turn a step into time and energy.

Conventions (all counts are for the whole batch, summed over identical layers):

* A matmul of an (m x k) by a (k x n) matrix costs ``2 m k n`` FLOPs.
* Attention is computed per sequence under its own mask: a sequence of ``l`` tokens
  costs ``2 l^2 d_head`` FLOPs per head for the scores and the same for the context,
  so a padded batch pays for ``L^2`` per row and a packed or unpadded one for
  ``sum(l_i^2)``. The full square is counted, causal or not, as dense kernels do.
* Element-wise ops (softmax, layer norm, activation) carry a few FLOPs per element;
  they matter for bytes moved, not for FLOPs.
* ``dtype_bytes`` (2 for FP16/BF16) sizes weights and activations.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from . import limits
from ._validate import boolean_fields, choice, lengths_array, positive


@dataclass(frozen=True)
class TransformerConfig:
    """Shape of a transformer. Every count is a plain integer; see ``params`` for the total."""

    name: str
    kind: str  # "encoder" (BERT: bidirectional, classification) or "decoder" (GPT: generation)
    layers: int  # transformer blocks
    d_model: int  # hidden size
    heads: int  # attention (query) heads
    d_ff: int  # feed-forward inner size
    vocab: int  # vocabulary size
    max_positions: int  # longest sequence the model accepts, tokens
    kv_heads: int = 0  # key/value heads (grouped-query attention); 0 means = heads
    gated_mlp: bool = False  # SwiGLU-style MLP with three matrices (Llama)
    learned_positions: bool = True  # learned position table (BERT, GPT); False for RoPE (Llama)
    tied_embeddings: bool = True  # output head shares the token embedding
    type_vocab: int = 0  # BERT token-type embeddings
    biases: bool = True  # linear layers carry biases (False for Llama)
    published_params: float = 0.0  # parameter count as published, for checks (0: none)
    source: str = ""  # where the shape and the published count come from
    d_head: int = (
        0  # width of one attention head; 0 means d_model // heads (a shard keeps the full width)
    )
    embedding: bool = (
        True  # holds the embedding tables (False: a later pipeline stage, see ``shard``)
    )
    head: bool = (
        True  # holds the final norm and pooler / LM head (False: an earlier pipeline stage)
    )

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(
                f"TransformerConfig.name must be a non-empty string, got {self.name!r}"
            )
        choice("TransformerConfig.kind", self.kind, ("encoder", "decoder"))
        for f in ("layers", "d_model", "heads", "d_ff", "vocab", "max_positions"):
            positive(
                f"TransformerConfig.{f}",
                getattr(self, f),
                integer=True,
                at_most=2**40,
                why="model dimensions this large overflow the FLOP and byte counts",
            )
        limits.check_sequence_length("TransformerConfig.max_positions", self.max_positions)
        boolean_fields(self)
        positive("TransformerConfig.kv_heads", self.kv_heads, integer=True, allow_zero=True)
        positive("TransformerConfig.type_vocab", self.type_vocab, integer=True, allow_zero=True)
        positive("TransformerConfig.d_head", self.d_head, integer=True, allow_zero=True)
        if not self.d_head and self.d_model % self.heads:
            raise ValueError(
                f"TransformerConfig.d_model ({self.d_model}) must be divisible by heads ({self.heads})"
            )
        if self.kv_heads and self.heads % self.kv_heads:
            raise ValueError(
                f"TransformerConfig.heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})"
            )

    # Shape helpers and parameter counts: computed once per config (it is frozen), as the
    # machine models read them for every op of every step (claim 10 read head_dim 120k times)
    @functools.cached_property
    def head_dim(self) -> int:
        return self.d_head or self.d_model // self.heads

    @functools.cached_property
    def q_dim(self) -> int:
        """Width of the query projection (and of the attention output): heads x head width."""
        return self.heads * self.head_dim

    @functools.cached_property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    @functools.cached_property
    def kv_dim(self) -> int:
        """Width of the key (or value) projection."""
        return self.n_kv_heads * self.head_dim

    # Parameter counts
    @functools.cached_property
    def layer_matmul_params(self) -> int:
        """Weights of one block's matrices (no biases, no norms)."""
        d, f, q = self.d_model, self.d_ff, self.q_dim
        attn = d * q + 2 * d * self.kv_dim + q * d
        mlp = (3 if self.gated_mlp else 2) * d * f
        return attn + mlp

    @functools.cached_property
    def layer_params(self) -> int:
        """All parameters of one block: matrices, biases, norms."""
        d, f = self.d_model, self.d_ff
        p = self.layer_matmul_params
        if self.biases:
            p += self.q_dim + 2 * self.kv_dim + d + (2 * f if self.gated_mlp else f) + d
        p += 2 * (2 * d if self.biases else d)  # two norms: LayerNorm (scale+shift) or RMSNorm
        return p

    @functools.cached_property
    def embedding_params(self) -> int:
        if not self.embedding:
            return 0
        d = self.d_model
        p = self.vocab * d + self.type_vocab * d
        if self.learned_positions:
            p += self.max_positions * d
        return p

    @functools.cached_property
    def head_params(self) -> int:
        """Parameters after the last block: final norm, pooler (encoder) or untied LM head."""
        if not self.head:
            return 0
        d = self.d_model
        norm = 2 * d if self.biases else d
        if self.kind == "encoder":
            return norm + d * d + d  # embedding LayerNorm + pooler (BERT has no final norm)
        # a tied head on a stage without the embedding keeps its own copy of the table
        return norm + (0 if self.tied_embeddings and self.embedding else self.vocab * d)

    @functools.cached_property
    def params(self) -> int:
        """Total parameters."""
        return self.embedding_params + self.layers * self.layer_params + self.head_params

    @property
    def nonembedding_matmul_params(self) -> int:
        """Weights every token multiplies through: the blocks' matrices (Kaplan et al.'s N)."""
        return self.layers * self.layer_matmul_params

    def weight_bytes(self, dtype_bytes: int = 2) -> float:
        return float(self.params * dtype_bytes)

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """KV-cache bytes one token holds across all layers."""
        return 2 * self.layers * self.kv_dim * dtype_bytes

    def replace(self, **changes) -> TransformerConfig:
        return dataclasses.replace(self, **changes)

    def __repr__(self):
        return (
            f"TransformerConfig({self.name!r}: {self.kind}, {self.layers} layers, d={self.d_model}, "
            f"{self.heads} heads"
            + (f" ({self.n_kv_heads} KV)" if self.kv_heads else "")
            + f", d_ff={self.d_ff}, vocab={self.vocab}, {self.params / 1e6:,.1f}M params)"
        )


_MODELS = {
    "bert-base": TransformerConfig(
        "bert-base",
        "encoder",
        12,
        768,
        12,
        3072,
        30522,
        512,
        type_vocab=2,
        published_params=110e6,
        source="Devlin et al. 2019 (BERT), Table/§3: BERT-BASE 110M",
    ),
    "bert-large": TransformerConfig(
        "bert-large",
        "encoder",
        24,
        1024,
        16,
        4096,
        30522,
        512,
        type_vocab=2,
        published_params=340e6,
        source="Devlin et al. 2019 (BERT): BERT-LARGE 340M",
    ),
    "gpt2": TransformerConfig(
        "gpt2",
        "decoder",
        12,
        768,
        12,
        3072,
        50257,
        1024,
        published_params=124e6,
        source="Radford et al. 2019 (GPT-2 small, 124M as released)",
    ),
    "llama-2-7b": TransformerConfig(
        "llama-2-7b",
        "decoder",
        32,
        4096,
        32,
        11008,
        32000,
        4096,
        gated_mlp=True,
        learned_positions=False,
        tied_embeddings=False,
        biases=False,
        published_params=6.74e9,
        source="Touvron et al. 2023 (Llama 2), model card: 6.74B",
    ),
    "llama-2-70b": TransformerConfig(
        "llama-2-70b",
        "decoder",
        80,
        8192,
        64,
        28672,
        32000,
        4096,
        kv_heads=8,
        gated_mlp=True,
        learned_positions=False,
        tied_embeddings=False,
        biases=False,
        published_params=68.98e9,
        source="Touvron et al. 2023 (Llama 2), model card: 68.98B (GQA, 8 KV heads)",
    ),
    "gpt-3-175b": TransformerConfig(
        "gpt-3-175b",
        "decoder",
        96,
        12288,
        96,
        4 * 12288,
        50257,
        2048,
        published_params=175e9,
        source="Brown et al. 2020 (GPT-3), Table 2.1: 175.0B",
    ),
}

MODELS = tuple(_MODELS)


def model(name: str | TransformerConfig) -> TransformerConfig:
    """The preset model called ``name``, the model in the file ``name`` (.toml/.json), or a Hugging
    Face config given as ``hf:PATH/config.json`` (see ``ipusim.specfiles``); a config is returned unchanged."""
    if isinstance(name, TransformerConfig):
        return name
    key = str(name).lower()
    if key not in _MODELS:
        from . import specfiles  # model files and hf:PATH configs

        if specfiles.is_spec_path(name):
            return specfiles.load_model(name, TransformerConfig)
        raise ValueError(
            f"unknown model preset {name!r}; valid: {', '.join(MODELS)}, a model file "
            "(.toml/.json; python -m ipusim schema model), or hf:PATH/config.json"
        )
    return _MODELS[key]


def shard(
    model_or_name,
    *,
    tensor: int = 1,
    layers: int | None = None,
    first: bool = True,
    last: bool = True,
) -> TransformerConfig:
    """The part of a model one chip holds under tensor and pipeline parallelism (Megatron-LM style).

    ``tensor``: chips a layer is split over. Each holds ``heads / tensor`` query heads (full head
    width), ``kv_heads / tensor`` key/value heads (or one, replicated, when ``tensor`` exceeds
    them), ``d_ff / tensor`` of the MLP and ``ceil(vocab / tensor)`` rows of the embedding and LM
    head; the residual stream (``d_model``), norms and position tables stay whole on every chip.
    ``layers``: blocks in this pipeline stage (default all); ``first`` / ``last``: the stage
    holds the embedding / the final norm and head. The matmul FLOPs of ``tensor`` shards add up
    to the whole model's; the all-reduces that join them are priced by ``ipusim.placement``.
    """
    cfg = model(model_or_name)
    t = positive("tensor", tensor, integer=True)
    n = cfg.layers if layers is None else positive("layers", layers, integer=True)
    if n > cfg.layers:
        raise ValueError(f"layers={n} exceeds {cfg.name}'s {cfg.layers} layers")
    if cfg.heads % t or cfg.d_ff % t:
        raise ValueError(
            f"tensor={t} must divide {cfg.name}'s heads ({cfg.heads}) and d_ff ({cfg.d_ff})"
        )
    kv = cfg.n_kv_heads
    if kv % t and t % kv:
        raise ValueError(
            f"tensor={t} must divide, or be a multiple of, {cfg.name}'s {kv} key/value heads"
        )
    heads = cfg.heads // t
    kv_shard = max(1, kv // t)
    if t == 1 and n == cfg.layers and first and last:
        return cfg
    return cfg.replace(
        name=f"{cfg.name}[t{t} L{n}{' first' if first else ''}{' last' if last else ''}]",
        layers=n,
        heads=heads,
        kv_heads=0 if kv_shard == heads else kv_shard,
        d_ff=cfg.d_ff // t,
        vocab=-(-cfg.vocab // t),
        d_head=cfg.head_dim,
        embedding=first,
        head=last,
        published_params=0.0,
        source=f"shard of {cfg.name}",
    )


# ---------------------------------------------------------------------------------------------
# Ops and steps
# ---------------------------------------------------------------------------------------------

OP_KINDS = ("matmul", "attention", "softmax", "norm", "activation", "embedding")


@dataclass(frozen=True)
class Op:
    """One op of a step, summed over the ``count`` identical layers it appears in.

    ``m, k, n`` give the matmul shape of one instance for matmuls; for attention ops
    ``groups`` independent (l x d_head) products are run per sequence and head, and
    ``m = n`` is the longest row length.
    """

    name: str  # e.g. "ffn_up"
    kind: str  # one of OP_KINDS
    count: int  # identical instances in the step (usually the number of layers)
    flops: float  # FLOPs of all instances
    weight_bytes: float  # parameter bytes read, all instances
    act_read_bytes: float  # activation bytes read, all instances
    act_write_bytes: float  # activation bytes written, all instances
    kv_bytes: float = 0.0  # KV-cache bytes read (decode) or written (prefill), all instances
    m: int = 0  # rows of the left operand (tokens), one instance
    k: int = 0  # contraction size, one instance
    n: int = 0  # columns of the right operand, one instance
    groups: int = 1  # independent products per instance (heads x sequences for attention)

    @property
    def bytes(self) -> float:
        """All bytes the op must touch at least once (weights + activations + KV)."""
        return self.weight_bytes + self.act_read_bytes + self.act_write_bytes + self.kv_bytes

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per byte touched."""
        return self.flops / self.bytes if self.bytes else float("inf")

    def per_instance(self) -> Op:
        """The same op for one layer (``count = 1``)."""
        c = self.count
        return dataclasses.replace(
            self,
            count=1,
            flops=self.flops / c,
            weight_bytes=self.weight_bytes / c,
            act_read_bytes=self.act_read_bytes / c,
            act_write_bytes=self.act_write_bytes / c,
            kv_bytes=self.kv_bytes / c,
        )


PHASES = ("forward", "prefill", "decode", "train")


@dataclass(frozen=True)
class Step:
    """The ops of one step of ``model`` over a batch of sequences.

    ``lengths`` are the real tokens of each sequence. ``row_len`` is the padded length
    (every row costs ``row_len`` tokens) or 0 when the batch runs unpadded or packed.
    For ``phase == "decode"``, ``lengths`` are the context lengths (cached tokens plus
    the new one) and each sequence contributes one new token.
    """

    model: TransformerConfig
    phase: str
    lengths: np.ndarray
    row_len: int
    dtype_bytes: int
    ops: tuple

    @property
    def batch(self) -> int:
        return int(self.lengths.size)

    @property
    def real_tokens(self) -> int:
        """Tokens of real content processed (new tokens for decode)."""
        return self.batch if self.phase == "decode" else int(self.lengths.sum())

    @property
    def tokens(self) -> int:
        """Token positions computed, padding included."""
        if self.phase == "decode":
            return self.batch
        return self.batch * self.row_len if self.row_len else self.real_tokens

    @property
    def flops(self) -> float:
        return float(sum(o.flops for o in self.ops))

    @property
    def bytes(self) -> float:
        return float(sum(o.bytes for o in self.ops))

    @property
    def weight_bytes(self) -> float:
        return float(sum(o.weight_bytes for o in self.ops))

    @property
    def kv_bytes(self) -> float:
        return float(sum(o.kv_bytes for o in self.ops))

    @property
    def padding_fraction(self) -> float:
        """Share of computed token positions that are padding."""
        return 1.0 - self.real_tokens / self.tokens

    def by_kind(self) -> dict:
        """FLOPs and bytes summed per op kind."""
        out = {}
        for o in self.ops:
            d = out.setdefault(o.kind, {"flops": 0.0, "bytes": 0.0})
            d["flops"] += o.flops
            d["bytes"] += o.bytes
        return out

    def table(self) -> list[dict]:
        """One dict per op: name, kind, count, GFLOP, MB moved, intensity."""
        return [
            {
                "op": o.name,
                "kind": o.kind,
                "count": o.count,
                "gflop": o.flops / 1e9,
                "mbytes": o.bytes / 1e6,
                "flop_per_byte": o.intensity,
            }
            for o in self.ops
        ]

    def to_dict(self) -> dict:
        return {
            "model": self.model.name,
            "phase": self.phase,
            "batch": self.batch,
            "row_len": self.row_len,
            "real_tokens": self.real_tokens,
            "tokens": self.tokens,
            "flops": self.flops,
            "bytes": self.bytes,
            "weight_bytes": self.weight_bytes,
            "kv_bytes": self.kv_bytes,
            "ops": self.table(),
        }

    def __repr__(self):
        pad = f"padded to {self.row_len}" if self.row_len else "unpadded"
        return (
            f"Step({self.model.name}, {self.phase}, batch {self.batch}, {pad}: "
            f"{self.real_tokens} real tokens, {len(self.ops)} ops, {self.flops / 1e9:,.1f} GFLOP, "
            f"{self.bytes / 1e6:,.1f} MB touched)"
        )


# The two op builders below are memoised (ops are frozen values): a serving table's steps share
# most of their shapes (the LM head's rows are the batch, a GEMM's the token count), and building
# a frozen Op costs more than looking one up. ``typed``: 3 and np.int64(3) give ops whose fields
# keep the type they were given, as unmemoised.
_OPS_MEMO = 4096


def clear_op_cache() -> None:
    """Forget the memoised ops (the tests build ops afresh to compare)."""
    matmul_op.cache_clear()
    _elementwise.cache_clear()


@functools.lru_cache(maxsize=_OPS_MEMO, typed=True)
def matmul_op(name, count, m, k, n, dt, *, weights=True):
    """``count`` matmuls of (``m`` x ``k``) @ (``k`` x ``n``), ``dt`` bytes per element, as one ``Op``.

    FLOPs count a multiply-add as two. The (``k`` x ``n``) operand is a weight when ``weights``
    (read as weight bytes), else an activation (read as activation bytes); the output is
    written once. The tile planner and its calibration build their single-matmul steps with it.
    """
    return Op(
        name,
        "matmul",
        count,
        flops=count * 2.0 * m * k * n,
        weight_bytes=count * float(k * n * dt) if weights else 0.0,
        act_read_bytes=count * float(m * k * dt) + (0.0 if weights else count * float(k * n * dt)),
        act_write_bytes=count * float(m * n * dt),
        m=m,
        k=k,
        n=n,
    )


@functools.lru_cache(maxsize=_OPS_MEMO, typed=True)
def _elementwise(name, kind, count, elements, flops_per_element, dt, *, reads=1):
    return Op(
        name,
        kind,
        count,
        flops=count * float(elements * flops_per_element),
        weight_bytes=0.0,
        act_read_bytes=count * float(reads * elements * dt),
        act_write_bytes=count * float(elements * dt),
        m=int(elements),
    )


def step(
    model_or_name,
    lengths,
    *,
    phase: str = "forward",
    pad_to: int | None = None,
    dtype_bytes: int = 2,
) -> Step:
    """Build the op list of one step.

    Parameters
    ----------
    model_or_name : preset name or ``TransformerConfig``
    lengths : int or sequence of int
        Tokens per sequence (for ``decode``: context length including the new token).
    phase : "forward" (encoder or full-sequence pass), "prefill" (decoder prompt pass,
        writes the KV cache), "decode" (one new token per sequence, reads the KV cache),
        or "train" (forward + backward: 3x the forward FLOPs, see ``footprint.training_footprint``).
    pad_to : int, optional
        Pad every sequence to this many tokens (a padded batch). ``None`` runs unpadded
        (or packed: the cost is the same under a block-diagonal mask).
    dtype_bytes : bytes per weight and activation element (2 = FP16).

    Lengths longer than the model's ``max_positions`` or than ``pad_to`` are an error.
    """
    cfg = model(model_or_name)
    choice("phase", phase, PHASES)
    if phase in ("prefill", "decode") and cfg.kind == "encoder":
        raise ValueError(
            f"phase {phase!r}: {cfg.name} is an encoder, it has no KV cache to {phase} "
            "(use forward or train)"
        )
    dt = positive("dtype_bytes", dtype_bytes, integer=True)
    if hasattr(lengths, "__len__"):
        limits.check_batch(len(lengths), name="lengths (sequences in the step)")
    lens = lengths_array("lengths", lengths, max_len=cfg.max_positions)
    if pad_to is not None:
        pad_to = positive("pad_to", pad_to, integer=True)
        if pad_to > cfg.max_positions:
            raise ValueError(
                f"pad_to={pad_to} exceeds {cfg.name}'s max_positions {cfg.max_positions}"
            )
        if lens.max() > pad_to:
            raise ValueError(f"a sequence of {lens.max()} tokens does not fit pad_to={pad_to}")
    if phase == "decode" and pad_to is not None:
        raise ValueError("pad_to applies to forward/prefill/train steps, not decode")

    L, d, h, hd, f = cfg.layers, cfg.d_model, cfg.heads, cfg.head_dim, cfg.d_ff
    kvd, q = cfg.kv_dim, cfg.q_dim
    B = lens.size
    decode = phase == "decode"
    # Tokens computed (rows of every matmul) and the attention "area" sum(l_q * l_k).
    if decode:
        T = B
        att_area = float(lens.sum())  # one query against each cached context
        row = int(lens.max())
    elif pad_to is not None:
        T = B * pad_to
        att_area = float(B) * pad_to * pad_to
        row = pad_to
    else:
        T = int(lens.sum())
        att_area = float(np.sum(lens.astype(np.float64) ** 2))
        row = int(lens.max())
    keys = float(lens.sum()) if decode else float(T)  # key/value tokens attended over

    ops = (
        [
            Op(
                "embedding",
                "embedding",
                1,
                flops=float(3 * T * d),
                weight_bytes=float(T * d * dt) * (2 if cfg.learned_positions else 1),
                act_read_bytes=0.0,
                act_write_bytes=float(T * d * dt),
                m=T,
                n=d,
            ),
        ]
        if cfg.embedding
        else []
    )
    ops += [matmul_op("qkv", L, T, d, q + 2 * kvd, dt)]
    kv_write = float(L * T * 2 * kvd * dt) if phase in ("prefill", "decode") else 0.0
    kv_read = float(L * keys * 2 * kvd * dt) if decode else 0.0
    ops += [
        Op(
            "attn_scores",
            "attention",
            L,
            flops=L * 2.0 * h * hd * att_area,
            weight_bytes=0.0,
            act_read_bytes=L * float(T * q * dt) + (0.0 if decode else L * keys * kvd * dt),
            act_write_bytes=L * float(h * att_area * dt),
            kv_bytes=kv_read / 2 + kv_write,
            m=row if not decode else 1,
            k=hd,
            n=row,
            groups=h * B,
        ),
        _elementwise("softmax", "softmax", L, h * att_area, 5, dt),
        Op(
            "attn_context",
            "attention",
            L,
            flops=L * 2.0 * h * hd * att_area,
            weight_bytes=0.0,
            act_read_bytes=L * float(h * att_area * dt) + (0.0 if decode else L * keys * kvd * dt),
            act_write_bytes=L * float(T * q * dt),
            kv_bytes=kv_read / 2,
            m=row if not decode else 1,
            k=row,
            n=hd,
            groups=h * B,
        ),
        matmul_op("attn_out", L, T, q, d, dt),
        _elementwise("norm_attn", "norm", L, T * d, 8, dt, reads=2),
        matmul_op("ffn_up", L, T, d, (2 if cfg.gated_mlp else 1) * f, dt),
        _elementwise("activation", "activation", L, T * f, 8, dt, reads=2 if cfg.gated_mlp else 1),
        matmul_op("ffn_down", L, T, f, d, dt),
        _elementwise("norm_ffn", "norm", L, T * d, 8, dt, reads=2),
    ]
    if not cfg.head:
        pass
    elif cfg.kind == "encoder":
        ops.append(matmul_op("pooler", 1, B, d, d, dt))
    else:
        ops.append(_elementwise("final_norm", "norm", 1, T * d, 8, dt))
        # Generation needs logits of the last token of each sequence only; training needs all.
        rows = T if phase == "train" else B
        ops.append(matmul_op("lm_head", 1, rows, d, cfg.vocab, dt))
    if phase == "train":
        ops = [
            dataclasses.replace(
                o,
                flops=3 * o.flops,
                act_read_bytes=3 * o.act_read_bytes,
                act_write_bytes=3 * o.act_write_bytes,
                weight_bytes=2 * o.weight_bytes,
            )
            for o in ops
        ]
    return Step(cfg, phase, lens, pad_to or 0, dt, tuple(ops))


def forward_flops_closed_form(model_or_name, seq_len: int) -> float:
    """FLOPs per token of a forward pass, closed form: ``2 N + 4 n_layer l d_attn``.

    ``N`` is the blocks' matrix weights (Kaplan et al. 2020, "Scaling Laws", Table 1, with
    the context term doubled because we count both the score and the context products
    over the full ``l x l`` square). Embeddings, norms and heads are left out.
    """
    cfg = model(model_or_name)
    return 2.0 * cfg.nonembedding_matmul_params + 4.0 * cfg.layers * seq_len * cfg.d_model
