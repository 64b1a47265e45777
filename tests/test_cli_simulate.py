"""``python -m ipusim simulate``: text and JSON output, fit reporting, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ipusim import cli, lengths, tiles, workloads


def _run(capsys, *argv):
    code = cli.main(["simulate", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_text_output_has_time_split_memory_and_fit(capsys):
    code, out, _ = _run(
        capsys, "--chip", "gc200", "--model", "bert-base", "--batch", "4", "--seq-len", "64"
    )
    assert code == 0
    for word in (
        "step time",
        "compute",
        "sync",
        "exchange",
        "memory per tile: max",
        "mean",
        "fits",
    ):
        assert word in out


def test_json_matches_the_library(capsys):
    code, out, _ = _run(
        capsys,
        "--chip",
        "gc200",
        "--model",
        "gpt2",
        "--batch",
        "3",
        "--seq-len",
        "100",
        "--phase",
        "prefill",
        "--json",
    )
    assert code == 0
    d = json.loads(out)
    r = tiles.simulate("gc200", workloads.step("gpt2", [100] * 3, phase="prefill"))
    assert d["time_s"] == pytest.approx(r.time_s, rel=1e-12)
    assert set(d["split_s"]) == {"compute", "sync", "exchange"}
    assert sum(d["split_s"].values()) == pytest.approx(d["time_s"], rel=1e-9)
    assert d["memory_per_unit_max_bytes"] >= d["memory_per_unit_mean_bytes"] > 0
    assert (
        d["fits"] is True
        and d["packed"] is False
        and d["lengths_source"] is None
        and d["real_tokens"] == 300
    )


def test_packed_runs_the_drawn_lengths_unpadded(capsys):
    """--lengths squad-384 draws --batch lengths (seeded, cut to --seq-len); --packed runs them unpadded, the
    default pads each to --seq-len: the same steps the library gives for those lengths."""
    argv = [
        "--chip",
        "gc200",
        "--model",
        "bert-base",
        "--batch",
        "16",
        "--seq-len",
        "256",
        "--lengths",
        "squad-384",
        "--seed",
        "3",
        "--json",
    ]
    runs = {}
    for packed in (False, True):
        code, out, _ = _run(capsys, *argv, *(["--packed"] if packed else []))
        assert code == 0
        runs[packed] = json.loads(out)
    lens = [int(x) for x in np.minimum(lengths.dataset("squad-384").sample(16, seed=3), 256)]
    assert max(lens) == 256 and min(lens) < 256  # the draw has long ones cut and short ones
    assert runs[True]["real_tokens"] == runs[False]["real_tokens"] == sum(lens)
    assert runs[True]["lengths_source"] == "squad-384" and runs[True]["packed"] is True
    padded = tiles.simulate("gc200", workloads.step("bert-base", lens, pad_to=256))
    packed = tiles.simulate("gc200", workloads.step("bert-base", lens))
    assert runs[False]["time_s"] == pytest.approx(padded.time_s, rel=1e-12)
    assert runs[True]["time_s"] == pytest.approx(packed.time_s, rel=1e-12)
    assert runs[True]["time_s"] < runs[False]["time_s"]


def test_packed_without_unequal_lengths_is_refused(capsys):
    code, out, err = _run(
        capsys, "--chip", "gc200", "--model", "gpt2", "--batch", "3", "--seq-len", "100", "--packed"
    )
    assert code == 2 and out == ""
    assert "--packed changes nothing" in err and "--lengths" in err


def test_a_step_that_does_not_fit_says_so(capsys):
    code, out, _ = _run(
        capsys,
        "--chip",
        "gc200",
        "--model",
        "gpt2",
        "--batch",
        "24",
        "--seq-len",
        "1024",
        "--phase",
        "prefill",
        "--json",
    )
    d = json.loads(out)
    assert code == 0 and d["fits"] is False and d["fit"] == "does_not_fit"
    assert "Out of memory on tile" in d["fit_message"]
    assert d["time_s"] is None and d["energy_j"] is None  # inf (the fit rule) prints as null
    assert d["time_if_unlimited_s"] > 0 and d["throughput_seq_per_s"] == 0
    code, out, _ = _run(
        capsys,
        "--chip",
        "gc200",
        "--model",
        "gpt2",
        "--batch",
        "24",
        "--seq-len",
        "1024",
        "--phase",
        "prefill",
    )
    assert code == 0 and "step time   none: the step DOES NOT FIT" in out and "inf" not in out


@pytest.mark.parametrize(
    "argv,needle",
    [
        (
            ["--chip", "gc9000", "--model", "bert-base", "--batch", "1", "--seq-len", "8"],
            "unknown chip",
        ),
        (["--chip", "gc200", "--model", "bert-base", "--batch", "0", "--seq-len", "8"], "--batch"),
        (
            ["--chip", "gc200", "--model", "bert-base", "--batch", "1", "--seq-len", "9999"],
            "longer than",
        ),
    ],
)
def test_bad_values_exit_2_with_one_line(capsys, argv, needle):
    code, _, err = _run(capsys, *argv)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_gpu_chip_goes_through_machine_simulate(capsys):
    code, out, _ = _run(
        capsys,
        "--chip",
        "a100-80gb",
        "--model",
        "bert-base",
        "--batch",
        "8",
        "--seq-len",
        "128",
        "--json",
    )
    assert code == 0 and json.loads(out)["kind"] == "gpu"


def test_json_carries_the_fit_state_bert_base_36x384_on_chip(capsys):
    """The issue's case: BERT-base, batch 36 x 384 tokens on one GC200 stays on chip (serial
    passes keep the temporaries within the tile)."""
    code, out, _ = _run(
        capsys,
        "--chip",
        "gc200",
        "--model",
        "bert-base",
        "--batch",
        "36",
        "--seq-len",
        "384",
        "--json",
    )
    d = json.loads(out)
    assert code == 0 and d["fit"] == "on_chip" and d["fits"] is True and d["time_s"] > 0
    assert d["memory_per_unit_max_bytes"] <= d["memory_limit_bytes"]


def test_json_carries_the_energy_split(capsys):
    """``--json`` carries energy_j, board_energy_j and energy_split (level -> J), exchange
    included and > 0 for a tile step that exchanges data; energy_j is the split's sum."""
    code, out, _ = _run(
        capsys,
        "--chip",
        "gc200",
        "--model",
        "bert-base",
        "--batch",
        "4",
        "--seq-len",
        "64",
        "--json",
    )
    assert code == 0
    d = json.loads(out)
    assert d["energy_split"]["exchange"] > 0 and set(d["energy_split"]) >= {
        "flops",
        "sram",
        "exchange",
        "streaming",
    }
    assert d["energy_j"] == pytest.approx(sum(d["energy_split"].values()), rel=1e-12)
    assert d["board_energy_j"] > d["energy_j"]
    code, out, _ = _run(
        capsys,
        "--chip",
        "a100-80gb",
        "--model",
        "bert-base",
        "--batch",
        "4",
        "--seq-len",
        "64",
        "--json",
    )
    assert set(json.loads(out)["energy_split"]) == {"flops", "hbm", "l2", "smem"}


def test_lengths_file_draws_from_its_lengths(capsys, tmp_path):
    """--lengths reads a 'length,count' CSV (or a list, or a dataset name: ``lengths.source``);
    the draw uses only the file's lengths."""
    f = tmp_path / "h.csv"
    f.write_text("length,count\n40,3\n200,1\n")
    code, out, _ = _run(
        capsys,
        "--chip",
        "gc200",
        "--model",
        "bert-base",
        "--batch",
        "64",
        "--seq-len",
        "256",
        "--lengths",
        str(f),
        "--packed",
        "--json",
    )
    assert code == 0
    d = json.loads(out)
    lens = lengths.load_histogram(f).sample(64, seed=0)
    assert set(lens.tolist()) == {40, 200} and d["real_tokens"] == int(lens.sum())
    assert d["lengths_source"] == str(f)
    code, _, err = _run(
        capsys,
        "--chip",
        "gc200",
        "--model",
        "bert-base",
        "--batch",
        "4",
        "--seq-len",
        "256",
        "--lengths",
        str(tmp_path / "missing.csv"),
    )
    assert code == 2 and "missing.csv" in err
