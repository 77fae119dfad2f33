"""The command-line pusher against the real cluster: batched scontrol updates, per-job results."""

from __future__ import annotations

import pytest

import slurm_cluster as sc
from fairshared.records import JobGone, PushAction
from fairshared.sinks.push_cli import CliUpdater

pytestmark = pytest.mark.slurm

USER, ACCOUNT = "fspush1", "fspusha"


@pytest.fixture
def pending(slurm):
    sc.ensure_cluster("fair_tree")
    sc.add_unix_user(USER)
    sc.sacctmgr("add", "account", f"name={ACCOUNT}", "parent=root", "fairshare=1", f"cluster={sc.CLUSTER_NAME}")
    sc.sacctmgr("add", "user", f"name={USER}", f"account={ACCOUNT}", f"cluster={sc.CLUSTER_NAME}")
    # pending and not held: they may start only in an hour
    jobs = [sc.submit(USER, ACCOUNT, 1, 30, extra=("--begin=now+3600",)) for _ in range(5)]
    yield jobs
    sc.run(["scancel", *map(str, jobs)], check=False)
    sc.sacctmgr("delete", "user", f"name={USER}", f"account={ACCOUNT}", check=False)
    sc.sacctmgr("delete", "account", f"name={ACCOUNT}", check=False)


def held_values():
    out = sc.run(["squeue", "-h", "-t", "PD", "-o", "%i|%y"]).stdout
    return {int(i): int(n) for i, n in (ln.split("|") for ln in out.split() if ln)}


def test_apply_many_batches_and_reports_each_job(pending):
    gone = max(pending) + 100000  # no such job
    a, b, c, d, e = pending
    actions = [PushAction(a, "nice", 7), PushAction(b, "nice", 7), PushAction(gone, "nice", 7),
               PushAction(c, "nice", 9), PushAction(d, "nice", 9), PushAction(e, "nice", 11)]
    upd = CliUpdater(env=dict(sc.cluster_env()))
    results = upd.apply_many(actions)
    assert [type(r) for r in results] == [type(None), type(None), JobGone, type(None), type(None), type(None)]
    nice = held_values()
    assert [nice[j] for j in pending] == [7, 7, 9, 9, 11]


def test_one_read_runs_each_slurm_command_once(pending):
    """What push mode priority reads (tree, usage, order, config, partitions, nodes, QOS, jobs, sprio
    facts, sshare's own FairShare): each command once, though several readers ask for the same."""
    from collections import Counter

    from fairshared.sources.slurm_cli import SlurmCli

    cli = SlurmCli(env=dict(sc.cluster_env()))
    pi = cli.snapshot(details=True, sshare=True)
    assert {j.job_id for j in pi.jobs} >= set(pending) and pi.reported_fairshare
    runs = Counter(what for what, _ in cli.calls)
    assert runs["scontrol show config"] == runs["scontrol show assoc_mgr flags=assoc"] == 1, runs
    assert runs["sshare -a -l -P -m"] == 1, runs
    assert max(runs.values()) == 1 and len(runs) >= 8, runs
    cli.snapshot()  # a new read runs them again
    assert Counter(what for what, _ in cli.calls)["scontrol show config"] == 2


def test_an_array_parent_update_reaches_its_split_pending_tasks(pending):
    """Split pending tasks (split off by a one-task update) are shown by squeue inside their
    array's row (squeue/print.c _combine_pending_array_tasks: same name and partition), so the
    daemon plans for that row, the array's own id, alone; ``scontrol update JobId=<array id>``
    must then reach every record of the array, split ones included (plan.by_array_parent relies on
    the same).  ``squeue -r`` lists each task with its priority, in which the SiteFactor counts."""
    from fairshared.sources.jobinfo_cli import read_jobs
    from fairshared.sources.slurm_cli import SlurmCli

    arr = sc.submit(USER, ACCOUNT, 1, 30, extra=("--begin=now+3600", "--array=1-5"))
    try:
        env = dict(sc.cluster_env())
        for task in (2, 3):  # updating one task splits it off the parent record
            sc.run(["scontrol", "update", f"JobId={arr}_{task}", "SiteFactor=11"])

        def priorities():  # squeue -r: one row per task (split or not), its priority; SiteFactor counts in it
            out = sc.run(["squeue", "-r", "-h", "-j", str(arr), "-o", "%i|%Q"]).stdout
            rows = (ln.split("|") for ln in out.split())
            return {i: int(q) for i, q in rows}

        before = priorities()
        base = before[f"{arr}_1"]  # still in the parent record, SiteFactor 0 (no age: not yet eligible)
        assert before == {f"{arr}_{t}": base + (11 if t in (2, 3) else 0) for t in range(1, 6)}, before
        rows = [j for j in read_jobs(SlurmCli(env=env)) if j.display_id.startswith(f"{arr}_")]
        assert [j.job_id for j in rows] == [arr], rows  # squeue: one row, the array's own id
        CliUpdater(env=env).apply(PushAction(arr, "site_factor", 321))  # the parent alone: one call
        assert priorities() == {i: base + 321 for i in before}  # split tasks included
    finally:
        sc.run(["scancel", str(arr)], check=False)
