"""`fairshared recompute`: it signals only a fairshared process named by a pid file nobody else could
have planted, and never follows a redirect with the token."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import time

import pytest
from daemon_proc import Daemon, fairshared_argv, write_config


def recompute(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(fairshared_argv() + ["recompute", *args], capture_output=True, text=True,
                          timeout=60, check=False, stdin=subprocess.DEVNULL, env=env)


def config_with_pid_file(tmp_path, pid_file) -> str:
    return str(write_config(tmp_path / "fs.toml", f'[state]\ndirectory = "{tmp_path}/state"\n'
                                                  f'pid_file = "{pid_file}"\n'))


def test_signal_reaches_the_daemon_of_its_own_pid_file(tmp_path):
    cfg = config_with_pid_file(tmp_path, tmp_path / "run" / "fairshared.pid")
    d = Daemon(tmp_path, "--demo", "--period", "3600", "--config", cfg)
    try:
        d.wait_ready()
        d.wait_cycle(1)
        res = recompute("--signal", "--config", cfg, "--timeout", "30")
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["cycle"] == 2
    finally:
        d.stop()


@pytest.fixture
def bystander():
    """A process SIGUSR1 would kill (no handler), whose command line says fairshared."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "fairshared-lookalike"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def stranger():
    """A process SIGUSR1 would kill, that is not fairshared."""
    proc = subprocess.Popen(["sleep", "120"])
    yield proc
    proc.kill()
    proc.wait()


def refused(res, *needles):
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_a_pid_file_naming_another_program_is_refused(tmp_path, stranger):
    pf = tmp_path / "fairshared.pid"
    pf.write_text(f"{stranger.pid}\n")
    pf.chmod(0o600)
    res = recompute("--signal", "--config", config_with_pid_file(tmp_path, pf), "--timeout", "2")
    refused(res, f"pid file {pf}", f"pid {stranger.pid}", "not fairshared")
    time.sleep(0.2)
    assert stranger.poll() is None  # not signalled


def test_a_stale_pid_file_naming_a_process_that_mentions_fairshared_is_refused(tmp_path):
    """`tail -f /var/log/fairshared.log` got the pid of a stopped daemon, and SIGUSR1 killed it: its
    command line says fairshared.  Only the process that holds the pid file's lock is the daemon."""
    log = tmp_path / "fairshared.log"
    log.write_text("")
    tail = subprocess.Popen(["tail", "-f", str(log)], stdout=subprocess.DEVNULL)
    try:
        pf = tmp_path / "fairshared.pid"
        pf.write_text(f"{tail.pid}\n")
        pf.chmod(0o600)
        res = recompute("--signal", "--config", config_with_pid_file(tmp_path, pf), "--timeout", "2")
        refused(res, f"pid file {pf}", f"pid {tail.pid}", "does not hold the pid file's lock")
        time.sleep(0.2)
        assert tail.poll() is None  # not signalled
    finally:
        tail.kill()
        tail.wait()


@pytest.mark.parametrize("mode", [0o664, 0o646, 0o666])
def test_a_pid_file_others_may_write_is_refused(tmp_path, bystander, mode):
    pf = tmp_path / "fairshared.pid"
    pf.write_text(f"{bystander.pid}\n")
    pf.chmod(mode)
    res = recompute("--signal", "--config", config_with_pid_file(tmp_path, pf), "--timeout", "2")
    refused(res, f"pid file {pf}", f"writable by others (mode {mode:04o})")
    time.sleep(0.2)
    assert bystander.poll() is None


def test_a_symlinked_pid_file_is_refused(tmp_path, bystander):
    real = tmp_path / "real.pid"
    real.write_text(f"{bystander.pid}\n")
    real.chmod(0o600)
    pf = tmp_path / "fairshared.pid"
    pf.symlink_to(real)
    res = recompute("--signal", "--config", config_with_pid_file(tmp_path, pf), "--timeout", "2")
    refused(res, f"pid file {pf}", "symbolic link")
    assert bystander.poll() is None


def test_a_pid_file_planted_by_another_user_is_refused(tmp_path, bystander):
    if os.geteuid() != 0:
        pytest.skip("needs root to give the file to another user")
    pf = tmp_path / "fairshared.pid"
    pf.write_text(f"{bystander.pid}\n")
    pf.chmod(0o644)
    os.chown(pf, 65534, 65534)  # nobody's file, naming root's process
    res = recompute("--signal", "--config", config_with_pid_file(tmp_path, pf), "--timeout", "2")
    refused(res, f"pid file {pf}", "belongs to uid 65534", "not trusted")
    assert bystander.poll() is None


@pytest.mark.parametrize("content", ["", "abc", "12x"])
def test_a_pid_file_without_a_pid_is_refused(tmp_path, content):
    pf = tmp_path / "fairshared.pid"
    pf.write_text(content)
    pf.chmod(0o600)
    res = recompute("--signal", "--config", config_with_pid_file(tmp_path, pf), "--timeout", "2")
    refused(res, f"pid file {pf}", "holds no pid")


@pytest.mark.parametrize("content", ["0", "-1", "+1", " -5 "])
def test_pid_0_and_negative_pids_are_never_read(tmp_path, content):
    # in process, on the reader alone: kill(0) signals our own process group and kill(-1) every
    # process we may signal, so this is never tried through the command on a build without the check
    from fairshared.daemon.pidfile import _read_pid
    from fairshared.model import InputError

    pf = tmp_path / "fairshared.pid"
    pf.write_text(content)
    pf.chmod(0o600)
    with pytest.raises(InputError, match="holds no pid"):
        _read_pid(pf)


# -- a redirect is never followed with the token ----------------------------------------------------

class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every request with ``self.server.answer`` and records the headers it got."""

    def _any(self):
        self.server.seen.append((self.command, self.path, dict(self.headers)))
        code, location = self.server.answer
        self.send_response(code)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = _any

    def log_message(self, *args):
        pass


def serve(answer):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    srv.seen, srv.answer = [], answer
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_recompute_refuses_a_redirect_and_the_token_stays_home(tmp_path, code):
    elsewhere = serve((200, None))
    door = serve((code, f"http://127.0.0.1:{elsewhere.server_address[1]}/steal"))
    try:
        env = {**os.environ, "FAIRSHARED_TOKEN": "s3cret"}
        res = recompute("--url", f"http://127.0.0.1:{door.server_address[1]}", "--timeout", "5", env=env)
        assert res.returncode == 1, res.stderr
        line = res.stderr.strip()
        assert "\n" not in line and f"HTTP {code} redirects to" in line and "not followed" in line, line
        assert [s[:2] for s in door.seen] == [("POST", "/-/recompute")]
        assert elsewhere.seen == []  # nothing, and no token, went to the redirect's target
    finally:
        door.shutdown()
        elsewhere.shutdown()


# -- nor sent through a proxy ----------------------------------------------------------------------

@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_recompute_never_sends_the_token_through_a_proxy(tmp_path, host):
    """`$http_proxy` set (as on many login nodes): the token went to the proxy, even for 127.0.0.1."""
    daemon = serve((200, None))
    proxy = serve((200, None))  # a fake proxy: records what it is sent
    try:
        purl = f"http://127.0.0.1:{proxy.server_address[1]}"
        env = {**os.environ, "FAIRSHARED_TOKEN": "s3cret", "http_proxy": purl, "HTTP_PROXY": purl,
               "https_proxy": purl, "all_proxy": purl, "no_proxy": "", "NO_PROXY": ""}
        res = recompute("--url", f"http://{host}:{daemon.server_address[1]}", "--timeout", "5", env=env)
        assert proxy.seen == []
        assert [(s[0], s[1], s[2].get("Authorization")) for s in daemon.seen] == [
            ("POST", "/-/recompute", "Bearer s3cret")]
        assert res.returncode == 1  # the fake daemon's {} is no successful cycle
    finally:
        daemon.shutdown()
        proxy.shutdown()


# -- a token file must be one: one line, the caller's or root's, unreadable to others --------------------

def test_recompute_refuses_a_file_that_is_not_a_token_file(tmp_path):
    """As root `--token-file /etc/shadow` sent the shadow file's first line to any --url."""
    door = serve((200, None))
    try:
        url = f"http://127.0.0.1:{door.server_address[1]}"
        lines = tmp_path / "lines"
        lines.write_text("root:$6$secret:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n")
        lines.chmod(0o640)
        res = recompute("--url", url, "--token-file", str(lines), "--timeout", "5")
        refused(res, f"http.token_file {lines}", "more than one line")
        assert door.seen == []
        if os.geteuid() == 0:
            other = tmp_path / "other"
            other.write_text("t0ken\n")
            other.chmod(0o600)
            os.chown(other, 65534, 65534)
            res = recompute("--url", url, "--token-file", str(other), "--timeout", "5")
            refused(res, f"http.token_file {other}", "owned by uid 65534")
            assert door.seen == []
        good = tmp_path / "good"
        good.write_text("t0ken\n")
        good.chmod(0o600)
        recompute("--url", url, "--token-file", str(good), "--timeout", "5")
        assert [s[2].get("Authorization") for s in door.seen] == ["Bearer t0ken"]
    finally:
        door.shutdown()


def test_the_daemon_refuses_a_token_file_owned_by_another_user(tmp_path):
    from fairshared.daemon.config_http import HttpConfig, resolve_token
    from fairshared.model import InputError

    if os.geteuid() != 0:
        pytest.skip("needs root to give the file to another user")
    tok = tmp_path / "token"
    tok.write_text("s3cret\n")
    tok.chmod(0o600)
    os.chown(tok, 65534, 65534)  # nobody's: nobody could change the daemon's token
    with pytest.raises(InputError, match="owned by uid 65534"):
        resolve_token(HttpConfig(token_file=str(tok)), env={})
