"""The type check (issue 28 §4): mypy, with pyproject.toml's ``[tool.mypy]``, over src/fairshared.

Run alone: ``python -m mypy`` from the repository's root (or ``python -m pytest tests/test_types.py``).
The cache goes to the test's temporary directory: nothing is written into the clone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def mypy(*args: str, cwd: Path, cache: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600, env=env)


def test_mypy_finds_no_error_in_src(tmp_path):
    res = mypy(cwd=ROOT, cache=tmp_path / "cache")
    out = res.stdout + res.stderr
    assert res.returncode == 0 and res.stdout.startswith("Success: no issues found in "), (
        f"mypy (exit {res.returncode}) over src/fairshared:\n{out}")


def test_a_source_or_updater_that_breaks_its_protocol_is_an_error(tmp_path):
    """The sources and updaters name the Protocol they implement, so a wrong signature or a missing
    method is mypy's error at the class, not a runner's AttributeError in a cycle."""
    module = tmp_path / "broken.py"
    module.write_text(
        "from fairshared.model import Snapshot\n"
        "from fairshared.records import PushAction\n"
        "from fairshared.sinks.base import AppliesEach, JobUpdater\n"
        "from fairshared.sources.base import Source\n"
        "\n"
        "\n"
        "class NoDetails(Source):\n"
        "    name = 'broken'\n"
        "    reads_details = False\n"
        "\n"
        "    def snapshot(self, *, jobs: bool = True) -> Snapshot:\n"  # line 11: details= missing
        "        raise NotImplementedError\n"
        "\n"
        "\n"
        "class NoApply(AppliesEach, JobUpdater):\n"
        "    name = 'broken'\n"
        "\n"
        "    def apply_one(self, action: PushAction) -> None:\n"
        "        pass\n"
        "\n"
        "\n"
        "NoApply()\n")  # line 22
    res = mypy(str(module), "--config-file", str(ROOT / "pyproject.toml"), cwd=tmp_path,
               cache=tmp_path / "cache", env={**os.environ, "MYPYPATH": str(ROOT / "src")})
    errors = [line.split(": error: ", 1) for line in res.stdout.splitlines() if ": error: " in line]
    assert [(where.removeprefix(str(tmp_path) + os.sep), what) for where, what in errors] == [
        ("broken.py:11", 'Signature of "snapshot" incompatible with supertype '
                         '"fairshared.sources.base.Source"  [override]'),
        ("broken.py:22", 'Cannot instantiate abstract class "NoApply" with abstract attribute "apply"  '
                         '[abstract]'),
    ], res.stdout + res.stderr
