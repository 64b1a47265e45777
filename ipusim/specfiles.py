"""Chips and models from files: TOML or JSON spec files, and Hugging Face ``config.json`` files.

A chip file holds ``kind = "tile"`` or ``"gpu"`` and every field of ``hardware.TileChip`` or
``hardware.GpuChip`` (same names, same SI units), with an optional ``[sources]`` table (field ->
where the number comes from) and ``notes``. A model file holds the fields of
``workloads.TransformerConfig``. The schema of each file is built from the dataclass's own
fields (one schema for presets and files): pydantic checks the types and refuses unknown keys,
then the dataclass checks the values exactly as it checks a preset's (``python -m ipusim schema
chip|model|case`` prints the JSON Schema). The dataclasses are passed in, so this module sits
below ``hardware`` and ``workloads``, which read files through it.

``hf_model(path, cls)`` reads a Hugging Face ``config.json`` of the architectures the workloads model
(BERT, GPT-2, Llama/Mistral with grouped-query attention) and refuses the others, naming the key
that is not supported (for example ``num_local_experts``: a mixture of experts).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

from ._validate import read_text_file

FILE_SUFFIXES = (".toml", ".json")
HF_PREFIX = "hf:"
_TYPES = {"int": int, "float": float, "str": str, "bool": bool}
_MAX_SPEC_BYTES = 1 << 20  # a spec file is a few hundred bytes; 1 MiB is far beyond any real one


def is_spec_path(name) -> bool:
    """True when ``name`` names a spec file (ends in .toml/.json) or a Hugging Face config (``hf:...``)."""
    s = str(name)
    return s.lower().startswith(HF_PREFIX) or s.lower().endswith(FILE_SUFFIXES)


def _model_for(cls, extra: dict | None = None):
    """A strict pydantic model with one field per dataclass field (type from its annotation)."""
    from pydantic import ConfigDict, create_model

    fields = {}
    for f in dataclasses.fields(cls):
        if f.name in ("sources", "notes"):
            continue
        typ = _TYPES[str(f.type)]
        default = ... if f.default is dataclasses.MISSING else f.default
        fields[f.name] = (typ, default)
    names = {f.name for f in dataclasses.fields(cls)}
    if "sources" in names:  # a chip: field -> source key, and free notes
        fields["sources"] = (dict[str, str], {})
        fields["notes"] = (str, "")
    fields.update(extra or {})
    cfg = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, title=cls.__name__)
    return create_model(cls.__name__ + "File", __config__=cfg, **fields)


@functools.cache
@functools.lru_cache(maxsize=None)
def spec_model(cls, kind: str | None = None):
    """The pydantic model of a file holding ``cls``'s fields (a chip's ``kind`` literal when given)."""
    from typing import Literal

    return _model_for(cls, {"kind": (Literal[kind], ...)} if kind else None)


def _one_line(err) -> str:
    """The first problem of a pydantic ValidationError as ``field: what is wrong, got value``."""
    e = err.errors(include_url=False)[0]
    path = ".".join(str(x) for x in e["loc"]) or "file"
    if e["type"] == "extra_forbidden":
        return f"{path}: unknown field"
    if e["type"] == "missing":
        return f"{path}: missing (required)"
    msg = e["msg"].replace("Input should be", "expected")
    got = repr(e.get("input"))
    return f"{path}: {msg[0].lower() + msg[1:]}, got {got if len(got) <= 60 else got[:57] + '...'}"


def _read(path, what: str) -> dict:
    """The table in a TOML or JSON file (by suffix), or a ValueError naming the file."""
    import tomllib

    text = read_text_file(what, path, max_bytes=_MAX_SPEC_BYTES)
    kind = "JSON" if str(path).lower().endswith(".json") else "TOML"
    try:
        d = json.loads(text) if kind == "JSON" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as err:
        raise ValueError(f"{what} {str(path)!r} is not valid {kind}: {err}") from None
    if not isinstance(d, dict):
        raise ValueError(
            f"{what} {str(path)!r}: the top level must be a table of fields, got {type(d).__name__}"
        )
    return d


def _build(cls, model, d: dict, where: str):
    """Validate ``d`` with the pydantic ``model``, then build the dataclass (its own value checks)."""
    from pydantic import ValidationError

    try:
        v = model.model_validate(d)
    except ValidationError as err:
        raise ValueError(f"{where}: {_one_line(err)}") from None
    kw = v.model_dump()
    if "kind" not in {f.name for f in dataclasses.fields(cls)}:  # a chip's kind picks its class
        kw.pop("kind", None)
    try:
        return cls(**kw)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def chip_from_dict(d: dict, classes: dict, *, where: str = "chip"):
    """A chip from a table of fields with ``kind`` one of ``classes`` (kind -> dataclass:
    ``hardware.CHIP_CLASSES``, {"tile": TileChip, "gpu": GpuChip})."""
    kind = d.get("kind") if isinstance(d, dict) else None
    if kind not in classes:
        raise ValueError(f"{where}: kind: expected {' or '.join(map(repr, classes))}, got {kind!r}")
    return _build(classes[kind], spec_model(classes[kind], kind), d, where)


def load_chip(path, classes: dict):
    """A chip from a TOML or JSON chip file (see the module docstring); ``classes`` as
    ``chip_from_dict``."""
    return chip_from_dict(_read(path, "chip file"), classes, where=f"chip file {str(path)!r}")


def model_from_dict(d: dict, cls, *, where: str = "model"):
    """A model config (``cls``: ``workloads.TransformerConfig``) from a table of its fields."""
    return _build(cls, spec_model(cls), d, where)


def load_model(spec, cls):
    """A model config (``cls``: ``workloads.TransformerConfig``) from a TOML/JSON model file, or
    from a Hugging Face config given as ``hf:PATH``."""
    s = str(spec)
    if s.lower().startswith(HF_PREFIX):
        return hf_model(s[len(HF_PREFIX) :], cls)
    return model_from_dict(_read(s, "model file"), cls, where=f"model file {s!r}")


def chip_to_dict(c) -> dict:
    """Every field of a chip as a plain table (``kind`` first): what ``chip_from_dict`` reads."""
    d = {"kind": c.kind}
    for f in dataclasses.fields(c):
        v = getattr(c, f.name)
        d[f.name] = dict(v) if f.name == "sources" else v
    return d


def to_toml(d: dict) -> str:
    """A flat table (scalars, plus one level of string tables) as TOML; floats round-trip exactly."""

    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        return json.dumps(str(v), ensure_ascii=False)  # a JSON string is a valid TOML basic string

    lines = [f"{k} = {val(v)}" for k, v in d.items() if not isinstance(v, dict)]
    for k, v in d.items():
        if isinstance(v, dict) and v:
            lines += ["", f"[{k}]"] + [f"{json.dumps(str(kk))} = {val(vv)}" for kk, vv in v.items()]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Hugging Face config.json
# --------------------------------------------------------------------------------------------
HF_ARCHITECTURES = ("bert", "gpt2", "llama", "mistral")
_HF_REFUSED = {  # a key that changes the computation beyond what workloads.step counts, and why
    "num_local_experts": "mixture of experts (workloads model dense MLPs only)",
    "num_experts": "mixture of experts (workloads model dense MLPs only)",
    "n_routed_experts": "mixture of experts (workloads model dense MLPs only)",
    "num_experts_per_tok": "mixture of experts (workloads model dense MLPs only)",
    "moe_intermediate_size": "mixture of experts (workloads model dense MLPs only)",
    "quantization_config": "quantized weights (workloads size weights at 2 bytes, FP16/BF16)",
    "add_cross_attention": "cross-attention (workloads model self-attention only)",
}


def _hf_get(cfg: dict, key: str, where: str, default=None):
    v = cfg.get(key, default)
    if v is None:
        raise ValueError(
            f"{where}: {key}: missing (required for model_type {cfg.get('model_type')!r})"
        )
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{where}: {key}: expected a whole number, got {v!r}")
    return v


def hf_model(path, cls):
    """A model config (``cls``: ``workloads.TransformerConfig``) from a Hugging Face ``config.json`` (BERT, GPT-2, Llama/Mistral).

    The shape is read from the keys the ``transformers`` library defines for each
    architecture; anything that would make the step's FLOPs or bytes differ from the dense
    transformer ``workloads.step`` counts is refused, naming the key.
    """
    where = f"Hugging Face config {str(path)!r}"
    cfg = _read(path, "Hugging Face config")
    for key, why in _HF_REFUSED.items():
        if cfg.get(key) not in (None, False, 0):
            raise ValueError(f"{where}: {key} = {cfg[key]!r} is not supported: {why}")
    mt = cfg.get("model_type")
    if mt not in HF_ARCHITECTURES:
        raise ValueError(
            f"{where}: model_type {mt!r} is not supported; supported: {', '.join(HF_ARCHITECTURES)}"
        )
    name = Path(path).parent.name or Path(path).stem
    g = lambda key, default=None: _hf_get(cfg, key, where, default)  # noqa: E731
    src = f"Hugging Face config.json ({mt}) read by ipusim.specfiles.hf_model"
    if mt == "bert":
        if cfg.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(
                f"{where}: position_embedding_type = {cfg['position_embedding_type']!r} is not "
                "supported (only 'absolute')"
            )
        return model_from_dict(
            dict(
                name=name,
                kind="encoder",
                layers=g("num_hidden_layers"),
                d_model=g("hidden_size"),
                heads=g("num_attention_heads"),
                d_ff=g("intermediate_size"),
                vocab=g("vocab_size"),
                max_positions=g("max_position_embeddings"),
                type_vocab=g("type_vocab_size", 2),
                source=src,
            ),
            cls,
            where=where,
        )
    if mt == "gpt2":
        d = g("n_embd")
        inner = cfg.get("n_inner")
        return model_from_dict(
            dict(
                name=name,
                kind="decoder",
                layers=g("n_layer"),
                d_model=d,
                heads=g("n_head"),
                d_ff=4 * d if inner is None else g("n_inner"),
                vocab=g("vocab_size"),
                max_positions=g("n_positions"),
                tied_embeddings=bool(cfg.get("tie_word_embeddings", True)),
                source=src,
            ),
            cls,
            where=where,
        )
    # llama / mistral: RMSNorm, SwiGLU MLP, rotary positions, no biases, grouped-query attention
    for key in ("attention_bias", "mlp_bias"):
        if cfg.get(key):
            raise ValueError(
                f"{where}: {key} = true is not supported (Llama-family layers without biases only)"
            )
    positions = g("max_position_embeddings")
    window = cfg.get("sliding_window")
    if window is not None and window < positions:
        raise ValueError(
            f"{where}: sliding_window = {window!r} is not supported: workloads count full "
            f"attention over up to max_position_embeddings ({positions}) tokens"
        )
    heads, d_model = g("num_attention_heads"), g("hidden_size")
    head_dim = cfg.get("head_dim")
    kw = dict(
        name=name,
        kind="decoder",
        layers=g("num_hidden_layers"),
        d_model=d_model,
        heads=heads,
        d_ff=g("intermediate_size"),
        vocab=g("vocab_size"),
        max_positions=positions,
        kv_heads=g("num_key_value_heads", heads),
        gated_mlp=True,
        learned_positions=False,
        tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        biases=False,
        source=src,
    )
    if head_dim is not None and head_dim != d_model // heads:
        kw["d_head"] = g("head_dim")
    return model_from_dict(kw, cls, where=where)
