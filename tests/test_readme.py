"""The README's script example runs and prints what the README says it prints."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_script_example_output_matches():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Without Jupyter"):]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)
    shown = re.search(r"prints\n\n```\n(.*?)```", section, flags=re.S).group(1)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == shown.strip()


def test_readme_cli_examples_run():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Command line\n.*?```\n(.*?)```", text, flags=re.S).group(1)
    for line in block.strip().splitlines():
        cmd = line.split("#", 1)[0].split()
        assert cmd[:3] == ["python", "-m", "ipusim"], line
        if "--requests" in cmd:  # keep the suite fast: same command, fewer requests
            cmd[cmd.index("--requests") + 1] = "20000"
        out = subprocess.run([sys.executable, *cmd[1:]], capture_output=True, text=True, timeout=600, check=False)
        assert out.returncode == 0, f"{line}\n{out.stderr}"
        assert out.stdout.strip(), line
