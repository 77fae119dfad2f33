"""The runner's audit log (state.audit_log) and pushes that fail but land, with in-process fakes.

The fault-injection suite against the real cluster (test_faults_slurm.py) reads the audit log
to check every push against the snapshot of its own cycle; these tests pin the log's content,
and the rule the suite found broken: a ``scontrol update`` that timed out may still be carried
out once slurmctld answers again, so in nice mode both values must stay ours.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

from fakes import SETTINGS, TREE  # the same static cluster as the runner's tests

from fairshared.daemon.config import config_from_dict
from fairshared.daemon.runner import Runner
from fairshared.model import Job, Snapshot
from fairshared.records import PushError, SourceError
from fairshared.sinks.base import AppliesEach


class Queue(AppliesEach):
    """A static cluster whose jobs keep the nice (or SiteFactor) written to them."""

    name = "static"

    def __init__(self, jobs):
        self.jobs = {j.job_id: j for j in jobs}
        self.fail: Exception | None = None
        self.applied = []

    def snapshot(self, *, jobs=True):
        if self.fail:
            raise self.fail
        return Snapshot(associations=list(TREE), settings=SETTINGS, jobs=list(self.jobs.values()))

    def apply(self, action):
        self.applied.append(action)
        self.jobs[action.job_id] = replace(self.jobs[action.job_id], **{action.field: action.new})


def runner(q, tmp_path, **cfg):
    config = config_from_dict({"push": {"weight": 1000, **cfg.pop("push", {})}, **cfg})
    return Runner(config, q, q, None, tmp_path / "state")


def audit(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_one_line_per_cycle_with_snapshot_and_pushes(tmp_path):
    log = tmp_path / "audit" / "fairshared.jsonl"
    q = Queue([Job(1, "busy", "a", "batch", priority=10, site_factor=0),
               Job(2, "idle", "a", "batch", priority=10, site_factor=0)])
    r = runner(q, tmp_path, state={"audit_log": str(log)})
    r.cycle()
    r.cycle()
    q.fail = SourceError("`squeue` did not answer within 3 s")
    r.cycle()
    first, second, failed = audit(log)
    assert (first["cycle"], first["outcome"], first["weight"], first["associations"]) == (1, "success", 1000, 4)
    assert first["planned"] == 2 and first["started"] <= first["finished"]
    assert sorted((p["job_id"], p["field"], p["old"], p["new"], p["contribution"]) for p in first["pushed"]) == \
        [(1, "site_factor", 0, 500, 500), (2, "site_factor", 0, 1000, 1000)]
    assert ["a", "busy", None, "a", 1, 90.0, None] in first["assocs"]
    assert first["digest"] == hashlib.sha256(json.dumps(first["assocs"]).encode()).hexdigest()
    assert [j[0] for j in first["jobs"]] == [1, 2] and first["jobs"][0][4] == "PENDING"
    assert second["outcome"] == "success" and second["planned"] == 0 and second["pushed"] == []
    assert second["digest"] == first["digest"]
    assert failed["outcome"] == "pull_failed" and "did not answer" in failed["error"]
    assert failed["assocs"] is None and failed["digest"] is None and failed["pushed"] == []


def test_refused_updates_are_not_listed_as_pushed_and_dry_run_pushes_nothing(tmp_path):
    log = tmp_path / "audit.jsonl"
    q = Queue([Job(1, "busy", "a", "batch", priority=10, site_factor=0),
               Job(2, "idle", "a", "batch", priority=10, site_factor=0)])
    real = q.apply

    def refuse_2(a):
        if a.job_id == 2:
            raise PushError("job 2: Access/permission denied")
        real(a)
    q.apply = refuse_2
    runner(q, tmp_path / "dry", push={"dry_run": True}, state={"audit_log": str(log)}).cycle()
    runner(q, tmp_path, state={"audit_log": str(log)}).cycle()
    dry, wet = audit(log)
    assert dry["dry_run"] and dry["planned"] == 2 and dry["pushed"] == []
    assert wet["outcome"] == "push_failed" and wet["planned"] == 2 and [p["job_id"] for p in wet["pushed"]] == [1]


def test_an_unwritable_audit_log_never_fails_the_cycle(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    q = Queue([Job(1, "busy", "a", "batch", priority=10, site_factor=0)])
    res = runner(q, tmp_path, state={"audit_log": str(blocker / "audit.jsonl")}).cycle()
    assert res.outcome == "success" and res.pushed == 1


def test_no_audit_log_by_default(tmp_path):
    q = Queue([Job(1, "busy", "a", "batch", priority=10, site_factor=0)])
    runner(q, tmp_path).cycle()
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == ["last-cycle.json", "push-state.json"]


# -- a push that fails but lands ------------------------------------------------------------------

def test_nice_update_that_timed_out_but_landed_is_not_applied_twice(tmp_path):
    """Seen on the real cluster: slurmctld stopped (SIGSTOP) during the push; the update timed out
    and was carried out after SIGCONT; the next cycle took our value for the owner's nice."""
    q = Queue([Job(1, "busy", "a", "batch", priority=10, nice=7)])
    real = q.apply

    def lands_then_times_out(a):
        real(a)
        raise PushError(f"job {a.job_id}: scontrol update did not answer within 3 s")
    q.apply = lands_then_times_out
    r = runner(q, tmp_path, push={"mode": "nice"})
    assert r.cycle().outcome == "push_failed"
    assert q.jobs[1].nice == 7 - 500
    q.apply = real
    res = r.cycle()
    assert res.outcome == "success" and res.actions == []  # ours: not pushed again
    assert q.jobs[1].nice == 7 - 500  # not 7 - 500 - 500
    # and across a restart (the state on disk says the same)
    assert runner(q, tmp_path, push={"mode": "nice"}).cycle().actions == []


def test_nice_update_refused_every_cycle_keeps_the_owners_nice(tmp_path):
    q = Queue([Job(1, "busy", "a", "batch", priority=10, nice=7)])
    real = q.apply

    def refuse(a):
        q.applied.append(a)
        raise PushError(f"job {a.job_id}: Nice={a.new} refused: Access/permission denied")
    q.apply = refuse
    r = runner(q, tmp_path, push={"mode": "nice"})
    for _ in range(4):
        res = r.cycle()
        assert res.outcome == "push_failed" and [(a.old, a.new) for a in res.actions] == [(7, 7 - 500)]
    # a restart in between changes nothing, and once Slurm accepts, the value is the owner's 7 - W·F
    r = runner(q, tmp_path, push={"mode": "nice"})
    q.apply = real
    assert [(a.old, a.new) for a in r.cycle().actions] == [(7, 7 - 500)]
    assert q.jobs[1].nice == 7 - 500 and r.cycle().actions == []


def test_nice_update_that_failed_and_did_not_land_is_retried_from_the_owners_nice(tmp_path):
    q = Queue([Job(1, "busy", "a", "batch", priority=10, nice=7)])
    real = q.apply

    def times_out(a):
        raise PushError(f"job {a.job_id}: scontrol update did not answer within 3 s")
    q.apply = times_out
    r = runner(q, tmp_path, push={"mode": "nice"})
    r.cycle()
    q.apply = real
    res = r.cycle()
    assert [(a.old, a.new) for a in res.actions] == [(7, 7 - 500)] and q.jobs[1].nice == 7 - 500
    # the owner changes their nice later: the new value is their base, as always
    q.jobs[1] = replace(q.jobs[1], nice=100)
    assert [(a.old, a.new) for a in r.cycle().actions] == [(100, 100 - 500)]


def test_nice_update_refused_while_the_factor_moves_never_drifts(tmp_path):
    """Slurm holds our earlier value while the new one is refused cycle after cycle: that value
    stays ours, so the owner's nice (7) stays the base."""
    q = Queue([Job(1, "busy", "a", "batch", priority=10, nice=7)])
    real = q.apply
    r = runner(q, tmp_path, push={"mode": "nice"})
    r.cycle()
    assert q.jobs[1].nice == 7 - 500  # W = 1000, F = 1/2

    def refuse(a):
        raise PushError(f"job {a.job_id}: scontrol update did not answer within 3 s")
    q.apply = refuse
    r.reconfigure(config_from_dict({"push": {"weight": 2000, "mode": "nice"}}))
    for _ in range(3):
        res = r.cycle()
        assert [(a.old, a.new) for a in res.actions] == [(7 - 500, 7 - 1000)]
    q.apply = real
    r.cycle()
    assert q.jobs[1].nice == 7 - 1000 and r.cycle().actions == []


def test_nice_value_undone_by_a_restarted_slurmctld_is_still_ours(tmp_path):
    """Seen on the real cluster: slurmctld SIGKILLed before saving its state comes back with the
    value we wrote before the last push; that value must not become the owner's nice."""
    q = Queue([Job(1, "busy", "a", "batch", priority=10, nice=7)])
    r = runner(q, tmp_path, push={"mode": "nice"})
    r.cycle()
    q.jobs[1] = replace(q.jobs[1], nice=100)  # the owner's change ...
    r.cycle()
    assert q.jobs[1].nice == 100 - 500
    r.cycle()  # (a quiet cycle in between)
    q.jobs[1] = replace(q.jobs[1], nice=7 - 500)  # ... lost with our push when slurmctld restarts
    res = runner(q, tmp_path, push={"mode": "nice"}).cycle()  # also across a restart of ours
    assert [(a.old, a.new) for a in res.actions] == [(7 - 500, 100 - 500)]  # not 7 - 500 - 500


# -- found by the soak (benchmarks/soak.py) -------------------------------------------------------

def test_a_sub_second_period_runs(tmp_path):
    """`fairshared run --period 0.2` died at start-up: APScheduler's misfire_grace_time was int(0.2) = 0."""
    from daemon_proc import Daemon

    d = Daemon(tmp_path, "--demo", "--period", "0.2", "--config",
               str(write(tmp_path / "fs.toml", f'[state]\ndirectory = "{tmp_path}/state"\n')))
    try:
        d.wait_ready()
        d.wait_cycle(3, timeout=30)
    finally:
        assert d.stop() == 0


def test_the_command_log_of_the_cli_source_is_bounded():
    """SlurmCli kept every command it ran (a daemon runs them forever: RSS grew each cycle)."""
    from fairshared.sources.slurm_cli import SlurmCli

    src = SlurmCli()
    for i in range(5000):
        src.calls.append((f"cmd {i}", 0.0))
    assert len(src.calls) == 1000 and src.calls[-1][0] == "cmd 4999"


def write(path, text):
    path.write_text(text)
    return path


# -- a full disk: a record is whole or missing (and counted), never glued onto the next ----------------

FULL_DISK = r"""
import json, resource, signal, sys
from pathlib import Path
from fairshared.daemon.statefiles import append_line

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit is then EFBIG, like ENOSPC
path = Path(sys.argv[1])
_, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
append_line(path, json.dumps({"cycle": 1}) + "\n")
resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size + 10, hard))  # room for 10 bytes
try:
    append_line(path, json.dumps({"cycle": 2, "pad": "x" * 100}) + "\n")
    print("written")
except OSError as exc:
    print("failed", exc.errno)
resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # space again
append_line(path, json.dumps({"cycle": 3}) + "\n")
"""


def test_a_full_disk_leaves_no_partial_audit_record(tmp_path):
    import subprocess
    import sys

    log = tmp_path / "audit.jsonl"
    res = subprocess.run([sys.executable, "-c", FULL_DISK, str(log)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and res.stdout.split()[0] == "failed", (res.stdout, res.stderr)
    assert [json.loads(line)["cycle"] for line in log.read_text().splitlines()] == [1, 3]


def test_a_partial_line_left_before_is_not_glued_onto_the_next_record(tmp_path):
    from fairshared.daemon.statefiles import append_line

    log = tmp_path / "audit.jsonl"
    log.write_text('{"cycle": 1}\n{"cycle": 2, "pa')  # what an older version left on a full disk
    append_line(log, json.dumps({"cycle": 3}) + "\n")
    assert log.read_text().splitlines()[-1] == '{"cycle": 3}'


def test_a_lost_audit_record_is_counted_in_the_status(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    q = Queue([Job(1, "busy", "a", "batch", priority=10, site_factor=0)])
    r = runner(q, tmp_path, state={"audit_log": str(blocker / "audit.jsonl")})
    r.cycle()
    r.cycle()
    assert r.status()["audit_records_lost"] == 2
    ok = runner(q, tmp_path / "ok", state={"audit_log": str(tmp_path / "audit.jsonl")})
    ok.cycle()
    assert ok.status()["audit_records_lost"] == 0
