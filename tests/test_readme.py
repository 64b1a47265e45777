"""The README's script example runs and prints what the README says it prints; its CLI examples run."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ipusim.cli import main

ROOT = Path(__file__).resolve().parent.parent


def test_readme_script_example_output_matches():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Without Jupyter") :]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)
    shown = re.search(r"prints\n\n```\n(.*?)```", section, flags=re.S).group(1)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == shown.strip()


def _cli_examples() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Command line\n.*?```\n(.*?)```", text, flags=re.S).group(1)
    cmds = []
    for line in block.strip().splitlines():
        cmd = line.split("#", 1)[0].split()
        assert cmd[:3] == ["python", "-m", "ipusim"], line
        if "--requests" in cmd:  # keep the suite fast: same command, fewer requests
            cmd[cmd.index("--requests") + 1] = "20000"
        cmds.append(cmd)
    return cmds


def test_readme_cli_entry_point_runs():
    """``python -m ipusim`` itself, in a fresh interpreter, on the first example."""
    cmd = _cli_examples()[0]
    out = subprocess.run(
        [sys.executable, *cmd[1:]], capture_output=True, text=True, timeout=600, check=False
    )
    assert out.returncode == 0, f"{' '.join(cmd)}\n{out.stderr}"
    assert out.stdout.strip()


def test_readme_cli_examples_run(capsys):
    """Every example through the same ``main`` in this process (one interpreter start and one set
    of warm caches for all of them). A sweep that would start its own local cluster
    (``--workers N``) runs with ``--serial`` here: the CLI on Dask is tested in
    tests/test_sweep_dask.py on the session's cluster, and the unchanged command, cluster start
    included, in ``test_readme_sweep_example_starts_its_own_cluster`` (slow)."""
    for cmd in _cli_examples():
        argv = cmd[3:]
        if argv[0] == "sweep" and "--workers" in argv:
            i = argv.index("--workers")
            argv = [*argv[:i], "--serial", *argv[i + 2 :]]
        rc = main(argv)
        out = capsys.readouterr()
        assert rc == 0, f"{' '.join(cmd)}\n{out.err}"
        assert out.out.strip(), " ".join(cmd)


@pytest.mark.slow
def test_readme_sweep_example_starts_its_own_cluster():
    for cmd in _cli_examples():
        if cmd[3] == "sweep":
            out = subprocess.run(
                [sys.executable, *cmd[1:]], capture_output=True, text=True, timeout=600, check=False
            )
            assert out.returncode == 0, f"{' '.join(cmd)}\n{out.stderr}"
            assert "dask on" in out.stdout
