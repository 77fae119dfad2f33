"""Two head nodes, live: a primary and a backup slurmctld (deploy/dev-cluster/up --backup), a
fairshared beside each, ``scontrol takeover``, then the primary killed.

Both daemons compute and export; only the one beside the slurmctld in control pushes.  Asserted
from both daemons' audit logs (every update Slurm accepted, with the cycle's time and the role it
saw): which daemon pushed each update, that none pushed while the other's slurmctld was in control,
that no job got the same value pushed by both, that the backup's daemon pushes within one period
of taking over, and that ``fairshared_controller_active`` says which is which.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import threading
import time

import pytest
import slurm_cluster as sc
from daemon_proc import Daemon, write_config
from helpers import wait_until

pytestmark = pytest.mark.slurm

USERS = ["hau1", "hau2", "hau3"]
ACCOUNTS = [("haa", 60), ("hab", 30), ("hafill", 0)]
W = 1_000_000
W2 = 2_000_000  # the weight after the takeover
PERIOD = 2.0  # the daemons' cycle period (seconds)


def heartbeat(tries: int = 20) -> tuple[int, int]:
    """(Unix time, SlurmctldHost index) of the controller in control, from its heartbeat file.

    slurmctld rewrites the file as unlink + link, so one read may find nothing: retry for up
    to a second, as slurmctld's own get_last_heartbeat() and the daemon (HEARTBEAT_TRIES) do."""
    path = sc.cluster_dir() / "state" / "slurmctld" / "heartbeat"
    for attempt in range(tries):
        try:
            return struct.unpack(">QQ", path.read_bytes()[:16])
        except (OSError, struct.error):
            if attempt == tries - 1:
                raise
            time.sleep(0.05)
    raise AssertionError("unreachable")


class Beats(threading.Thread):
    """Every heartbeat the controllers write, read every 0.1 s (a beat comes every 2 s here)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.seen: list[tuple[int, int]] = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(0.1):
            try:
                beat = heartbeat(tries=1)
            except (OSError, struct.error):
                continue  # between the unlink and the link of a rewrite
            if not self.seen or self.seen[-1] != beat:
                self.seen.append(beat)

    def first(self, index: int, after: float) -> int:
        """When the first beat naming ``index`` after ``after`` was written."""
        return min(t for t, i in self.seen if i == index and t > after)


def audit(path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line]
    except FileNotFoundError:
        return []


def pushes(path) -> list[tuple[float, float, int, int, int | None]]:
    """(cycle started, finished, job id, value, the value Slurm held at the cycle's read) of every
    update the daemon's cycles had accepted."""
    return [(c["started"], c["finished"], p["job_id"], p["new"], p["old"]) for c in audit(path) for p in c["pushed"]]


@pytest.fixture(scope="module")
def heads(slurm, tmp_path_factory):
    info = sc.ensure_cluster("fair_tree", backup=True)
    sc.wait_quiet(300)
    sc.remove_objects(USERS + ["hafiller"], [a for a, _ in ACCOUNTS])  # a run killed half-way left them
    for u in USERS + ["hafiller"]:
        sc.add_unix_user(u)
    for a, shares in ACCOUNTS:
        sc.sacctmgr("add", "account", f"name={a}", "parent=root", f"fairshare={shares}", f"cluster={sc.CLUSTER_NAME}")
    for u, a, s in [("hau1", "haa", 1), ("hau2", "haa", 3), ("hau3", "hab", 1), ("hafiller", "hafill", 1)]:
        sc.sacctmgr("add", "user", f"name={u}", f"account={a}", f"fairshare={s}", f"cluster={sc.CLUSTER_NAME}")
    filler = sc.submit("hafiller", "hafill", 4096, 900)  # holds the node: the others stay pending
    sc.wait_running(filler)
    tmp = tmp_path_factory.mktemp("heads")
    daemons = {}
    for name in ("fsctl1", "fsctl2"):
        d = tmp / name
        d.mkdir()
        cfg = write_config(d / "fs.toml", f"""
[source]
kind = "cli"
[push]
mode = "site_factor"
weight = {W}
[controller]
host = "{name}"
[http]
min_interval = 0
[state]
directory = "{d}/state"
audit_log = "{d}/audit.jsonl"
""")
        daemons[name] = Daemon(d, "--config", str(cfg), "--period", str(PERIOD), env=dict(info.env))
    yield {"a": daemons["fsctl1"], "b": daemons["fsctl2"], "audit_a": tmp / "fsctl1" / "audit.jsonl",
           "audit_b": tmp / "fsctl2" / "audit.jsonl", "filler": filler, "cfg_a": tmp / "fsctl1" / "fs.toml",
           "cfg_b": tmp / "fsctl2" / "fs.toml"}
    for d in daemons.values():
        d.stop()
    sc.remove_objects(USERS + ["hafiller"], [a for a, _ in ACCOUNTS])
    sc.ensure_cluster("fair_tree")  # one controller again for the tests after this module


def test_only_the_head_in_control_pushes_through_takeover_and_failover(heads):
    a, b = heads["a"], heads["b"]
    beats = Beats()
    beats.start()
    for d in (a, b):
        d.wait_ready(60)
    assert heartbeat()[1] == 0  # fsctl1, the primary, is in control
    first = [sc.submit(u, acct, 16, 60) for u, acct in [("hau1", "haa"), ("hau2", "haa"), ("hau3", "hab")]]
    # the primary's daemon pushes them; the backup's computes the same and pushes nothing
    wait_until(lambda: {j for _, _, j, _, _ in pushes(heads["audit_a"])} >= set(first), 60, "fsctl1's daemon to push")
    wait_until(lambda: b.status()["cycle"] >= 2, 30, "fsctl2's daemon to run cycles")
    assert pushes(heads["audit_b"]) == []
    assert a.metric("fairshared_controller_active") == 1 and b.metric("fairshared_controller_active") == 0
    st = b.status()
    assert st["controller_active"] is False
    assert "fsctl1 in control" in st["controller"] or "/readyz" in st["controller"], st["controller"]
    assert st["planned"] == 0 or st["deferred"] == st["planned"]

    # -- scontrol takeover: the backup takes control -----------------------------------------------
    sc.run(["scontrol", "takeover"])
    wait_until(lambda: heartbeat()[1] == 1, 60, "the backup to write the heartbeat")
    t_over = time.time()
    second = [sc.submit(u, acct, 16, 60) for u, acct in [("hau1", "haa"), ("hau3", "hab")]]
    # a new weight moves the value of every job already pushed: the backup's daemon must push them,
    # the primary's must not (a reload, as an admin would make it on both heads; not a share change:
    # on one machine slurmdbd sends those to the primary's address only, see up --backup)
    for d, cfg in ((a, heads["cfg_a"]), (b, heads["cfg_b"])):
        cfg.write_text(cfg.read_text().replace(f"weight = {W}", f"weight = {W2}"))
        d.signal(signal.SIGHUP)
    wait_until(lambda: {j for _, _, j, _, _ in pushes(heads["audit_b"])} >= set(second), 60,
               "fsctl2's daemon to push the new jobs")
    first_b = min(started for started, _, _, _, _ in pushes(heads["audit_b"]))
    # within one period of the takeover (plus the cycle that was running and the submissions)
    assert first_b - t_over < PERIOD + 10, (first_b - t_over)
    wait_until(lambda: b.metric("fairshared_controller_active") == 1, 30, "fsctl2's daemon to report active")
    wait_until(lambda: a.metric("fairshared_controller_active") == 0, 30, "fsctl1's daemon to report standby")

    # the takeover ended the primary (22.05 and 25.11 alike): fsctl1's daemon sees fsctl2 in control
    n_a = a.status()["cycle"]
    wait_until(lambda: a.status()["cycle"] >= n_a + 2, 30, "fsctl1's daemon to keep cycling")
    assert a.status()["controller_active"] is False
    pa, pb = pushes(heads["audit_a"]), pushes(heads["audit_b"])
    assert [p for p in pa if p[0] > t_over] == [], [p for p in pa if p[0] > t_over]
    assert min(p[0] for p in pb) > max(p[0] for p in pa) - PERIOD - 10

    # -- the primary comes back and takes control again: fsctl1's daemon pushes again ---------------
    sc.up_again()
    wait_until(lambda: heartbeat()[1] == 0, 60, "the primary to take control back")
    # when it took control: its first beat is written at most one beat interval (min(SlurmctldTimeout
    # / 4, 30) s = 2 s here) after
    t_back = beats.first(0, t_over) - 2.5
    third = [sc.submit("hau2", "haa", 16, 60)]
    wait_until(lambda: {j for _, _, j, _, _ in pushes(heads["audit_a"])} >= set(third), 60,
               "fsctl1's daemon to push again")

    # -- the primary is killed: after SlurmctldTimeout the backup takes over, fsctl2's daemon pushes --
    pidfile = sc.cluster_dir() / "run" / "slurmctld.pid"
    os.kill(int(pidfile.read_text().strip()), signal.SIGKILL)
    t_kill = time.time()
    wait_until(lambda: heartbeat()[1] == 1, 120, "the backup to take over from the killed primary")
    t_fail = time.time()
    fourth = [sc.submit("hau3", "hab", 16, 60)]
    wait_until(lambda: {j for _, _, j, _, _ in pushes(heads["audit_b"])} >= set(fourth), 60,
               "fsctl2's daemon to push after the failover")
    assert min(p[0] for p in pushes(heads["audit_b"]) if p[2] in fourth) - t_fail < PERIOD + 10

    # -- who pushed what ---------------------------------------------------------------------------
    pa, pb = pushes(heads["audit_a"]), pushes(heads["audit_b"])
    # each daemon pushed only in cycles that started while its own slurmctld was in control
    # (a cycle running at a change may finish its batch: cycles that *started* after it are clean)
    assert [p for p in pa if t_over < p[0] < t_back or p[0] > t_kill] == []
    assert [p for p in pb if p[0] < t_over - 60 or t_back + PERIOD + 10 < p[0] < t_kill] == []
    # every push changed what Slurm held when its daemon read the job: nothing was pushed twice
    assert all(old != new for *_, new, old in pa + pb)
    # the same value from both daemons only when the first push died with the SIGKILLed primary
    # (slurmctld had not saved it: the backup recovered the older value, and fsctl2's daemon read
    # that); never across the takeover, which saves the state first
    by_job: dict[int, list[tuple[float, str, int, int | None]]] = {}
    for who, rows in (("fsctl1", pa), ("fsctl2", pb)):
        for started, _, job, value, old in rows:
            by_job.setdefault(job, []).append((started, who, value, old))
    for job, rows in by_job.items():
        rows.sort()
        for (t1, w1, v1, _), (t2, w2, v2, old2) in zip(rows, rows[1:]):
            if v1 == v2:
                assert w1 != w2 and t1 < t_kill < t2 and old2 != v2, (job, rows)
    # every job fsctl1's daemon pushed got its new weight's value from fsctl2's
    for job in first:
        assert [w for _, w, _, _ in by_job[job]][:2] == ["fsctl1", "fsctl2"], (job, by_job[job])
        assert by_job[job][1][2] == 2 * by_job[job][0][2]
    # and what Slurm holds now is what fsctl2's daemon pushed last
    held = sc.site_factors()
    for job, rows in by_job.items():
        if job in held:
            assert held[job] == rows[-1][2], (job, rows, held[job])
    # the role changes were logged, with what decided them
    roles = [e for e in a.log_events("controller role")]
    assert [r["active"] for r in roles][:2] == [True, False], roles
    assert [r["active"] for r in b.log_events("controller role")][:2] == [False, True]
