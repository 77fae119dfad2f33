#!/usr/bin/env python3
"""Run the test suite against real Slurm releases, one after the other.

    python tests/matrix.py            # the README's test command (CI): the whole suite on
                                      # Slurm 22.05, then the real-Slurm core on 25.11 with real pyslurm
    python tests/matrix.py --full     # every release (22.05 23.11 24.11 25.11 26.05): every real-Slurm
                                      # test on each, pyslurm on 25.11; writes docs/testing.md's compatibility table
    python tests/matrix.py --versions 24.11,26.05 [--full] [-- PYTEST ARGS]

Each part starts that release's dev cluster (``deploy/dev-cluster/up --slurm VERSION``: Debian's
package for 22.05, any other release built once from ../shared/slurm-src, see the dev-cluster
README), runs pytest with ``FAIRSHARED_SLURM_VERSION`` set, and reports passed / failed / skipped
and its wall time.  On 25.11 it builds pyslurm 25.11 from PyPI against that Slurm, once, into a
virtualenv beside the build (``/var/tmp/fairshared-slurm/venv-25.11.x``) with this checkout and its
dependencies installed, and runs the part with that interpreter, so the pyslurm source and updater
are tested for real.  That virtualenv sees no other site-packages: run from a venv (as the README
says) or from the system Python, it holds everything it needs.  Only one dev cluster
runs at a time: each part stops the previous one, and the last one is stopped at the end.  Exit
status 0 only if every part ran tests and none failed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
UP = REPO / "deploy" / "dev-cluster" / "up"
BUILDS = Path(os.environ.get("FAIRSHARED_SLURM_BUILDS", "/var/tmp/fairshared-slurm"))
TABLE_PAGE = REPO / "docs" / "testing.md"  # where the compatibility table lives
VERSIONS = ("22.05", "23.11", "24.11", "25.11", "26.05")
DEFAULT = "22.05"
PYSLURM = {"25.11": "pyslurm>=25.11,<25.12"}  # the pyslurm release that builds against each Slurm

# The real-Slurm tests that must pass on every release (the matrix), and the pyslurm ones.
CORE = ["tests/test_slurm_differential.py", "tests/test_push_cli_slurm.py", "tests/test_daemon_slurm.py",
        "tests/test_ha_slurm.py", "tests/test_rate_limit_slurm.py", "tests/test_pull_slurm.py",
        "tests/test_assoc_priority_slurm.py"]
PYSLURM_TESTS = ["-m", "pyslurm"]
TABLE_BEGIN, TABLE_END = "<!-- matrix:begin -->", "<!-- matrix:end -->"


@dataclass
class Part:
    version: str
    what: str  # "whole suite", "real-Slurm tests", "core"
    args: list[str]
    pyslurm: bool = False
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    setup_seconds: float = 0.0
    slurm: str = ""  # the full version the cluster ran
    notes: list[str] = field(default_factory=list)


def log(msg: str) -> None:
    print(f"matrix: {msg}", file=sys.stderr, flush=True)


def up(version: str) -> dict[str, str]:
    """Start (building first if needed) the dev cluster of ``version``; its export lines."""
    proc = subprocess.run([str(UP), "--slurm", version, "--quiet"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"matrix: deploy/dev-cluster/up --slurm {version} failed:\n{proc.stderr[-4000:]}")
    out = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"export (\w+)=(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).removesuffix(":$PATH")
    return out


def pyslurm_python(version: str, exports: dict[str, str]) -> str:
    """A virtualenv with pyslurm built against this Slurm's headers and library (once), and this
    checkout installed in it; returns its python."""
    bindir = exports["PATH"].split(":")[0]
    prefix = Path(bindir).parent
    venv = BUILDS / f"venv-{prefix.name}"
    py = venv / "bin" / "python"
    probe = [str(py), "-c", "import os; os.environ['PYSLURM_DISABLE_AUTO_INIT']='1'; import pyslurm"]
    if not py.exists() or subprocess.run(probe, capture_output=True).returncode != 0:
        log(f"building {PYSLURM[version]} against Slurm {prefix.name} into {venv} (about 5 min)")
        new_venv(venv)
        env = dict(os.environ, SLURM_INCLUDE_DIR=str(prefix / "include"), SLURM_LIB_DIR=str(prefix / "lib"))
        logf = BUILDS / f"pyslurm-{prefix.name}.log"
        with open(logf, "w") as fh:
            for argv in ([str(py), "-m", "pip", "install", "cython>=3", "setuptools>=68", "wheel"],
                         [str(py), "-m", "pip", "install", "--no-build-isolation", PYSLURM[version]]):
                if subprocess.run(argv, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode != 0:
                    raise SystemExit(f"matrix: {' '.join(argv[2:])} failed; see {logf}")
    install_checkout(py)
    return str(py)


def new_venv(venv: Path) -> Path:
    """An empty virtualenv at ``venv`` (replacing what is there); its python.

    Not ``--system-site-packages``: run from a venv, "system" is the base Python beneath it, which
    has none of the project's dependencies (seen: the pyslurm part failed on ``import structlog``)."""
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    return venv / "bin" / "python"


def install_checkout(py: Path) -> None:
    """This checkout, editable, with the dependencies its tests need, into ``py``'s environment."""
    argv = [str(py), "-m", "pip", "install", "-q", "-e", f"{REPO}[test,plot]"]
    proc = subprocess.run(argv, capture_output=True, text=True,
                          env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    if proc.returncode != 0:
        raise SystemExit(f"matrix: {' '.join(argv)} failed:\n{proc.stderr[-4000:]}")


def run_part(part: Part, extra: list[str]) -> None:
    t0 = time.monotonic()
    exports = up(part.version)
    python = pyslurm_python(part.version, exports) if part.pyslurm else sys.executable
    part.setup_seconds = time.monotonic() - t0
    xml = BUILDS / f"junit-{part.version}-{part.what.replace(' ', '-')}.xml"
    env = dict(os.environ, FAIRSHARED_SLURM_VERSION=part.version)
    # as if activated: the interpreter's `fairshared` (the daemons the tests start) first on PATH, also
    # when this runs as /path/to/venv/bin/python tests/matrix.py without activating the venv
    env["PATH"] = str(Path(python).parent) + ":" + env["PATH"]
    argv = [python, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={xml}", *part.args, *extra]
    log(f"Slurm {part.version}, {part.what}: {' '.join(argv[1:])}")
    t1 = time.monotonic()
    rc = subprocess.run(argv, cwd=REPO, env=env).returncode
    part.seconds = time.monotonic() - t1
    count(part, xml)
    part.slurm = subprocess.run(["scontrol", "--version"], capture_output=True, text=True,
                                env=dict(os.environ, PATH=exports["PATH"] + ":" + os.environ["PATH"])
                                ).stdout.split()[-1]
    if rc not in (0, 1) or (rc == 1 and not part.failed):
        part.failed += 1
        part.notes.append(f"pytest exited {rc}")


def count(part: Part, xml: Path) -> None:
    try:
        root = ET.parse(xml).getroot()
    except (OSError, ET.ParseError):
        return
    for case in root.iter("testcase"):
        kinds = {c.tag for c in case}
        if kinds & {"failure", "error"}:
            part.failed += 1
        elif "skipped" in kinds:
            part.skipped += 1
            for c in case:
                if c.tag == "skipped" and c.get("type") == "pytest.xfail":
                    part.notes.append(f"{case.get('name')}: {c.get('message', '')}")
        else:
            part.passed += 1


def plan(versions: list[str], full: bool) -> list[Part]:
    parts = []
    for v in versions:
        if v == DEFAULT:
            parts.append(Part(v, "whole suite", ["-m", "not pyslurm"]))
        else:
            parts.append(Part(v, "real-Slurm tests" if full else "core",
                              ["-m", "slurm and not pyslurm"] + ([] if full else CORE)))
        if v in PYSLURM:
            parts.append(Part(v, "pyslurm", PYSLURM_TESTS, pyslurm=True))
    return parts


HEADER = ["| Slurm | tests | passed | failed | skipped | known differences (xfail) | setup min | tests min | date |",
          "|---|---|---|---|---|---|---|---|---|"]


def row(p: Part, when: str) -> str:
    return (f"| {p.slurm or p.version} | {p.what} | {p.passed} | {p.failed} | {p.skipped} | "
            f"{'; '.join(p.notes) or 'none'} | {p.setup_seconds / 60:.1f} | {p.seconds / 60:.1f} | {when} |")


def table(parts: list[Part], total: float) -> str:
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    return "\n".join([*HEADER, *(row(p, when) for p in parts), "",
                      f"{total / 60:.0f} min in all on {os.cpu_count()} cores."])


def _key(line: str) -> tuple:
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    series = tuple(int(x) for x in cells[0].split(".")[:2])
    order = ("whole suite", "core", "real-Slurm tests", "pyslurm")
    return series, order.index(cells[1]) if cells[1] in order else 9, cells[1]


def write_table(parts: list[Part]) -> None:
    """Put this run's rows into docs/testing.md's compatibility table, replacing the rows of the same release
    and tests and keeping the others (each row says when it ran)."""
    readme = TABLE_PAGE.read_text()
    if TABLE_BEGIN not in readme:
        log("docs/testing.md has no compatibility-table markers; not written")
        return
    head, rest = readme.split(TABLE_BEGIN, 1)
    old, tail = rest.split(TABLE_END, 1)
    rows = {_key(ln)[:3:2]: ln for ln in old.splitlines() if ln.startswith("| ") and not ln.startswith("| Slurm")}
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    for p in parts:
        line = row(p, when)
        rows[_key(line)[:3:2]] = line
    body = [rows[k] for k in sorted(rows, key=lambda k: _key(rows[k]))]
    text = "\n".join([*HEADER, *body, "",
                      "Each row is the last run of `python tests/matrix.py --full` that covered that release and "
                      "those tests (`--versions` runs some releases only); setup is starting the cluster and, "
                      "the first time, building Slurm or pyslurm."])
    TABLE_PAGE.write_text(f"{head}{TABLE_BEGIN}\n{text}\n{TABLE_END}{tail}")


def stop_cluster() -> None:
    """Stop the last part's cluster with ``down`` (SIGTERM: slurmctld saves its job state).

    A cluster left running dies with whatever ends the machine's session, maybe by SIGKILL a
    second after the last clean-up's scancel: seen, slurmctld then recovered the cancelled jobs
    at its next start, and they kept the next run's tests waiting for an empty queue."""
    down = UP.with_name("down")
    rc = subprocess.run([str(down)], cwd=REPO, check=False).returncode
    if rc:
        log(f"{down} exited {rc}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true",
                    help="every real-Slurm test on every release (or on --versions); write their rows into "
                         "docs/testing.md's compatibility table")
    ap.add_argument("--versions", help=f"comma-separated releases (default: {DEFAULT},25.11; --full: all of "
                                        f"{','.join(VERSIONS)})")
    ap.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    a = ap.parse_args(argv)
    versions = a.versions.split(",") if a.versions else list(VERSIONS if a.full else (DEFAULT, "25.11"))
    for v in versions:
        if v not in VERSIONS:
            ap.error(f"--versions: {v!r} is not one of {', '.join(VERSIONS)}")
    t0 = time.monotonic()
    parts = plan(versions, a.full)
    try:
        for part in parts:
            run_part(part, a.pytest_args)
            if a.full and not a.pytest_args:  # each part's row as soon as it ran: a run stopped
                write_table([part])           # half-way (two hours on 2 cores) keeps what it measured
    finally:
        stop_cluster()
    total = time.monotonic() - t0
    print("\n" + table(parts, total) + "\n")
    passed = sum(p.passed for p in parts)
    failed = sum(p.failed for p in parts)
    skipped = sum(p.skipped for p in parts)
    empty = [f"{p.version} {p.what}" for p in parts if not p.passed]
    if empty:
        log(f"no test passed in: {', '.join(empty)}")
    print(f"matrix: {passed} passed, {failed} failed, {skipped} skipped")
    return 0 if not failed and not empty else 1


if __name__ == "__main__":
    sys.exit(main())
