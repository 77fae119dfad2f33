"""``explain --vs`` and ``whatif`` against a real Slurm (deploy/dev-cluster; run with ``-m slurm``).

Scenario (accounts, users and the QOS prefixed ``wi``; removed again in a ``finally``):

* tree: ``wia`` (fairshare 60) with wiu1 (1) and wiu2 (3); ``wib`` (40) with wiu3 (1);
* usage: one short real job each, of different sizes, so that no two siblings tie (a tie would
  make the ranks depend on the sibling order, which is not what this test is about);
* a job in QOS ``wifill`` (UsageFactor 0) fills the node, so the jobs after it stay pending without
  charging usage between slurmctld's iteration and our reads;
* pending jobs from every user in one partition each (a single sprio row per job).

(a) For several pairs, the side ``explain --vs`` says ranks higher is the side ``sprio`` ranks
higher, and its stated point difference equals the difference of sprio's PRIORITY column.  The
priorities are frozen as in test_sprio_slurm: slurmctld is restarted (it recomputes every pending
job at one start_time) and both sides are read within that one iteration, ``--at last-calc``.
(b) ``whatif --shares wia=1000`` predicts FairShare values; ``sacctmgr modify`` then applies the
edit for real and, after slurmctld's next calculation, sshare shows the predicted values.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import slurm_cluster as sc

pytestmark = pytest.mark.slurm

USERS = ["wiu1", "wiu2", "wiu3"]
ACCOUNTS = ["wia", "wib"]
FILL_QOS = "wifill"
SRC = Path(__file__).resolve().parent.parent / "src"


def _cleanup():
    sc.remove_objects(USERS, ACCOUNTS, [FILL_QOS])


_fairshared = sc.fairshared


@pytest.fixture(scope="module")
def scenario():
    sc.cluster_or_skip("fair_tree")
    _cleanup()
    sc.wait_quiet(300)
    try:
        for u in USERS:
            sc.add_unix_user(u)
        sc.sacctmgr("add", "qos", FILL_QOS, "usagefactor=0")
        c = f"cluster={sc.CLUSTER_NAME}"
        sc.sacctmgr("add", "account", "wia", "fairshare=60", c)
        sc.sacctmgr("add", "account", "wib", "fairshare=40", c)
        qos = f"qos=normal,{FILL_QOS}"
        for user, acct, shares in [("wiu1", "wia", 1), ("wiu2", "wia", 3), ("wiu3", "wib", 1)]:
            sc.sacctmgr("add", "user", user, f"account={acct}", f"fairshare={shares}", qos, c)
        used = [sc.submit("wiu1", "wia", 1024, 4), sc.submit("wiu2", "wia", 128, 3),
                sc.submit("wiu3", "wib", 512, 5)]
        sc.wait_jobs(used, timeout=180)
        fill = sc.submit("wiu3", "wib", 4096, 3600, extra=[f"--qos={FILL_QOS}"])
        sc.wait_running(fill)
        jobs = {
            "u1_debug": sc.submit("wiu1", "wia", 10, 3600, partition="debug"),
            "u2_high": sc.submit("wiu2", "wia", 100, 3600, partition="high"),
            "u3_debug": sc.submit("wiu3", "wib", 20, 3600, partition="debug"),
            "u2_debug": sc.submit("wiu2", "wia", 1, 3600, partition="debug", extra=["--nice=50"]),
        }
        yield jobs
    finally:
        _cleanup()
        sc.ensure_cluster("fair_tree")


def _sprio_priorities() -> dict[int, int]:
    out = sc.run(["sprio", "-h", "-o", "%i %Y"]).stdout
    return {int(i): int(p) for i, p in (line.split() for line in out.splitlines() if line.strip())}


PAIRS = [("u1_debug", "u2_high"), ("u2_high", "u3_debug"), ("u3_debug", "u1_debug"), ("u2_debug", "u1_debug")]


@pytest.mark.parametrize("algorithm", ["fair_tree", "classic"])
def test_explain_vs_agrees_with_sprio(scenario, algorithm, capsys):
    sc.ensure_cluster(algorithm)
    for _ in range(3):
        sc.restart_ctld()
        before = sc.last_decay_ran()
        prio = _sprio_priorities()
        ours = {}
        for a, b in PAIRS:
            ours[(a, b)] = json.loads(_fairshared(
                "explain", str(scenario[a]), "--vs", str(scenario[b]), "--source", "slurm",
                "--at", "last-calc", "--format", "json"))
        if sc.last_decay_ran() == before:
            break
    else:
        raise AssertionError("slurmctld kept recomputing priorities during the reads")
    if algorithm == "fair_tree":  # a real session, shown in every run (README quotes one)
        a, b = PAIRS[1]
        text = _fairshared("explain", str(scenario[a]), "--vs", str(scenario[b]), "--source", "slurm",
                           "--at", "last-calc")
        with capsys.disabled():
            print(f"\n$ fairshared explain {scenario[a]} --vs {scenario[b]}   # Slurm {sc.current().version}\n{text}",
                  flush=True)
    for (a, b), d in ours.items():
        ja, jb = scenario[a], scenario[b]
        want = prio[ja] - prio[jb]
        assert d["points"]["total"] == want, (a, b, d["points"])
        assert d["higher"] == ("a" if want > 0 else "b" if want < 0 else None), (a, b)


def test_whatif_shares_prediction_comes_true(scenario, capsys):
    sc.ensure_cluster("fair_tree")
    sc.wait_next_calc()
    predicted = json.loads(_fairshared("whatif", "--source", "slurm", "--shares", "wia=1000",
                                       "--format", "json"))
    want = {r["user"]: r["fairshare_after"] for r in predicted["users"] if r["user"] in USERS}
    before = {r["user"]: r["fairshare_before"] for r in predicted["users"] if r["user"] in USERS}
    assert want != before, "the edit should change someone's FairShare"
    text = _fairshared("whatif", "--source", "slurm", "--shares", "wia=1000")
    with capsys.disabled():
        print(f"\n$ fairshared whatif --shares wia=1000   # Slurm {sc.current().version}\n{text}", flush=True)
    try:
        sc.sacctmgr("modify", "account", "where", "name=wia", "set", "fairshare=1000")
        sc.wait_next_calc()
        got = {r["User"]: float(r["FairShare"]) for r in sc.sshare_rows() if r.get("User") in USERS}
        assert {u: f"{v:f}" for u, v in got.items()} == {u: f"{v:f}" for u, v in want.items()}
    finally:
        sc.sacctmgr("modify", "account", "where", "name=wia", "set", "fairshare=60", check=False)
