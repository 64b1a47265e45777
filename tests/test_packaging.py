"""One dependency list: environment.yml must mirror pyproject.toml; .ci/run must be the README's."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _norm(req: str) -> str:
    return re.sub(r"\s+", "", req).lower().replace("_", "-")


def _pyproject_requirements() -> set[str]:
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = set(map(_norm, proj["dependencies"]))
    for extra in proj["optional-dependencies"].values():
        reqs |= {_norm(r) for r in extra if not r.startswith("ipusim[")}
    return reqs


def _environment_requirements() -> tuple[set[str], list[str]]:
    """The conda and pip entries of environment.yml's ``dependencies:`` section."""
    conda, pip = set(), []
    section, in_pip = None, False
    for line in (ROOT / "environment.yml").read_text().splitlines():
        s = line.split("#", 1)[0].rstrip()
        if not s.strip():
            continue
        top = re.match(r"^(\w[\w-]*):", s)
        if top:
            section, in_pip = top.group(1), False
            continue
        if section != "dependencies":
            continue
        if s.strip() == "- pip:":
            in_pip = True
            continue
        m = re.match(r"^(\s*)-\s+(.+)$", s)
        item = m.group(2).strip().strip('"')
        if in_pip and len(m.group(1)) > 2:
            pip.append(item)
        else:
            in_pip = False
            if re.split(r"[<>=! ]", item)[0] not in ("python", "pip"):
                conda.add(_norm(item))
    return conda, pip


def test_environment_yml_mirrors_pyproject():
    conda, pip = _environment_requirements()
    assert conda == _pyproject_requirements(), (
        f"only in environment.yml: {sorted(conda - _pyproject_requirements())}; "
        f"only in pyproject.toml: {sorted(_pyproject_requirements() - conda)}"
    )
    assert any(p.replace('"', "").replace("'", "") == "-e .[dev]" for p in pip), pip


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```(?:bash|sh)\n(.*?)```", readme, flags=re.S)
    assert len(blocks) >= 2, "README must open with two command blocks"
    test_cmd = blocks[1].strip()
    ci = (ROOT / ".ci" / "run").read_text()
    ci_cmd = [ln for ln in ci.splitlines() if ln.strip() and not ln.startswith("#")][-1].strip()
    assert ci_cmd.replace(" -q", "") == test_cmd.replace(" -q", ""), (ci_cmd, test_cmd)
