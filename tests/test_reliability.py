"""Faults run for real: a read-only root, a full disk for each cache and for the user's outputs.

Each test runs ``ipusim`` in a private mount namespace (``unshare -m``, as root) where it
remounts the root read-only or mounts a 64 KiB tmpfs; the mounts vanish with the namespace.
Where that is not possible (not root, no ``unshare``, a container without CAP_SYS_ADMIN) the
tests are skipped, saying why. What must hold: every command runs uncached with one line on
stderr when nothing (or nothing but its output) is writable, and only the user's own output
failing is an error (exit 2, one line), with no file left half-written.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

PY = sys.executable
SMALL = "64k"  # the tmpfs: a few Parquet chunks or CSV pages


@pytest.fixture(scope="module")
def ns(tmp_path_factory):
    """Run a shell script in a private mount namespace: ``ns(script, mount=DIR)`` mounts a
    64 KiB tmpfs on DIR first (``mount`` None: none). Skips the module where this cannot work."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip(
            "needs root and unshare (a private mount namespace) to make a read-only root or a tiny disk"
        )
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux) for a private mount namespace")
    probe_dir = tmp_path_factory.mktemp("probe")
    probe = subprocess.run(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            f"mount --make-rprivate / && mount -t tmpfs -o size={SMALL} tmpfs {probe_dir}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0:
        pytest.skip(
            f"unshare -m / mount refused here ({probe.stderr.strip()[:120]}): needs CAP_SYS_ADMIN"
        )

    def run(script, *, mount=None, size=SMALL, env=None, timeout=300):
        pre = "mount --make-rprivate / && "
        if mount is not None:
            pre += f"mount -t tmpfs -o size={size} tmpfs {mount} && "
        return subprocess.run(
            ["unshare", "-m", "sh", "-c", pre + script],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
        )

    return run


def _notes(stderr: str) -> list:
    """ipusim's own lines on stderr, notes and errors (a table build's progress bar may stand beside them)."""
    lines = stderr.splitlines()
    assert not any("Traceback" in ln for ln in lines), stderr
    return [ln for ln in lines if ln.startswith("ipusim")]


SIMULATE = f"{PY} -m ipusim simulate --chip gc200 --model bert-base --batch 4 --seq-len 128 --json"
SERVE = f"{PY} -m ipusim serve --chip a100-80gb --max-batch 2 --requests 200 --rate 50 --json"
FIXED = f"{PY} -m ipusim serve --service fixed --service-ms 1 --rate 300 --requests 4000"


def test_a_read_only_root_runs_every_cache_off_with_one_line_each(ns, tmp_path):
    """No Numba cache, no table cache, no temp dir: simulate and serve still run (output as a
    normal run's), saying so; the user's --csv there is the only error: exit 2, one line, no file."""
    env = {"IPUSIM_CACHE_DIR": str(tmp_path / "tables")}
    want_sim = subprocess.run(
        SIMULATE.split(), capture_output=True, text=True, env={**os.environ, **env}
    )
    want_serve = subprocess.run(
        SERVE.split(), capture_output=True, text=True, env={**os.environ, "IPUSIM_CACHE_DIR": "off"}
    )
    assert want_sim.returncode == 0 and want_serve.returncode == 0
    ro = "mount -o remount,bind,ro / && "
    got = ns(ro + SIMULATE, env=env)
    assert got.returncode == 0 and got.stdout == want_sim.stdout, got.stderr
    notes = _notes(got.stderr)
    assert (
        len(notes) == 1 and "Numba" in notes[0] and "cached beside the package are read" in notes[0]
    )
    got = ns(ro + SERVE, env=env)
    assert got.returncode == 0 and got.stdout == want_serve.stdout, got.stderr
    notes = _notes(got.stderr)
    assert (
        len(notes) == 2 and "cannot write the table cache" in notes[1] and "Read-only" in notes[1]
    )
    out = tmp_path / "r.csv"
    got = ns(ro + FIXED + f" --csv {out}")
    notes = _notes(got.stderr)
    assert (
        got.returncode == 2
        and notes[-1].startswith("ipusim serve: error:")
        and str(out) in notes[-1]
    )
    assert not out.exists()


def test_a_full_disk_for_the_numba_cache_runs_uncached(ns, tmp_path):
    """A kernel compiled where its cache cannot be saved (ENOSPC): it runs, said once."""
    disk = tmp_path / "disk"
    disk.mkdir()
    (tmp_path / "kern.py").write_text(
        textwrap.dedent("""
        from numba import njit

        @njit(cache=True)
        def twice(x):
            return 2 * x
    """)
    )
    (tmp_path / "run.py").write_text(
        f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\nimport ipusim, kern\n"
        "print(kern.twice(21))\n"
    )
    fill = f"dd if=/dev/zero of={disk}/fill bs=1k count=64 2>/dev/null; "
    got = ns(fill + f"{PY} {tmp_path}/run.py", mount=disk, env={"NUMBA_CACHE_DIR": str(disk)})
    assert got.returncode == 0 and got.stdout.strip() == "42", got.stderr
    notes = _notes(got.stderr)
    assert len(notes) == 1 and "cannot be written" in notes[0] and "No space left" in notes[0]


def test_a_full_disk_for_the_table_cache_runs_uncached(ns, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    want = subprocess.run(
        SERVE.split(), capture_output=True, text=True, env={**os.environ, "IPUSIM_CACHE_DIR": "off"}
    )
    fill = f"mkdir {disk}/tables && dd if=/dev/zero of={disk}/fill bs=1k count=64 2>/dev/null; "
    got = ns(
        fill + SERVE + f"; ls -A {disk}/tables",
        mount=disk,
        env={"IPUSIM_CACHE_DIR": f"{disk}/tables"},
    )
    assert got.returncode == 0 and got.stdout == want.stdout, (
        got.stderr
    )  # ls lists nothing: no entry, no temporary
    notes = _notes(got.stderr)
    assert (
        len(notes) == 1
        and "cannot write the table cache" in notes[0]
        and "No space left" in notes[0]
    )


def test_no_output_is_left_half_written_on_a_small_disk(ns, tmp_path):
    """serve --csv (new and over an old file), checklist --out (its report stood in for: 230 KB)
    and a sweep's table on a disk too small for them: exit 2 with one line, the old file as it
    was, nothing else on the disk."""
    disk = tmp_path / "disk"
    disk.mkdir()
    (tmp_path / "ck.py").write_text(
        textwrap.dedent("""
        import sys, types
        import ipusim.checklist as ck
        from ipusim import cli

        class Report:
            verdict = types.SimpleNamespace(headline="verdict")

            def to_markdown(self):
                return "a line of a long report\\n" * 10_000

        ck.run_checklist = lambda case, show_progress=True: Report()
        sys.exit(cli.main(["checklist", "--out", sys.argv[1], "--no-progress"]))
    """)
    )
    script = (
        f"echo old > {disk}/old.csv; "
        f"{PY} {tmp_path}/ck.py {disk}/report.md; echo rc=$?; "
        f"{FIXED} --csv {disk}/new.csv; echo rc=$?; "
        f"{FIXED} --csv {disk}/old.csv; echo rc=$?; "
        f"{PY} -m ipusim sweep --task spin --vary rep=0:1999:2000 --set seconds=0 --serial --json "
        f"--out {disk}/s.csv >/dev/null; echo rc=$?; "
        f"cat {disk}/old.csv; ls -A {disk}; ls -A {disk}/s.csv.parts"
    )
    got = ns(script, mount=disk)
    lines = got.stdout.split()
    assert lines[:4] == ["rc=2", "rc=2", "rc=2", "rc=2"], (got.stdout, got.stderr)
    # no half file and no temporary: the old file, and the sweep's whole chunks kept for --resume
    assert lines[4] == "old" and lines[5:7] == ["old.csv", "s.csv.parts"], got.stdout
    assert all(x.startswith("part-") and x.endswith(".parquet") for x in lines[7:]), got.stdout
    errors = _notes(got.stderr)
    assert len(errors) == 4 and all("No space left on device" in e for e in errors), got.stderr


def test_a_sweep_stopped_by_a_full_disk_resumes_from_its_last_chunk(ns, tmp_path):
    """Chunks of 10 rows until the disk fills; after space is freed, resume runs only the rest."""
    disk = tmp_path / "disk"
    disk.mkdir()
    code = textwrap.dedent(f"""
        import json, os, pathlib
        from ipusim import sweep
        out, kw = "{disk}/s.parquet", dict(vary={{"rep": list(range(200))}}, fixed={{"seconds": 0.0}},
                                            mode="serial", chunk_rows=10, batch_size=10, show_progress=False)
        try:
            sweep.run("spin", out=out, **kw)
            raise SystemExit("the disk did not fill")
        except OSError as err:
            stopped = err.strerror
        parts = sorted(p.name for p in pathlib.Path(out + ".parts").iterdir())
        held = sum(len(sweep.read_table(p)) for p in pathlib.Path(out + ".parts").glob("part-*"))
        os.unlink("{disk}/fill")
        res = sweep.run("spin", out=out, resume=True, **kw)
        print(json.dumps({{"stopped": stopped, "parts": parts, "held": held, "skipped": res.skipped, "computed": res.computed,
                          "rows": len(sweep.read_table(out))}}))
    """)
    (tmp_path / "run.py").write_text(code)
    got = ns(
        f"dd if=/dev/zero of={disk}/fill bs=1k count=240 2>/dev/null; {PY} {tmp_path}/run.py",
        mount=disk,
        size="256k",
    )
    assert got.returncode == 0, got.stderr
    r = json.loads(got.stdout)
    kept = len(r["parts"])
    assert r["stopped"] == "No space left on device" and kept >= 1
    assert all(p.startswith("part-") for p in r["parts"])  # whole chunks only, no temporary
    # every row in the kept parts (whole chunks, then what fit of the held rows) is skipped
    assert (r["skipped"], r["computed"], r["rows"]) == (r["held"], 200 - r["held"], 200)


def test_a_write_error_keeps_the_rows_held_that_still_fit(tmp_path, monkeypatch):
    """Runs everywhere: a disk with room for 37 rows (a write past it raises ENOSPC). Chunks of
    10 fill 30 rows; the fourth chunk fails and is written in halves (5, then 2), so 37 rows
    are kept, not 30, and a resume after space is freed runs only the other 163 points."""
    import errno

    from ipusim import sweep
    from ipusim.sweep import output

    real = output.Sink._write_part
    room = {"rows": 37}

    def small_disk(self, rows):
        if self.written + len(rows) > room["rows"]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(self, rows)

    monkeypatch.setattr(output.Sink, "_write_part", small_disk)
    out = tmp_path / "s.parquet"
    kw = dict(
        vary={"rep": list(range(200))},
        fixed={"seconds": 0.0},
        mode="serial",
        chunk_rows=10,
        batch_size=10,
        show_progress=False,
    )
    with pytest.raises(OSError) as stop:
        sweep.run("spin", out=out, **kw)
    assert stop.value.errno == errno.ENOSPC
    parts = sorted((tmp_path / "s.parquet.parts").iterdir())
    kept = [len(output.read_table(p)) for p in parts]
    assert kept == [10, 10, 10, 5, 2], kept
    room["rows"] = 10**9  # space freed
    res = sweep.run("spin", out=out, resume=True, **kw)
    assert (res.skipped, res.computed) == (37, 163)
    table = sweep.read_table(out)
    assert len(table) == 200 and table["point_key"].is_unique
    assert sorted(table["rep"]) == list(range(200))
