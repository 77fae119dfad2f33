"""packaging/build's packages installed on a fresh Debian 12, and the parts of the build that are functions.

The ``packages`` fixture runs ``packaging/build OUTDIR`` twice: this version, and one version up
(``--set-version X+pkgtest1``).  Then, each in a fresh minimal Debian 12 (tests/debian_root.py:
debootstrap minbase with the .deb's dependencies, cached as a tarball) used as a chroot:

* the .deb: ``dpkg -i``; the user, files, modes and conffile are what packaging/ says and nothing
  is enabled; ``systemd-analyze verify`` passes on the installed unit; ``fairshared --version``
  runs as the package's user and says the package's version; the demo daemon run as that user
  with the installed config answers /metrics and /-/healthy on loopback (the chroot shares the
  host's network) and stops; the same .deb again, then the one up, keep an edited conffile and
  the token; ``dpkg --purge`` leaves no process whose root is the chroot, no unit, no
  /opt/fairshared, no /etc/fairshared;
* the .rpm's scriptlets, which get rpm's arguments: Debian's rpm installs it into the chroot,
  upgrades it one up and erases it.

Needs root.  With ``CI=true`` a missing prerequisite fails the test, elsewhere it is skipped
with a one-line reason (as for the other external tools, tests/test_systemd.py).
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

import debian_root as dr

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "packaging" / "build"


def _load_build():
    loader = importlib.machinery.SourceFileLoader("fairshared_packaging_build", str(BUILD))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


build = _load_build()


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


# ------------------------------------------------------------------------ the packages, installed

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


def _build(outdir: Path, *args: str) -> tuple[float, dict[str, Path]]:
    """packaging/build OUTDIR ARGS: its seconds, and what it made by kind (deb, rpm, sdist, wheel)."""
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, str(BUILD), str(outdir), *args], capture_output=True, text=True,
                         timeout=1800)
    assert res.returncode == 0, f"packaging/build {' '.join(args)}: exit {res.returncode}\n{res.stderr}"
    kinds = {".deb": "deb", ".rpm": "rpm", ".gz": "sdist", ".whl": "wheel"}
    return time.monotonic() - t0, {kinds[p.suffix]: p for p in sorted(outdir.iterdir())}


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    """Both packages, the sdist and the wheel of this version, and both packages one version up."""
    if os.geteuid() != 0:
        dr.unavailable("needs root: debootstrap, chroot and dpkg inside it")
    if not Path(build.TARGET_PYTHON).exists():
        dr.unavailable(f"{build.TARGET_PYTHON} is missing: the package's venv is built with it")
    version = build.read_version((REPO / "src" / "fairshared" / "__init__.py").read_text())
    higher = f"{version}+pkgtest1"
    took, made = _build(tmp_path_factory.mktemp("dist"))
    took2, made2 = _build(tmp_path_factory.mktemp("dist-higher"), "--set-version", higher)
    print(f"\npackaging/build: {took:.1f} s (deb, rpm, sdist, wheel), {took2:.1f} s (the same one version up); "
          + ", ".join(f"{p.name} {p.stat().st_size / 1e6:.1f} MB" for p in made.values()))
    return {"version": version, "higher": higher, "this": made, "up": made2}


@contextmanager
def _debian(name: str):
    """A fresh Debian 12, deleted afterwards; no process may outlive what ran in it."""
    root = dr.CACHE / f"{name}.{os.getpid()}"
    dr.remove_tree(root)
    t0 = time.monotonic()
    took = dr.fresh_debian(root)
    print(f"\n{name}: " + (f"debootstrap {took:.0f} s" if took
                            else f"from the cached tarball {time.monotonic() - t0:.1f} s"))
    try:
        yield root
        assert dr.processes_in(root) == []
    finally:
        dr.remove_tree(root)


def _user(root: Path) -> tuple[int, int]:
    """The fairshared user's uid and gid in the chroot, its fields checked against the sysusers file."""
    passwd = (root / "etc/passwd").read_text().splitlines()
    entry = next(ln.split(":") for ln in passwd if ln.startswith("fairshared:"))
    assert entry[4:] == ["fairshared Slurm fair-share", "/var/lib/fairshared", "/usr/sbin/nologin"], entry
    assert 0 < int(entry[2]) < 1000, entry
    return int(entry[2]), int(entry[3])


def _check_installed(root: Path, gid: int) -> str:
    """The files as packaging/ says, nothing enabled; returns the token."""
    toml = root / "etc/fairshared/fairshared.toml"
    st = toml.stat()
    assert (oct(st.st_mode & 0o7777), st.st_uid, st.st_gid) == ("0o640", 0, gid)
    assert toml.read_text() == (REPO / "deploy" / "fairshared.toml").read_text()
    token = root / "etc/fairshared/http-token"
    assert oct(token.stat().st_mode & 0o7777) == "0o600" and re.fullmatch(r"[0-9a-f]{64}\n", token.read_text())
    assert os.readlink(root / "usr/bin/fairshared") == "/opt/fairshared/bin/fairshared"
    assert os.readlink(root / "opt/fairshared/bin/python3.11") == build.TARGET_PYTHON
    unit = root / "usr/lib/systemd/system/fairshared.service"
    assert unit.read_text() == build.packaged_unit((REPO / "systemd" / "fairshared.service").read_text())
    assert (root / "usr/lib/sysusers.d/fairshared.conf").read_text() == \
        (REPO / "systemd" / "fairshared.sysusers").read_text()
    assert not list((root / "etc/systemd/system").rglob("fairshared*")), "enabled, or a unit in /etc"
    return token.read_text()


def _check_gone(root: Path) -> None:
    for gone in ("opt/fairshared", "usr/bin/fairshared", "usr/lib/systemd/system/fairshared.service",
                 "usr/lib/sysusers.d/fairshared.conf"):
        assert not os.path.lexists(root / gone), gone
    assert not list((root / "etc/systemd").rglob("fairshared*"))
    assert "\nfairshared:" in (root / "etc/passwd").read_text()  # system users stay (postrm says why)


def _version_as_user(root: Path, user: tuple[int, int]) -> str:
    return dr.in_root(root, "/usr/bin/fairshared", "--version", user=user, env={"HOME": "/"}).stdout.strip()


def _demo_answers(root: Path, user: tuple[int, int], version: str, log_path: Path) -> float:
    """The demo daemon run as the package's user with the installed config answers /metrics (a
    computed cycle, the package's version) and /-/healthy on loopback, and stops on SIGTERM with 0."""
    port = _free_port()
    t0 = time.monotonic()
    with open(log_path, "w+") as log:
        demo = subprocess.Popen(
            ["chroot", f"--userspec={user[0]}:{user[1]}", f"--groups={user[1]}", str(root), "/usr/bin/fairshared",
             "run", "--demo", "--config", "/etc/fairshared/fairshared.toml", "--listen", f"127.0.0.1:{port}"],
            env={**dr.ENV, "HOME": "/", "XDG_STATE_HOME": "/tmp/fairshared-pkgtest-state"},
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            metrics, took = "", 0.0
            while time.monotonic() - t0 < 90 and demo.poll() is None:
                code, metrics = _get(f"http://127.0.0.1:{port}/metrics")
                if code == 200 and re.search(r"(?m)^fairshared_snapshot_associations [1-9]", metrics):
                    took = time.monotonic() - t0
                    break
                time.sleep(0.5)
            log.seek(0)
            assert demo.poll() is None, f"the demo daemon exited {demo.returncode}:\n{log.read()[-3000:]}"
            assert re.search(r"(?m)^fairshared_snapshot_associations [1-9]", metrics), metrics[-2000:]
            assert re.search(rf'(?m)^fairshared_info\{{[^}}]*version="{re.escape(version)}"', metrics)
            assert _get(f"http://127.0.0.1:{port}/-/healthy")[0] == 200
            demo.send_signal(signal.SIGTERM)
            assert demo.wait(timeout=60) == 0, log.read()[-3000:]
        finally:
            if demo.poll() is None:
                demo.kill()
                demo.wait(timeout=30)
    return took


def _requirement(text: str) -> tuple[str, frozenset[str]]:
    """"apscheduler>=3.10,<4" as (name, {specifiers}): METADATA writes the specifiers sorted."""
    name, specs = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*(.*)", text.strip()).groups()
    return name, frozenset(x.strip() for x in specs.split(",") if x.strip())


def test_sdist_and_wheel_are_what_pip_would_take(packages):
    """The wheel (built from the sdist) carries the version, the entry point and the dependencies
    of pyproject.toml; the sdist the sources; the one-up build the stamped version in both."""
    import tarfile
    import tomllib
    import zipfile

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    for made, version in ((packages["this"], packages["version"]), (packages["up"], packages["higher"])):
        with zipfile.ZipFile(made["wheel"]) as whl:
            meta = whl.read(f"fairshared-{version}.dist-info/METADATA").decode()
            assert f"\nVersion: {version}\n" in meta
            assert [_requirement(ln[len("Requires-Dist: "):]) for ln in meta.splitlines()
                    if ln.startswith("Requires-Dist: ") and "extra ==" not in ln] == [_requirement(d) for d in deps]
            entry_points = whl.read(f"fairshared-{version}.dist-info/entry_points.txt").decode()
            assert "fairshared = fairshared.cli:main" in entry_points
            assert f'__version__ = "{version}"' in whl.read("fairshared/__init__.py").decode()
        with tarfile.open(made["sdist"]) as sdist:
            names = sdist.getnames()
        top = f"fairshared-{version}"
        assert {f"{top}/pyproject.toml", f"{top}/README.md", f"{top}/src/fairshared/cli.py"} <= set(names)


def test_deb_installs_runs_upgrades_and_purges_on_a_fresh_debian(packages, tmp_path):
    version, higher = packages["version"], packages["higher"]
    deb_version, higher_version = build.package_version(version) + "-1", build.package_version(higher) + "-1"
    assert packages["this"]["deb"].name == f"fairshared_{deb_version}_{build.ARCHES[os.uname().machine]}.deb"

    def dpkg_status(root: Path) -> str:
        return dr.in_root(root, "dpkg-query", "-W", "-f", "${Status} ${Version}", "fairshared", check=False).stdout

    depends = subprocess.run(["dpkg-deb", "-f", str(packages["this"]["deb"]), "Depends"], capture_output=True,
                             text=True, check=True).stdout.strip()
    assert depends == ", ".join(dr.INCLUDE), "tests/debian_root.py INCLUDE must list the .deb's Depends"
    with _debian("deb-root") as root:
        shutil.copy(packages["this"]["deb"], root / "tmp" / "fairshared.deb")
        shutil.copy(packages["up"]["deb"], root / "tmp" / "fairshared-higher.deb")
        t0 = time.monotonic()
        res = dr.in_root(root, "dpkg", "-i", "/tmp/fairshared.deb")
        print(f"dpkg -i: {time.monotonic() - t0:.1f} s")
        assert "installed, not enabled" in res.stdout
        assert dpkg_status(root) == f"install ok installed {deb_version}"
        user = _user(root)
        token = _check_installed(root, user[1])
        conffiles = dr.in_root(root, "dpkg-query", "-W", "-f", "${Conffiles}", "fairshared").stdout
        assert conffiles.split()[0] == "/etc/fairshared/fairshared.toml", conffiles

        # the unit verifies as installed: its ExecStart= program exists in the chroot
        res = dr.in_root(root, "systemd-analyze", "verify", "fairshared.service", check=False)
        out = (res.stdout + res.stderr).strip()
        assert res.returncode == 0 and "fairshared" not in out, out

        assert _version_as_user(root, user) == f"fairshared {version}"
        took = _demo_answers(root, user, version, tmp_path / "demo.log")
        print(f"demo: first cycle's metrics after {took:.1f} s")

        # upgrade over itself, then one version up: the edited conffile and the token stay
        toml = root / "etc/fairshared/fairshared.toml"
        toml.write_text(toml.read_text() + "# edited by tests/test_package.py\n")
        edited = toml.read_text()
        for deb, expect, said in (("/tmp/fairshared.deb", deb_version, version),
                                  ("/tmp/fairshared-higher.deb", higher_version, higher)):
            res = dr.in_root(root, "dpkg", "-i", deb)
            assert "installed, not enabled" not in res.stdout  # said on the first install only
            assert dpkg_status(root) == f"install ok installed {expect}"
            assert toml.read_text() == edited and (root / "etc/fairshared/http-token").read_text() == token
            assert not list((root / "etc/fairshared").glob("*.dpkg-*")), "dpkg left a .dpkg-new/-old/-dist"
            assert _version_as_user(root, user) == f"fairshared {said}"
        site = next((root / "opt/fairshared/lib").glob("python3*/site-packages"))
        assert [p.name for p in site.glob("fairshared-*.dist-info")] == [f"fairshared-{higher}.dist-info"]

        # purge: nothing of the package is left but its user
        res = dr.in_root(root, "dpkg", "--purge", "fairshared")
        assert "not empty so not removed" not in res.stdout + res.stderr, res.stdout + res.stderr
        assert dpkg_status(root) in ("", "unknown ok not-installed "), dpkg_status(root)
        _check_gone(root)
        assert not (root / "etc/fairshared").exists() and not (root / "var/lib/fairshared").exists()


def test_rpm_scriptlets_install_upgrade_and_erase_in_a_debian_root(packages):
    """The .rpm's scriptlets, which get rpm's arguments (a count where dpkg passes a word), run by
    Debian's rpm into a fresh Debian 12 (``--nodeps``: that rpm database knows none of dpkg's
    packages): install, one version up keeping an edited config, erase.  rpm keeps an edited
    config as .rpmsave on erase, and the token it did not install."""
    rpm = [dr.tool("rpm", "rpm"), "--force-debian", "--nodeps"]
    version, higher = packages["version"], packages["higher"]
    with _debian("rpm-root") as root:
        def q() -> str:
            return subprocess.run([rpm[0], f"--root={root}", "-q", "fairshared"], capture_output=True, text=True).stdout

        res = subprocess.run([*rpm, f"--root={root}", "-i", str(packages["this"]["rpm"])], capture_output=True,
                             text=True, timeout=600)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "installed, not enabled" in res.stdout
        assert q().startswith(f"fairshared-{build.package_version(version)}-1.")
        user = _user(root)
        token = _check_installed(root, user[1])
        assert _version_as_user(root, user) == f"fairshared {version}"
        toml = root / "etc/fairshared/fairshared.toml"
        toml.write_text(toml.read_text() + "# edited by tests/test_package.py\n")
        edited = toml.read_text()

        res = subprocess.run([*rpm, f"--root={root}", "-U", str(packages["up"]["rpm"])], capture_output=True,
                             text=True, timeout=600)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "installed, not enabled" not in res.stdout
        assert q().startswith(f"fairshared-{build.package_version(higher)}-1.")
        assert toml.read_text() == edited and (root / "etc/fairshared/http-token").read_text() == token
        assert sorted(p.name for p in (root / "etc/fairshared").iterdir()) == ["fairshared.toml", "http-token"]
        assert _version_as_user(root, user) == f"fairshared {higher}"

        res = subprocess.run([*rpm, f"--root={root}", "-e", "fairshared"], capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stdout + res.stderr
        _check_gone(root)
        left = sorted(p.name for p in (root / "etc/fairshared").iterdir())
        assert left == ["fairshared.toml.rpmsave", "http-token"]
