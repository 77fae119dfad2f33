"""One daemon cycle's rules, with in-process sources and updaters.

These check the shell's logic (what is pushed when, what a failure does); the
real-Slurm daemon tests are in test_daemon_slurm.py.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from fakes import CFG, SETTINGS, TREE, PriorityQueue, Queue, Recorder, jobs, runner  # noqa: F401

from fairshared.daemon.config import config_from_dict
from fairshared.daemon.runner import Runner
from fairshared.model import Job, Snapshot
from fairshared.records import SourceError
from fairshared.settings import ClusterSettings
from fairshared.sinks.push_demo import DemoUpdater
from fairshared.sources.demo import DemoCluster, DemoSource


def test_push_then_nothing_when_inputs_unchanged(tmp_path):
    q = Queue(jobs())
    r = runner(q, tmp_path)
    first = r.cycle()
    assert first.outcome == "success" and first.algorithm == "fair_tree"
    assert {(a.job_id, a.new) for a in first.actions} == {(1, 500), (2, 1000)}  # F 1/2 and 1 (N = 2)
    assert first.pushed == 2 and q.jobs[2].site_factor == 1000
    second = r.cycle()
    assert second.actions == [] and second.pushed == 0
    assert json.loads((tmp_path / "push-state.json").read_text())["jobs"] == {
        "1": {"value": 500, "base": 0}, "2": {"value": 1000, "base": 0}}
    assert json.loads((tmp_path / "last-cycle.json").read_text())["cycle"] == 2


def test_failed_pull_pushes_nothing_and_backs_off(tmp_path):
    q = Queue(jobs())
    r = runner(q, tmp_path)
    assert r.cycle().ok  # learns the cluster's 60 s calc period
    q.applied.clear()
    q.jobs = {j.job_id: j for j in jobs()}  # queue changed: there would be something to push
    q.fail = SourceError("`sshare -a -l` did not answer within 60 s")
    res = r.cycle()
    assert res.outcome == "pull_failed" and "did not answer" in res.error
    assert q.applied == [] and res.result is None
    r.cycle()
    r.cycle()
    assert r.failures == 3 and r.retry_delay() == 240  # 60 s period doubled twice
    assert r.metrics.cycles[-1].outcome == "pull_failed" and r.status()["stale"]
    q.fail = None
    ok = r.cycle()
    assert ok.outcome == "success" and ok.pushed == 2 and r.failures == 0 and not r.status()["stale"]


def test_inconsistent_snapshot_is_a_failed_pull(tmp_path):
    q = Queue(jobs())
    r = runner(q, tmp_path)
    q.snapshot = lambda **kw: Snapshot(associations=TREE + [TREE[-1]], settings=SETTINGS, jobs=jobs())
    res = r.cycle()
    assert res.outcome == "pull_failed" and "duplicate association" in res.error and q.applied == []


def test_dry_run_plans_but_writes_nothing(tmp_path):
    q = Queue(jobs())
    r = runner(q, tmp_path, dry_run=True)
    res = r.cycle()
    assert len(res.actions) == 2 and res.pushed == 0 and q.applied == [] and res.dry_run


def test_refused_and_vanished_jobs(tmp_path):
    js = jobs() + [Job(666, "idle", "a", "batch", priority=10, site_factor=0),
                   Job(777, "busy", "a", "batch", priority=10, site_factor=0)]
    q = Queue(js)
    r = runner(q, tmp_path)
    del q.jobs[777]
    q.snapshot = lambda **kw: Snapshot(associations=list(TREE), settings=SETTINGS, jobs=js)
    res = r.cycle()
    assert res.outcome == "push_failed" and res.push_errors == 1 and res.jobs_gone == 1 and res.pushed == 2
    assert 666 not in r.state.jobs and 777 not in r.state.jobs  # retried next cycle from Slurm's value


def test_restart_does_not_push_again(tmp_path):
    q = Queue(jobs())
    runner(q, tmp_path).cycle()
    q.applied.clear()
    for j in list(q.jobs):  # pretend the source cannot read SiteFactor: memory must do
        q.jobs[j] = replace(q.jobs[j], site_factor=None)
    again = runner(q, tmp_path).cycle()  # a new process reading the same state directory
    assert again.actions == [] and q.applied == []


def test_demo_cluster_runs_and_pushes_into_its_queue(tmp_path):
    cluster = DemoCluster(seed=3)
    cfg = config_from_dict({})
    r = Runner(cfg, DemoSource(cluster), DemoUpdater(cluster), Recorder(), tmp_path)
    res = r.cycle()
    assert res.outcome == "success" and res.pushed > 0 and len(res.snapshot.associations) == 22
    pushed = {a.job_id: a.new for a in res.actions}
    assert all(cluster.jobs[j].site_factor == v for j, v in pushed.items() if j in cluster.jobs)


def test_demo_jobs_keeps_a_big_queue_and_leaves_the_small_demo_as_it_was(demo_now):
    from fairshared.sources.demo import PERIOD
    t = [demo_now]
    small, default = DemoCluster(seed=5, clock=lambda: t[0]), DemoCluster(seed=5, clock=lambda: t[0], pending_jobs=None)
    assert sorted(small.jobs) == sorted(default.jobs) and len(small.jobs) < 100
    big = DemoCluster(seed=5, clock=lambda: t[0], pending_jobs=2000)
    assert len(big.jobs) == 2000 and set(small.jobs) <= set(big.jobs)  # the small demo's jobs, topped up
    before = set(big.jobs)
    t[0] += PERIOD
    assert len(big.jobs) == 2000 and 0 < len(before - set(big.jobs)) < 2000  # a churning queue
    assert all(j.state == "PENDING" and j.user != "root" for j in big.jobs.values())
    assert len(before - set(big.jobs)) >= 2000 // 4 - len(small.jobs)  # a quarter of the filler starts


@pytest.mark.parametrize("mode", ["nice"])
def test_nice_mode_through_the_runner(tmp_path, mode):
    q = Queue([Job(1, "busy", "a", "batch", priority=10, nice=7)])
    q.apply = lambda a: q.jobs.__setitem__(a.job_id, replace(q.jobs[a.job_id], nice=a.new))
    r = runner(q, tmp_path, mode=mode)
    res = r.cycle()
    assert [(a.old, a.new) for a in res.actions] == [(7, 7 - 500)]  # busy: F = 1/2 (N = 2)
    assert r.cycle().actions == []


class Killed(BaseException):
    """Stands for the process dying half-way through a push (SIGKILL, OOM, power)."""


def nice_queue(js):
    q = Queue(js)

    def apply(a):
        q.applied.append(a)
        q.jobs[a.job_id] = replace(q.jobs[a.job_id], nice=a.new)
    q.apply = apply
    return q


def test_nice_mode_killed_mid_push_never_applies_twice(tmp_path):
    q = nice_queue([Job(1, "busy", "a", "batch", priority=10, nice=7),
                    Job(2, "idle", "a", "batch", priority=10, nice=-3)])
    r = runner(q, tmp_path, mode="nice")
    real = q.apply

    def dies_after_first(a):
        real(a)
        raise Killed
    q.apply = dies_after_first
    with pytest.raises(Killed):
        r.cycle()
    assert q.jobs[1].nice == 7 - 500 and q.jobs[2].nice == -3  # job 1 written, job 2 not, state not final
    q.apply = real
    again = runner(q, tmp_path, mode="nice").cycle()  # a new process on the same state directory
    assert [(a.job_id, a.old, a.new) for a in again.actions] == [(2, -3, -3 - 1000)]
    assert q.jobs[1].nice == 7 - 500  # not 7 - 500 - 500
    for _ in range(3):
        assert runner(q, tmp_path, mode="nice").cycle().actions == []
    # the owner changes their nice: the new value is their base from now on
    q.jobs[1] = replace(q.jobs[1], nice=100)
    res = runner(q, tmp_path, mode="nice").cycle()
    assert [(a.job_id, a.new) for a in res.actions] == [(1, 100 - 500)]


def test_nice_mode_pushes_nothing_when_its_state_cannot_be_saved(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")  # the state directory path is a file: every save fails (like a full disk)
    q = nice_queue([Job(1, "busy", "a", "batch", priority=10, nice=7)])
    res = Runner(config_from_dict({"push": {"weight": 1000, "mode": "nice"}}), q, q, Recorder(),
                 blocker / "state").cycle()
    assert res.outcome == "push_failed" and "push state" in res.error and q.applied == []
    assert q.jobs[1].nice == 7


def test_operator_fixed_priority_is_left_alone_unless_configured(tmp_path):
    js = jobs() + [Job(3, "idle", "a", "batch", priority=42, site_factor=0, direct_set_prio=True)]
    q = Queue(js)
    assert {a.job_id for a in runner(q, tmp_path / "1").cycle().actions} == {1, 2}
    q = Queue(js)
    assert {a.job_id for a in runner(q, tmp_path / "2", override_fixed=True).cycle().actions} == {1, 2, 3}




def test_priority_mode_pushes_the_whole_priority_and_leaves_operator_fixed_jobs(tmp_path):
    q = PriorityQueue([
        Job(1, "busy", "a", "batch", priority=1),
        Job(2, "idle", "a", "batch", priority=1),
        Job(3, "idle", "a", "batch", priority=777, direct_set_prio=True),  # an operator's
        Job(4, "idle", "a", "batch", priority=0),  # held
        Job(5, "idle", "a", "batch", priority=1, nice=50),  # its owner's nice
    ])
    r = runner(q, tmp_path, mode="priority")
    res = r.cycle()
    # only the fair-share weight is set (W = 1000): P = 1000 · F, F = 1/2 (busy) and 1 (idle)
    assert res.outcome == "success"
    assert sorted((a.job_id, a.old, a.new) for a in res.actions) == [(1, 1, 500), (2, 1, 1000), (5, 1, 950)]
    assert q.infos[5].nice == 0  # Slurm forgot the owner's nice; we did not
    assert q.infos[3].priority == 777 and q.infos[4].priority == 0
    # now jobs 1 and 2 are fixed too, but by us: recognised, and unchanged inputs push nothing
    assert r.cycle().actions == []
    assert runner(q, tmp_path, mode="priority").cycle().actions == []  # nor after a restart


def test_priority_mode_needs_a_source_that_reads_job_details(tmp_path):
    q = Queue(jobs())
    res = runner(q, tmp_path, mode="priority").cycle()
    assert res.outcome == "pull_failed" and "push.mode 'priority'" in res.error and q.applied == []


def test_fair_share_counted_twice_warns_once_per_change(tmp_path, monkeypatch):
    """site_factor mode with Slurm's PriorityWeightFairshare not 0: one warning when it starts, a note
    when it stops, nothing while it stays; the metric follows every cycle that read the settings."""
    import fairshared.daemon.runner as runner_mod
    from fairshared.sinks.metrics import Metrics

    events: list[tuple[str, str]] = []

    class Log:
        def __getattr__(self, level):
            return lambda event, **kw: events.append((level, event))

    q = Queue(jobs())
    m = Metrics(version="1")
    r = Runner(config_from_dict({"push": {"weight": 1000}}), q, q, m, tmp_path)
    monkeypatch.setattr(r, "log", Log())

    def twice() -> list[tuple[str, str]]:
        return [e for e in events if "twice" in e[1]]

    def gauge() -> float | None:
        for line in m.render().decode().splitlines():
            if line.startswith("fairshared_fairshare_counted_twice "):
                return float(line.split()[1])
        return None

    assert gauge() is None  # unknown before the first read
    for w, expect in ((0, 0), (0, 0), (5000, 1), (5000, 1), (7000, 1), (0, 0), (5000, 1)):
        monkeypatch.setitem(CFG, "weight_fairshare", w)
        res = r.cycle()
        assert res.fairshare_counted_twice is bool(expect) and gauge() == expect
    assert twice() == [("warning", "fair share counted twice: push.mode site_factor adds fairshared's while "
                                   "Slurm's PriorityWeightFairshare adds its own; set PriorityWeightFairshare=0 "
                                   "in slurm.conf"),
                       ("info", "fair share no longer counted twice"),
                       ("warning", twice()[0][1])]
    # a failed pull knows nothing new: the gauge keeps the last value and nothing is logged
    q.fail = SourceError("sshare timed out")
    assert r.cycle().fairshare_counted_twice is None and gauge() == 1 and len(twice()) == 3
    q.fail = None
    # another push mode: Slurm's weight is the only fair-share term; a note, and the gauge drops
    r.reconfigure(config_from_dict({"push": {"weight": 1000, "mode": "nice"}}))
    assert r.cycle().fairshare_counted_twice is False and gauge() == 0
    assert twice()[-1] == ("info", "fair share no longer counted twice") and len(twice()) == 4
    assert runner_mod.counts_fairshare_twice(config_from_dict({}),
                                             Snapshot([], settings=ClusterSettings(weight_fairshare=1)))


# --- a paced push: push.max_rate and slurmctld's rl_enable (issue 19) -------------------------------

def many_jobs(n):
    return [Job(i, "busy" if i % 2 else "idle", "a", "batch", priority=10, site_factor=0, nice=0)
            for i in range(1, n + 1)]


def test_rate_limit_from_slurmctld_parameters():
    from fairshared.slurm.config import rate_limit
    assert rate_limit("enable_configless,idle_on_node_suspend") is None and rate_limit(None) is None
    assert rate_limit("RL_ENABLE") == {"bucket_size": 30, "refill_rate": 2, "refill_period": 1}
    assert rate_limit("rl_enable,rl_refill_rate=10,rl_bucket_size=50,rl_refill_period=2,rl_log_freq=0") == \
        {"bucket_size": 50, "refill_rate": 10, "refill_period": 2}
    # 23.02 brought the limit; 22.05 takes rl_enable and ignores it (test_rate_limit_slurm.py)
    assert rate_limit("rl_enable", "22.05.8") is None
    assert rate_limit("rl_enable", "23.02.0")["bucket_size"] == 30
    assert rate_limit("rl_enable", "25.11.7")["refill_rate"] == 2


def test_a_push_over_the_rate_goes_largest_change_first_and_keeps_the_rest_for_later(tmp_path, monkeypatch):
    q = Queue(many_jobs(40))
    q.jobs[1] = replace(q.jobs[1], site_factor=480)  # busy's value is 500: a small change
    CFG_RL = dict(CFG, calc_period_seconds=10, rate_limit={"bucket_size": 4, "refill_rate": 2, "refill_period": 1},
                  slurm_user_uid=64030)
    monkeypatch.setattr(Queue, "snapshot", lambda self, jobs=True: Snapshot(
        associations=list(TREE), settings=ClusterSettings.from_dict(CFG_RL), jobs=list(self.jobs.values())))
    monkeypatch.setattr("fairshared.daemon.runner_push.os.geteuid", lambda: 1000)  # not SlurmUser, not root
    r = runner(q, tmp_path)
    slept = []
    r.sleep = slept.append
    res = r.cycle()
    # 80 % of 2 per second, half of a 10 s period, plus half the bucket: 1.6 * 5 + 2 = 10
    assert res.rate == pytest.approx(1.6) and res.pushed == 10 and res.deferred == 30
    assert 1 not in {a.job_id for a in res.applied}  # 480 -> 500 is the smallest change: left for later
    # paced one update at a time: before update k it waits until k / 1.6 s after the push began
    # (the fake sleep does not advance the clock, so each wait is the whole time from the start)
    assert len(slept) == 9 and slept == sorted(slept) and slept[-1] == pytest.approx(9 / 1.6, abs=0.2)
    assert res.outcome == "success" and r.status()["deferred"] == 30
    pushed = {a.job_id for a in res.applied}
    later = r.cycle()  # the next cycle takes the next ten
    assert later.pushed == 10 and not pushed & {a.job_id for a in later.applied}
    monkeypatch.setattr("fairshared.daemon.runner_push.os.geteuid", lambda: 64030)  # SlurmUser: no limit
    rest = r.cycle()
    assert rest.rate is None and rest.pushed == 20 and rest.deferred == 0


class NiceQueue(Queue):
    def apply(self, action):
        self.applied.append(action)
        self.jobs[action.job_id] = replace(self.jobs[action.job_id], **{action.field: action.new})


def test_a_deferred_nice_keeps_its_old_state_so_nothing_is_subtracted_twice(tmp_path):
    q = NiceQueue(many_jobs(6))
    r = runner(q, tmp_path, mode="nice")
    first = r.cycle()
    assert first.pushed == 6
    nices = {j: q.jobs[j].nice for j in q.jobs}  # -500 busy, -1000 idle: ours
    r.config = r.config.model_copy(update={"push": r.config.push.model_copy(update={"max_rate": 0.02})})
    # idle starts using: busy and idle now share; everything changes, the rate allows 1 update per cycle
    TREE_NOW = [TREE[0], TREE[1], TREE[2], replace(TREE[3], usage=90.0)]
    q.snapshot = lambda jobs=True: Snapshot(associations=list(TREE_NOW), settings=SETTINGS,
                                            jobs=list(q.jobs.values()))
    r.sleep = lambda s: None
    paced = r.cycle()
    assert paced.pushed == 1 and paced.deferred >= 2  # 0.02/s * 30 s = 0.6: at least one a cycle
    # every job left for later still holds the nice we wrote, and is still known as ours
    for j, job in q.jobs.items():
        st = r.state.jobs[j]
        assert st.ours(job.nice) and st.base == 0, (j, job.nice, st)
    assert {j for j in q.jobs if q.jobs[j].nice != nices[j]} == {a.job_id for a in paced.applied}


def test_the_last_cycles_snapshot_is_not_alive_during_the_next_pull(tmp_path):
    """At 100,000 jobs and associations a snapshot (and the result made from it) is hundreds of MB;
    what the runner keeps of the last cycle (status, readiness) must not hold it beside the next
    pull, or the daemon's peak memory doubles (issue 19)."""
    import gc
    import weakref

    class Remembering(Queue):
        def __init__(self, js):
            super().__init__(js)
            self.previous = None
            self.previous_alive: list[bool] = []

        def snapshot(self, *, jobs=True, details=False):
            gc.collect()
            if self.previous is not None:
                self.previous_alive.append(self.previous() is not None)
            snap = super().snapshot(jobs=jobs, details=details)
            self.previous = weakref.ref(snap)
            return snap

    q = Remembering(jobs())
    r = Runner(config_from_dict({"push": {"weight": 1000}}), q, q, None, tmp_path)
    first = r.cycle()
    assert first.snapshot is not None and first.pushed == 2  # the caller gets the whole cycle
    del first
    r.cycle()
    r.cycle()
    assert q.previous_alive == [False, False]
    status = r.status()  # what is kept still answers status and readiness
    assert status["cycle"] == 3 and status["outcome"] == "success" and r.last_good.number == 3


def test_between_two_cycles_the_runner_holds_no_snapshot(tmp_path):
    """The daemon returns what a cycle freed to the system once it ends (daemon/memory.py): the
    runner's note of the cycle in progress held the whole of it (snapshot, result, priorities)
    until the next cycle began, tens of MB at 50,000 jobs that could be neither freed nor returned."""
    import gc
    import weakref

    q = Queue(jobs())
    r = Runner(config_from_dict({"push": {"weight": 1000}}), q, q, None, tmp_path)
    res = r.cycle()
    assert res.snapshot is not None and res.result is not None and res.pushed == 2
    snap, result = weakref.ref(res.snapshot), weakref.ref(res.result)
    del res
    gc.collect()
    assert snap() is None and result() is None
    assert r.status()["outcome"] == "success" and r.last_good.number == 1  # what is kept still answers


def test_publishers_get_the_whole_cycle_and_a_failing_one_fails_nothing(tmp_path):
    class Broken:
        def publish(self, cycle):
            raise RuntimeError("disk on fire")

    q = Queue(jobs())
    seen = Recorder()
    cfg = config_from_dict({"push": {"weight": 1000}})
    r = Runner(cfg, q, q, Recorder(), tmp_path, publishers=(Broken(), seen))
    res = r.cycle()
    assert res.outcome == "success" and res.pushed == 2  # the broken sink did not fail the cycle
    got = seen.cycles[0]
    assert got.snapshot is not None and got.result is not None  # whole, before kept() drops them
    assert sorted(u for u in got.result.tree.user if u) == ["busy", "idle"]
    assert r.last.snapshot is None  # what the runner keeps is still the small record


def test_a_cycle_that_raises_before_its_record_exists_is_a_failed_cycle_not_a_crash(tmp_path, monkeypatch):
    """A bug raised before the cycle's record was made (here: in the push mode's lookup) still ends
    as a failed cycle: the record _raised makes has no algorithm known yet (a TypeError before)."""
    import fairshared.daemon.runner as runner_module

    def broken(name):
        raise LookupError(f"no push mode {name!r} (a bug)")

    q = Queue(jobs())
    r = runner(q, tmp_path)
    monkeypatch.setattr(runner_module, "mode_for", broken)
    res = r.cycle()
    assert (res.outcome, res.error, res.algorithm) == (
        "pull_failed", "pull: LookupError(\"no push mode 'site_factor' (a bug)\")", "")
    assert q.applied == [] and r.failures == 1 and r.status()["outcome"] == "pull_failed"
    monkeypatch.undo()
    assert r.cycle().pushed == 2  # the next cycle goes on
