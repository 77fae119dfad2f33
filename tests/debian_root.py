"""A fresh minimal Debian 12 in a directory, to install fairshared's packages into (tests/test_package.py).

``fresh_debian(dest)`` extracts a cached tarball of ``debootstrap --variant=minbase
--include=python3.11,systemd,procps bookworm`` (the package's dependencies), made once (about 4 minutes)
from the mirror this machine's apt uses and kept in /var/tmp/fairshared-pkgtest
(``$FAIRSHARED_PKGTEST_CACHE``).  Nothing is mounted in it: dpkg, systemd-sysusers, systemctl,
``systemd-analyze verify`` and the daemon all work in a chroot without /proc (tried).
``remove_tree(root)`` still unmounts whatever it finds under it (debootstrap mounts /proc and /sys
while it works, and a failed one may leave them) and deletes it only when nothing is mounted
there any more.  ``processes_in(root)`` lists the processes whose root is the chroot.

Every missing prerequisite calls ``unavailable(reason)``: a failure under ``CI=true``, else a skip.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("FAIRSHARED_PKGTEST_CACHE", "/var/tmp/fairshared-pkgtest"))
SUITE = "bookworm"
INCLUDE = ("python3.11", "systemd", "procps")  # the .deb's Depends: dpkg -i needs them there
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8", "HOME": "/root",
       "DEBIAN_FRONTEND": "noninteractive"}


def unavailable(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def mounts_under(root: Path) -> list[str]:
    """Mount points at or below ``root``, deepest first (from this process's mountinfo)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
        if point == str(root) or point.startswith(str(root) + "/"):
            found.append(point)
    return sorted(found, key=len, reverse=True)


def processes_in(root: Path) -> list[str]:
    """Processes whose root directory is ``root`` (what runs inside the chroot): "PID CMDLINE"."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.readlink(d / "root") == str(root):
                    cmdline = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    out.append(f"{d.name} {cmdline}")
            except OSError:
                pass  # gone meanwhile, or not ours to read
    return out


def remove_tree(root: Path) -> None:
    """Unmount whatever is still mounted under ``root``, then delete it; never delete through a mount."""
    for point in mounts_under(root):
        if subprocess.run(["umount", point]).returncode != 0:
            subprocess.run(["umount", "-l", point])
    left = mounts_under(root)
    assert not left, f"still mounted, {root} kept: {left}"
    shutil.rmtree(root, ignore_errors=True)


def mirror() -> str:
    """The Debian mirror this machine's apt uses for bookworm's main (deb822 .sources or .list)."""
    for p in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for stanza in p.read_text().split("\n\n"):
            fields = dict(re.findall(r"(?m)^(\w[\w-]*):\s*(.*)$", stanza))
            if SUITE in fields.get("Suites", "").split() and "main" in fields.get("Components", "").split():
                return fields["URIs"].split()[0]
    for p in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]:
        if p.exists():
            m = re.search(rf"(?m)^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+{SUITE}\s+.*\bmain\b", p.read_text())
            if m:
                return m.group(1)
    unavailable(f"no apt source for {SUITE} main on this machine to debootstrap from")


def _which(name: str) -> str | None:
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if Path(p).exists()), None)


def tool(name: str, package: str) -> str:
    """The path of a Debian tool, installed with apt-get if missing (after an update if that fails)."""
    found = _which(name)
    for update_first in (False, True):
        if found:
            break
        if update_first:
            subprocess.run(["apt-get", "-qq", "update"], capture_output=True, timeout=600)
        subprocess.run(["apt-get", "-qq", "-y", "install", package], capture_output=True, timeout=600,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        found = _which(name)
    if not found:
        unavailable(f"{name} is not installed and apt-get install {package} failed")
    return found


def fresh_debian(dest: Path) -> float:
    """A fresh minimal Debian 12 with the package's dependencies at ``dest``, from the cached
    tarball or debootstrapped (then cached); returns the seconds debootstrap took (0: cached)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    tarball = CACHE / f"{SUITE}-minbase-{'-'.join(INCLUDE)}.tar"
    took = 0.0
    if not tarball.exists():
        debootstrap, source = tool("debootstrap", "debootstrap"), mirror()
        tree = CACHE / f"debootstrap.{os.getpid()}"
        t0 = time.monotonic()
        try:
            res = subprocess.run([debootstrap, "--variant=minbase", f"--include={','.join(INCLUDE)}", SUITE,
                                  str(tree), source], capture_output=True, text=True, timeout=1800)
            if res.returncode != 0:
                unavailable(f"debootstrap {SUITE} from {source} failed: {res.stderr.strip().splitlines()[-1:]}")
            partial = tarball.with_suffix(".partial")
            subprocess.run(["tar", "-C", str(tree), "--numeric-owner", "-cf", str(partial), "."], check=True)
            os.replace(partial, tarball)
        finally:
            remove_tree(tree)
        took = time.monotonic() - t0
    dest.mkdir(parents=True)
    subprocess.run(["tar", "-C", str(dest), "--numeric-owner", "-xpf", str(tarball)], check=True)
    return took


def in_root(root: Path, *argv: str, user: tuple[int, int] | None = None, env: dict | None = None,
            check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    """``argv`` run in the chroot (as uid:gid ``user`` if given), output captured, stdin empty."""
    spec = [f"--userspec={user[0]}:{user[1]}", f"--groups={user[1]}"] if user else []
    res = subprocess.run(["chroot", *spec, str(root), *argv], capture_output=True, text=True, timeout=timeout,
                         env={**ENV, **(env or {})}, stdin=subprocess.DEVNULL)
    if check:
        assert res.returncode == 0, f"{' '.join(argv)} in the chroot: exit {res.returncode}\n{res.stdout}{res.stderr}"
    return res
