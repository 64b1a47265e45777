"""The registry of published figures (ipusim/data/published.csv), ``validate`` and the modules
that read from it: every calibration row within its stated band, and the modules quote the
registry's numbers (one place)."""

import json
import re
from pathlib import Path

import pytest

from ipusim import validation as V
from ipusim.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _source_keys() -> set:
    keys = set()
    for line in (ROOT / "docs" / "sources.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| ([A-Z0-9][^|]*?) \|", line)
        if m:
            keys.update(k.strip() for k in m.group(1).split("/"))
    return keys


def test_registry_has_forty_rows_in_five_areas_with_sources_and_use():
    rows = V.registry()
    assert len(rows) >= 40
    assert len({r["area"] for r in rows}) >= 5
    assert len({r["id"] for r in rows}) == len(rows)  # ids unique
    keys = _source_keys()
    for r in rows:
        assert r["source"] in keys, r["id"]
        assert r["use"] in V.USES and r["table"] and r["metric"] and r["unit"], r["id"]
        assert r["workload"] in V.PREDICTORS, r["id"]
    assert {r["use"] for r in rows} == set(V.USES)


@pytest.mark.parametrize("row_id", [r["id"] for r in V.registry() if r["use"] == "calibration"])
def test_calibration_row_within_its_band(row_id):
    """In sample: a parameter was set from this row, so the model must reproduce it within the
    tolerance the registry states for it."""
    r = V.row(row_id)
    ratio = V.predict(r) / r["value"]
    assert abs(ratio - 1) <= r["tolerance"], f"{row_id}: predicted / published = {ratio:.3f}"


def _values(**where):
    return sorted(r["value"] for r in V.rows(**where))


def test_gpu_module_quotes_the_registry():
    from ipusim.gpu import calibration as g

    assert sorted(x[2] for x in g.TRT_BERT_BASE_A100_40GB_FP16_MS) == sorted(
        r["value"] for r in V.rows(source="TRT-BERT") if r["model"] == "bert-base"
    )
    assert sorted(x[-1] for x in g.FT_BERT_BASE_A100_80GB_FP16_MS) == _values(
        source="FT-GUIDE", workload="gpu-padded"
    )
    assert sorted(x[-1] for x in g.PADDING_REMOVED_MS) == _values(workload="gpu-padding-removed")
    for r in V.rows(area="gpu"):
        if r["source"] == "TRT-BERT" and r["use"] == "calibration":
            assert r["tolerance"] == g.CALIBRATION_TOLERANCE
        elif r["source"] == "FT-GUIDE" and r["workload"] == "gpu-padded":
            assert r["tolerance"] == (g.FT_TOLERANCE if r["batch"] >= 8 else g.FT_BATCH1_TOLERANCE)
        elif r["workload"] == "gpu-padding-removed":
            assert r["tolerance"] == g.PADDING_REMOVED_TOLERANCE


def test_embeddings_module_quotes_the_registry():
    from ipusim.embeddings import dlrm

    rows = V.rows(source="TORCHREC-DLRM")
    assert sorted(x[2] for x in dlrm.TORCHREC_ROWS) == sorted(r["value"] for r in rows)
    assert (
        [x[3] for x in dlrm.TORCHREC_ROWS].count("in")
        == sum(r["use"] == "calibration" for r in rows)
        == 1
    )


def test_tile_module_quotes_the_registry():
    """ipusim/tile_calibration.py keeps its own constants: they must equal the registry's rows,
    value and tolerance."""
    from ipusim import tile_calibration as tc

    tess = {r["batch"]: r for r in V.rows(source="TESS-PF")}
    assert {n: tf for n, tf in tc.TESS_PF_BOW_FP16_TFLOPS} == {
        n: r["value"] for n, r in tess.items()
    }
    assert V.row("jia-ft-exchange")["value"] * 1e12 == pytest.approx(
        tc.JIA_FT_EXCHANGE_BYTES_PER_S, rel=1e-12
    )
    gemm = V.row("jia-ft-gemm-2688")
    assert (gemm["batch"], gemm["value"] * 1e12) == (
        tc.JIA_FT_GEMM[0],
        pytest.approx(tc.JIA_FT_GEMM[1], rel=1e-12),
    )
    c600 = V.row("bytemlperf-c600-bert-base")
    assert (c600["value"], c600["batch"]) == (
        tc.BYTEMLPERF_C600_SEQ_PER_S,
        tc.BYTEMLPERF_ROWS_PER_BATCH,
    )
    from ipusim import hardware

    assert V.row("jia-ft-tile-latency")["value"] * 1e-9 == pytest.approx(
        hardware.JIA_FT_TILE_LATENCY_S, rel=1e-12
    )
    for r in V.rows(area="tile"):
        if (
            r["workload"] != "tile-largest-gemm"
        ):  # GEMM-fit rows: the 10 % (tests/test_tile_basics.py)
            assert r["tolerance"] == (
                tc.IN_SAMPLE_TOLERANCE if r["use"] == "calibration" else tc.OUT_OF_SAMPLE_TOLERANCE
            )


def test_training_module_quotes_the_registry():
    """ipusim/training/calibration.py keeps its own constants: they must equal the registry's
    rows."""
    from ipusim.training import calibration as cal

    m = V.row("megatron-gpt3-175b-tflops")
    assert (m["value"], m["chips"], m["batch"], m["seq_len"]) == (
        cal.MEGATRON_175B["tflops_per_gpu"],
        cal.MEGATRON_175B["chips"],
        cal.MEGATRON_175B["global_batch"],
        cal.MEGATRON_175B["seq_len"],
    )
    assert m["tolerance"] == cal.TOL_MEGATRON_TFLOPS
    d = V.row("megatron-gpt3-175b-days")
    assert (d["value"], d["tolerance"]) == (
        cal.MEGATRON_175B["days_300b_tokens"],
        cal.TOL_MEGATRON_DAYS,
    )
    for name, hours in cal.LLAMA2_GPU_HOURS.items():
        r = V.row(f"{name}-gpu-hours")
        assert (r["value"], r["chips"], r["tolerance"]) == (
            hours,
            cal.LLAMA2_CHIPS,
            cal.TOL_LLAMA2_GPU_HOURS,
        )
    bow = V.row("bow-pod16-bert-base-ph1")
    ref = cal.BOW_POD16_BERT_BASE
    assert (bow["value"], bow["chips"], bow["seq_len"], bow["chip"]) == (
        ref["seq_per_s"],
        ref["chips"],
        ref["seq_len"],
        ref["chip"],
    )


def test_packing_rows_are_the_published_efficiencies():
    """The registry's packing rows agree with the figures in ipusim/data/README.md."""
    text = (ROOT / "ipusim" / "data" / "README.md").read_text(encoding="utf-8")
    for r in V.rows(area="packing"):
        if r["workload"] == "packing-efficiency":
            assert f"{r['value']:.2%}" in text, r["id"]


def test_validate_json_lists_rows_areas_sources_and_summary(capsys):
    assert main(["validate", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["rows"]
    assert len(rows) >= 40 and len({r["area"] for r in rows}) >= 5
    assert all(r["source"] and r["use"] in V.USES for r in rows)
    for r in rows:
        assert r["ratio"] == pytest.approx(r["predicted"] / r["published"])
    summ = {s["area"]: s for s in out["summary"]}
    assert summ["all"]["rows"] == len(rows)
    assert summ["all"]["in_rows"] + summ["all"]["out_rows"] == len(rows)


def test_validate_area_text_and_csv(tmp_path, capsys):
    f = tmp_path / "v.csv"
    assert main(["validate", "--area", "packing", "--csv", str(f)]) == 0
    text = capsys.readouterr().out
    assert "krell-spfhp-squad-384-k3" in text and "within 25%" in text
    assert len(f.read_text().splitlines()) == 1 + len(V.rows(area="packing"))


def test_read_rows_refuses_a_bad_row(tmp_path):
    f = tmp_path / "m.csv"
    good = (ROOT / "ipusim" / "data" / "published.csv").read_text(encoding="utf-8").splitlines()
    f.write_text("\n".join([good[0], good[1].replace(",calibration,", ",sometimes,")]) + "\n")
    with pytest.raises(ValueError, match="line 2.*use must be"):
        V.read_rows(f)
    with pytest.raises(ValueError, match="area must be"):
        V.rows("nowhere")
    r = dict(V.registry()[0], workload="mystery")
    with pytest.raises(ValueError, match="no rule predicts workload 'mystery'"):
        V.predict(r)


def test_plot_predicted_vs_published(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from ipusim.plots import validation as pv

    res = V.validate("packing") + V.validate("embeddings")
    ax = pv.predicted_vs_published(res)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "embeddings, calibration (in sample)" in labels and "packing, check" in labels
    with pytest.raises(ValueError, match="at least one row"):
        pv.predicted_vs_published([])


def test_validation_figure_colours_areas_with_the_second_palette():
    """Chips' colours are for chips only (issue 26): every area, the tile and GPU areas too, has
    its own colour from ``plots.style.OTHER_COLORS``, and no point is drawn in a chip's colour."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.colors import to_hex

    from ipusim.plots import style
    from ipusim.plots import validation as pv

    colours = [pv.AREA_COLORS[a] for a in V.AREAS]
    assert len(set(colours)) == len(colours) and set(colours) <= set(style.OTHER_COLORS)
    chip = {*style.CHIP_COLORS.values(), *style.KIND_COLORS.values()}
    ax = pv.predicted_vs_published(V.validate("packing") + V.validate("embeddings"))
    drawn = {to_hex(ln.get_color()) for ln in ax.get_lines() if ln.get_marker() in ("s", "o")}
    assert drawn and not drawn & chip


def test_cached_predictions_follow_tile_parameter_overrides():
    from ipusim import tile_calibration as tc

    base = {r["id"]: r["predicted"] for r in V.validate("tile") if r["id"] == "jia-ft-exchange"}
    with tc.overrides(EXCHANGE_EFFICIENCY=0.5):
        inside = {
            r["id"]: r["predicted"] for r in V.validate("tile") if r["id"] == "jia-ft-exchange"
        }
    assert inside["jia-ft-exchange"] < base["jia-ft-exchange"]
    after = {r["id"]: r["predicted"] for r in V.validate("tile") if r["id"] == "jia-ft-exchange"}
    assert after == base
