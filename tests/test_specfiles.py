"""Chip and model files (TOML/JSON), Hugging Face configs, and ``ipusim schema``."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from ipusim import cli, hardware, specfiles, workloads

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "examples" / "configs"


def _main(*argv) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(list(argv))
    return rc, out.getvalue()


@pytest.mark.parametrize("name", ["gc200", "a100-80gb"])
@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_a_preset_written_as_a_file_gives_byte_identical_json(tmp_path, name, suffix):
    d = specfiles.chip_to_dict(hardware.chip(name))
    path = tmp_path / f"chip{suffix}"
    path.write_text(specfiles.to_toml(d) if suffix == ".toml" else json.dumps(d))
    assert hardware.chip(str(path)) == hardware.chip(name)
    args = ["simulate", "--model", "bert-base", "--batch", "4", "--seq-len", "128", "--json"]
    rc_p, preset = _main(*args, "--chip", name)
    rc_f, from_file = _main(*args, "--chip", str(path))
    assert rc_p == rc_f == 0
    assert from_file == preset  # byte for byte


def test_shipped_chip_file_is_the_gc200_preset():
    c = hardware.chip(str(ROOT / "examples" / "my_chip.toml"))
    assert c == hardware.chip("gc200"), (
        "examples/my_chip.toml differs from the gc200 preset; rewrite it with "
        "specfiles.to_toml(specfiles.chip_to_dict(hardware.chip('gc200')))"
    )
    assert dict(c.sources) == dict(hardware.chip("gc200").sources)


@pytest.mark.parametrize(
    "text, field",
    [
        ('kind = "tile"\nname = "x"\ntiles = 1.5\n', "tiles: expected a valid integer"),
        ('kind = "gpu"\nname = "x"\nsms = 10\n', "clock_hz: missing"),
        ('kind = "tpu"\nname = "x"\n', "kind: expected 'tile' or 'gpu'"),
    ],
)
def test_a_bad_chip_file_is_refused_naming_the_field(tmp_path, text, field):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(ValueError, match=field):
        hardware.chip(str(p))


def test_chip_file_values_are_checked_as_a_presets_are(tmp_path):
    d = specfiles.chip_to_dict(hardware.chip("gc200"))
    p = tmp_path / "c.json"
    p.write_text(json.dumps({**d, "code_bytes_per_tile": d["sram_per_tile_bytes"]}))
    with pytest.raises(ValueError, match="must exceed code_bytes_per_tile"):
        hardware.chip(str(p))
    p.write_text(json.dumps({**d, "turbo": True}))
    with pytest.raises(ValueError, match="turbo: unknown field"):
        hardware.chip(str(p))


def test_model_file_round_trips_a_preset(tmp_path):
    m = workloads.model("llama-2-70b")
    import dataclasses

    p = tmp_path / "m.toml"
    p.write_text(specfiles.to_toml(dataclasses.asdict(m)))
    assert workloads.model(str(p)) == m


def _hf(tmp_path, cfg: dict) -> str:
    d = tmp_path / "m"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return f"hf:{d / 'config.json'}"


def test_hf_configs_of_published_shapes_give_the_presets_parameter_counts(tmp_path):
    """The keys of the public BERT-base, GPT-2 small and Llama-2-70B configs (shapes as in their
    papers) give the same parameter count as the presets built from those papers."""
    bert = {
        "model_type": "bert",
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "vocab_size": 30522,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
    }
    gpt2 = {
        "model_type": "gpt2",
        "n_embd": 768,
        "n_head": 12,
        "n_layer": 12,
        "n_inner": None,
        "n_positions": 1024,
        "vocab_size": 50257,
    }
    llama = {
        "model_type": "llama",
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
    }
    for cfg, preset in ((bert, "bert-base"), (gpt2, "gpt2"), (llama, "llama-2-70b")):
        m = workloads.model(_hf(tmp_path, cfg))
        assert m.params == workloads.model(preset).params, preset
        assert m.kv_dim == workloads.model(preset).kv_dim


def test_shipped_hf_configs_read_and_moe_is_refused():
    llama = workloads.model(f"hf:{CONFIGS / 'llama_tiny' / 'config.json'}")
    assert (llama.heads, llama.n_kv_heads, llama.gated_mlp, llama.biases) == (8, 2, True, False)
    assert workloads.model(f"hf:{CONFIGS / 'bert_tiny' / 'config.json'}").kind == "encoder"
    assert workloads.model(f"hf:{CONFIGS / 'gpt2_tiny' / 'config.json'}").d_ff == 4 * 256
    with pytest.raises(ValueError, match="num_local_experts = 8 is not supported"):
        workloads.model(f"hf:{CONFIGS / 'mixtral_tiny' / 'config.json'}")


@pytest.mark.parametrize(
    "extra, match",
    [
        ({"model_type": "t5"}, "model_type 't5' is not supported"),
        ({"sliding_window": 1024}, "sliding_window = 1024 is not supported"),
        ({"quantization_config": {"bits": 4}}, "quantization_config"),
        ({"hidden_size": "big"}, "hidden_size: expected a whole number"),
    ],
)
def test_hf_configs_the_workloads_do_not_model_are_refused(tmp_path, extra, match):
    cfg = {
        "model_type": "mistral",
        "hidden_size": 512,
        "intermediate_size": 1408,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
        **extra,
    }
    with pytest.raises(ValueError, match=match):
        workloads.model(_hf(tmp_path, cfg))


def test_simulate_runs_a_chip_file_with_an_hf_model():
    rc, out = _main(
        "simulate",
        "--chip",
        str(ROOT / "examples" / "my_chip.toml"),
        "--model",
        f"hf:{CONFIGS / 'llama_tiny' / 'config.json'}",
        "--batch",
        "2",
        "--seq-len",
        "128",
        "--phase",
        "prefill",
        "--json",
    )
    assert rc == 0
    d = json.loads(out)
    assert d["model"] == "llama_tiny" and d["chip"] == "gc200" and d["time_s"] > 0


@pytest.mark.parametrize("kind", ["chip", "model", "case"])
def test_schema_command_prints_a_json_schema(kind):
    rc, out = _main("schema", kind)
    assert rc == 0
    s = json.loads(out)
    props = s["oneOf"][0]["properties"] if kind == "chip" else s["properties"]
    assert {"chip": "tiles", "model": "kv_heads", "case": "candidates"}[kind] in props
