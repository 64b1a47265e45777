"""Nothing silently wrong, nothing half-written: the table cache proves what it holds, outputs
are written whole, only regular files are read, and a user's chip or model cannot pass for a
preset. (Faults that need root, a read-only root or a full disk: tests/test_reliability.py.)"""

import dataclasses
import os
import signal
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from ipusim import _files, hardware, sweep, workloads
from ipusim.checklist import case as C
from ipusim.checklist import config_file as F
from ipusim.serving import table_cache, tables

# The cheapest serve that builds a chip table (an A100 at two rows: ~1,000 GPU steps).
SERVE = [
    sys.executable,
    "-m",
    "ipusim",
    "serve",
    "--chip",
    "a100-80gb",
    "--max-batch",
    "2",
    "--requests",
    "200",
    "--rate",
    "50",
    "--json",
]


def _serve(cache_dir, timeout=300):
    env = {**os.environ, "IPUSIM_CACHE_DIR": str(cache_dir)}
    return subprocess.run(SERVE, env=env, capture_output=True, timeout=timeout)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A clean run's stdout and its one cache entry's bytes and key."""
    d = tmp_path_factory.mktemp("clean-cache")
    run = _serve(d)
    assert run.returncode == 0, run.stderr
    (entry,) = d.iterdir()
    return run.stdout, entry.read_bytes(), entry.stem


def _corrupt(kind, path, good: bytes, key: str):
    tab, why = table_cache.decode(key, good)
    assert why == ""
    if kind == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "wrong shape":  # a valid entry, digest and all, of another shape
        path.write_bytes(table_cache.encode(key, tab[:, :100]))
    elif kind == "zeros":
        path.write_bytes(table_cache.encode(key, np.zeros_like(tab)))
    elif kind == "negated":
        path.write_bytes(table_cache.encode(key, -tab))
    elif kind == "random bytes":
        path.write_bytes(np.random.default_rng(0).bytes(len(good)))
    elif kind == "flipped byte":  # one bit of the data: only the digest can tell
        b = bytearray(good)
        b[-9] ^= 1
        path.write_bytes(bytes(b))
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()


KINDS = [
    "truncated",
    "empty",
    "wrong shape",
    "zeros",
    "negated",
    "random bytes",
    "flipped byte",
    "fifo",
    "directory",
]


@pytest.mark.parametrize("kind", KINDS)
def test_a_corrupt_cache_entry_is_named_discarded_and_rebuilt_byte_for_byte(kind, clean, tmp_path):
    """The next run's output equals a clean run's byte for byte; stderr says, in one line, which
    cache file was discarded; the rebuilt entry verifies."""
    out, good, key = clean
    path = tmp_path / f"{key}.tab"
    _corrupt(kind, path, good, key)
    run = _serve(tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout == out
    notes = [ln for ln in run.stderr.decode().splitlines() if "table cache file" in ln]
    assert len(notes) == 1 and str(path) in notes[0] and "discarded" in notes[0], run.stderr
    assert path.is_file() and path.read_bytes() == good


def test_built_tables_pass_their_own_checks_and_bad_ones_fail(monkeypatch):
    """The checks of meaning hold for tables the machine model builds (else every run would
    rebuild) and fail for each way a table can be wrong."""
    monkeypatch.setenv("IPUSIM_CACHE_DIR", "off")
    spec = tables.Replica(hardware.chip("a100-80gb"), workloads.model("bert-base"))
    fine = tables.time_table(spec, "forward", 2, 64, 64, True)
    coarse = tables.coarse_grid(spec, "forward", 2)[2]
    assert table_cache.times_check(fine, zero_edges=True) is None
    assert table_cache.times_check(coarse, zero_edges=False) is None
    bad = np.array(fine)
    bad[1, 3] = np.nan
    assert "NaN" in table_cache.times_check(bad, zero_edges=True)
    bad = np.array(fine)
    bad[1, 3] = np.inf  # row 1 does not fit, row 2 does
    assert "larger batch" in table_cache.times_check(bad, zero_edges=True)
    bad = np.array(fine)
    bad[0, 5] = 1.0
    assert "row 0" in table_cache.times_check(bad, zero_edges=True)
    assert "<= 0" in table_cache.times_check(-np.array(coarse), zero_edges=False)
    assert table_cache.count_check(np.array([3.0]), 8) is None
    for v in (-1.0, 2.5, 9.0, np.nan):
        assert table_cache.count_check(np.array([v]), 8)
    B, cols = 4, 3
    mixed = np.full((B, B, cols), np.nan)
    for d in range(1, B):
        for r in range(1, B - d + 1):
            mixed[d, r, 1:] = 1e-3 * (d + r)
    assert table_cache.mixed_check(mixed) is None
    m2 = mixed.copy()
    m2[1, 1, 1] = np.nan
    assert "NaN" in table_cache.mixed_check(m2)


def test_decode_refuses_another_key_and_a_padded_entry():
    tab = np.arange(6.0).reshape(2, 3) + 1
    blob = table_cache.encode("a" * 32, tab)
    assert np.array_equal(table_cache.decode("a" * 32, blob)[0], tab)
    assert "another key" in table_cache.decode("b" * 32, blob)[1]
    assert "truncated or padded" in table_cache.decode("a" * 32, blob + b"\0")[1]
    assert "shape" in table_cache.decode("a" * 32, blob, shape=(3, 2))[1]


def test_leftovers_of_dead_writers_are_removed_and_a_live_writers_kept(tmp_path, monkeypatch):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pid = int(dead.stdout)
    host = _files._host()
    gone = tmp_path / f".{'k' * 32}.tab~{host}~{pid}~abc123.tmp"
    live = tmp_path / f".{'j' * 32}.tab~{host}~{os.getpid()}~abc123.tmp"
    other = tmp_path / "notes.txt"  # not ours: never touched
    for f in (gone, live, other):
        f.write_bytes(b"x")
    monkeypatch.setenv("IPUSIM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(table_cache, "_state", {"notes": set(), "cleaned": set()})
    monkeypatch.setattr(tables, "_memory", {})
    tables.cached(lambda: np.ones((2, 2)), "test", 1)
    assert not gone.exists() and live.exists() and other.exists()


def test_an_unwritable_cache_is_said_once_and_the_table_still_built(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("IPUSIM_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(table_cache, "_state", {"notes": set(), "cleaned": set()})
    monkeypatch.setattr(tables, "_memory", {})
    for i in range(3):
        assert np.array_equal(tables.cached(lambda: np.ones((2, 2)), "test", i), np.ones((2, 2)))
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "cannot write the table cache" in err[0] and str(blocker) in err[0]


# ------------------------------------------------------------------------------ outputs whole


def test_atomic_write_leaves_the_target_untouched_on_an_error(tmp_path):
    p = tmp_path / "out.csv"
    p.write_text("old\n")
    os.chmod(p, 0o640)
    with pytest.raises(RuntimeError):
        with _files.atomic_write(p) as f:
            f.write("half of a new fi")
            raise RuntimeError("disk full, say")
    assert p.read_text() == "old\n" and sorted(x.name for x in tmp_path.iterdir()) == ["out.csv"]
    with _files.atomic_write(p) as f:
        f.write("new\n")
    assert (
        p.read_text() == "new\n" and (os.stat(p).st_mode & 0o777) == 0o640
    )  # the target's permissions kept


def test_atomic_write_through_a_link_and_into_a_stream(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("a")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    with _files.atomic_write(link) as f:
        f.write("b")
    assert link.is_symlink() and real.read_text() == "b"
    with _files.atomic_write(os.devnull) as f:  # a device is written through, never replaced
        f.write("c")
    assert os.path.exists(os.devnull) and not os.path.isfile(os.devnull)


def test_sweep_out_onto_an_existing_table_needs_resume_or_overwrite(tmp_path):
    out = tmp_path / "s.csv"
    kw = dict(mode="serial", out=out, show_progress=False)
    sweep.run("spin", vary={"seconds": [0.0, 0.001]}, **kw)
    with pytest.raises(ValueError, match="already exists"):
        sweep.run("spin", vary={"seconds": [0.002]}, **kw)
    res = sweep.run("spin", vary={"seconds": [0.002]}, overwrite=True, **kw)
    assert len(res.table) == 1 and len(sweep.read_table(out)) == 1  # replaced, not merged
    with pytest.raises(ValueError, match="resume or overwrite"):
        sweep.run("spin", vary={"seconds": [0.002]}, overwrite=True, resume=True, **kw)


_FLAKY = {"refuse": True}


@sweep.register("flaky", params={"x": 0}, takes_chip=False)
def _flaky(point):
    if _FLAKY["refuse"] and point["x"] % 2:
        raise ValueError("odd x refused")
    return {"y": 10 * point["x"]}


def test_resume_retries_refused_points_only_when_asked(tmp_path):
    out = tmp_path / "s.parquet"
    kw = dict(vary={"x": [0, 1, 2, 3]}, mode="serial", out=out, show_progress=False)
    first = sweep.run("flaky", **kw)
    assert first.refused == 2
    _FLAKY["refuse"] = False
    try:
        again = sweep.run("flaky", resume=True, **kw)
        assert (again.computed, again.refused) == (0, 2)  # refused rows kept as they were
        retried = sweep.run("flaky", resume=True, retry_refused=True, **kw)
    finally:
        _FLAKY["refuse"] = True
    assert (retried.skipped, retried.computed, retried.refused) == (2, 2, 0)
    back = sweep.read_table(out)
    assert back["y"].tolist() == [0, 10, 20, 30] and (back["error"] == "").all()


def test_a_sweep_stopped_by_a_write_error_keeps_its_chunks(tmp_path, monkeypatch):
    """A write error on the third chunk: the two chunks written stay, the held rows are written
    again in smaller parts (the error was on one write only, so all of them fit), and resume
    runs only the rest."""
    from ipusim.sweep import output

    out = tmp_path / "s.parquet"
    real = output._files.atomic_write
    calls = {"n": 0}

    def failing(path, *a, **k):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(28, "No space left on device", str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(output._files, "atomic_write", failing)
    kw = dict(
        vary={"x": list(range(20))},
        mode="serial",
        out=out,
        chunk_rows=5,
        batch_size=5,
        show_progress=False,
    )
    with pytest.raises(OSError, match="No space"):
        sweep.run("flaky", **kw)
    monkeypatch.setattr(output._files, "atomic_write", real)
    parts = sorted((tmp_path / "s.parquet.parts").glob("part-*.parquet"))
    assert len(parts) > 2 and sum(len(pd.read_parquet(p)) for p in parts) == 15
    res = sweep.run("flaky", resume=True, **kw)
    assert (res.skipped, res.computed) == (15, 5)
    fresh = sweep.run("flaky", vary=kw["vary"], mode="serial", show_progress=False).table
    pd.testing.assert_series_equal(sweep.read_table(out)["point_key"], fresh["point_key"])


# ------------------------------------------------------------------------------ regular files only


@pytest.fixture
def alarm():
    """Fail instead of hanging if a reader blocks on a FIFO."""

    def boom(*_):
        raise TimeoutError("a reader blocked")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize(
    "reader", ["lengths", "trace", "arrivals", "config", "config lengths", "config arrivals"]
)
@pytest.mark.parametrize("special", ["fifo", "directory", "device"])
def test_every_reader_refuses_what_is_not_a_regular_file(reader, special, tmp_path, alarm):
    from ipusim import arrivals, lengths

    if special == "fifo":
        target = tmp_path / "pipe"
        os.mkfifo(target)
    elif special == "directory":
        target = tmp_path
    else:
        target = "/dev/zero"
    what = {"fifo": "FIFO", "directory": "directory", "device": "device"}[special]
    config = tmp_path / "c.toml"
    if reader == "config lengths":
        config.write_text(f'[traffic]\nlengths = "{target}"\n')
    elif reader == "config arrivals":
        config.write_text(f'[traffic]\narrivals = "{target}"\n')
    call = {
        "lengths": lambda: lengths.source(str(target)),
        "trace": lambda: arrivals.load_trace(target),
        "arrivals": lambda: F.read_arrivals(target),
        "config": lambda: F.load_case(target),
        "config lengths": lambda: F.load_case(config),
        "config arrivals": lambda: F.load_case(config),
    }[reader]
    with pytest.raises(ValueError, match=what):
        call()


# ------------------------------------------------------------------------------ names


def test_a_chip_or_model_named_like_a_preset_it_is_not_is_refused():
    with pytest.raises(ValueError, match=r"chip name 'a100-80gb'.*tile chip"):
        C.Candidate(hardware.chip("gc200").replace(name="a100-80gb"))
    with pytest.raises(ValueError, match=r"chip name 'gc200'.*differs in tiles"):
        C.Candidate(hardware.chip("gc200").replace(tiles=736))
    one_layer = dataclasses.replace(workloads.model("bert-base"), layers=1)
    with pytest.raises(ValueError, match=r"model name 'bert-base'.*differs in layers"):
        C.Case(model=one_layer)
    assert C.Candidate(hardware.chip("gc200")).chip is hardware.chip(
        "gc200"
    )  # the preset itself: fine
    assert (
        C.Candidate(hardware.chip("gc200").replace(name="my-chip", tiles=736)).chip.name
        == "my-chip"
    )


def test_a_config_chip_based_on_a_preset_is_renamed_and_priced_on_its_own():
    d = {"candidates": [{"chip": {"base": "gc200", "tiles": 736}}, "a100-80gb:1"]}
    with pytest.raises(ValueError, match=r"no price per chip-hour for chip 'gc200\*'"):
        F.case_from_dict(d)
    case = F.case_from_dict(d, prices={"gc200*": 1.0})
    assert (
        case.candidates[0].chip.name == "gc200*"
        and case.prices.chip_hour(case.candidates[0].chip) == 1.0
    )
    named = {"candidates": [{"chip": {"base": "gc200", "name": "a100-80gb"}}]}
    with pytest.raises(ValueError, match=r"candidates\[0\]: chip name 'a100-80gb'"):
        F.case_from_dict(named)


def test_a_corrupt_numba_cache_entry_is_compiled_afresh(tmp_path):
    """Numba's own cache: an index file of random bytes is read as a miss (one line), not a
    crash, and written anew."""
    (tmp_path / "kern.py").write_text(
        "from numba import njit\n\n\n@njit(cache=True)\ndef twice(x):\n    return 2 * x\n"
    )
    (tmp_path / "run.py").write_text(
        f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\nimport ipusim, kern\n"
        "print(kern.twice(21))\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "nb")}
    first = subprocess.run(
        [sys.executable, str(tmp_path / "run.py")], env=env, capture_output=True, text=True
    )
    (index,) = (tmp_path / "nb").rglob("*.nbi")
    index.write_bytes(np.random.default_rng(1).bytes(300))
    again = subprocess.run(
        [sys.executable, str(tmp_path / "run.py")], env=env, capture_output=True, text=True
    )
    assert first.stdout == again.stdout == "42\n" and first.stderr == ""
    notes = again.stderr.splitlines()
    assert len(notes) == 1 and "could not be read" in notes[0], again.stderr
    third = subprocess.run(
        [sys.executable, str(tmp_path / "run.py")], env=env, capture_output=True, text=True
    )
    assert third.stdout == "42\n" and third.stderr == ""  # the index was written anew


def test_a_batch_that_fits_only_padded_is_charged_as_the_larger_batch():
    """Fit not monotone in rows (the planner tiles a larger batch differently): the rows that do
    not fit take the time of the fewest larger rows that fit, so the built table verifies."""
    from ipusim.serving import table_cache, tables

    inf = np.inf
    raw = np.array(
        [[0, 0, 0], [0, 1.0, inf], [0, inf, inf], [0, inf, 3.0], [0, 2.5, inf], [0, inf, inf]]
    )
    assert table_cache.times_check(raw, zero_edges=True) is not None
    fixed = tables.pad_to_a_fitting_batch(raw)
    assert table_cache.times_check(fixed, zero_edges=True) is None
    want = np.array(
        [[0, 0, 0], [0, 1.0, 3.0], [0, 2.5, 3.0], [0, 2.5, 3.0], [0, 2.5, inf], [0, inf, inf]]
    )
    np.testing.assert_array_equal(fixed, want)
    np.testing.assert_array_equal(raw[3, 2], 3.0)  # the input is not changed
