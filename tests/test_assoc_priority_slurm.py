"""Push mode assoc_priority and the way back on a real Slurm (issue 25), dev cluster started with
``up --settings assoc-priority`` (PriorityWeightAssoc=1, NO_NORMAL_ASSOC, PriorityWeightFairshare=0).

Slurm's own answers are the judge: ``sacctmgr show assoc WOPLimits`` for what was written,
``sprio -o %B`` (the association term of a job's priority) for what a job carries, ``sdiag`` for the
job-update RPCs slurmctld received, ``squeue`` for SiteFactor and nice after the way back.
"""

from __future__ import annotations

import re
import time

import pytest

import slurm_cluster as sc
from fairshared.daemon.config import config_from_dict
from fairshared.daemon.runner import Runner
from fairshared.sinks.assoc_cli import SacctmgrAssocs
from fairshared.sinks.push_cli import CliUpdater
from fairshared.sources.slurm_cli import SlurmCli

pytestmark = pytest.mark.slurm

USERS = ["fsap1", "fsap2", "fsap3"]
ACCOUNTS = ["fsapa", "fsapb"]
FILL_QOS = "fsapfill"


def runner(tmp_path, mode="assoc_priority", **push):
    env = sc.cluster_env()
    cfg = config_from_dict({"push": {"mode": mode, "weight": 10000, **push}})
    return Runner(cfg, SlurmCli(env=env, timeout=60), CliUpdater(env=env), None, tmp_path,
                  assoc_writer=SacctmgrAssocs(env=env))


def own_priorities() -> dict[tuple[str, str], int | None]:
    out = sc.run(["sacctmgr", "-nP", "show", "assoc", "WOPLimits", "format=account,user,priority"]).stdout
    rows = (line.split("|") for line in out.splitlines() if line)
    return {(a, u): (int(p) if p else None) for a, u, p in rows if u in USERS}


def sprio_column(jobs, column: str) -> dict[int, int]:
    """One sprio column of each of ``jobs``.  All pending jobs are read and then filtered: 24.11's
    sprio refuses a list after ``-j`` ("Invalid job id": sprio/opts.c parses the whole list for
    each element; 25.11 parses the element)."""
    want = set(map(int, jobs))
    out = sc.run(["sprio", "-h", "-o", f"%i|{column}"]).stdout
    rows = (line.split("|") for line in out.split() if line)
    return {int(i): round(float(v)) for i, v in rows if int(i) in want}


def assoc_terms(jobs) -> dict[int, int]:
    """sprio's association term (%B, weighted) of each job."""
    return sprio_column(jobs, "%B")


def update_job_rpcs() -> int:
    """REQUEST_UPDATE_JOB count in sdiag's RPC statistics (0 when none was received)."""
    m = re.search(r"REQUEST_UPDATE_JOB\s*\(\s*\d+\)\s*count:\s*(\d+)", sc.run(["sdiag"]).stdout)
    return int(m.group(1)) if m else 0


def squeue_fields(jobs) -> dict[int, tuple[int, int]]:
    """(SiteFactor via sprio is not printed by squeue: nice %y) — (nice, priority %Q) per job."""
    out = sc.run(["squeue", "-h", "-j", ",".join(map(str, jobs)), "-o", "%i|%y|%Q"]).stdout
    return {int(i): (int(n), int(q)) for i, n, q in (line.split("|") for line in out.split() if line)}


@pytest.fixture(scope="module")
def cluster():
    info = sc.cluster_or_skip("fair_tree")
    sc.ensure_cluster("fair_tree", settings="assoc-priority")
    sc.remove_objects(USERS, ACCOUNTS, [FILL_QOS])
    clear_priorities()  # what an interrupted run left
    sc.wait_quiet(300)
    c = f"cluster={sc.CLUSTER_NAME}"
    try:
        for u in USERS:
            sc.add_unix_user(u)
        sc.sacctmgr("add", "qos", FILL_QOS, "usagefactor=0")
        sc.sacctmgr("add", "account", "fsapa", "fairshare=60", c)
        sc.sacctmgr("add", "account", "fsapb", "fairshare=40", c)
        for user, acct, shares in [("fsap1", "fsapa", 1), ("fsap2", "fsapa", 4), ("fsap3", "fsapb", 1)]:
            sc.sacctmgr("add", "user", user, f"account={acct}", f"fairshare={shares}", f"qos=normal,{FILL_QOS}", c)
        # usage, so that the three users' factors differ (charged at the jobs' end)
        sc.wait_jobs([sc.submit("fsap1", "fsapa", 1024, 4), sc.submit("fsap2", "fsapa", 256, 4)], timeout=180)
        fill = sc.submit("fsap3", "fsapb", 4096, 3600, extra=[f"--qos={FILL_QOS}"])
        sc.wait_running(fill)
        yield info
    finally:
        sc.remove_objects(USERS, ACCOUNTS, [FILL_QOS])
        clear_priorities()
        sc.ensure_cluster("fair_tree")


def clear_priorities():
    """Every user association's own Priority cleared (these tests write root's too)."""
    sc.sacctmgr("modify", "user", "where", "name=" + ",".join(["root", *USERS]), "set", "priority=-1", check=False)


def pend(user, account, n=1, extra=()):
    return [sc.submit(user, account, 1, 3600, extra=list(extra)) for _ in range(n)]


def test_a_job_carries_its_share_at_submit_and_no_job_is_updated(cluster, tmp_path):
    early = pend("fsap1", "fsapa") + pend("fsap2", "fsapa") + pend("fsap3", "fsapb")
    r = runner(tmp_path)
    rpcs = update_job_rpcs()
    res = r.cycle()
    assert res.outcome == "success", res.error
    assert update_job_rpcs() == rpcs  # no REQUEST_UPDATE_JOB over the cycle
    written = {(a.account, a.user): a.new for a in res.assoc_actions}
    ours = {k: v for k, v in written.items() if k[1] in USERS}
    assert len(ours) == 3 and len(set(ours.values())) == 3  # three different shares, three values
    assert own_priorities() == ours  # slurmdbd holds exactly what was planned
    # a job submitted right after the cycle carries its association's value at once
    late = {u: pend(u, a)[0] for u, a in [("fsap1", "fsapa"), ("fsap2", "fsapa"), ("fsap3", "fsapb")]}
    terms = assoc_terms(late.values())
    assert {u: terms[j] for u, j in late.items()} == {u: ours[(a, u)] for (a, u) in ours}
    # a steady cycle writes nothing
    res = r.cycle()
    assert res.outcome == "success" and not [a for a in res.assoc_actions if a.user in USERS]

    # a new value reaches the jobs already pending within one PriorityCalcPeriod of the write
    r.reconfigure(config_from_dict({"push": {"mode": "assoc_priority", "weight": 4000}}))
    res = r.cycle()
    halved = {(a.account, a.user): a.new for a in res.assoc_actions if a.user in USERS}
    assert halved and all(halved[k] < ours[k] for k in halved)
    sc.wait_next_calc()
    terms = assoc_terms(early)
    by_user = {j: u for j, u in zip(early, ["fsap1", "fsap2", "fsap3"])}
    assert {by_user[j]: terms[j] for j in early} == {u: v for (_, u), v in own_priorities().items()}

    # push mode site_factor on the same cluster gives the same priorities: the mode change takes the
    # association priorities back (cleared: they had none) and pushes SiteFactor = c instead.  Each
    # job's priority less the term that carries c (%B, then %S) is the same in both modes but for
    # the age gained meanwhile; c itself may move between the two cycles (a running job's usage is
    # charged at each decay pass: on 22.05 even under a QOS with UsageFactor=0)
    assoc_prio, assoc_term = sprio_column(early, "%Y"), sprio_column(early, "%B")
    r.reconfigure(config_from_dict({"push": {"mode": "site_factor", "weight": 4000}}))
    res = r.cycle()
    assert res.outcome == "success" and res.taken_back >= 3, res.error
    assert set(own_priorities().values()) == {None}
    pushed = {a.job_id: a.new for a in res.actions}
    sc.wait_next_calc()
    sf_prio, sf_term = sprio_column(early, "%Y"), sprio_column(early, "%S")
    assert {j: sf_term[j] for j in early} == {j: pushed[j] for j in early}
    assert sprio_column(early, "%B") == {j: 0 for j in early}  # nothing of the old mode is left
    rest = {j: (assoc_prio[j] - assoc_term[j], sf_prio[j] - sf_term[j]) for j in early}
    assert all(0 <= sf - assoc <= 2 for assoc, sf in rest.values()), rest
    # where c did not move, the order is the same
    if {j: assoc_term[j] for j in early} == {j: sf_term[j] for j in early}:
        assert sorted(early, key=lambda j: (-sf_prio[j], j)) == sorted(early, key=lambda j: (-assoc_prio[j], j))


def test_foreign_priority_is_refused_naming_it(cluster, tmp_path):
    sc.sacctmgr("modify", "user", "where", "name=fsap2", "account=fsapa", "set", "priority=55")
    try:
        res = runner(tmp_path).cycle()
        assert res.outcome == "push_failed" and "fsapa/fsap2" in res.error and "Priority=55" in res.error
        assert own_priorities()[("fsapa", "fsap1")] is None  # nothing written
        res = runner(tmp_path / "over", take_over=True).cycle()
        assert res.outcome == "success" and own_priorities()[("fsapa", "fsap2")] != 55
        # the way back puts the 55 back
        out = sc.fairshared("undo", "--state-dir", str(tmp_path / "over"), "--apply")
        assert "Took back what push mode assoc_priority wrote" in out
        assert own_priorities()[("fsapa", "fsap2")] == 55 and own_priorities()[("fsapa", "fsap1")] is None
    finally:
        sc.sacctmgr("modify", "user", "where", "name=fsap2", "account=fsapa", "set", "priority=-1")


@pytest.mark.parametrize("mode", ["site_factor", "nice", "priority", "assoc_priority"])
def test_undo_takes_back_each_mode_and_is_safe_twice(cluster, tmp_path, mode):
    jobs = pend("fsap1", "fsapa", extra=["--nice=100"]) + pend("fsap2", "fsapa")
    before = squeue_fields(jobs)
    assert before[jobs[0]][0] == 100
    res = runner(tmp_path, mode).cycle()
    assert res.outcome == "success", res.error
    if mode == "assoc_priority":
        assert own_priorities()[("fsapa", "fsap1")] is not None
    else:
        assert {a.job_id for a in res.applied} >= set(jobs)
    shown = sc.fairshared("undo", "--state-dir", str(tmp_path))
    assert shown.startswith(f"Would take back what push mode {mode} wrote") and "--apply" in shown
    out = sc.fairshared("undo", "--state-dir", str(tmp_path), "--apply")
    assert out.startswith(f"Took back what push mode {mode} wrote")
    assert "Nothing to take back" in sc.fairshared("undo", "--state-dir", str(tmp_path), "--apply")
    after = squeue_fields(jobs)
    assert {j: after[j][0] for j in jobs} == {j: before[j][0] for j in jobs}  # each owner's nice
    snap = SlurmCli(env=sc.cluster_env(), timeout=60).snapshot(details=True)
    mine = {j.job_id: j for j in snap.jobs if j.job_id in jobs}
    assert all(mine[j].site_factor in (0, None) for j in jobs)
    assert not any(mine[j].direct_set_prio for j in jobs)  # priority mode's fixed priorities released
    assert set(own_priorities().values()) == {None}
    sc.run(["scancel", *map(str, jobs)], check=False)
    time.sleep(1)


@pytest.mark.pyslurm
def test_the_pyslurm_source_pushes_by_association_too(cluster, tmp_path, monkeypatch):
    """The daemon's own wiring with ``source.kind = "pyslurm"``: pyslurm reads, sacctmgr writes the
    association priorities (service.make_assoc_writer), and a job submitted after the cycle carries
    its association's value in sprio; the way back clears them again."""
    from fairshared.daemon.wiring import make_assoc_writer, make_source_and_updater
    from fairshared.records import SourceError
    from fairshared.takeback import plan_takeback

    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))  # libslurm reads the conf SLURM_CONF names
    try:
        from fairshared.pyslurm_loader import import_pyslurm

        import_pyslurm()
    except SourceError as exc:
        if sc.must_fail_loudly():
            raise
        pytest.skip(f"pyslurm not usable here (tests/matrix.py builds it for Slurm 25.11): {exc}")
    clear_priorities()  # the other tests' runners wrote these with states of their own
    cfg = config_from_dict({"source": {"kind": "pyslurm", "timeout": 60},
                            "push": {"mode": "assoc_priority", "weight": 10000}})
    source, updater = make_source_and_updater(cfg, demo=False)
    writer = make_assoc_writer(cfg, source)
    assert isinstance(writer, SacctmgrAssocs)
    writer.env = sc.cluster_env()
    r = Runner(cfg, source, updater, None, tmp_path, assoc_writer=writer)
    rpcs = update_job_rpcs()
    res = r.cycle()
    assert res.outcome == "success", res.error
    assert update_job_rpcs() == rpcs
    ours = {(a.account, a.user): a.new for a in res.assoc_actions if a.user in USERS}
    assert len(ours) == 3 and len(set(ours.values())) == 3
    assert own_priorities() == ours
    late = pend("fsap2", "fsapa")[0]
    assert assoc_terms([late])[late] == ours[("fsapa", "fsap2")]
    # the way back from this state, as `fairshared undo --apply` does it
    tb = plan_takeback(r.state, [], writer.read(sc.CLUSTER_NAME))
    assert {(a.account, a.user) for a in tb.assoc_actions if a.user in USERS} == set(ours)
    for a in tb.assoc_actions:
        writer.write(sc.CLUSTER_NAME, [a.id], a.new)
    assert all(v is None for v in own_priorities().values())
    sc.run(["scancel", str(late)], check=False)
