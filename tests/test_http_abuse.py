"""The daemon's front door under abuse: bad lengths, big bodies, idle connections, bind failures."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from daemon_proc import Daemon, fairshared_argv, free_port, gated_service, write_config
from helpers import wait_until


def raw(port: int, data: bytes, timeout: float = 5, family=socket.AF_INET, host="127.0.0.1") -> bytes:
    """Send ``data``, read until the server closes (or ``timeout``)."""
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect((host, port))
        s.sendall(data)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return out


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("abuse")
    cfg = write_config(tmp / "fs.toml", f'[http]\ntoken = "s3cret"\n[state]\ndirectory = "{tmp}/state"\n')
    d = Daemon(tmp, "--demo", "--period", "3600", "--config", str(cfg))
    d.tmp = tmp
    d.wait_ready()
    d.wait_cycle(1)
    yield d
    d.stop()


def cycles(d) -> int:
    return d.status()["cycle"]


@pytest.mark.parametrize("length", ["-1", "abc", "1e3", "+5"])
def test_malformed_content_length_is_400(daemon, length):
    out = raw(daemon.port, f"POST /-/recompute HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n".encode())
    assert out.startswith(b"HTTP/1.1 400 ")


def test_a_big_body_is_refused_unread_and_its_remainder_is_no_request(daemon):
    before = cycles(daemon)
    # declared 200 MiB, nothing sent: answered at once, before any of it is read
    t0 = time.monotonic()
    out = raw(daemon.port, b"POST /-/recompute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\n"
                           b"Content-Length: 209715200\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 413 ") and time.monotonic() - t0 < 3
    # a body that carries a second, authorised request: refused, the connection closed, no cycle
    inner = b"POST /-/recompute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\nContent-Length: 0\r\n\r\n"
    body = b"x" * 70000 + inner
    out = raw(daemon.port, b"POST /-/healthy HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    assert out.count(b"HTTP/1.1 ") == 1 and out.startswith(b"HTTP/1.1 413 ")
    time.sleep(0.5)
    assert cycles(daemon) == before


def test_token_is_checked_and_no_traceback_is_ever_logged(daemon):
    out = raw(daemon.port, b"POST /-/recompute HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 401 ")
    out = raw(daemon.port, b"GET /-/recompute HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 405 ")
    assert "Traceback" not in daemon.log()
    for line in daemon.log().splitlines():  # one format: every line is a JSON object
        assert isinstance(json.loads(line), dict)


def test_metrics_negotiates_openmetrics(daemon):
    out = raw(daemon.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                           b"Accept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n\r\n")
    head, _, body = out.partition(b"\r\n\r\n")
    assert b"Content-Type: application/openmetrics-text; version=1.0.0" in head
    assert body.endswith(b"# EOF\n") and body.count(b"# EOF") == 1 and b"fairshared_info" in body
    plain = daemon.get("/metrics")
    assert b"# EOF" not in plain and b'fairshared_info{' in plain


def test_info_reports_what_runs(daemon):
    line = next(ln for ln in daemon.get("/metrics").decode().splitlines() if ln.startswith("fairshared_info{"))
    assert 'algorithm="fair_tree"' in line and 'source="demo"' in line and 'dry_run="false"' in line


def test_ready_after_a_good_cycle(daemon):
    assert daemon.get("/-/ready") == b"ready\n"


def run_fails(*args, tmp=None) -> subprocess.CompletedProcess:
    return subprocess.run(fairshared_argv() + ["run", "--demo", *args], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def assert_one_line(res, *needles):
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.mark.parametrize("listen, needle", [
    ("127.0.0.1:99999", "out of range"),
    ("127.0.0.1", "not HOST:PORT"),
    (":abc", "not HOST:PORT"),
    ("127.0.0.1:abc", "not a number"),
    ("::1:80", "in brackets"),
    ("no-such-host.invalid:9817", "cannot resolve"),
    ("192.0.2.1:9817", "cannot listen"),  # TEST-NET-1: not an address of this host
])
def test_bad_listen_addresses_are_one_line(tmp_path, listen, needle):
    cfg = write_config(tmp_path / "fs.toml", f'[http]\nallow_unauthenticated = true\n'
                                             f'[state]\ndirectory = "{tmp_path}/state"\n')
    assert_one_line(run_fails("--config", str(cfg), "--listen", listen), needle)


def test_a_second_daemon_on_the_same_port_or_state_refuses_in_one_line(daemon, tmp_path):
    other = write_config(tmp_path / "o.toml", f'[state]\ndirectory = "{tmp_path}/state"\n')
    assert_one_line(run_fails("--config", str(other), "--listen", f"127.0.0.1:{daemon.port}"),
                    "http.listen", "in use")
    same_state = daemon.tmp / "fs.toml"
    assert_one_line(run_fails("--config", str(same_state), "--listen", f"127.0.0.1:{free_port()}"),
                    "state directory lock", "in use by another fairshared")
    assert daemon.proc.poll() is None and daemon.get("/-/healthy") == b"ok\n"


def test_ipv6_listen(tmp_path):
    if not socket.has_ipv6:
        pytest.skip("no IPv6 in this Python")
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        pytest.skip("no ::1 on this host")
    port = free_port()
    cfg = write_config(tmp_path / "fs.toml", f'[state]\ndirectory = "{tmp_path}/state"\n')
    d = Daemon(tmp_path, "--demo", "--period", "3600", "--config", str(cfg), "--listen", f"[::1]:{port}")
    try:
        deadline = time.monotonic() + 30
        out = b""
        while time.monotonic() < deadline and not out.startswith(b"HTTP/1.1 200"):
            try:
                out = raw(port, b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                          family=socket.AF_INET6, host="::1")
            except OSError:
                time.sleep(0.2)
        assert out.startswith(b"HTTP/1.1 200") and out.endswith(b"ok\n")
    finally:
        d.stop()


# -- in process: the server's limits ---------------------------------------------------------------

def test_idle_connections_are_capped_and_closed():
    from fairshared.daemon.http import Endpoints, make_app
    from fairshared.daemon.httpserver import HttpServer, bind

    ep = Endpoints(render_metrics=lambda accept: (b"m\n", "text/plain"), status=dict,
                   health=lambda: (True, "ok\n"), ready=lambda: (True, "ready\n"),
                   recompute=lambda: (200, {}))
    srv = HttpServer(make_app(ep), bind("127.0.0.1:0", 16), max_connections=3, timeout=1, backlog=16, threads=2)
    srv.start()
    port = srv.address[1]
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
    try:
        time.sleep(0.3)  # the server has accepted all three: it is at its limit
        t0 = time.monotonic()
        out = raw(port, b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout=10)
        waited = time.monotonic() - t0
        assert out.startswith(b"HTTP/1.1 200") and out.endswith(b"ok\n")
        # answered at once, in the slot of the connection idle longest (closed to make room): the cap
        # held, and a waiting probe did not wait for the idle timeout (1 s)
        assert waited < 0.5 and len(srv.server.active_channels) <= 3
        for s in idle:  # and they were closed by the server
            s.settimeout(1)
            assert s.recv(10) == b""
    finally:
        for s in idle:
            s.close()
        srv.stop(2)


# -- in process: recompute requests merge ----------------------------------------------------------

@pytest.fixture
def service(tmp_path):
    with gated_service({"state": {"directory": str(tmp_path / "state")},
                        "http": {"max_waiting": 2, "recompute_wait": 20}}, wait=20) as svc:
        yield svc


def test_many_requests_are_one_pending_cycle_and_few_callers_wait(service):
    svc = service
    assert svc.trigger("first") is True
    wait_until(svc.runner.lock.locked)  # cycle 1 runs, blocked on the gate
    merged = [svc.trigger("http") for _ in range(200)]
    assert merged.count(True) == 1  # one pending cycle for 200 requests
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(svc.http_recompute())) for _ in range(10)]
    for t in threads:
        t.start()
    wait_until(lambda: sum(1 for c, _ in answers if c == 202) == 8)  # at once: only 2 may wait
    svc.gate.set()
    for t in threads:
        t.join(20)
    assert sorted(c for c, _ in answers) == [200, 200] + [202] * 8
    wait_until(lambda: not svc.runner.lock.locked() and not svc.requests.pending)
    time.sleep(0.3)
    assert svc.runner.number == 2  # the running cycle and the one they all merged into


def test_after_stop_no_queued_cycle_runs_and_waiters_are_answered(service):
    svc = service
    svc.trigger("first")
    wait_until(svc.runner.lock.locked)
    svc.trigger("http")  # queued behind the running one
    answers = []
    t = threading.Thread(target=lambda: answers.append(svc.http_recompute()))
    t.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    stopper = threading.Thread(target=svc.shutdown)
    stopper.start()
    t.join(5)
    assert answers and answers[0][0] == 503 and time.monotonic() - t0 < 5
    svc.gate.set()
    stopper.join(30)
    time.sleep(0.5)
    assert svc.runner.number == 1  # the queued cycle was dropped
    assert svc.trigger("late") is False and svc.http_recompute()[0] == 503


def test_health_turns_after_n_failures(service):
    svc = service
    assert svc.health() == (True, "ok\n") and svc.ready()[0] is False
    svc.runner.failures = svc.config.http.unhealthy_after - 1
    assert svc.health()[0] is True
    svc.runner.failures += 1
    assert svc.health() == (False, "unhealthy: 5 failed cycles in a row\n")


# -- a failing, slow cluster: health, readiness, and SIGTERM with requests queued ------------------

def slow_failing_cluster(tmp_path, seconds: float):
    """A bin_dir whose every Slurm command takes ``seconds`` and fails: every cycle is pull_failed."""
    import stat
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("scontrol", "sshare", "sacctmgr", "squeue", "sprio", "sacct"):
        exe = bin_dir / name
        exe.write_text(f"#!{sys.executable}\nimport sys, time\ntime.sleep({seconds})\n"
                       f"sys.stderr.write('slurm_load_ctl_conf error: Unable to contact slurm controller\\n')\n"
                       f"sys.exit(1)\n")
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def get_status(d, path):
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(d.url + path, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:  # not listening yet
        return 0, b""


def test_unhealthy_after_n_failed_cycles_and_never_ready(tmp_path):
    bin_dir = slow_failing_cluster(tmp_path, 0)
    cfg = write_config(tmp_path / "fs.toml", f'[source]\nkind = "cli"\nbin_dir = "{bin_dir}"\n'
                                             f'[schedule]\nmax_backoff = 0.3\n[http]\nunhealthy_after = 3\n'
                                             f'[state]\ndirectory = "{tmp_path}/state"\n')
    d = Daemon(tmp_path, "--config", str(cfg), "--period", "0.2")
    try:
        wait_until(lambda: get_status(d, "/-/ready")[0] == 503, 30)
        wait_until(lambda: get_status(d, "/-/healthy")[0] == 503, 30)
        code, body = get_status(d, "/-/healthy")
        st = d.status()
        assert code == 503 and body.startswith(b"unhealthy: ") and st["consecutive_failures"] >= 3
        assert st["outcome"] == "pull_failed" and get_status(d, "/-/ready") == (
            503, b"not ready: no cycle has computed a result yet\n")
    finally:
        d.stop()


def test_sigterm_with_requests_queued_runs_no_further_cycle(tmp_path):
    bin_dir = slow_failing_cluster(tmp_path, 2)
    cfg = write_config(tmp_path / "fs.toml", f'[source]\nkind = "cli"\nbin_dir = "{bin_dir}"\n'
                                             f'[state]\ndirectory = "{tmp_path}/state"\n')
    d = Daemon(tmp_path, "--config", str(cfg), "--period", "3600")
    try:
        wait_until(lambda: get_status(d, "/-/healthy")[0] == 200, 30)
        answers = []

        def post():
            answers.append(d.post("/-/recompute", timeout=60)[0])

        threads = [threading.Thread(target=post) for _ in range(40)]
        for t in threads:
            t.start()
        wait_until(lambda: answers.count(202) == 38, 20)  # 2 wait, 38 were answered at once
        t0 = time.monotonic()
        assert d.stop(timeout=40) == 0
        took = time.monotonic() - t0
        for t in threads:
            t.join(10)
    finally:
        if d.proc.poll() is None:
            d.stop()
    events = [json.loads(line)["event"] for line in d.log_path.read_text().splitlines()]
    cycles_after_stop = events[events.index("stopping"):].count("cycle")
    assert events.count("cycle") <= 2 and cycles_after_stop <= 1  # at most the one running at SIGTERM
    assert events[-1] == "stopped" and took < 30
    # the two that waited for the pending cycle were told it will not run
    assert sorted(answers) == [202] * 38 + [503, 503]


def test_idle_connections_under_a_low_fd_limit_leave_cycles_and_cpu_alone(tmp_path):
    """The issue's case: ``ulimit -n 64`` and 63 idle connections.  The server stops accepting at
    half the limit, so a cycle still gets its descriptors, and nothing spins."""
    import resource
    import signal as sig

    port = free_port()
    cfg = write_config(tmp_path / "fs.toml", f'[http]\ntimeout = 30\nmin_interval = 0\n'
                                             f'[state]\ndirectory = "{tmp_path}/state"\n')
    log = open(tmp_path / "daemon.log", "w")
    proc = subprocess.Popen(fairshared_argv() + ["run", "--demo", "--period", "3600", "--config", str(cfg),
                                                 "--listen", f"127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)))
    idle = []
    try:
        deadline = time.monotonic() + 30
        while b"ok\n" not in (raw(port, b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1)
                              if _listening(port) else b""):
            assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "daemon.log").read_text()
            time.sleep(0.2)
        for _ in range(63):
            idle.append(socket.create_connection(("127.0.0.1", port)))
        time.sleep(1)
        cpu0 = _cpu_seconds(proc.pid)
        proc.send_signal(sig.SIGUSR1)  # a cycle while the connections are held
        time.sleep(3)
        cpu = _cpu_seconds(proc.pid) - cpu0
        events = [json.loads(line) for line in (tmp_path / "daemon.log").read_text().splitlines()]
        cycles = [e for e in events if e["event"] == "cycle"]
        assert [c["outcome"] for c in cycles] == ["success", "success"], events[-3:]
        assert cpu < 1.0, f"{cpu:.2f} s of CPU in 3 s: the loop spins"
        assert not any("Too many open files" in json.dumps(e) for e in events)
        assert proc.poll() is None
    finally:
        for s in idle:
            s.close()
        proc.send_signal(sig.SIGTERM)
        assert proc.wait(40) == 0
        log.close()


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("http, listen, needles", [
    ('token_file = "{tmp}/empty"', None, ["http.token_file", "empty"]),
    ('token_file = "{tmp}/missing"', None, ["http.token_file", "No such file"]),
    ('token = ""', None, ["http.token", "at least 1 character"]),
    ('token_file = "{tmp}/public"', None, ["http.token_file", "/public: mode 0644", "chmod 0600"]),
    ('token_file = "{tmp}/shared"', None, ["http.token_file", "/shared: mode 0620", "chmod 0600"]),
    ("", "0.0.0.0:{port}", ["--listen", "is not loopback", "allow_unauthenticated"]),
])
def test_authentication_mistakes_stop_the_start_in_one_line(tmp_path, http, listen, needles):
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "empty").chmod(0o600)
    for name, mode in (("public", 0o644), ("shared", 0o620)):
        (tmp_path / name).write_text("s3cret\n")
        (tmp_path / name).chmod(mode)
    cfg = write_config(tmp_path / "fs.toml", "[http]\n" + http.format(tmp=tmp_path) + "\n"
                                             f'[state]\ndirectory = "{tmp_path}/state"\n')
    args = ["--config", str(cfg)] + (["--listen", listen.format(port=free_port())] if listen else [])
    assert_one_line(run_fails(*args), *needles)


# -- reads need the token off loopback ---------------------------------------------------------------

def wsgi_get(app, path: str, token: str | None = None) -> str:
    """The status line of ``GET path`` through the WSGI app, no socket."""
    got = []
    environ = {"PATH_INFO": path, "REQUEST_METHOD": "GET"}
    if token:
        environ["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    b"".join(app(environ, lambda status, headers: got.append(status)))
    return got[0]


@pytest.mark.parametrize("listen, reads, token, locked", [
    ("127.0.0.1:9817", None, "s3cret", False),  # loopback: reads open by default
    ("[::1]:9817", None, "s3cret", False),
    ("10.0.0.1:9817", None, "s3cret", True),  # off loopback with a token: reads need it by default
    ("10.0.0.1:9817", "false", "s3cret", False),  # unless the config says otherwise
    ("127.0.0.1:9817", "true", "s3cret", True),
    ("10.0.0.1:9817", None, None, False),  # allow_unauthenticated: no token to ask for
])
def test_reads_need_the_token_off_loopback_unless_configured(tmp_path, listen, reads, token, locked):
    from fairshared.daemon.config import config_from_dict
    from fairshared.daemon.http import Endpoints, make_app
    from fairshared.daemon.service import Service

    http = {"listen": listen, **({"token": token} if token else {"allow_unauthenticated": True})}
    if reads is not None:
        http["token_for_reads"] = reads == "true"
    svc = Service(config_from_dict({"http": http, "state": {"directory": str(tmp_path / "state")}}), None,
                  demo=True)
    app = make_app(Endpoints(render_metrics=svc.metrics.exposition, status=svc.runner.status,
                             health=svc.health, ready=svc.ready, recompute=lambda: (200, {}), auth=svc.auth))
    for path in ("/metrics", "/-/status"):
        assert wsgi_get(app, path) == ("401 Unauthorized" if locked else "200 OK"), path
        if token:
            assert wsgi_get(app, path, token) == "200 OK"
    assert wsgi_get(app, "/-/healthy") == "200 OK"  # the probes never need it


# -- /metrics: formatted once per cycle and format, sent without a copy --------------------------------

def test_scrapes_in_alternating_formats_format_each_once_and_head_sends_no_body():
    from test_metrics import ACCEPTS, counting_formats, cycle

    from fairshared.daemon.http import Endpoints, make_app
    from fairshared.daemon.httpserver import HttpServer, bind
    from fairshared.sinks.metrics import Metrics

    m = Metrics(version="1")
    formatted = counting_formats(m)
    m.publish(cycle(1))
    ep = Endpoints(render_metrics=m.exposition, status=dict, health=lambda: (True, "ok\n"),
                   ready=lambda: (True, "ready\n"), recompute=lambda: (200, {}))
    srv = HttpServer(make_app(ep), bind("127.0.0.1:0", 16), max_connections=16, timeout=5, backlog=16,
                     threads=4)
    srv.start()
    port = srv.address[1]
    try:
        types = set()
        for i in range(40):
            out = raw(port, f"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                            f"Accept: {ACCEPTS[i % len(ACCEPTS)]}\r\n\r\n".encode())
            head, _, body = out.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            length = int(next(ln.split(b":")[1] for ln in lines if ln.startswith(b"Content-Length")))
            assert out.startswith(b"HTTP/1.1 200") and len(body) == length and b"fairshared_info{" in body
            types.add(next(ln for ln in head.split(b"\r\n") if ln.startswith(b"Content-Type")))
        # one formatting per format, not per scrape; two formats served whatever the Accept header
        assert len(types) == 2 and len(formatted) == 2
        # HEAD: the length, no body; the connection stays usable for the next request
        out = raw(port, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /-/healthy HTTP/1.1\r\nHost: x\r\n"
                        b"Connection: close\r\n\r\n")
        first, _, rest = out.partition(b"\r\n\r\n")
        assert first.startswith(b"HTTP/1.1 200")
        assert rest.startswith(b"HTTP/1.1 200") and rest.endswith(b"ok\n")
    finally:
        srv.stop(2)


def test_a_big_body_is_sent_from_the_cached_object_not_copied_per_scrape():
    import tracemalloc

    from fairshared.daemon.http import Endpoints, Parts, make_app
    from fairshared.daemon.httpserver import HttpServer, bind

    big = bytes(range(256)) * (16 * 1024)  # 4 MiB, "the cache"
    ep = Endpoints(render_metrics=lambda accept: ((b"# runtime\n", big), "text/plain"), status=dict,
                   health=lambda: (True, "ok\n"), ready=lambda: (True, "ready\n"),
                   recompute=lambda: (200, {}))
    srv = HttpServer(make_app(ep), bind("127.0.0.1:0", 64), max_connections=32, timeout=10, backlog=64,
                     threads=4)
    srv.start()
    port = srv.address[1]
    idle = []
    try:
        out = raw(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout=10)
        assert out.partition(b"\r\n\r\n")[2] == b"# runtime\n" + big  # whole, in order
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            for _ in range(12):  # scrapers that ask and never read
                s = socket.create_connection(("127.0.0.1", port))
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                idle.append(s)
            time.sleep(1.5)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        assert peak < len(big) // 2, f"{peak / 2**20:.1f} MiB allocated for 12 scrapes of a 4 MiB body"
        assert raw(port, b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").endswith(b"ok\n")
    finally:
        for s in idle:
            s.close()
        srv.stop(2)
    p = Parts((b"abc", b"", b"defgh"))  # the file the server reads from: seek, tell, short reads
    assert p.seek(0, 2) == 8 and p.tell() == 8 and p.read(4) == b""
    p.seek(1)
    assert p.read(10) == b"bc" and p.read(2) == b"de" and p.read() == b"fgh"
    p.seek(-2, 1)
    assert p.read() == b"gh"


# -- slowloris: a deadline for the whole request; the probes keep answering ---------------------------

def trickle(port: int, n: int, every: float, until: float) -> tuple[list, threading.Thread]:
    """``n`` connections that send a request one byte every ``every`` s until ``until`` (monotonic);
    returns the sockets and the sending thread (it stops on a socket the server closed)."""
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    request = b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 4000

    def run():
        i = 0
        while time.monotonic() < until and i < len(request):
            for s in socks:
                try:
                    s.send(request[i:i + 1])
                except OSError:
                    pass
            i += 1
            time.sleep(every)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return socks, t


def closed_by_server(s: socket.socket) -> bool:
    s.settimeout(0.5)
    try:
        return s.recv(10) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except (TimeoutError, BlockingIOError):
        return False


def timed_get(port: int, path: str, timeout: float = 20) -> tuple[float, bytes]:
    t0 = time.monotonic()
    out = raw(port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode(), timeout=timeout)
    return time.monotonic() - t0, out


def test_a_trickled_request_is_closed_at_the_deadline_and_frees_its_slot():
    from fairshared.daemon.http import Endpoints, make_app
    from fairshared.daemon.httpserver import HttpServer, bind

    ep = Endpoints(render_metrics=lambda accept: (b"m\n", "text/plain"), status=dict,
                   health=lambda: (True, "ok\n"), ready=lambda: (True, "ready\n"),
                   recompute=lambda: (200, {}))
    # every slot taken by a trickler sending a byte every 0.2 s: never idle for the 30 s channel timeout
    srv = HttpServer(make_app(ep), bind("127.0.0.1:0", 16), max_connections=4, timeout=30, request_timeout=1,
                     backlog=16, threads=2)
    srv.start()
    port = srv.address[1]
    socks, t = trickle(port, 4, 0.2, time.monotonic() + 12)
    try:
        time.sleep(0.3)
        took, out = timed_get(port, "/-/healthy")
        assert out.startswith(b"HTTP/1.1 200") and out.endswith(b"ok\n")
        assert took < 4, f"/-/healthy waited {took:.1f} s behind 4 trickling connections"
        # cut off at the deadline (or to make room for the probe), while still sending
        open_ = list(socks)
        until = time.monotonic() + 4
        while open_ and time.monotonic() < until:
            open_ = [s for s in open_ if not closed_by_server(s)]
        assert not open_ and t.is_alive()
    finally:
        for s in socks:
            s.close()
        srv.stop(2)


def test_seventy_trickling_connections_leave_the_probes_and_scrapes_answering(daemon):
    """The issue's attack on the demo daemon: 70 connections, a byte every 2 s, no token."""
    socks, _ = trickle(daemon.port, 70, 2.0, time.monotonic() + 9)
    try:
        time.sleep(0.5)
        worst = 0.0
        for _ in range(6):
            for path in ("/-/healthy", "/metrics"):
                took, out = timed_get(daemon.port, path)
                assert out.startswith(b"HTTP/1.1 200"), out[:100]
                worst = max(worst, took)
            time.sleep(0.5)
        assert worst < 1.0, f"a probe or scrape took {worst:.2f} s during the attack"
        time.sleep(7 - 0.5 - 6 * 0.5)  # past http.request_timeout (5 s) since their first byte
        assert sum(closed_by_server(s) for s in socks) == 70
    finally:
        for s in socks:
            s.close()


# -- waitress's per-request warnings become one summary line per interval -----------------------------

def test_pressure_summarises_waitress_warnings_once_per_interval():
    import logging

    from fairshared.daemon.httplimits import Pressure

    now = [1000.0]
    lines = []
    p = Pressure(interval=60, clock=lambda: now[0], log=lambda event, **kw: lines.append((event, kw)))
    queue = logging.getLogger("waitress.queue")
    p.install()
    try:
        assert p.flush() is False  # nothing happened: nothing said
        for i in range(15038):
            queue.warning("Task queue depth is %d", 1 + i % 37)
        logging.getLogger("waitress").warning("total open connections reached the connection limit, "
                                              "no longer accepting new connections")
        p.slow(3)
        p.stalled(2)
        p.late(5)
        p.evict(4)
        now[0] += 5
        assert p.flush() is False and lines == []  # within the minute: counted, not said
        now[0] += 55
        assert p.flush() is True and lines == [("http under pressure", {
            "queued": 15038, "max_queue_depth": 37, "slow_requests_closed": 3, "stalled_answers_closed": 2,
            "late_answers_closed": 5, "closed_for_room": 4, "connection_limit_reached": 1, "seconds": 60.0})]
        assert p.flush() is False
        now[0] += 100
        queue.warning("Task queue depth is %d", 2)  # after a quiet spell: a new window
        now[0] += 30
        assert p.flush() is False
        assert p.flush(force=True) is True and lines[-1][1]["queued"] == 1 and len(lines) == 2  # at stop
        assert p.filter(logging.makeLogRecord({"msg": "something else"})) is True  # others pass
        # the closes' totals since the start outlive the summaries (fairshared_http_connections_closed)
        assert p.closed() == {"slow_request": 3, "stalled_answer": 2, "late_answer": 5, "room": 4}
    finally:
        p.uninstall()


def test_a_queue_for_the_workers_is_one_log_line_not_one_per_request(caplog):
    from fairshared.daemon.http import Endpoints, make_app
    from fairshared.daemon.httplimits import Pressure
    from fairshared.daemon.httpserver import HttpServer, bind

    gate = threading.Event()

    def slow_status():
        gate.wait(10)
        return {}

    ep = Endpoints(render_metrics=lambda accept: (b"m\n", "text/plain"), status=slow_status,
                   health=lambda: (True, "ok\n"), ready=lambda: (True, "ready\n"),
                   recompute=lambda: (200, {}))
    lines = []
    pressure = Pressure(interval=1, log=lambda event, **kw: lines.append((event, kw)))
    srv = HttpServer(make_app(ep), bind("127.0.0.1:0", 64), max_connections=64, timeout=10, backlog=64,
                     threads=1, pressure=pressure)
    srv.start()
    port = srv.address[1]
    answers = []
    clients = [threading.Thread(target=lambda: answers.append(
        raw(port, b"GET /-/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout=15)))
        for _ in range(30)]
    try:
        with caplog.at_level(logging.WARNING):
            for c in clients:
                c.start()
            time.sleep(1.5)  # all 30 queued behind the one worker
            gate.set()
            for c in clients:
                c.join(15)
            time.sleep(1.2)
        assert len(answers) == 30 and all(a.startswith(b"HTTP/1.1 200") for a in answers)
        assert not [r for r in caplog.records if "Task queue depth" in r.getMessage()]
        assert len(lines) == 1 and lines[0][0] == "http under pressure"
        assert lines[0][1]["queued"] >= 25 and lines[0][1]["max_queue_depth"] >= 25, lines
    finally:
        gate.set()
        srv.stop(2)


# -- clients that ask and never read: no request thread is theirs to hold (issue 26, item 1) ----------

def stuck_pipeliners(port: int, n: int, requests: int = 3, path: str = "/metrics") -> list[socket.socket]:
    """``n`` connections that each send ``requests`` pipelined GETs in one go and never read."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode() * requests)
        socks.append(s)
    return socks


def timed_read(port: int, path: str, timeout: float = 10) -> tuple[float, bytes]:
    """timed_get for a big answer (read into one buffer, not a string of copies)."""
    t0 = time.monotonic()
    out = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        while chunk := s.recv(1 << 20):
            out += chunk
    return time.monotonic() - t0, bytes(out)


def read_to_close(s: socket.socket, limit: int = 64 * 2**20) -> bool:
    """Whether the server closed ``s``: read what it had sent before closing, up to end of stream."""
    s.settimeout(0.5)
    got = 0
    try:
        while got < limit:
            chunk = s.recv(65536)
            if not chunk:
                return True
            got += len(chunk)
    except (ConnectionResetError, BrokenPipeError):
        return True
    except (TimeoutError, BlockingIOError):
        return False
    return False


def big_metrics_server(threads: int = 4, timeout: int = 3, body_mib: int = 12, answer_timeout: float = 30):
    from fairshared.daemon.http import Endpoints, make_app
    from fairshared.daemon.httpserver import HttpServer, bind

    big = b"x" * (body_mib * 2**20)  # bigger than half waitress's 16 MiB output high-water mark
    ep = Endpoints(render_metrics=lambda accept: ((b"# m\n", big), "text/plain"), status=dict,
                   health=lambda: (True, "ok\n"), ready=lambda: (True, "ready\n"),
                   recompute=lambda: (200, {}))
    srv = HttpServer(make_app(ep), bind("127.0.0.1:0", 128), max_connections=256, timeout=timeout,
                     backlog=128, threads=threads, answer_timeout=answer_timeout)
    srv.start()
    return srv, len(big) + 4


def test_fifty_pipelining_clients_that_never_read_hold_no_request_thread():
    """The issue's attack (4 connections x 3 pipelined GET /metrics, never read, silenced every answer
    for 63 s), with 50 such clients: the probes and a reading scraper still answer within 1 s, and
    the stuck connections are closed once their answer has made no progress for http.timeout s."""
    srv, size = big_metrics_server(threads=4, timeout=3)
    port = srv.address[1]
    socks = stuck_pipeliners(port, 50)
    try:
        time.sleep(1.0)  # every stuck connection has its requests in
        worst = 0.0
        for path in ("/-/healthy", "/-/ready", "/-/healthy"):
            took, out = timed_get(port, path, timeout=10)
            assert out.startswith(b"HTTP/1.1 200"), (path, out[:80])
            worst = max(worst, took)
        took, out = timed_read(port, "/metrics")
        assert len(out.partition(b"\r\n\r\n")[2]) == size  # a reading scraper gets the whole answer
        worst = max(worst, took)
        assert worst < 1.0, f"a probe or scrape took {worst:.2f} s behind 50 clients that never read"
        time.sleep(4.5)  # > http.timeout (3 s) + the once-a-second check without progress
        assert sum(read_to_close(s) for s in socks) == 50
        assert len(srv.server.active_channels) == 0
    finally:
        for s in socks:
            s.close()
        srv.stop(2)


def read_until(s: socket.socket, end: bytes) -> bytes:
    out = b""
    while not out.endswith(end):
        chunk = s.recv(4096)
        assert chunk, out
        out += chunk
    return out


def test_probes_have_a_worker_of_their_own():
    """waitress serves requests first come, first served: ~150 pipelined scrapes ahead of a
    /-/healthy held it 0.9 s in the queue (benchmarks/http_load.py, 50 clients x 3 GET /metrics
    during a cycle).  Every worker held here, and a queue behind them: the probes still answer."""
    from fairshared.daemon.http import Endpoints, make_app
    from fairshared.daemon.httpserver import HttpServer, bind

    gate, busy = threading.Event(), threading.Semaphore(0)

    def held_metrics(accept):
        busy.release()
        gate.wait(20)
        return b"m 1\n", "text/plain"

    ep = Endpoints(render_metrics=held_metrics, status=dict, health=lambda: (True, "ok\n"),
                   ready=lambda: (True, "ready\n"), recompute=lambda: (200, {}))
    srv = HttpServer(make_app(ep), bind("127.0.0.1:0", 64), max_connections=64, timeout=30, backlog=64,
                     threads=2)
    srv.start()
    port = srv.address[1]
    scrapes = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(6)]
    try:
        for s in scrapes:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert busy.acquire(timeout=5) and busy.acquire(timeout=5)  # both workers held, 4 queued
        for path, body in (("/-/healthy", b"ok\n"), ("/-/ready", b"ready\n"), ("/-/healthy", b"ok\n")):
            took, out = timed_get(port, path, timeout=10)
            assert out.startswith(b"HTTP/1.1 200") and out.endswith(body), out[:80]
            assert took < 0.5, f"{path} waited {took:.2f} s behind held scrapes"
        head = raw(port, b"HEAD /-/healthy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout=2)
        assert head.startswith(b"HTTP/1.1 200") and b"Content-Length: 3" in head
        # a probe pipelined before a scrape: the probe is answered at once, the scrape waits its turn
        mixed = socket.create_connection(("127.0.0.1", port), timeout=10)
        scrapes.append(mixed)
        mixed.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_until(mixed, b"ok\n").startswith(b"HTTP/1.1 200")
        gate.set()
        for s in scrapes:  # every scrape answered once the workers are free
            assert read_until(s, b"m 1\n").startswith(b"HTTP/1.1 200")
    finally:
        gate.set()
        for s in scrapes:
            s.close()
        srv.stop(2)


def test_a_slow_drip_reader_is_closed_at_the_answer_deadline():
    """A client that reads a big answer slowly but steadily moves it often enough for close_stalled
    (a connection whose answer makes no progress for http.timeout): 512 KB/s of a 32 MB answer,
    with a 10 s http.timeout, was still open after 45 s with 15.7 MB pending (and would have been
    for a minute more, 8 pipelined answers for 8 minutes), holding a slot and the body.  The answer
    deadline closes it however steadily it reads, and only it: a reading client gets the same
    answer whole, and the close is counted."""
    srv, size = big_metrics_server(threads=2, timeout=10, body_mib=32, answer_timeout=3)
    port = srv.address[1]
    drip = socket.socket()
    drip.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    try:
        took, out = timed_read(port, "/metrics")  # a reader at loopback speed: whole, well in time
        assert len(out.partition(b"\r\n\r\n")[2]) == size and took < 3
        drip.connect(("127.0.0.1", port))
        drip.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        t0, got, closed_at = time.monotonic(), 0, None
        drip.settimeout(0.25)
        while time.monotonic() - t0 < 12 and closed_at is None:
            try:
                got += len(drip.recv(128 * 1024))  # ~512 KB/s: moving, never stalled
            except TimeoutError:
                pass
            time.sleep(0.25)
            if srv.pressure.closed()["late_answer"]:
                closed_at = time.monotonic() - t0
        assert closed_at is not None, f"a slow reader still held its answer after 12 s ({got} bytes read)"
        assert 3 <= closed_at < 6, closed_at  # the deadline, checked every second
        assert 0 < got < size
        assert srv.pressure.closed() == {"slow_request": 0, "stalled_answer": 0, "late_answer": 1, "room": 0}
        assert len(srv.server.active_channels) == 0
    finally:
        drip.close()
        srv.stop(2)


def test_a_reload_changes_the_request_and_answer_deadlines_at_once(tmp_path):
    from fairshared.daemon.http import Endpoints, make_app
    from fairshared.daemon.httpserver import HttpServer, bind

    path = write_config(tmp_path / "fs.toml", "[http]\nrequest_timeout = 5\nanswer_timeout = 30\n")
    with gated_service({"http": {"request_timeout": 5, "answer_timeout": 30},
                        "state": {"directory": str(tmp_path / "state")}}, str(path)) as svc:
        svc.gate.set()
        ep = Endpoints(render_metrics=lambda accept: (b"", "text/plain"), status=dict,
                       health=lambda: (True, "ok\n"), ready=lambda: (True, "ready\n"), recompute=lambda: (200, {}))
        hc = svc.config.http
        svc.http = HttpServer(make_app(ep), bind("127.0.0.1:0", 8), max_connections=8, timeout=hc.timeout,
                              request_timeout=hc.request_timeout, answer_timeout=hc.answer_timeout, backlog=8,
                              threads=1)
        try:
            assert (svc.http.request_timeout, svc.http.answer_timeout) == (5, 30)
            path.write_text("[http]\nrequest_timeout = 2\nanswer_timeout = 7.5\n")
            svc.reload()
            assert (svc.http.request_timeout, svc.http.answer_timeout) == (2, 7.5)
        finally:
            svc.http.stop(1)  # never started: its worker threads would outlive the test


def test_pipelining_is_bounded_per_connection():
    from fairshared.daemon.httplimits import MAX_PIPELINED

    srv, _ = big_metrics_server(threads=2, timeout=5, body_mib=1)
    port = srv.address[1]
    try:
        out = raw(port, b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n" * (MAX_PIPELINED + 20), timeout=5)
        # the first MAX_PIPELINED answered, the last of them with Connection: close, the rest dropped
        assert out.count(b"HTTP/1.1 200") == MAX_PIPELINED
        assert out.count(b"Connection: close") == 1
        assert out.endswith(b"Connection: close\r\n\r\nok\n") or out.rstrip().endswith(b"ok")
    finally:
        srv.stop(2)


def test_one_turn_of_the_loop_accepts_every_waiting_connection():
    """waitress accepts one connection per turn of its loop: 200 tricklers closed at their deadline
    together reconnected together, the listen queue overflowed and the kernel dropped whichever SYN
    came next -- a /-/healthy among them, retried by its client a second later (1.02 s probes in
    http_load.py's slowloris phase).  One turn now takes all that wait, up to the connection limit."""
    from waitress import wasyncore

    from fairshared.daemon.http import Endpoints, make_app
    from fairshared.daemon.httpserver import HttpServer, bind

    ep = Endpoints(render_metrics=lambda accept: (b"", "text/plain"), status=dict,
                   health=lambda: (True, "ok\n"), ready=lambda: (True, "ready\n"), recompute=lambda: (200, {}))
    srv = HttpServer(make_app(ep), bind("127.0.0.1:0", 64), max_connections=40, timeout=30, backlog=64,
                     threads=1)  # not started: the test turns the loop itself
    port = srv.address[1]
    waiting = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(30)]
    try:
        wasyncore.loop(timeout=1.0, map=srv._map, use_poll=True, count=1)
        assert len(srv.server.active_channels) == 30
        more = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(20)]
        waiting += more
        wasyncore.loop(timeout=1.0, map=srv._map, use_poll=True, count=1)
        # the limit counts every descriptor of the loop's map (the listener and waitress's trigger too)
        assert len(srv._map) == srv.server.adj.connection_limit == 40
    finally:
        for s in waiting:
            s.close()
        srv.stop(2)


def test_the_default_backlog_holds_a_burst_of_reconnecting_tricklers():
    """Past a full listen queue the kernel drops SYNs: a probe among them waits 1 s for its client to
    send it again.  With the old default of 128 the 130th of 300 connections made while the server
    took none timed out (0.5 s); the default holds them all (where net.core.somaxconn allows)."""
    from fairshared.daemon.config_http import HttpConfig
    from fairshared.daemon.httpserver import bind

    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    if somaxconn < 300:
        pytest.skip(f"net.core.somaxconn is {somaxconn}: the kernel caps the backlog below 300")
    listener = bind("127.0.0.1:0", HttpConfig().backlog)  # nobody accepts: the queue alone holds them
    socks = []
    try:
        for _ in range(300):
            socks.append(socket.create_connection(("127.0.0.1", listener.getsockname()[1]), timeout=0.5))
        assert len(socks) == 300
    finally:
        for s in socks:
            s.close()
        listener.close()


def test_past_the_connection_cap_a_probe_takes_the_slot_of_the_oldest_trickler():
    """700 trickling connections past the 512 cap held /-/healthy in the backlog (p99 2.9 s): when a
    connection waits and every slot is taken, the one whose request has been arriving longest goes."""
    from fairshared.daemon.http import Endpoints, make_app
    from fairshared.daemon.httpserver import HttpServer, bind

    ep = Endpoints(render_metrics=lambda accept: (b"m\n", "text/plain"), status=dict,
                   health=lambda: (True, "ok\n"), ready=lambda: (True, "ready\n"),
                   recompute=lambda: (200, {}))
    # a request deadline far away: only making room can let the probes in
    srv = HttpServer(make_app(ep), bind("127.0.0.1:0", 64), max_connections=16, timeout=30,
                     request_timeout=60, backlog=64, threads=2)
    srv.start()
    port = srv.address[1]
    socks, _ = trickle(port, 24, 0.2, time.monotonic() + 15)
    try:
        time.sleep(1.0)
        worst = 0.0
        for _ in range(8):
            took, out = timed_get(port, "/-/healthy", timeout=10)
            assert out.startswith(b"HTTP/1.1 200") and out.endswith(b"ok\n"), out[:80]
            worst = max(worst, took)
        assert worst < 1.0, f"/-/healthy waited {worst:.2f} s behind tricklers past the connection cap"
        assert len(srv.server.active_channels) <= 16
    finally:
        for s in socks:
            s.close()
        srv.stop(2)
