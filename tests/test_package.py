"""packaging/build's .deb on a fresh Debian 12, and the pieces of the build that are plain functions.

The lifecycle test builds the packages (``packaging/build OUTDIR``, plus a second .deb one version
up), debootstraps a minimal Debian 12 (bookworm, minbase with python3.11 and systemd, the
package's dependencies) into a directory, and in a chroot of it: ``dpkg -i``; the user, files,
modes and conffile are what packaging/ says; ``systemd-analyze verify`` passes on the installed
unit; ``fairshared --version`` runs as the package's user and says the package's version; the
demo daemon started as that user with the installed config answers /-/healthy and /metrics on
loopback (the chroot shares the host's network); the same .deb again and then the higher one
keep an edited conffile and the token; ``dpkg --purge`` leaves no process whose root is the
chroot, no unit, no /opt/fairshared and no /etc/fairshared.

The debootstrapped tree is kept as a tarball in /var/tmp/fairshared-pkgtest (about 4 minutes
the first time, seconds after).  The mirror is the one this machine's apt uses.  /proc is mounted
in the chroot while the package is in it (systemd-sysusers and systemctl read it, as on a real
system) and always unmounted; the tree is deleted only when nothing is mounted under it.

Policy, as for the other external tools (tests/test_systemd.py): needs root; with ``CI=true`` a
missing prerequisite fails the test, elsewhere it is skipped with a one-line reason.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "packaging" / "build"
CACHE = Path(os.environ.get("FAIRSHARED_PKGTEST_CACHE", "/var/tmp/fairshared-pkgtest"))
SUITE = "bookworm"
INCLUDE = ("python3.11", "systemd")
CHROOT_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8", "HOME": "/root",
              "DEBIAN_FRONTEND": "noninteractive"}


def _load_build():
    loader = importlib.machinery.SourceFileLoader("fairshared_packaging_build", str(BUILD))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


build = _load_build()


def _unavailable(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


# ------------------------------------------------------------------------ the build's functions

def test_package_version_keeps_pep440_order_for_dpkg():
    """Pre-releases get a tilde and dev releases two (they sort before the release, and dev before
    the pre-releases, in dpkg and rpm only so); dpkg itself checks the order when it is here."""
    cases = {"0.1.0": "0.1.0", "0.2.0rc1": "0.2.0~rc1", "0.2.0.dev3": "0.2.0~~dev3", "0.2.0a1": "0.2.0~a1",
             "0.1.0.post1": "0.1.0.post1", "0.1.0+pkgtest1": "0.1.0+pkgtest1"}
    assert {v: build.package_version(v) for v in cases} == cases
    with pytest.raises(build.BuildError, match="'v1.0'"):
        build.package_version("v1.0")
    dpkg = shutil.which("dpkg")
    if dpkg is None:
        return
    ordered = ["0.1.0", "0.1.0+pkgtest1", "0.1.0.post1", "0.2.0.dev3", "0.2.0a1", "0.2.0b1", "0.2.0rc1", "0.2.0"]
    for lo, hi in zip(ordered, ordered[1:]):
        a, b = build.package_version(lo), build.package_version(hi)
        assert subprocess.run([dpkg, "--compare-versions", a, "lt", b]).returncode == 0, f"{a} !< {b}"


def test_set_version_and_read_version():
    text = '"""x"""\n\n__version__ = "0.1.0"\n'
    assert build.read_version(build.set_version(text, "0.3.0rc2")) == "0.3.0rc2"
    with pytest.raises(build.BuildError, match="not a version"):
        build.set_version(text, "0.1; rm")
    with pytest.raises(build.BuildError, match="2 __version__ lines"):
        build.set_version(text + text, "0.2.0")


def test_the_packaged_unit_differs_from_the_shipped_one_in_execstart_only():
    shipped = (REPO / "systemd" / "fairshared.service").read_text()
    packaged = build.packaged_unit(shipped)
    diff = [(a, b) for a, b in zip(shipped.splitlines(), packaged.splitlines()) if a != b]
    assert len(shipped.splitlines()) == len(packaged.splitlines())
    assert diff == [("ExecStart=/usr/local/bin/fairshared run --config /etc/fairshared/fairshared.toml",
                     "ExecStart=/usr/bin/fairshared run --config /etc/fairshared/fairshared.toml")]
    with pytest.raises(build.BuildError, match="0 lines"):
        build.packaged_unit(packaged)


def test_maintainer_scripts_are_filled_from_the_sysusers_file(tmp_path):
    """The preinst's sysusers line is the file's, its useradd fallback has the same fields, and
    every filled script is valid sh with no placeholder left."""
    fields = build.parse_sysusers((REPO / "systemd" / "fairshared.sysusers").read_text())
    assert fields["USER_NAME"] == "fairshared" and fields["USER_HOME"] == "/var/lib/fairshared"
    assert fields["USER_SHELL"] == "/usr/sbin/nologin"
    for name in ("preinst", "postinst", "prerm", "postrm"):
        text = build.fill((REPO / "packaging" / "scripts" / name).read_text(), fields, name)
        (tmp_path / name).write_text(text)
        assert subprocess.run(["sh", "-n", str(tmp_path / name)]).returncode == 0, name
        if name == "preinst":
            assert f"\n{fields['SYSUSERS']}\nSYSUSERS\n" in text
            assert (f"--home-dir '/var/lib/fairshared' --no-create-home \\\n        --shell '/usr/sbin/nologin' "
                    f"--comment '{fields['USER_GECOS']}' fairshared") in text
    with pytest.raises(build.BuildError, match=r"no value for @USER_NAME@"):
        build.fill("getent passwd @USER_NAME@", {}, "preinst")
    with pytest.raises(build.BuildError, match="2 'u' lines"):
        build.parse_sysusers("u a - - /x /y\nu b - - /x /y\n")


def test_glibc_floor_of_wheel_tags():
    assert build.glibc_floor(["py3-none-any"]) == (0, 0)
    assert build.glibc_floor(["cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64",
                              "cp311-cp311-manylinux_2_28_x86_64", "py3-none-any"]) == (2, 28)
    assert build.glibc_floor(["cp311-cp311-manylinux2014_x86_64"]) == (2, 17)


# ------------------------------------------------------------------------ the chroot's plumbing

def _mounts_under(root: Path) -> list[str]:
    """Mount points at or below ``root``, deepest first (from this process's mountinfo)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
        if point == str(root) or point.startswith(str(root) + "/"):
            found.append(point)
    return sorted(found, key=len, reverse=True)


def _processes_in(root: Path) -> list[str]:
    """Processes whose root directory is ``root``: what runs inside the chroot."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.readlink(d / "root") == str(root):
                    cmdline = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    out.append(f"{d.name} {cmdline}")
            except OSError:
                pass  # gone meanwhile
    return out


def _remove_tree(root: Path) -> None:
    """Unmount whatever is still mounted under ``root``, then delete it; never delete through a mount."""
    for point in _mounts_under(root):
        if subprocess.run(["umount", point]).returncode != 0:
            subprocess.run(["umount", "-l", point])
    left = _mounts_under(root)
    assert not left, f"still mounted, {root} kept: {left}"
    shutil.rmtree(root, ignore_errors=True)


@contextmanager
def _proc_mounted(root: Path):
    subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], check=True)
    try:
        yield
    finally:
        if subprocess.run(["umount", str(root / "proc")]).returncode != 0:
            subprocess.run(["umount", "-l", str(root / "proc")])


def _mirror() -> str:
    """The Debian mirror this machine's apt uses for bookworm (deb822 .sources or sources.list)."""
    texts = [p.read_text() for p in sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))]
    for text in texts:
        for stanza in text.split("\n\n"):
            fields = dict(re.findall(r"(?m)^(\w[\w-]*):\s*(.*)$", stanza))
            if SUITE in fields.get("Suites", "").split() and "main" in fields.get("Components", "").split():
                return fields["URIs"].split()[0]
    lists = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]
    for p in lists:
        if p.exists():
            m = re.search(rf"(?m)^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+{SUITE}\s+.*\bmain\b", p.read_text())
            if m:
                return m.group(1)
    _unavailable(f"no apt source for {SUITE} main on this machine to debootstrap from")


def _debootstrap() -> str:
    tool = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
    if not Path(tool).exists():
        for attempt in ([], ["update"]):
            if attempt:
                subprocess.run(["apt-get", "-qq", *attempt], capture_output=True, timeout=600)
            subprocess.run(["apt-get", "-qq", "-y", "install", "debootstrap"], capture_output=True, timeout=600,
                           env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
            if Path(tool).exists():
                break
        else:
            _unavailable("debootstrap is not installed and apt-get install debootstrap failed")
    return tool


def _fresh_debian(dest: Path) -> float:
    """A fresh minimal Debian 12 with the package's dependencies at ``dest``, from the cached
    tarball or debootstrapped (then cached); returns the seconds debootstrap took (0: cached)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    tarball = CACHE / f"{SUITE}-minbase-{'-'.join(INCLUDE)}.tar"
    took = 0.0
    if not tarball.exists():
        tool, mirror = _debootstrap(), _mirror()
        tree = CACHE / f"debootstrap.{os.getpid()}"
        t0 = time.monotonic()
        try:
            res = subprocess.run([tool, "--variant=minbase", f"--include={','.join(INCLUDE)}", SUITE, str(tree),
                                  mirror], capture_output=True, text=True, timeout=1800)
            if res.returncode != 0:
                _unavailable(f"debootstrap {SUITE} from {mirror} failed: {res.stderr.strip().splitlines()[-1:]}")
            partial = tarball.with_suffix(".partial")
            subprocess.run(["tar", "-C", str(tree), "--numeric-owner", "-cf", str(partial), "."], check=True)
            os.replace(partial, tarball)
        finally:
            _remove_tree(tree)
        took = time.monotonic() - t0
    dest.mkdir(parents=True)
    subprocess.run(["tar", "-C", str(dest), "--numeric-owner", "-xpf", str(tarball)], check=True)
    return took


def _in_root(root: Path, *argv: str, user: tuple[int, int] | None = None, env: dict | None = None,
             check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    spec = [f"--userspec={user[0]}:{user[1]}", f"--groups={user[1]}"] if user else []
    res = subprocess.run(["chroot", *spec, str(root), *argv], capture_output=True, text=True, timeout=timeout,
                         env={**CHROOT_ENV, **(env or {})}, stdin=subprocess.DEVNULL)
    if check:
        assert res.returncode == 0, f"{' '.join(argv)} in the chroot: exit {res.returncode}\n{res.stdout}{res.stderr}"
    return res


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def _tail(log) -> str:
    log.flush()
    log.seek(0)
    return "".join(log.readlines()[-30:])


def _build(outdir: Path, *args: str) -> tuple[float, list[Path]]:
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, str(BUILD), str(outdir), *args], capture_output=True, text=True,
                         timeout=1800)
    assert res.returncode == 0, f"packaging/build {' '.join(args)}: exit {res.returncode}\n{res.stderr}"
    return time.monotonic() - t0, sorted(outdir.iterdir())


# ------------------------------------------------------------------------ the lifecycle

def test_deb_installs_runs_upgrades_and_purges_on_a_fresh_debian(tmp_path):
    if os.geteuid() != 0:
        _unavailable("needs root: debootstrap, chroot and dpkg inside it")
    if not Path(build.TARGET_PYTHON).exists():
        _unavailable(f"{build.TARGET_PYTHON} is missing: the package's venv is built with it")
    version = build.read_version((REPO / "src" / "fairshared" / "__init__.py").read_text())
    higher = f"{version}+pkgtest1"
    timings: dict[str, float] = {}

    # --- the build: .deb, .rpm, sdist, wheel; then a .deb one version up
    timings["build (deb, rpm, sdist, wheel)"], made = _build(tmp_path / "dist")
    names = {p.suffix if p.suffix != ".gz" else ".tar.gz": p for p in made}
    assert sorted(names) == [".deb", ".rpm", ".tar.gz", ".whl"], [p.name for p in made]
    deb_version = build.package_version(version) + "-1"
    assert names[".deb"].name == f"fairshared_{deb_version}_{build.ARCHES[os.uname().machine]}.deb"
    assert names[".rpm"].read_bytes()[:4] == b"\xed\xab\xee\xdb"  # the RPM lead's magic
    sizes = {p.name: p.stat().st_size / 1e6 for p in made}
    timings["build (deb only, higher version)"], made2 = _build(tmp_path / "dist2", "--formats", "deb",
                                                               "--set-version", higher)
    deb2 = next(p for p in made2 if p.suffix == ".deb")

    root = CACHE / f"root.{os.getpid()}"
    _remove_tree(root)
    t0 = time.monotonic()
    took = _fresh_debian(root)
    timings["debootstrap" if took else "fresh Debian from the cached tarball"] = took or time.monotonic() - t0
    demo = None
    try:
        shutil.copy(names[".deb"], root / "tmp" / "fairshared.deb")
        shutil.copy(deb2, root / "tmp" / "fairshared-higher.deb")
        with _proc_mounted(root):
            # --- install
            t0 = time.monotonic()
            res = _in_root(root, "dpkg", "-i", "/tmp/fairshared.deb")
            timings["dpkg -i"] = time.monotonic() - t0
            assert "installed, not enabled" in res.stdout
            status = _in_root(root, "dpkg-query", "-W", "-f", "${Status} ${Version}", "fairshared").stdout
            assert status == f"install ok installed {deb_version}"
            passwd = {ln.split(":")[0]: ln.split(":") for ln in (root / "etc/passwd").read_text().splitlines()}
            user = passwd["fairshared"]
            uid, gid = int(user[2]), int(user[3])
            assert 0 < uid < 1000 and user[4:] == ["fairshared Slurm fair-share", "/var/lib/fairshared",
                                                  "/usr/sbin/nologin"], user
            toml = root / "etc/fairshared/fairshared.toml"
            st = toml.stat()
            assert (oct(st.st_mode & 0o7777), st.st_uid, st.st_gid) == ("0o640", 0, gid)
            assert toml.read_text() == (REPO / "deploy" / "fairshared.toml").read_text()
            conffiles = _in_root(root, "dpkg-query", "-W", "-f", "${Conffiles}", "fairshared").stdout
            assert conffiles.split()[0] == "/etc/fairshared/fairshared.toml", conffiles
            token = root / "etc/fairshared/http-token"
            assert oct(token.stat().st_mode & 0o7777) == "0o600" and re.fullmatch(r"[0-9a-f]{64}\n", token.read_text())
            first_token = token.read_text()
            assert os.readlink(root / "usr/bin/fairshared") == "/opt/fairshared/bin/fairshared"
            assert os.readlink(root / "opt/fairshared/bin/python") == build.TARGET_PYTHON
            unit = root / "usr/lib/systemd/system/fairshared.service"
            assert unit.read_text() == build.packaged_unit((REPO / "systemd" / "fairshared.service").read_text())
            assert (root / "usr/lib/sysusers.d/fairshared.conf").read_text() == \
                (REPO / "systemd" / "fairshared.sysusers").read_text()
            assert not list((root / "etc/systemd/system").rglob("fairshared*")), "enabled, or a unit in /etc"

            # --- the unit verifies, as installed (its ExecStart= program exists in the chroot)
            res = _in_root(root, "systemd-analyze", "verify", "fairshared.service", check=False)
            out = (res.stdout + res.stderr).strip()
            assert res.returncode == 0 and "fairshared" not in out, out

            # --- fairshared --version as the package's user, from a directory it cannot write
            said = _in_root(root, "/usr/bin/fairshared", "--version", user=(uid, gid), env={"HOME": "/"}).stdout
            assert said.strip() == f"fairshared {version}"

            # --- the demo daemon as that user, with the installed config, answers on loopback
            port = _free_port()
            t0 = time.monotonic()
            log = open(tmp_path / "demo.log", "w+")
            demo = subprocess.Popen(
                ["chroot", f"--userspec={uid}:{gid}", f"--groups={gid}", str(root), "/usr/bin/fairshared", "run",
                 "--demo", "--config", "/etc/fairshared/fairshared.toml", "--listen", f"127.0.0.1:{port}"],
                env={**CHROOT_ENV, "HOME": "/", "XDG_STATE_HOME": "/tmp/fairshared-pkgtest-state"},
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            metrics = ""
            while time.monotonic() - t0 < 90 and demo.poll() is None:
                code, metrics = _get(f"http://127.0.0.1:{port}/metrics")
                if code == 200 and re.search(r"(?m)^fairshared_snapshot_associations [1-9]", metrics):
                    break
                time.sleep(0.5)
            timings["demo: first cycle's metrics"] = time.monotonic() - t0
            assert demo.poll() is None, f"the demo daemon exited {demo.returncode}:\n{_tail(log)}"
            assert re.search(rf'(?m)^fairshared_info\{{[^}}]*version="{re.escape(version)}"', metrics), metrics[:2000]
            assert re.search(r"(?m)^fairshared_snapshot_associations [1-9]", metrics), metrics[:2000]
            assert _get(f"http://127.0.0.1:{port}/-/healthy")[0] == 200
            demo.send_signal(signal.SIGTERM)
            assert demo.wait(timeout=60) == 0, _tail(log)
            log.close()
            demo = None

            # --- upgrade over itself, then one version up: the edited conffile and the token stay
            toml.write_text(toml.read_text() + "# edited by tests/test_package.py\n")
            edited = toml.read_text()
            for deb, expect_version, expect_said in (("/tmp/fairshared.deb", deb_version, version),
                                                     ("/tmp/fairshared-higher.deb",
                                                      build.package_version(higher) + "-1", higher)):
                t0 = time.monotonic()
                res = _in_root(root, "dpkg", "-i", deb)
                timings[f"dpkg -i over it ({expect_version})"] = time.monotonic() - t0
                assert "installed, not enabled" not in res.stdout  # said on the first install only
                status = _in_root(root, "dpkg-query", "-W", "-f", "${Status} ${Version}", "fairshared").stdout
                assert status == f"install ok installed {expect_version}"
                assert toml.read_text() == edited and token.read_text() == first_token
                assert not list((root / "etc/fairshared").glob("*.dpkg-*")), "dpkg left a .dpkg-new/-old/-dist"
                said = _in_root(root, "fairshared", "--version", user=(uid, gid), env={"HOME": "/"}).stdout
                assert said.strip() == f"fairshared {expect_said}"
            site = next((root / "opt/fairshared/lib").glob("python3*/site-packages"))
            assert [p.name for p in site.glob("fairshared-*.dist-info")] == [f"fairshared-{higher}.dist-info"]

            # --- purge: nothing of the package is left but its user
            res = _in_root(root, "dpkg", "--purge", "fairshared")
            assert "not empty so not removed" not in res.stdout + res.stderr, res.stdout + res.stderr
            status = _in_root(root, "dpkg-query", "-W", "-f", "${Status}", "fairshared", check=False).stdout
            assert status in ("", "unknown ok not-installed"), status
        for gone in ("opt/fairshared", "etc/fairshared", "usr/bin/fairshared", "usr/lib/systemd/system/fairshared.service",
                     "usr/lib/sysusers.d/fairshared.conf", "var/lib/fairshared"):
            assert not os.path.lexists(root / gone), gone
        assert not list((root / "etc/systemd").rglob("fairshared*"))
        assert "fairshared" in (root / "etc/passwd").read_text()  # system users stay (postrm says why)
        assert _processes_in(root) == []
    finally:
        if demo is not None:
            demo.kill()
            demo.wait(timeout=30)
        _remove_tree(root)
    print("\n" + "\n".join(f"  {k}: {v:.1f} s" for k, v in timings.items())
          + "\n" + "\n".join(f"  {k}: {v:.1f} MB" for k, v in sizes.items()))
