"""A private munged for the tests: its own key, socket, pid, log and seed files in a temporary
directory; never the system's munged nor the dev cluster's.

``munged`` insists on its directories: the key and log directories readable by root alone (0700),
the socket's directory and every directory above it searchable by everybody (0755), so that a
non-root uid (``runuser -u nobody``) can reach the socket.  Run as root it needs ``--force``.
When munge is not installed: under CI=true it is installed with apt-get (as root), else the tests
skip with a one-line reason; under CI=true a missing munge is a failure, never a skip.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

MUNGED = "/usr/sbin/munged"
PACKAGES = ["munge"]


def unavailable(what: str, reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what}: {reason}")
    pytest.skip(f"{what}: {reason}")


def apt_install(packages: list[str], ready) -> str | None:
    """apt-get install ``packages`` (root under CI=true only); None when ``ready()`` after, else why not."""
    if os.environ.get("CI") != "true":
        return f"missing: apt-get install {' '.join(packages)}"
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return f"missing, and not root with apt-get to install {' '.join(packages)}"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=300",
               *packages]

    def apt(argv):
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)

    r = apt(install)
    if r.returncode != 0:  # update the lists only when the install fails
        apt(["apt-get", "update", "-q", "-o", "DPkg::Lock::Timeout=300"])
        r = apt(install)
    if r.returncode != 0:
        last = ((r.stderr or r.stdout).strip().splitlines() or [f"exit {r.returncode}"])[-1]
        return f"apt-get install {' '.join(packages)} failed: {last}"
    return None if ready() else f"apt-get installed {' '.join(packages)} but it is still missing"


def munge_ready() -> bool:
    return os.access(MUNGED, os.X_OK) and all(shutil.which(c) for c in ("munge", "unmunge"))


def ensure_munge() -> None:
    if not munge_ready():
        why = apt_install(PACKAGES, munge_ready)
        if why:
            unavailable("munge", why)


@dataclass
class Munged:
    """One private munged: ``socket`` to pass to munge/unmunge ``--socket``."""

    top: Path
    socket: str
    pid: int

    def mint(self, payload: bytes | None, as_user: str | None = None, ttl: int | None = None) -> str:
        """A credential made by ``munge`` (as ``as_user`` through runuser, else as this process)."""
        argv = ["munge", "--socket", self.socket] + (["--no-input"] if payload is None else
                                                    ["--string", payload.decode()])
        if ttl is not None:
            argv += ["--ttl", str(ttl)]
        if as_user is not None:
            argv = ["runuser", "-u", as_user, "--"] + argv
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def stop(self) -> None:
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        for _ in range(100):
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


def start_munged(name: str) -> Munged:
    """Start a private munged with a new random key under a new temporary directory."""
    ensure_munge()
    top = Path(tempfile.mkdtemp(prefix=f"fairshared-{name}-"))
    top.chmod(0o755)  # every directory above the socket: searchable by all (munged checks)
    for sub, mode in (("etc", 0o700), ("log", 0o700), ("lib", 0o700), ("run", 0o755)):
        (top / sub).mkdir(mode=mode)
        (top / sub).chmod(mode)
    key = top / "etc" / "munge.key"
    subprocess.run(["dd", "if=/dev/urandom", f"of={key}", "bs=1024", "count=1", "status=none"], check=True)
    key.chmod(0o400)
    socket = str(top / "run" / "munge.socket")
    argv = [MUNGED, f"--socket={socket}", f"--key-file={key}", f"--pid-file={top / 'run' / 'munged.pid'}",
            f"--log-file={top / 'log' / 'munged.log'}", f"--seed-file={top / 'lib' / 'munged.seed'}"]
    if os.geteuid() == 0:
        argv.insert(1, "--force")  # munged refuses root without it
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        log = (top / "log" / "munged.log")
        tail = log.read_text()[-500:] if log.exists() else ""
        pytest.fail(f"munged did not start: {done.stderr.strip()} {tail}")
    pid = int((top / "run" / "munged.pid").read_text())
    return Munged(top, socket, pid)


@pytest.fixture(scope="module")
def munged():
    """A private munged for the module's tests (import this fixture into a test module)."""
    m = start_munged("munge")
    yield m
    m.stop()
