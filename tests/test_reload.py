"""Reloads (SIGHUP) at a real site: the command line survives them, they never wait for a cycle,
a rotated token takes effect, and on-demand cycles keep a minimum interval."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import sys
import time

import pytest
from daemon_proc import Daemon, gated_service, write_config
from helpers import wait_until

# -- the command line survives a reload ------------------------------------------------------------

def test_sighup_keeps_dry_run_period_and_listen_from_the_command_line(tmp_path):
    # The file says nothing about dry_run, period or listen: they come from the command line.  A
    # reload with the file unchanged once dropped all three (the next cycle pushed 10 jobs).
    cfg = write_config(tmp_path / "fs.toml", f'[state]\ndirectory = "{tmp_path}/state"\n'
                                             f'[http]\nmin_interval = 0\n')
    d = Daemon(tmp_path, "--demo", "--dry-run", "--period", "3", "--config", str(cfg))
    try:
        d.wait_ready()
        d.wait_cycle(2, timeout=30)
        d.signal(signal.SIGHUP)
        wait_until(lambda: d.log_events("configuration reloaded"), what="the reload")
        n = d.status()["cycle"]
        t0 = time.monotonic()
        d.wait_cycle(n + 3, timeout=30)  # the reload's cycle, then the 3-second timer again
        elapsed = time.monotonic() - t0
        # the demo's own period is 15 s: three more cycles in well under that is still --period 3
        assert elapsed < 14, f"{elapsed:.1f} s for 3 cycles: --period 3 was dropped"
        cycles = d.log_events("cycle")
        assert len(cycles) >= n + 3
        assert all(c["dry_run"] is True and c["pushed"] == 0 for c in cycles), \
            [(c["cycle"], c["dry_run"], c["pushed"]) for c in cycles]
        assert any(c["planned"] > 0 for c in cycles[n:])  # there was something it would have pushed
        assert d.log_events("configuration reloaded")[0]["dry_run"] is True
        # --listen is still where it was, and nothing claims a change waits for a restart
        assert d.get("/-/healthy") == b"ok\n"
        assert not d.log_events("these settings take effect at the next restart")
        assert d.status()["dry_run"] is True
    finally:
        d.stop()


def test_a_reload_that_changes_a_start_up_key_names_it_and_keeps_the_running_value(tmp_path):
    cfg = write_config(tmp_path / "fs.toml", f'[state]\ndirectory = "{tmp_path}/state"\n')
    d = Daemon(tmp_path, "--demo", "--period", "3600", "--config", str(cfg))
    try:
        d.wait_ready()
        cfg.write_text(f'[state]\ndirectory = "{tmp_path}/elsewhere"\n[http]\ntimeout = 3\n'
                       f'[push]\nmode = "off"\n')
        d.signal(signal.SIGHUP)
        wait_until(lambda: d.log_events("configuration reloaded"), what="the reload")
        (warn,) = d.log_events("these settings take effect at the next restart")
        assert warn["keys"] == ["http.timeout", "state.directory"]
        d.wait_cycle(2)
        assert d.log_events("cycle")[-1]["push_mode"] == "off"  # the rest took effect
        assert not (tmp_path / "elsewhere").exists()
    finally:
        d.stop()


def test_for_reload_keeps_start_up_keys_and_refuses_a_mix_that_is_not_valid():
    from fairshared.daemon.config import config_from_dict, for_reload
    from fairshared.model import InputError

    running = config_from_dict({"http": {"listen": "0.0.0.0:9817", "token": "a"}})
    new, later = for_reload(running, config_from_dict({"http": {"token": "b"}, "push": {"dry_run": True}}))
    assert later == ["http.listen"] and new.http.listen == "0.0.0.0:9817"
    assert new.http.token == "b" and new.push.dry_run is True
    # the listener stays public until a restart, and the new file has no token for it
    with pytest.raises(InputError, match="http.listen"):
        for_reload(running, config_from_dict({"push": {"dry_run": True}}))


# -- a reload never waits for a cycle --------------------------------------------------------------

@pytest.fixture
def gated(tmp_path):
    """A demo Service whose cycles wait on a gate (daemon_proc.gated_service), reading its config file."""
    path = write_config(tmp_path / "fs.toml", f'[state]\ndirectory = "{tmp_path}/state"\n')
    with gated_service({"state": {"directory": str(tmp_path / "state")}}, str(path)) as svc:
        svc.path = path
        yield svc


def test_reload_during_a_cycle_returns_at_once_and_applies_from_the_next_cycle(gated):
    svc = gated
    svc.trigger("first")
    wait_until(svc.runner.lock.locked, what="cycle 1 to start")
    svc.path.write_text(f'[state]\ndirectory = "{svc.state_dir}"\n[push]\ndry_run = true\n')
    t0 = time.monotonic()
    svc.reload()
    assert time.monotonic() - t0 < 1.0  # it used to wait for the cycle: no watchdog, no SIGTERM meanwhile
    assert svc.config.push.dry_run is True
    svc.gate.set()
    wait_until(lambda: svc.runner.number >= 2 and not svc.runner.lock.locked(), what="the reload's cycle")
    second = svc.runner.last
    assert svc.runner.number == 2 and second.dry_run is True and second.pushed == 0
    assert second.actions  # it would have pushed: dry run, not nothing to do


def test_on_demand_cycles_keep_the_minimum_interval(tmp_path):
    from fairshared.daemon.config import config_from_dict
    from fairshared.daemon.scheduler import make_scheduler
    from fairshared.daemon.service import Service

    svc = Service(config_from_dict({"state": {"directory": str(tmp_path / "state")},
                                    "http": {"min_interval": 1.5}}), None, demo=True)
    starts: list[float] = []
    real = svc.runner.cycle

    def timed(reason="timer"):
        starts.append(time.monotonic())
        return real(reason)

    svc.runner.cycle = timed
    svc.scheduler = make_scheduler()  # the daemon's own
    svc.scheduler.start()
    try:
        for _ in range(4):  # four requests in a burst, then more while the delayed one waits
            assert svc.http_recompute()[0] == 200
        assert len(starts) == 4
        gaps = [b - a for a, b in zip(starts, starts[1:])]
        assert all(g >= 1.45 for g in gaps), gaps
        # many requests during the interval are one cycle
        t0 = time.monotonic()
        merged = [svc.trigger("signal") for _ in range(50)]
        assert merged.count(True) == 1
        wait_until(lambda: len(starts) == 5, what="the merged cycle")
        time.sleep(2)
        assert len(starts) == 5 and starts[4] - starts[3] >= 1.45 and starts[4] >= t0
    finally:
        svc.scheduler.shutdown(wait=False)


# -- the main thread keeps pinging the watchdog during a reload in a long cycle ---------------------

def slow_cluster(tmp_path, seconds: float):
    """A bin_dir whose Slurm commands take ``seconds`` (and then fail): a cycle of that length.
    Each call touches ``started`` first, so the test knows a cycle is under way."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("scontrol", "sshare", "sacctmgr", "squeue", "sprio", "sacct"):
        exe = bin_dir / name
        exe.write_text(f"#!{sys.executable}\nimport sys, time, pathlib\n"
                       f"pathlib.Path({str(bin_dir / 'started')!r}).touch()\ntime.sleep({seconds})\n"
                       f"sys.stderr.write('slurm_load_ctl_conf error: Unable to contact slurm controller\\n')\n"
                       f"sys.exit(1)\n")
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def test_watchdog_pings_and_sigterm_while_a_reload_meets_a_long_cycle(tmp_path):
    bin_dir = slow_cluster(tmp_path, 12)
    cfg = write_config(tmp_path / "fs.toml", f'[source]\nkind = "cli"\nbin_dir = "{bin_dir}"\n'
                                             f'[state]\ndirectory = "{tmp_path}/state"\n')
    sock_path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(0.2)
    env = {**os.environ, "NOTIFY_SOCKET": sock_path, "WATCHDOG_USEC": "2000000"}
    d = Daemon(tmp_path, "--config", str(cfg), "--period", "3600", env=env)
    try:
        wait_until(lambda: (bin_dir / "started").exists(), what="cycle 1 to call Slurm")
        time.sleep(0.5)
        d.signal(signal.SIGHUP)
        pings, reloaded, t0 = 0, False, time.monotonic()
        while time.monotonic() - t0 < 5:  # the cycle has about 11 s to go
            try:
                msg = sock.recv(4096)
            except TimeoutError:
                continue
            pings += msg == b"WATCHDOG=1"
            reloaded |= msg.startswith(b"READY=1\nSTATUS=configuration reloaded")
        assert reloaded, d.log()
        assert pings >= 4, f"{pings} watchdog pings in 5 s during the reload (interval 1 s)"
        assert d.status()["cycle"] == 0  # the cycle was still running all along
        t1 = time.monotonic()
        d.signal(signal.SIGTERM)
        assert d.proc.wait(30) == 0
        # it waits for the cycle (at most 20 s), not for the reload and then the cycle
        assert time.monotonic() - t1 < 12, d.log()
        assert json.loads((tmp_path / "state" / "last-cycle.json").read_text())["cycle"] == 1
    finally:
        d.stop()
        sock.close()


# -- a rotated token takes effect at the reload ----------------------------------------------------

def test_a_rotated_token_file_takes_effect_at_reload(tmp_path):
    tok = tmp_path / "token"
    tok.write_text("first\n")
    tok.chmod(0o600)
    cfg = write_config(tmp_path / "fs.toml", f'[http]\ntoken_file = "{tok}"\nmin_interval = 0\n'
                                             f'[state]\ndirectory = "{tmp_path}/state"\n')
    d = Daemon(tmp_path, "--demo", "--period", "3600", "--config", str(cfg))
    try:
        d.wait_ready()
        assert d.post("/-/recompute", token="first")[0] == 200
        tok.write_text("second\n")
        assert d.post("/-/recompute", token="second")[0] == 401  # not before the reload
        d.signal(signal.SIGHUP)
        wait_until(lambda: d.log_events("configuration reloaded"), what="the reload")
        assert d.post("/-/recompute", token="first")[0] == 401
        assert d.post("/-/recompute", token="second")[0] == 200
        # an emptied token file is a rejected reload: the running token stays
        tok.write_text("")
        d.signal(signal.SIGHUP)
        wait_until(lambda: d.log_events("reload rejected, keeping the running configuration"), what="rejection")
        assert "token file is empty" in d.log_events("reload rejected, keeping the running configuration")[0]["error"]
        assert d.post("/-/recompute", token="second")[0] == 200
        # a token file others may read is a rejected reload too, naming the file and its mode
        tok.write_text("third\n")
        tok.chmod(0o644)
        d.signal(signal.SIGHUP)
        wait_until(lambda: len(d.log_events("reload rejected, keeping the running configuration")) == 2,
                   what="the second rejection")
        error = d.log_events("reload rejected, keeping the running configuration")[1]["error"]
        assert error.startswith(f"http.token_file {tok}: mode 0644 lets other users read or change"), error
        assert d.post("/-/recompute", token="third")[0] == 401
        assert d.post("/-/recompute", token="second")[0] == 200
    finally:
        d.stop()


# -- a reload that lands while a cycle takes the previous one is not lost ---------------------------

def test_a_reload_landing_while_a_cycle_takes_the_last_one_is_kept_for_the_next_cycle():
    """The window between a cycle's read of the pending reload and its reset: a reload landing there
    used to be dropped, and the daemon went on with the configuration before it (push.dry_run = true
    never taken).  The reload is made to land exactly there, from another thread, as SIGHUP does."""
    import threading

    from fairshared.daemon.config import config_from_dict
    from fairshared.daemon.runner import Runner
    from fairshared.sinks.push_demo import DemoUpdater
    from fairshared.sources.demo import DemoCluster, DemoSource

    first = config_from_dict({"push": {"mode": "site_factor"}})
    dry = config_from_dict({"push": {"mode": "site_factor", "dry_run": True}})

    class Racing(Runner):
        hit = False

        def __getattribute__(self, name):
            value = object.__getattribute__(self, name)
            if name == "_next" and value is not None and not Racing.hit:
                Racing.hit = True  # the cycle has read the first reload: the operator's next lands now
                t = threading.Thread(target=self.reconfigure, args=(dry,))
                t.start()
                t.join(0.5)  # with the fix it waits for the cycle to finish taking the first
            return value

    cluster = DemoCluster()
    runner = Racing(first, DemoSource(cluster), DemoUpdater(cluster))
    runner.reconfigure(first)
    runner._take_config()  # the cycle's start takes the first reload ...
    deadline = time.monotonic() + 5
    while runner._next is None and time.monotonic() < deadline:
        time.sleep(0.01)
    runner._take_config()  # ... and the next cycle's start the one that landed meanwhile
    assert runner.config.push.dry_run is True
