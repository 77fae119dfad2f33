"""`fairshared run` as a process on the built-in demo cluster: signals, HTTP, logs."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from daemon_proc import Daemon, fairshared_argv, write_config


@pytest.fixture
def daemon(tmp_path):
    # min_interval 0: these tests ask for cycles back to back (test_reload.py tests the interval)
    cfg = write_config(tmp_path / "fs.toml", f'[state]\ndirectory = "{tmp_path}/state"\n[http]\nmin_interval = 0\n')
    d = Daemon(tmp_path, "--demo", "--period", "3600", "--config", str(cfg))
    d.cfg = cfg
    d.wait_ready()
    d.wait_cycle(1)
    yield d
    d.stop()


def info_labels(d) -> dict:
    for line in d.get("/metrics").decode().splitlines():
        if line.startswith("fairshared_info{"):
            inner = line[line.index("{") + 1:line.index("}")]
            return dict(kv.split("=", 1) for kv in inner.split(","))
    raise AssertionError("no fairshared_info")


def test_sigusr1_runs_exactly_one_extra_cycle(daemon):
    assert daemon.status()["cycle"] == 1
    daemon.signal(signal.SIGUSR1)
    daemon.wait_cycle(2)
    time.sleep(1.5)
    assert daemon.status()["cycle"] == 2  # one signal, one cycle (the timer is an hour away)
    daemon.signal(signal.SIGUSR1)
    daemon.wait_cycle(3)
    time.sleep(1.5)
    assert daemon.status()["cycle"] == 3


def test_a_burst_of_sigusr1_coalesces(daemon):
    # Unix does not queue a standard signal that is already pending, and Python runs one
    # handler call per trip: a burst asks for "a cycle now", at least one and never more
    # than were sent.
    for _ in range(5):
        daemon.signal(signal.SIGUSR1)
    daemon.wait_cycle(2)
    time.sleep(2)
    assert 2 <= daemon.status()["cycle"] <= 6


def test_signal_storms_never_wedge_the_main_loop(daemon):
    # The handler once called threading.Event.set(), which deadlocks when the signal lands while
    # the main thread holds that Event's lock: a burst of SIGUSR1 then wedged the loop for good
    # (seen in about one burst in 50).  Every burst must still be answered by a cycle.
    for burst in range(100):
        before = daemon.status()["cycle"]
        for _ in range(20):
            daemon.signal(signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while daemon.status()["cycle"] <= before:
            assert time.monotonic() < deadline, f"burst {burst}: no cycle within 10 s, the main loop is wedged"
            time.sleep(0.02)


def test_sighup_with_a_broken_file_keeps_the_old_config(daemon):
    assert info_labels(daemon)["dry_run"] == '"false"'
    daemon.cfg.write_text('[push]\nmode = "sideways"\n')
    daemon.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while not any("reload rejected" in e["event"] for e in daemon.log_events()):
        assert time.monotonic() < deadline, daemon.log()
        time.sleep(0.1)
    rejected = [e for e in daemon.log_events() if "reload rejected" in e["event"]][0]
    assert "push.mode" in rejected["error"]
    assert daemon.proc.poll() is None and info_labels(daemon)["dry_run"] == '"false"'
    # a good file is taken, and the reload triggers a cycle under the new config
    daemon.cfg.write_text(f'[push]\ndry_run = true\n[state]\ndirectory = "{daemon.cfg.parent}/state"\n')
    daemon.signal(signal.SIGHUP)
    st = daemon.wait_cycle(2)
    assert info_labels(daemon)["dry_run"] == '"true"' and st["dry_run"] is True


def test_sigterm_exits_zero_within_seconds(daemon):
    t0 = time.monotonic()
    daemon.signal(signal.SIGTERM)
    assert daemon.proc.wait(10) == 0
    assert time.monotonic() - t0 < 5
    assert any(e["event"] == "stopped" for e in daemon.log_events())


def test_log_has_one_json_line_per_cycle_with_its_figures(daemon):
    cycles = daemon.log_events("cycle")
    assert len(cycles) == 1
    c = cycles[0]
    assert c["outcome"] == "success" and c["associations"] == 22 and c["planned"] >= 1
    assert c["pushed"] == c["planned"] and {"pull_s", "compute_s", "push_s", "publish_s"} <= set(c)
    assert c["level"] == "info" and "timestamp" in c


def test_http_recompute_and_the_recompute_command(daemon):
    code, st = daemon.post("/-/recompute")
    assert code == 200 and st["cycle"] == 2 and st["outcome"] == "success"
    res = subprocess.run(fairshared_argv() + ["recompute", "--url", daemon.url], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["cycle"] == 3


def test_recompute_token(tmp_path):
    tok = tmp_path / "token"
    tok.write_text("s3cret\n")
    tok.chmod(0o600)
    cfg = write_config(tmp_path / "fs.toml", f'[http]\ntoken_file = "{tok}"\ntoken_for_reads = true\n'
                                             f'[state]\ndirectory = "{tmp_path}/state"\n')
    d = Daemon(tmp_path, "--demo", "--period", "3600", "--config", str(cfg))
    try:
        d.wait_ready()
        assert d.post("/-/recompute")[0] == 401
        assert d.post("/-/recompute", token="wrong")[0] == 401
        code, st = d.post("/-/recompute", token="s3cret")
        assert code == 200 and st["outcome"] == "success"
        # token_for_reads: /metrics and /-/status need it, the probes do not
        import urllib.error
        import urllib.request
        for path in ("/metrics", "/-/status"):
            with pytest.raises(urllib.error.HTTPError) as exc:
                d.get(path)
            assert exc.value.code == 401
            req = urllib.request.Request(d.url + path, headers={"Authorization": "Bearer s3cret"})
            with urllib.request.urlopen(req, timeout=5) as r:
                assert r.status == 200
        assert d.get("/-/healthy") == b"ok\n"
        # the recompute command: never the token in argv; a file or the environment
        base = fairshared_argv() + ["recompute", "--url", d.url]
        argv = subprocess.run(base + ["--token", "s3cret"], capture_output=True, text=True, timeout=60)
        assert argv.returncode == 2 and "process list" in argv.stderr and "Traceback" not in argv.stderr
        by_file = subprocess.run(base + ["--token-file", str(tok)], capture_output=True, text=True, timeout=60)
        assert by_file.returncode == 0 and json.loads(by_file.stdout)["outcome"] == "success", by_file.stderr
        env = {**__import__("os").environ, "FAIRSHARED_TOKEN": "s3cret"}
        by_env = subprocess.run(base, capture_output=True, text=True, timeout=60, env=env)
        assert by_env.returncode == 0, by_env.stderr
        by_cfg = subprocess.run(base + ["--config", str(cfg)], capture_output=True, text=True, timeout=60)
        assert by_cfg.returncode == 0, by_cfg.stderr
        none = subprocess.run(base, capture_output=True, text=True, timeout=60,
                              env={k: v for k, v in env.items() if k != "FAIRSHARED_TOKEN"})
        assert none.returncode == 1 and "HTTP 401" in none.stderr
    finally:
        d.stop()


def test_listens_on_loopback_by_default(tmp_path):
    from fairshared.daemon.config import Config

    assert Config().http.listen.startswith("127.0.0.1:")


def test_once_and_bad_config_exit_codes(tmp_path):
    ok = subprocess.run(fairshared_argv() + ["run", "--demo", "--once", "--config",
                                             str(write_config(tmp_path / "a.toml", f'[state]\ndirectory = "{tmp_path}"\n'))],
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(fairshared_argv() + ["run", "--demo", "--once", "--config",
                                              str(write_config(tmp_path / "b.toml", "[push]\nweight = 'x'\n"))],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "push.weight" in bad.stderr and "Traceback" not in bad.stderr
