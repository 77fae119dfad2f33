"""systemd integration: the sd_notify helper, the unit file and the sysusers file.

* sdnotify: real AF_UNIX datagram sockets (a path in tmp_path and an abstract name) must
  receive exactly the bytes the daemon sends; without $NOTIFY_SOCKET everything is a no-op.
* ``systemd-analyze verify`` and ``systemd-analyze security --offline=true`` on
  systemd/fairshared.service (exposure must stay <= 2.0), ``systemd-sysusers --dry-run`` on
  systemd/fairshared.sysusers.

The systemd tools come from Debian's ``systemd`` package.  Policy, as for our other external
tools (tests/slurm_cluster.py): with ``CI == "true"`` a tool that cannot be obtained is a test
failure; elsewhere the test is skipped with a one-line reason.  If the package is missing, the
helper installs it with apt, but only as root, only after ``apt-get install -s`` shows that
nothing would be removed, and never as an upgrade of an installed ``systemd``.  The container
needs no running systemd: these subcommands work offline.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from fairshared.daemon import sdnotify

REPO = Path(__file__).resolve().parent.parent
UNIT = REPO / "systemd" / "fairshared.service"
SYSUSERS = REPO / "systemd" / "fairshared.sysusers"
MAX_EXPOSURE = 2.0

NOTIFY_VARS = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")


# ------------------------------------------------------------------------------------ sdnotify

@pytest.fixture(autouse=True)
def _clean_notify_env(monkeypatch):
    for v in NOTIFY_VARS:
        monkeypatch.delenv(v, raising=False)


class Receiver:
    """A bound AF_UNIX datagram socket standing in for systemd's notify socket."""

    def __init__(self, address: str | bytes):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(address)
        self.sock.settimeout(5.0)

    def recv(self) -> bytes:
        return self.sock.recv(65536)

    def empty(self) -> bool:
        self.sock.setblocking(False)
        try:
            self.sock.recv(65536)
            return False
        except BlockingIOError:
            return True
        finally:
            self.sock.settimeout(5.0)

    def close(self):
        self.sock.close()


@pytest.fixture
def path_socket(tmp_path, monkeypatch):
    path = tmp_path / "notify.sock"
    if len(os.fsencode(path)) >= 100:  # sun_path is 108 bytes
        path = Path("/tmp") / f"fs-notify-{uuid.uuid4().hex}.sock"
    r = Receiver(str(path))
    monkeypatch.setenv("NOTIFY_SOCKET", str(path))
    yield r
    r.close()
    path.unlink(missing_ok=True)


@pytest.fixture
def abstract_socket(monkeypatch):
    name = f"fairshared-test/{uuid.uuid4().hex}"
    r = Receiver(b"\0" + name.encode())
    monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
    yield r
    r.close()


def test_unset_notify_socket_is_a_silent_no_op():
    assert sdnotify.notify("READY=1") is False
    assert sdnotify.ready() is False
    assert sdnotify.ready(status="x") is False
    assert sdnotify.stopping() is False
    assert sdnotify.reloading() is False
    assert sdnotify.status("x") is False
    assert sdnotify.watchdog() is False
    assert sdnotify.watchdog_interval() is None


@pytest.mark.parametrize("value", ["/nonexistent/fairshared/notify.sock", "relative.sock",
                                   "vsock:2:1234", "@", ""])
def test_unusable_notify_socket_returns_false_without_raising(monkeypatch, value):
    monkeypatch.setenv("NOTIFY_SOCKET", value)
    assert sdnotify.notify("READY=1") is False
    assert sdnotify.watchdog() is False


def test_notify_to_a_socket_that_nobody_reads_returns_false(tmp_path, monkeypatch):
    p = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(p))
    s.close()  # the file stays, nobody listens: connect() is refused
    monkeypatch.setenv("NOTIFY_SOCKET", str(p))
    assert sdnotify.ready() is False


def test_path_socket_receives_exactly_the_bytes(path_socket):
    r = path_socket
    assert sdnotify.notify("READY=1", "STATUS=hello") is True
    assert r.recv() == b"READY=1\nSTATUS=hello"
    assert sdnotify.ready() is True
    assert r.recv() == b"READY=1"
    assert sdnotify.ready(status="reload rejected: bad\nfile") is True
    assert r.recv() == b"READY=1\nSTATUS=reload rejected: bad file"  # STATUS= is one line
    assert sdnotify.stopping() is True
    assert r.recv() == b"STOPPING=1"
    assert sdnotify.status("cycle 3: ok, 2 job(s) updated — ünïcode") is True
    assert r.recv() == "STATUS=cycle 3: ok, 2 job(s) updated — ünïcode".encode()
    assert sdnotify.watchdog() is True
    assert r.recv() == b"WATCHDOG=1"
    assert sdnotify.notify() is False  # nothing to send: nothing sent
    assert r.empty()


def test_reloading_sends_monotonic_usec(path_socket):
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    assert sdnotify.reloading() is True
    after = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    data = path_socket.recv()
    m = re.fullmatch(rb"RELOADING=1\nMONOTONIC_USEC=(\d+)", data)
    assert m, data
    assert before <= int(m.group(1)) <= after


def test_abstract_socket_receives_exactly_the_bytes(abstract_socket):
    assert sdnotify.ready(status="running") is True
    assert abstract_socket.recv() == b"READY=1\nSTATUS=running"
    assert sdnotify.watchdog() is True
    assert abstract_socket.recv() == b"WATCHDOG=1"


def test_notify_from_another_thread(path_socket):
    results = []
    t = threading.Thread(target=lambda: results.append(sdnotify.status("from a worker")))
    t.start()
    t.join()
    assert results == [True]
    assert path_socket.recv() == b"STATUS=from a worker"


def test_watchdog_interval(monkeypatch):
    assert sdnotify.watchdog_interval() is None
    monkeypatch.setenv("WATCHDOG_USEC", "60000000")
    assert sdnotify.watchdog_interval() == 30.0  # no WATCHDOG_PID: it is ours
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    assert sdnotify.watchdog_interval() == 30.0
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid() + 1))  # meant for another process
    assert sdnotify.watchdog_interval() is None
    monkeypatch.setenv("WATCHDOG_PID", "garbage")
    assert sdnotify.watchdog_interval() is None
    monkeypatch.delenv("WATCHDOG_PID")
    monkeypatch.setenv("WATCHDOG_USEC", "1500")
    assert sdnotify.watchdog_interval() == pytest.approx(0.00075)
    for bad in ("0", "-5", "", "sixty"):
        monkeypatch.setenv("WATCHDOG_USEC", bad)
        assert sdnotify.watchdog_interval() is None


def test_watchdog_pid_of_a_child_is_not_ours(monkeypatch):
    """A Slurm command started by the daemon inherits the environment; it must not ping."""
    monkeypatch.setenv("WATCHDOG_USEC", "60000000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    code = "from fairshared.daemon import sdnotify; print(sdnotify.watchdog_interval())"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "None"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_daemon_speaks_the_protocol(path_socket, tmp_path):
    """`fairshared run --demo` as systemd would start it: READY, WATCHDOG, reload, STOPPING."""
    import signal

    conf = tmp_path / "fairshared.toml"
    conf.write_text("[push]\ndry_run = true\n")
    env = {**os.environ, "WATCHDOG_USEC": "2000000", "STATE_DIRECTORY": str(tmp_path / "state"),
           "RUNTIME_DIRECTORY": str(tmp_path / "run"), "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = [sys.executable, "-m", "fairshared", "run", "--demo", "--config", str(conf),
            "--listen", f"127.0.0.1:{_free_port()}"]
    log = open(tmp_path / "daemon.log", "w")
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    path_socket.sock.settimeout(30)
    got: list[bytes] = []

    def until(pred) -> bytes:
        while True:
            try:
                msg = path_socket.recv()
            except TimeoutError:
                raise AssertionError(f"timed out; received {got!r}; log:\n"
                                     + (tmp_path / "daemon.log").read_text()) from None
            got.append(msg)
            if pred(msg):
                return msg

    try:
        assert until(lambda m: m.startswith(b"READY=1")) == b"READY=1\nSTATUS=running"
        until(lambda m: m == b"WATCHDOG=1")
        assert (tmp_path / "run" / "fairshared.pid").read_text().strip() == str(proc.pid)
        proc.send_signal(signal.SIGHUP)
        reload_msg = until(lambda m: m.startswith(b"RELOADING=1"))
        assert re.fullmatch(rb"RELOADING=1\nMONOTONIC_USEC=\d+", reload_msg), reload_msg
        assert until(lambda m: m.startswith(b"READY=1")) == b"READY=1\nSTATUS=configuration reloaded"
        # A reload queues a cycle.  Stop only once it is over: SIGTERM *during* a cycle currently
        # deadlocks (APScheduler's shutdown(wait=True) holds its job-store lock while the ending
        # cycle's Service._reschedule() waits for that lock), which is not what this test is about.
        until(lambda m: m.startswith(b"STATUS=cycle "))
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        until(lambda m: m == b"STOPPING=1")
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    assert all(m.startswith((b"READY=1", b"STATUS=", b"WATCHDOG=1", b"RELOADING=1", b"STOPPING=1"))
               for m in got), got


# ------------------------------------------------------------------- systemd's own tools

def _in_ci() -> bool:
    return os.environ.get("CI") == "true"


def _unavailable(reason: str):
    reason = reason.strip().splitlines()[0] if reason.strip() else "unknown reason"
    if _in_ci():
        pytest.fail(f"systemd tools unavailable (CI=true makes this a failure): {reason}")
    pytest.skip(f"systemd tools unavailable: {reason}")


def _apt(argv: list[str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout, check=False)


@functools.lru_cache(maxsize=None)
def _obtain(tool: str) -> tuple[str | None, str]:
    """(path, "") or (None, why).  Installs Debian's systemd package only when that is safe."""
    found = shutil.which(tool) or next((p for p in (f"/usr/bin/{tool}", f"/bin/{tool}")
                                        if os.access(p, os.X_OK)), None)
    if found:
        return found, ""
    if os.name != "posix" or os.geteuid() != 0:
        return None, f"{tool} not found and not root (cannot apt-get install systemd)"
    if not shutil.which("apt-get") or not shutil.which("dpkg-query"):
        return None, f"{tool} not found and this is not a Debian system (no apt-get)"
    q = subprocess.run(["dpkg-query", "-W", "-f", "${Status}", "systemd"], capture_output=True, text=True,
                       check=False)
    if "install ok installed" in q.stdout:
        return None, f"the systemd package is installed but {tool} is missing; not reinstalling it"
    lock = ["-o", "DPkg::Lock::Timeout=300"]
    install = ["apt-get", *lock, "install", "-y", "--no-install-recommends", "systemd"]
    try:
        sim = _apt(["apt-get", *lock, "install", "-s", "--no-install-recommends", "systemd"], 300)
        if sim.returncode != 0:
            upd = _apt(["apt-get", *lock, "update"], 600)
            if upd.returncode != 0:
                return None, f"apt-get update failed: {(upd.stderr or upd.stdout).strip()}"
            sim = _apt(["apt-get", *lock, "install", "-s", "--no-install-recommends", "systemd"], 300)
        if sim.returncode != 0:
            return None, f"apt-get install -s systemd failed: {(sim.stderr or sim.stdout).strip()}"
        removals = [ln for ln in sim.stdout.splitlines() if ln.startswith("Remv ")]
        if removals:
            return None, f"installing systemd would remove packages ({removals[0]}...); not doing it"
        res = _apt(install)
        if res.returncode != 0:
            return None, f"apt-get install systemd failed: {(res.stderr or res.stdout).strip()}"
    except subprocess.TimeoutExpired as exc:
        return None, f"{' '.join(exc.cmd)} timed out"
    except OSError as exc:
        return None, f"cannot run apt-get: {exc}"
    found = shutil.which(tool) or (f"/usr/bin/{tool}" if os.access(f"/usr/bin/{tool}", os.X_OK) else None)
    return (found, "") if found else (None, f"apt-get installed systemd but {tool} is still missing")


def _tool(tool: str) -> str:
    path, why = _obtain(tool)
    if path is None:
        _unavailable(why)
    return path


def _env() -> dict[str, str]:
    return {**os.environ, "SYSTEMD_COLORS": "0", "SYSTEMD_PAGER": "", "SYSTEMD_LOG_COLOR": "0",
            "LC_ALL": "C.UTF-8"}


def _run(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout, check=False)


@functools.lru_cache(maxsize=None)
def _systemd_version(analyze: str) -> int:
    out = _run([analyze, "--version"]).stdout
    m = re.match(r"systemd (\d+)", out)
    return int(m.group(1)) if m else 0


@pytest.fixture(scope="module")
def analyze() -> str:
    return _tool("systemd-analyze")


def _unit_settings(text: str) -> dict[str, list[str]]:
    """KEY -> values, in order (unit files repeat keys, e.g. SystemCallFilter=)."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")) or "=" not in line:
            continue
        k, v = line.split("=", 1)
        out.setdefault(k.strip(), []).append(v.strip())
    return out


def test_unit_declares_what_the_daemon_expects():
    s = _unit_settings(UNIT.read_text())
    assert s["Type"] == ["notify"]
    assert s["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert s["ExecStart"] == ["/usr/local/bin/fairshared run --config /etc/fairshared/fairshared.toml"]
    assert s["User"] == ["fairshared"] and s["Group"] == ["fairshared"]
    # service.py: state_dir() <- $STATE_DIRECTORY, pid_file() <- $RUNTIME_DIRECTORY
    for k in ("StateDirectory", "RuntimeDirectory", "ConfigurationDirectory"):
        assert s[k] == ["fairshared"]
    assert s["WatchdogSec"] and s["Restart"] == ["on-failure"]
    assert s["IPAddressDeny"] == ["any"] and s["IPAddressAllow"] == ["localhost"]
    assert s["CapabilityBoundingSet"] == [""] and s["AmbientCapabilities"] == [""]
    assert s["RestrictAddressFamilies"] == ["AF_UNIX AF_INET AF_INET6"]
    assert "ReadWritePaths" not in s  # StateDirectory=/RuntimeDirectory= are writable by themselves
    # config_http.resolve_token(): the credential the daemon looks for when no token key is set
    from fairshared.daemon.config_http import DEFAULT_CREDENTIAL
    assert s["LoadCredential"] == [f"{DEFAULT_CREDENTIAL}:/etc/fairshared/{DEFAULT_CREDENTIAL}"]


def _bytes(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def test_unit_resource_limits_fit_what_the_daemon_uses():
    """MemoryMax=, TasksMax=, LimitNOFILE= as sized in systemd/README.md from benchmarks/http_load.py
    (peak 347 MB RSS, 9 threads, 212 descriptors at 50k jobs under attack): present, with a margin,
    and the descriptor limit leaves the configured connection cap whole (the daemon serves at most
    half its descriptors)."""
    from fairshared.daemon.config_http import HttpConfig
    from fairshared.daemon.httpserver import connection_limit

    s = _unit_settings(UNIT.read_text())
    assert _bytes(s["MemoryMax"][0]) >= 2.5 * 347 * 2**20
    assert int(s["TasksMax"][0]) >= 4 * 9
    nofile = int(s["LimitNOFILE"][0])
    assert nofile >= 2 * HttpConfig().max_connections
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard >= nofile:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))
        try:
            assert connection_limit(HttpConfig().max_connections) == HttpConfig().max_connections
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    readme = (UNIT.parent / "README.md").read_text()
    for key in ("MemoryMax=", "TasksMax=", "LimitNOFILE="):
        assert f"{key}{s[key[:-1]][0]}" in readme, f"systemd/README.md does not explain {key}"


def test_unit_execstart_is_a_valid_command_line():
    argv = _unit_settings(UNIT.read_text())["ExecStart"][0].split()
    res = subprocess.run([sys.executable, "-m", "fairshared", *argv[1:], "--help"], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "--config" in res.stdout


def test_systemd_analyze_verify(analyze, tmp_path):
    """`systemd-analyze verify` on a copy whose ExecStart= program exists on this machine.

    verify checks that every Exec*= program exists and is executable *here*; the unit names the
    production path /usr/local/bin/fairshared, which a test machine (or a venv install) lacks.
    Only the program path is replaced; the rest of the unit is verified as shipped.  User= is
    not resolved by verify (systemd 252), so the fairshared user need not exist.  verify exits
    0 even for unknown keys or invalid values (it only warns), so any diagnostic that names the
    unit fails the test too.
    """
    text = UNIT.read_text()
    exe = shutil.which("fairshared") or sys.executable
    copy = tmp_path / "fairshared.service"
    new, n = re.subn(r"(?m)^ExecStart=/usr/local/bin/fairshared ", f"ExecStart={exe} ", text)
    assert n == 1
    copy.write_text(new)
    res = _run([analyze, "verify", str(copy)])
    out = (res.stdout + res.stderr).strip()
    print(f"\nsystemd-analyze verify (systemd {_systemd_version(analyze)}): rc={res.returncode}"
          f"{', output:' + chr(10) + out if out else ', no output'}")
    about_us = [ln for ln in out.splitlines() if str(copy) in ln or "fairshared.service" in ln]
    assert res.returncode == 0, out
    assert not about_us, "\n".join(about_us)


def test_systemd_analyze_security_exposure(analyze):
    if _systemd_version(analyze) < 250:
        _unavailable(f"systemd-analyze security --offline needs systemd >= 250, "
                     f"this is {_systemd_version(analyze)}")
    res = _run([analyze, "security", "--offline=true", "--no-pager", str(UNIT)])
    out = res.stdout + res.stderr
    m = re.search(r"Overall exposure level for \S+: (\d+(?:\.\d+)?)", out)
    assert m, f"no exposure level in the output (rc={res.returncode}):\n{out}"
    exposure = float(m.group(1))
    open_items = [ln.rstrip() for ln in out.splitlines() if ln.startswith("✗")]
    print(f"\nsystemd-analyze security --offline=true: exposure {exposure} (limit {MAX_EXPOSURE}); "
          f"not covered:\n" + "\n".join("  " + " ".join(ln.split()) for ln in open_items))
    assert res.returncode == 0, out
    assert exposure <= MAX_EXPOSURE, (f"exposure {exposure} > {MAX_EXPOSURE}; not covered:\n"
                                      + "\n".join(open_items))
    warnings = [ln for ln in out.splitlines() if str(UNIT) in ln]  # e.g. "...service:12: Unknown key"
    assert not warnings, "\n".join(warnings)


def test_sysusers_file(tmp_path):
    tool = _tool("systemd-sysusers")
    (tmp_path / "etc").mkdir()
    res = _run([tool, "--dry-run", f"--root={tmp_path}", str(SYSUSERS)])
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "Creating user 'fairshared'" in out, out
    assert "Creating group 'fairshared'" in out, out
    assert not (tmp_path / "etc" / "passwd").exists()  # --dry-run wrote nothing
