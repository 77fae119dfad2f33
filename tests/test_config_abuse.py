"""No configuration may blind the daemon (issue 26, item 3): numbers without bounds, a cycle that
raises, an empty or half-written file at a reload, a FIFO in place of the file."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time

import pytest
from daemon_proc import Daemon, fairshared_argv, gated_service, write_config
from fakes import Queue, Recorder, jobs

from fairshared.daemon.config import config_from_dict, load_config
from fairshared.daemon.runner import Runner
from fairshared.model import InputError

UNBOUNDED = [
    ("schedule", "period", "inf"), ("schedule", "period", "1e300"), ("schedule", "period", "nan"),
    ("schedule", "max_backoff", "inf"), ("push", "max_rate", "inf"), ("push", "max_rate", "1e300"),
    ("algorithm", "dampening", "inf"), ("source", "timeout", "nan"), ("http", "request_timeout", "inf"),
    ("http", "min_interval", "nan"), ("http", "recompute_wait", "inf"), ("http", "answer_timeout", "inf"),
    ("http", "answer_timeout", "0"), ("http", "answer_timeout", "3601"),
]


@pytest.mark.parametrize("section,key,value", UNBOUNDED)
def test_every_number_in_the_file_is_bounded_in_one_line_naming_the_key(tmp_path, section, key, value):
    cfg = write_config(tmp_path / "fs.toml", f"[{section}]\n{key} = {value}\n")
    with pytest.raises(InputError) as err:
        load_config(cfg)
    assert str(err.value).startswith(f"{cfg}: {section}.{key}: "), str(err.value)


@pytest.mark.parametrize("value", ["inf", "1e300"])
def test_an_unbounded_period_stops_the_start_in_one_line_from_the_file_or_the_command_line(tmp_path, value):
    cfg = write_config(tmp_path / "fs.toml", f'[schedule]\nperiod = {value}\n'
                                             f'[state]\ndirectory = "{tmp_path}/state"\n')
    res = subprocess.run(fairshared_argv() + ["run", "--demo", "--config", str(cfg), "--listen", "127.0.0.1:0"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "schedule.period" in res.stderr, res.stderr
    res = subprocess.run(fairshared_argv() + ["run", "--demo", "--period", "1e300", "--listen", "127.0.0.1:0"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "--period" in res.stderr, res.stderr


def test_an_unbounded_number_at_a_reload_is_a_rejected_reload(tmp_path):
    path = write_config(tmp_path / "fs.toml", "[schedule]\nperiod = 1e300\n")
    with gated_service({"schedule": {"period": 30}, "state": {"directory": str(tmp_path / "state")}},
                       str(path)) as svc:
        svc.gate.set()
        svc.reload()
        assert svc.config.schedule.period == 30  # kept, and said so (not "configuration reloaded")
        path.write_text("[push]\nmax_rate = inf\n")
        svc.reload()
        assert svc.config.push.max_rate == 0


class Exploding(Queue):
    def apply_many(self, actions):
        raise RuntimeError("an updater bug")


def test_an_exception_inside_a_cycle_is_a_failed_cycle_counted_and_shown(tmp_path):
    q = Exploding(jobs())
    r = Runner(config_from_dict({"push": {"weight": 1000}}), q, q, Recorder(), tmp_path)
    res = r.cycle()  # never raises out of the cycle (APScheduler would only log a traceback)
    assert not res.ok and res.outcome == "push_failed" and "an updater bug" in res.error
    assert r.failures == 1 and r.number == 1
    status = r.status()
    assert status["consecutive_failures"] == 1 and status["outcome"] == "push_failed"
    assert [c.outcome for c in r.metrics.cycles] == ["push_failed"]
    r.cycle()
    assert r.failures == 2


# -- a reload from an empty or half-written file drops neither the token nor the dry run ------------------

def test_an_empty_or_truncated_file_at_a_reload_keeps_the_token_and_the_dry_run(tmp_path):
    whole = '[http]\ntoken = "s3cret"\n[push]\ndry_run = true\nweight = 1000\n'
    path = write_config(tmp_path / "fs.toml", whole)
    running = {"http": {"token": "s3cret"}, "push": {"dry_run": True, "weight": 1000},
               "state": {"directory": str(tmp_path / "state")}}
    with gated_service(running, str(path)) as svc:
        svc.gate.set()
        for text in ("", whole[:whole.index("[push]")], whole[whole.index("[push]"):]):
            path.write_text(text)
            svc.reload()
            assert svc.token == "s3cret" and svc.auth() == ("s3cret", False), repr(text)
            assert svc.config.push.dry_run is True, repr(text)
        # said in so many words, they are dropped
        path.write_text('[http]\nallow_unauthenticated = true\n[push]\ndry_run = false\n')
        svc.reload()
        assert svc.token is None and svc.config.push.dry_run is False


# -- only regular files are read, and never on the thread that feeds the watchdog -------------------------

def test_a_fifo_as_the_config_file_is_refused_at_once(tmp_path):
    fifo = tmp_path / "fs.toml"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(InputError, match="not a regular file"):
        load_config(fifo)
    res = subprocess.run(fairshared_argv() + ["run", "--demo", "--config", str(fifo), "--listen", "127.0.0.1:0"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "not a regular file" in res.stderr and "Traceback" not in res.stderr
    assert time.monotonic() - t0 < 30


def test_a_fifo_at_a_reload_leaves_the_watchdog_and_sigterm_working(tmp_path):
    cfg = write_config(tmp_path / "fs.toml", f'[state]\ndirectory = "{tmp_path}/state"\n')
    sock_path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(0.2)
    env = {**os.environ, "NOTIFY_SOCKET": sock_path, "WATCHDOG_USEC": "2000000"}
    d = Daemon(tmp_path, "--demo", "--config", str(cfg), "--period", "3600", env=env)
    try:
        d.wait_ready()
        cfg.unlink()
        os.mkfifo(cfg)
        d.signal(signal.SIGHUP)
        pings, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < 4:
            try:
                pings += sock.recv(4096) == b"WATCHDOG=1"
            except TimeoutError:
                pass
        assert pings >= 3, f"{pings} watchdog pings in 4 s after a reload from a FIFO"
        rejected = d.log_events("reload rejected, keeping the running configuration")
        assert rejected and "not a regular file" in rejected[0]["error"], d.log()
        t1 = time.monotonic()
        d.signal(signal.SIGTERM)
        assert d.proc.wait(20) == 0 and time.monotonic() - t1 < 10
    finally:
        d.stop()
        sock.close()


def test_a_reload_runs_beside_the_main_loop_not_on_it(tmp_path):
    """A file that takes long to read (a hung network file system) holds the reload, not the loop."""
    path = write_config(tmp_path / "fs.toml", "[push]\ndry_run = true\n")
    with gated_service({"push": {"dry_run": True}, "state": {"directory": str(tmp_path / "state")}},
                       str(path)) as svc:
        svc.gate.set()
        started, release = threading.Event(), threading.Event()
        real = svc.reload

        def slow_reload():
            started.set()
            release.wait(10)
            real()

        svc.reload = slow_reload
        t0 = time.monotonic()
        svc.reload_requested = True
        svc._reload_if_asked()
        assert time.monotonic() - t0 < 0.5 and started.wait(2)
        svc.reload_requested = True  # a second SIGHUP while the first is still reading: queued
        svc._reload_if_asked()
        assert svc.reload_requested
        release.set()
        svc._reloader.join(5)
        svc._reload_if_asked()
        assert svc._reloader.is_alive() or not svc.reload_requested


def test_a_stop_as_a_requested_cycle_falls_due_leaves_the_scheduler_thread_alive(monkeypatch):
    """APScheduler marks itself stopped before it takes the job stores' lock, which its thread holds
    while it submits the jobs that fell due; a one-shot job (the cycle a reload asks for) was then
    removed from a stopped scheduler: JobLookupError, the scheduler's thread dead with a traceback
    (seen after the reload tests above, whose service stops as the reload's cycle falls due)."""
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.schedulers.base import STATE_STOPPED

    from fairshared.daemon.scheduler import make_scheduler

    died: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: died.append(args.exc_value))
    submitting, release = threading.Event(), threading.Event()

    class Held(ThreadPoolExecutor):  # holds the scheduler's thread inside its turn, the lock held
        def submit_job(self, job, run_times):
            submitting.set()
            release.wait(10)
            super().submit_job(job, run_times)

    sched = make_scheduler(Held(1))
    sched.start()
    ran = threading.Event()
    sched.add_job(ran.set)  # one-shot, due now: what Service._submit queues for a reload
    assert submitting.wait(5)
    stopper = threading.Thread(target=sched.shutdown, kwargs={"wait": False})
    stopper.start()
    deadline = time.monotonic() + 5
    while sched.state != STATE_STOPPED and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sched.state == STATE_STOPPED
    release.set()
    stopper.join(10)
    assert not stopper.is_alive() and died == [], died
    assert ran.wait(5)  # submitted before the stop: it ran


def test_a_fifo_as_the_token_file_is_refused_at_once(tmp_path):
    from fairshared.daemon.config_http import HttpConfig, resolve_token

    fifo = tmp_path / "token"
    os.mkfifo(fifo, 0o600)
    t0 = time.monotonic()
    with pytest.raises(InputError, match="is not a regular file"):
        resolve_token(HttpConfig(token_file=str(fifo)), env={})
    assert time.monotonic() - t0 < 5
