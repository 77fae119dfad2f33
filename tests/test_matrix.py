"""The README's two commands work from a fresh virtualenv, and CI runs the README's test command.

Issue 18 item 4: run from a venv, the 25.11 part's pyslurm venv was made with
``--system-site-packages`` from the base Python beneath the venv, which has none of the project's
dependencies (9 tests failed on ``import structlog``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import matrix  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    """The ```sh blocks on the README's first screen (before the first ---)."""
    first = (REPO / "README.md").read_text().split("\n---\n", 1)[0]
    return [b.strip() for b in re.findall(r"```sh\n(.*?)```", first, re.S)]


def test_ci_runs_the_readme_test_command_from_a_venv():
    try_it, tests = readme_commands()
    assert try_it.startswith("python3 -m venv .venv && . .venv/bin/activate && ")
    assert tests.startswith("python3 -m venv .venv && . .venv/bin/activate && ")
    assert tests.endswith("python tests/matrix.py")
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert ci[-1] == tests  # exactly the README's command, the last thing CI does


def test_a_matrix_venv_made_from_a_venv_has_the_project_and_its_dependencies(tmp_path):
    """What the 25.11 part does before building pyslurm into it, from whichever Python runs the matrix
    (the suite itself runs from a venv in CI); then the README's try-it command's daemon runs from it."""
    py = matrix.new_venv(tmp_path / "venv")
    bare = subprocess.run([str(py), "-c", "import structlog"], capture_output=True, text=True)
    assert bare.returncode != 0, "a new venv must not see the outer environment's packages"
    matrix.install_checkout(py)
    probe = subprocess.run([str(py), "-c", "import fairshared.cli, structlog, prometheus_client, pydantic, "
                                           "apscheduler, waitress, pytest, hypothesis; print('ok')"],
                           capture_output=True, text=True)
    assert probe.stdout.strip() == "ok", probe.stderr
    once = subprocess.run([str(py.parent / "fairshared"), "run", "--demo", "--once", "--dry-run",
                           "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               "XDG_STATE_HOME": str(tmp_path)})
    assert once.returncode == 0, once.stderr[-2000:]
    cycles = [r for r in map(json.loads, once.stderr.splitlines()) if r.get("event") == "cycle"]
    assert [c["outcome"] for c in cycles] == ["success"], once.stderr[-2000:]
    assert cycles[0]["pending_jobs"] > 0
