"""slurmctld's per-user RPC rate limit, live (deploy/dev-cluster/up --settings rate-limit:
``SlurmctldParameters=rl_enable`` with Slurm's defaults: a bucket of 30 RPCs refilled 2 a second).

The daemon runs as a Slurm Operator that is neither SlurmUser nor root (the only users the limit
spares), and has more jobs to push than the limit allows in a period.  On 23.02 and later it must
pace itself: push what the rate allows, defer the rest to the next cycles (largest changes first),
and never be told to back off by slurmctld ("RPC rate limit exceeded by uid ..." in its log), while
every job ends with the value it should hold.  22.05 has no rate limit (rate_limit.c came in 23.02):
there the same settings must not slow the daemon down.  That the limit is live for this user is
shown last (after the bucket has refilled), by a burst of squeue calls that slurmctld does refuse.

Found on the way, with a bucket of 8: the pull alone (scontrol show config, assoc_mgr, sshare,
squeue, sprio, ...) is a burst of about 8 RPCs, so on a bucket that small slurmctld tells even the
pull to back off (Slurm's client sleeps 1 s and retries; the cycle succeeds, a few seconds later).
The push's burst allowance is half the bucket for that reason.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

import slurm_cluster as sc
from daemon_proc import Daemon, write_config

pytestmark = pytest.mark.slurm

OPERATOR = "fsrlop"  # the daemon's user: AdminLevel=Operator, not SlurmUser
USERS = ["rlu1", "rlu2", "rlu3"]
ACCOUNTS = [("rla", 60), ("rlb", 30), ("rlfill", 0)]
JOBS = 60
PERIOD = 20  # s: the pull's own RPCs (~6 a cycle) fit in the fifth of the refill rate left to them
W = 1_000_000


def limit_log(uid: int, since: int) -> list[str]:
    """slurmctld's "telling to back off" lines for ``uid`` written after byte ``since`` of its log."""
    with open(sc.cluster_dir() / "log" / "slurmctld.log", "rb") as fh:
        fh.seek(since)
        text = fh.read().decode(errors="replace")
    return [ln for ln in text.splitlines() if f"RPC rate limit exceeded by uid {uid} " in ln]


def log_size() -> int:
    return os.path.getsize(sc.cluster_dir() / "log" / "slurmctld.log")


def as_operator(uid: int, *argv: str) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]


@pytest.fixture(scope="module")
def limited(slurm):
    info = sc.ensure_cluster("fair_tree", settings="rate-limit")
    sc.wait_quiet(300)
    everyone = USERS + ["rlfiller", OPERATOR]
    sc.remove_objects(everyone, [a for a, _ in ACCOUNTS])  # a run killed half-way left them
    uid = {u: sc.add_unix_user(u) for u in everyone}
    for a, shares in ACCOUNTS:
        sc.sacctmgr("add", "account", f"name={a}", "parent=root", f"fairshare={shares}",
                    f"cluster={sc.CLUSTER_NAME}")
    for u, a, s in [("rlu1", "rla", 1), ("rlu2", "rla", 3), ("rlu3", "rlb", 1), ("rlfiller", "rlfill", 1),
                    (OPERATOR, "rlfill", 1)]:
        sc.sacctmgr("add", "user", f"name={u}", f"account={a}", f"fairshare={s}",
                    f"cluster={sc.CLUSTER_NAME}")
    sc.sacctmgr("modify", "user", f"name={OPERATOR}", "set", "adminlevel=operator")
    filler = sc.submit("rlfiller", "rlfill", 4096, 900)  # holds the node: the others stay pending
    sc.wait_running(filler)
    work = tempfile.mkdtemp(prefix="fs-ratelimit-", dir="/var/tmp")  # the operator's: not under root's tmp
    os.chown(work, uid[OPERATOR], -1)
    yield {"info": info, "uid": uid[OPERATOR], "work": work}
    sc.remove_objects(everyone, [a for a, _ in ACCOUNTS])
    shutil.rmtree(work, ignore_errors=True)
    sc.ensure_cluster("fair_tree")  # the default settings again for the tests after this module


def test_a_paced_push_stays_inside_the_limit(limited):
    work = limited["work"]
    jobs = [sc.submit(u, a, 1 + i % 4, 60)
            for i, (u, a) in enumerate([("rlu1", "rla"), ("rlu2", "rla"), ("rlu3", "rlb")] * (JOBS // 3))]
    cfg = write_config(Path(work) / "fs.toml", f"""
[source]
kind = "cli"
[push]
mode = "site_factor"
weight = {W}
levels = 0
[http]
min_interval = 0
[state]
directory = "{work}/state"
audit_log = "{work}/audit.jsonl"
""")
    os.chown(cfg, limited["uid"], -1)
    since = log_size()
    d = Daemon(Path(work), "--config", str(cfg), "--period", str(PERIOD), env=dict(limited["info"].env),
               user=OPERATOR)
    try:
        d.wait_ready(60)
        t0 = time.monotonic()
        first = d.wait_cycle(1, 120)
        assert first["outcome"] == "success", first
        deadline = time.monotonic() + 6 * PERIOD
        while True:
            held = sc.site_factors(jobs)
            if len(held) == len(jobs) and all(v > 0 for v in held.values()):
                break
            assert time.monotonic() < deadline, (held, d.status(), d.log()[-3000:])
            time.sleep(1)
        took = time.monotonic() - t0
        deferred = d.metric("fairshared_push_deferred_total")
        refused = limit_log(limited["uid"], since)
        st = d.status()
    finally:
        d.stop()
    assert refused == [], refused[:5]
    if limited["info"].series >= (23, 2):
        # 60 jobs, at most 0.8 x 2 = 1.6 updates a second and half a period's worth plus half the
        # bucket a cycle (16 + 15 = 31): the first cycle pushes 31 and defers 29, the next pushes them
        assert first["deferred"] == JOBS - 31 and deferred >= JOBS - 31, (first, deferred)
        assert took > JOBS / 1.6 * 0.8, took  # paced: unpaced, 60 updates take well under a second
    else:
        assert first["deferred"] == 0 and deferred == 0, (first, deferred)
        assert first["pushed"] == JOBS
    assert st["outcome"] == "success"


def test_the_limit_refuses_a_burst_from_this_user(limited):
    """The premise: slurmctld (23.02+) tells this user to back off after its bucket; 22.05 never."""
    since = log_size()
    for _ in range(40):  # more than the bucket, as fast as squeue goes (the client sleeps and retries)
        sc.run(as_operator(limited["uid"], "squeue", "-h", "-o", "%i"), timeout=120)
    time.sleep(1)
    refused = limit_log(limited["uid"], since)
    if limited["info"].series >= (23, 2):
        assert refused, "slurmctld refused none of 40 back-to-back squeue calls: is rl_enable on?"
    else:
        assert refused == []
