"""``ipusim calibrate``: a user's measurements set the GPU efficiency parameters by the stated
bounded least-squares rule; round trip, refusals, the file ``load`` reads, ``validate --calibration``."""

import csv
import json
from pathlib import Path

import pytest

from ipusim import calibration, validation
from ipusim.cli import main
from ipusim.gpu import simulate
from ipusim.workloads import step

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = (
    (ROOT / "ipusim" / "data" / "published.csv")
    .read_text(encoding="utf-8")
    .splitlines()[0]
    .split(",")
)


def _write(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return path


def _measurement(chip, model, seq, batch, ms, **over):
    r = dict(
        id=f"m-{model}-{seq}-{batch}",
        area="gpu",
        workload="gpu-padded",
        chip=chip,
        chips=1,
        precision="fp16",
        model=model,
        phase="inference",
        batch=batch,
        seq_len=seq,
        metric="latency",
        unit="ms",
        value=ms,
        source="POC",
        table="test",
        use="check",
        tolerance=0.25,
    )
    r.update(over)
    return r


@pytest.mark.parametrize("chip, eff, launch", [("a100-80gb", 0.60, 7e-6), ("h100-sxm", 0.80, 3e-6)])
def test_round_trip_recovers_known_parameters_within_2_percent(tmp_path, chip, eff, launch):
    """Measurements made by ipusim itself with known parameters: the fit finds them again."""
    rows = []
    for model, seq, batch in (
        ("bert-base", 128, 1),
        ("bert-base", 128, 32),
        ("bert-base", 384, 8),
        ("bert-base", 384, 64),
        ("bert-large", 384, 16),
    ):
        t = simulate(
            chip, step(model, [seq] * batch, pad_to=seq), tensor_efficiency=eff, launch_s=launch
        ).time_s
        rows.append(_measurement(chip, model, seq, batch, t * 1e3))
    res = calibration.fit(calibration.measurements(_write(tmp_path / "m.csv", rows)))
    assert res["tensor_efficiency"] == pytest.approx(eff, rel=0.02)
    assert res["launch_s"] == pytest.approx(launch, rel=0.02)
    assert res["rms_log_error_after"] < 0.01 < res["rms_log_error_before"]


@pytest.mark.parametrize(
    "over, reason",
    [
        ({"area": "embeddings", "workload": "dlrm-step"}, "cannot be matched"),
        ({"area": "tile", "workload": "tile-gemm"}, "simulated on gc2"),
        ({"chip": "gc200"}, "chip must be a GPU preset"),
        ({"unit": "s"}, "latency in ms"),
        ({"model": "my-model"}, "model must be a preset"),
        ({"batch": ""}, "batch and seq_len"),
    ],
)
def test_unmatched_measurement_is_refused_with_row_and_reason(tmp_path, over, reason):
    rows = [
        _measurement("a100-80gb", "bert-base", 128, 8, 1.5),
        {**_measurement("a100-80gb", "bert-base", 128, 32, 4.5, id="bad-row"), **over},
    ]
    with pytest.raises(ValueError, match=f"line 3 \\(id 'bad-row'\\).*{reason}"):
        calibration.measurements(_write(tmp_path / "m.csv", rows))


def test_comment_lines_are_skipped_and_errors_name_the_file_line(tmp_path):
    """Lines starting with # (what was measured and how) are skipped; a refused row is named by
    its line in the file, comments counted."""
    path = _write(
        tmp_path / "m.csv",
        [
            _measurement("a100-80gb", "bert-base", 128, 8, 1.5),
            _measurement("a100-80gb", "bert-base", 128, 32, 4.5, id="bad-row", unit="s"),
        ],
    )
    text = path.read_text(encoding="utf-8")
    path.write_text("# measured on our A100\n# median of 1,000 runs\n" + text, encoding="utf-8")
    with pytest.raises(ValueError, match="line 5 \\(id 'bad-row'\\).*latency in ms"):
        calibration.measurements(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text(
        "\n".join([*lines[:4], "# a comment between rows", *lines[4:]]), encoding="utf-8"
    )
    with pytest.raises(ValueError, match="line 6 \\(id 'bad-row'\\)"):
        calibration.measurements(path)
    path.write_text("\n".join(lines[:4]), encoding="utf-8")
    assert [r["id"] for r in calibration.measurements(path)] == ["m-bert-base-128-8"]


def test_two_chips_in_one_file_are_refused(tmp_path):
    rows = [
        _measurement("a100-80gb", "bert-base", 128, 8, 1.5),
        _measurement("h100-sxm", "bert-base", 128, 8, 1.0),
    ]
    with pytest.raises(ValueError, match="one GPU chip per file"):
        calibration.measurements(_write(tmp_path / "m.csv", rows))


def test_example_poc_file_calibrates_and_validate_shows_before_and_after(tmp_path, capsys):
    out = tmp_path / "cal.toml"
    assert (
        main(
            [
                "calibrate",
                "--measurements",
                str(ROOT / "examples" / "poc_gpu_measurements.csv"),
                "--out",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    res = json.loads(capsys.readouterr().out)["gpu"]
    assert res["rms_log_error_after"] < res["rms_log_error_before"]
    params = calibration.load(out)
    assert params["gpu"]["chip"] == "a100-80gb"
    assert params["gpu"]["tensor_efficiency"] == pytest.approx(res["tensor_efficiency"], rel=1e-5)
    assert main(["validate", "--area", "gpu", "--calibration", str(out), "--json"]) == 0
    v = json.loads(capsys.readouterr().out)
    assert len(v["rows_after"]) == len(v["rows"])
    moved = [
        a
        for b, a in zip(v["rows"], v["rows_after"], strict=True)
        if a["predicted"] != b["predicted"]
    ]
    assert moved and all(validation.row(a["id"])["chip"] == "a100-80gb" for a in moved)


def test_load_refuses_a_bad_file(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[gpu]\nchip = "a100-80gb"\ntensor_efficiency = 1.5\nlaunch_s = 5e-6\n')
    with pytest.raises(ValueError, match="tensor_efficiency must be a number in"):
        calibration.load(f)
    f.write_text("[other]\n")
    with pytest.raises(ValueError, match="no \\[gpu\\] or \\[tile\\] table"):
        calibration.load(f)


def test_simulate_accepts_the_calibration_of_its_chip_only(tmp_path, capsys):
    f = tmp_path / "c.toml"
    f.write_text('[gpu]\nchip = "a100-80gb"\ntensor_efficiency = 0.5\nlaunch_s = 8e-6\n')
    base = ["simulate", "--model", "bert-base", "--batch", "8", "--seq-len", "128", "--json"]
    assert main([*base, "--chip", "a100-80gb"]) == 0
    before = json.loads(capsys.readouterr().out)["time_s"]
    assert main([*base, "--chip", "a100-80gb", "--calibration", str(f)]) == 0
    after = json.loads(capsys.readouterr().out)["time_s"]
    direct = simulate(
        "a100-80gb", step("bert-base", [128] * 8, pad_to=128), tensor_efficiency=0.5, launch_s=8e-6
    )
    assert after == pytest.approx(direct.time_s, rel=1e-12) and after > before
    assert main([*base, "--chip", "gc200", "--calibration", str(f)]) == 2
    assert "calibration is for 'a100-80gb'" in capsys.readouterr().err


def test_tile_round_trip_recovers_known_parameters_within_2_percent(tmp_path):
    """Tile microbenchmarks (the registry's TESS-PF, exchange and GEMM rows) re-made by ipusim
    with known parameters: ``fit_tile`` finds them again."""
    from ipusim import tile_calibration as tc

    known = {
        "AMP_PHASE_OVERHEAD_CYCLES": 450.0,
        "EXCHANGE_EFFICIENCY": 0.80,
        "REARRANGE_BYTES_PER_CYCLE": 2.5,
    }
    rows = [r for r in validation.rows(area="tile") if r["workload"] in calibration.TILE_WORKLOADS]
    for r in rows:
        r["value"] = validation.predict(r, {"tile": known})
    path = _write(
        tmp_path / "t.csv", [{k: ("" if v is None else v) for k, v in r.items()} for r in rows]
    )
    res = calibration.calibrate(calibration.measurements(path))
    assert set(res) == {"tile"}
    for k, v in known.items():
        assert res["tile"]["parameters"][k] == pytest.approx(v, rel=0.02), k
    assert dict(tc.current()) == res["tile"]["preset"]  # the fit leaves the module's values alone
    out = tmp_path / "t.toml"
    out.write_text(calibration.to_toml(res, str(path)))
    assert calibration.load(out)["tile"] == pytest.approx(res["tile"]["parameters"], rel=1e-5)


def test_one_rule_sets_the_presets_and_a_users_calibration(tmp_path):
    """The published TensorRT rows given to ``calibrate`` as a user's measurements come out as the
    presets' own fit (``gpu.fit_calibration``): both call ``gpu.calibration.least_squares``."""
    from ipusim import gpu, published

    trt = [r for r in published.rows(source="TRT-BERT") if r["model"] == "bert-base"]
    rows = [_measurement(r["chip"], "bert-base", r["seq_len"], r["batch"], r["value"]) for r in trt]
    res = calibration.fit(calibration.measurements(_write(tmp_path / "trt.csv", rows)))
    assert (res["tensor_efficiency"], res["launch_s"]) == pytest.approx(gpu.fit_calibration())
