"""``fairshared sprio --source slurm`` equals Slurm's own ``sprio -l``, to the unit, on a real cluster.

Scenario (accounts, users and QOS all prefixed ``pr``; removed again at the end):

* tree: ``pra`` (fairshare 60) with pru1 (1) and pru2 (3); ``prb`` (40) ⊃ ``prb1`` (Fairshare=parent)
  with pru3 (1) and pru4 (2);
* QOS ``prlo`` (priority 10), ``prhi`` (40) and ``prfill`` (UsageFactor 0), granted to all four users;
* usage: a few short real jobs by pru1, pru2 and pru3 (pru4 has none);
* a 4096-CPU job by pru4 in QOS prfill fills the node, so everything after it stays pending.  Its
  UsageFactor of 0 keeps the usage still while it runs: slurmctld charges running jobs at every
  decay iteration, which would make the fair-share inputs drift between its iteration and our read;
* pending jobs from every user, in both partitions and both QOS: one in two partitions, one with a
  user-set nice (``--nice=100``), one with an operator-set site factor (``scontrol update
  sitefactor=500``), one whose priority an operator fixed (``scontrol update priority=12345``), one
  with a fixed priority in two partitions (sprio's odd rows), a held one and one with a future
  begin time (neither listed), and one submitted ~50 s after the others;
* jobs with several QOS (``--qos=prlo,prhi`` in two partitions; ``--qos=normal,prhi``, normal's
  Priority 0): from 24.11 sprio shows a row per partition × QOS; before, Slurm accepts the list and
  the job has no QOS at all.

The cluster's weights (deploy/dev-cluster): fair-share 10000, age/job size/partition/QOS 1000,
PriorityMaxAge 1 day; partitions debug (PriorityJobFactor 1) and high (10).

**Age and time.**  sprio does not compute anything: it prints the factors slurmctld stored when it
last computed each job's priority — at its decay iteration (every PriorityCalcPeriod, 1 minute
here) or when the job was submitted or updated.  With weight 1000 over 1 day the age points grow
by 1 every 86.4 s, so "now" and "the last iteration" can print different ages.  The test therefore
makes every stored factor come from one known moment: it submits and updates all jobs first, then
restarts slurmctld (its decay thread recomputes every pending job at start-up, at the ``start_time``
it then writes to ``StateSaveLocation/priority_last_decay_ran``), reads ``sprio -l`` and
``fairshared sprio --at last-calc`` (which reads that file) within the same iteration — checking that
the file did not change meanwhile — and compares.  The first jobs have waited ~50 s by then (age
0.6 points, printed 1); the late one ~2 s (printed 0), so rounding on both sides is exercised.

The comparison is cell by cell on the numbers sprio prints (rounded with %.0f, PRIORITY truncated;
SITE cut to 10 characters) and the whole table byte for byte; for Fair Tree and for classic.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import slurm_cluster as sc
from sprio_compare import assert_sprio_equal

pytestmark = pytest.mark.slurm

USERS = ["pru1", "pru2", "pru3", "pru4"]
QOS = {"prlo": 10, "prhi": 40}
FILL_QOS = "prfill"
ACCOUNTS = ["pra", "prb", "prb1"]
SRC = Path(__file__).resolve().parent.parent / "src"



def _cleanup():
    sc.remove_objects(USERS, ACCOUNTS, [*QOS, FILL_QOS])


def _submit(user, account, cpus, partition=None, extra=()):
    return sc.submit(user, account, cpus, 3600, partition=partition, extra=list(extra))


_wait_running = sc.wait_running


@pytest.fixture(scope="module")
def scenario():
    sc.cluster_or_skip("fair_tree")
    _cleanup()
    # other tests' running jobs would keep charging usage between slurmctld's iteration and our read
    sc.wait_quiet(300)
    try:
        for u in USERS:
            sc.add_unix_user(u)
        for q, prio in QOS.items():
            sc.sacctmgr("add", "qos", q, f"priority={prio}")
        sc.sacctmgr("add", "qos", FILL_QOS, "usagefactor=0")
        qos_list = "qos=normal," + ",".join([*QOS, FILL_QOS])
        c = f"cluster={sc.CLUSTER_NAME}"
        sc.sacctmgr("add", "account", "pra", "fairshare=60", c)
        sc.sacctmgr("add", "account", "prb", "fairshare=40", c)
        sc.sacctmgr("add", "account", "prb1", "parent=prb", "fairshare=parent", c)
        for user, acct, shares in [("pru1", "pra", 1), ("pru2", "pra", 3), ("pru3", "prb1", 1), ("pru4", "prb1", 2)]:
            sc.sacctmgr("add", "user", user, f"account={acct}", f"fairshare={shares}", qos_list, c)

        # usage: short real jobs (charged at their end, AccountingStorageEnforce=limits)
        used = [sc.submit("pru1", "pra", 1024, 4), sc.submit("pru2", "pra", 256, 4, partition="high"),
                sc.submit("pru3", "prb1", 2048, 3)]
        sc.wait_jobs(used, timeout=180)

        fill = _submit("pru4", "prb1", 4096, extra=[f"--qos={FILL_QOS}"])
        _wait_running(fill)
        jobs = {
            "lo_debug": _submit("pru1", "pra", 10, "debug", ["--qos=prlo"]),
            "hi_high": _submit("pru2", "pra", 100, "high", ["--qos=prhi"]),
            "two_parts": _submit("pru3", "prb1", 20, "debug,high"),
            "nice": _submit("pru4", "prb1", 8, "high", ["--nice=100"]),
            "site": _submit("pru2", "pra", 1, "debug"),
            "held": _submit("pru1", "pra", 4, "debug", ["-H"]),
            "fixed": _submit("pru3", "prb1", 2, "debug"),
            "later": _submit("pru1", "pra", 6, "debug", ["--begin=now+3600"]),
            "fixed_two": _submit("pru2", "pra", 3, "high,debug"),
        }
        # several QOS per job: from 24.11 one priority per partition × QOS; before, Slurm takes the
        # list and the job runs with no QOS at all (seen on 22.05.8 and 23.11.11: "QOS=")
        jobs["two_qos"] = _submit("pru1", "pra", 12, "debug,high", ["--qos=prlo,prhi"])
        jobs["zero_qos"] = _submit("pru3", "prb1", 14, "debug", ["--qos=normal,prhi"])  # normal: Priority 0
        sc.run(["scontrol", "update", f"jobid={jobs['site']}", "sitefactor=500"])
        sc.run(["scontrol", "update", f"jobid={jobs['fixed']}", "priority=12345"])
        sc.run(["scontrol", "update", f"jobid={jobs['fixed_two']}", "priority=777"])
        # let the first jobs age ~50 s (0.58 age points: sprio prints 1), then one more job
        time.sleep(50)
        jobs["young"] = _submit("pru4", "prb1", 2, "debug", ["--qos=prhi"])
        time.sleep(2)
        yield {"jobs": jobs, "fill": fill}
    finally:
        _cleanup()
        sc.ensure_cluster("fair_tree")


_last_decay_ran = sc.last_decay_ran


_fairshared = sc.fairshared


def _read_both(snapshot: Path):
    """sprio -l, our JSON and our table, all from one decay iteration of slurmctld (``snapshot``: where
    our JSON's inputs are saved, for :func:`sprio_compare.unexplained`)."""
    for _ in range(3):
        sc.restart_ctld()  # recomputes every pending job's priority at one known start_time
        before = _last_decay_ran()
        theirs = sc.run(["sprio", "-l"]).stdout
        ours_json = json.loads(_fairshared("sprio", "--source", "slurm", "--format", "json", "--at", "last-calc",
                                           "--save-snapshot", str(snapshot)))
        ours_table = _fairshared("sprio", "--source", "slurm", "--at", "last-calc")
        if _last_decay_ran() == before:
            return theirs, ours_json, ours_table, before
    raise AssertionError("slurmctld kept recomputing priorities during the reads")


@pytest.mark.parametrize("algorithm", ["fair_tree", "classic"])
def test_sprio_equals_slurm(scenario, algorithm, tmp_path):
    sc.ensure_cluster(algorithm)
    theirs, ours, table, at = _read_both(tmp_path / "inputs.json")
    jobs = scenario["jobs"]
    assert_sprio_equal(theirs, ours, table, tmp_path / "inputs.json", f"{algorithm} at {at}")

    # the scenario is what it claims to be
    by_id: dict[int, list[dict]] = {}
    for r in ours["jobs"]:
        by_id.setdefault(r["job_id"], []).append(r)
    assert jobs["held"] not in by_id and jobs["later"] not in by_id and scenario["fill"] not in by_id
    assert [r["partition"] for r in by_id[jobs["two_parts"]]] == ["debug", "high"]
    assert [r["partition"] for r in by_id[jobs["fixed_two"]]] == ["high", "debug"]
    if sc.SERIES < (23, 2):  # 22.05's multi-partition quirk: SITE/NICE −2^31 and no set priority
        assert {r["site"] for r in by_id[jobs["fixed_two"]]} == {-2147483648}
    else:  # from 23.02 each partition's row shows the set priority
        assert {(r["site"], r["priority"]) for r in by_id[jobs["fixed_two"]]} == {(0, 777)}
    assert by_id[jobs["fixed"]][0]["priority"] == 12345
    assert by_id[jobs["site"]][0]["site"] == 500
    assert by_id[jobs["nice"]][0]["nice"] == 100
    assert by_id[jobs["lo_debug"]][0]["age"] >= 1 and by_id[jobs["young"]][0]["age"] == 0
    assert by_id[jobs["hi_high"]][0]["qos"] > by_id[jobs["lo_debug"]][0]["qos"] > 0
    assert by_id[jobs["hi_high"]][0]["partition_factor"] == 10 * by_id[jobs["lo_debug"]][0]["partition_factor"]
    if sc.SERIES < (24, 11):  # no QOS: QOS factor 0 in each partition's row
        assert [(r["partition"], r["qos_name"], r["qos"]) for r in by_id[jobs["two_qos"]]] == \
            [("debug", "", 0), ("high", "", 0)]
        assert [(r["qos_name"], r["qos"]) for r in by_id[jobs["zero_qos"]]] == [("", 0)]
    else:  # rows per partition × QOS, QOS inner, the higher QOS Priority first
        assert [(r["partition"], r["qos_name"]) for r in by_id[jobs["two_qos"]]] == \
            [("debug", "prhi"), ("debug", "prlo"), ("high", "prhi"), ("high", "prlo")]
        two = {(r["partition"], r["qos_name"]): r for r in by_id[jobs["two_qos"]]}
        assert two["debug", "prhi"]["qos"] > two["debug", "prlo"]["qos"] > 0
        # QOS normal has Priority 0: its row keeps the first QOS's factor (Slurm's quirk, reproduced)
        zero = [(r["qos_name"], r["qos"]) for r in by_id[jobs["zero_qos"]]]
        assert [q for q, _ in zero] == ["prhi", "normal"] and zero[0][1] == zero[1][1] > 0, zero
    fs = {r["user"]: r["fairshare"] for r in ours["jobs"] if r["job_id"] not in (jobs["fixed"], jobs["fixed_two"])}
    assert len(set(fs.values())) > 1, f"fair-share factors all equal: {fs}"
