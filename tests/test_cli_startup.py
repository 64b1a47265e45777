"""Start-up of the command line: a command imports only what it needs.

Every ``ipusim`` run pays for what it imports (numpy and Numba are most of a warm ``serve``);
these checks fail when a module-level import brings a heavy package, or a model a command does
not use, back onto the command-line path. Each runs a fresh interpreter (``sys.modules`` of this
test process is shared with every other test) and builds parsers only: no kernel is run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

# never needed to parse arguments, nor to run serve or checklist with cached tables
HEAVY = (
    "matplotlib",
    "pandas",
    "pyarrow",
    "pydantic",
    "ipywidgets",
    "IPython",
    "dask",
    "distributed",
    "simpy",
    "asyncio",
    "tomllib",
    "ipusim.plots",
    "ipusim.widgets",
    "ipusim.sweep",
)


def _modules_after(code: str) -> set[str]:
    """Names in ``sys.modules`` after ``code`` ran in a fresh interpreter."""
    script = textwrap.dedent(code) + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _loaded(mods: set[str], name: str) -> bool:
    return name in mods or any(m.startswith(name + ".") for m in mods)


def test_serve_and_checklist_commands_import_no_heavy_package_nor_machine_model():
    mods = _modules_after("""
        from ipusim import cli
        for name in ("serve", "checklist"):
            cli.build_parser(name)
        import ipusim.commands.serve, ipusim.commands.checklist, ipusim.serving
    """)
    assert (
        "ipusim.commands.serve" in mods
    )  # the check looked at a process that imported the command
    bad = [m for m in HEAVY if _loaded(mods, m)]
    assert not bad, f"importing the serve/checklist commands loaded {bad}"
    assert "tqdm" not in mods  # the progress bar is imported when a run shows one
    # with its table cached, serve reads seconds from the table: the machine models (tile
    # simulator, placement, GPU model) are imported only when a table is built
    bad = [
        m
        for m in (
            "ipusim.machine",
            "ipusim.tiles",
            "ipusim.gpu",
            "ipusim.placement",
            "ipusim.tileplan",
            "ipusim.energy",
        )
        if _loaded(mods, m)
    ]
    assert not bad, f"importing serve loaded the machine model: {bad}"


def test_progress_bar_off_imports_nothing_and_on_skips_asyncio():
    mods = _modules_after("""
        import io, sys
        from ipusim.config import progress
        bar = progress(total=3, desc="x", disable=True)
        bar.set_postfix_str("a"); bar.update(1); bar.close()
        assert list(progress([1, 2], disable=True)) == [1, 2]
        assert "tqdm" not in sys.modules, "a bar that is off imported tqdm"
        bar = progress(total=2, desc="x", disable=False, file=io.StringIO())
        bar.update(2); bar.close()
    """)
    assert (
        "tqdm" in mods and "asyncio" not in mods
    )  # tqdm.std in a terminal; tqdm.auto only in Jupyter


def test_service_time_of_one_batch_is_the_kernels_answer():
    """``ServiceModel.time_s`` prices a batch with the plain functions of ``batch_shape`` and
    ``lookup_s`` (no kernel load for a few calls from Python): the same seconds as the kernels,
    bit for bit, for padded, packed and length-free tables, and rows beyond the table."""
    import numpy as np

    from ipusim import packing
    from ipusim.serving import ServiceModel, fixed_service
    from ipusim.serving.service import batch_shape, lookup_s

    rng = np.random.default_rng(5)
    tab = np.cumsum(rng.uniform(1e-4, 3e-3, (9, 5)), axis=0)  # 8 rows x 4 columns of 128 tokens
    tab[0] = 0.0
    tab[:, 0] = 0.0
    tab[7:, 4] = np.inf  # long and many: does not fit
    devs = [
        ServiceModel("padded", tab, 128),
        ServiceModel("packed", tab[:, :2].copy(), 512, packed=True, pack_len=512),
        fixed_service(0.004, per_request_s=1e-4, max_batch=6),
    ]
    for dev in devs:
        for _ in range(60):
            lens = rng.integers(1, min(dev.max_len, 512) + 1, int(rng.integers(1, 25)))
            rows = None if rng.random() < 0.7 else int(rng.integers(1, 30))
            r, j, _ = batch_shape(
                dev.len_step,
                dev.packed,
                dev.pack_len,
                lens.size if rows is None else rows,
                int(lens.max()),
                int(lens.sum()),
            )
            if dev.packed:
                r = packing.first_fit_rows(
                    np.sort(lens)[::-1].copy(),
                    dev.pack_len,
                    dev.pack_len,
                    np.empty(lens.size, np.int64),
                )
            want = float(lookup_s(dev.table, r, j))
            got = dev.time_s(lens, rows=rows)
            assert got == want or (np.isinf(got) and np.isinf(want)), (
                dev.name,
                lens,
                rows,
                got,
                want,
            )


def test_progress_bars_are_off_in_headless_runs(monkeypatch):
    """IPUSIM_PROGRESS=0 (set by every headless notebook run) gives the do-nothing bar, so no
    executed notebook stores a frozen "0%" bar; unset, a full-size run shows one."""
    from ipusim import config

    monkeypatch.setenv("IPUSIM_QUICK", "0")
    monkeypatch.delenv("IPUSIM_PROGRESS", raising=False)
    assert config.progress_bars()
    monkeypatch.setenv("IPUSIM_PROGRESS", "0")
    assert not config.progress_bars()
    assert isinstance(config.progress([1]), config._NoBar)
