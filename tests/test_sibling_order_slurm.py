"""Slurm's sibling order measured live, in each state a slurmctld goes through.

Fair Tree ranks of sibling accounts that tie on LevelFS (here: idle accounts, LevelFS = inf) depend
on the order slurmctld holds them in (see ``fairshared.engine.sibling_order``).  The tree is made so
that the orders disagree: idle accounts are created as sotzz, sotza, sotzb, so slurmdbd's ``lft``
order (newest first) is sotzb, sotza, sotzz while names (and ``lineage``) say sotza, sotzb, sotzz;
sotza holds a 0-share user, so which account comes first changes every idle user's rank.

In each state the live command-line source plus our Fair Tree must print every user's FairShare
exactly as sshare does, and the order the source reports must be the one the rule predicts:

=========================== ======================== ==================
state                       22.05                    23.11 - 26.05
=========================== ======================== ==================
right after start-up        lft                      lineage
after run-time add/move/del name                     lineage
after a slurmctld restart   lft                      lineage
slurmdbd away and back      name (no reload: kept)   lineage
=========================== ======================== ==================
"""

from __future__ import annotations

import io

import pytest

import slurm_cluster as sc
from fairshared.engine import compute
from fairshared.slurm.sshare import parse_sshare
from fairshared.sources.slurm_cli import SlurmCli

pytestmark = pytest.mark.slurm

BUSY = "sobusy"
IDLE = ["sotzz", "sotza", "sotzb"]  # creation order
USERS = {"sou1": (BUSY, 1), "sou2": (BUSY, 1), "sou3": ("sotzz", 1), "sou4": ("sotza", 1), "sou5": ("sotza", 0),
         "sou6": ("sotzb", 1), "sou7": ("sotzc", 1)}


def _cleanup():
    sc.wait_quiet(300)
    sc.sacctmgr("delete", "user", "name=" + ",".join(USERS), check=False)
    sc.sacctmgr("delete", "account", "name=" + ",".join([*IDLE, "sotzc", BUSY]), check=False)


def _add_user(user):
    account, shares = USERS[user]
    sc.sacctmgr("add", "user", f"name={user}", f"account={account}", f"fairshare={shares}",
                f"cluster={sc.CLUSTER_NAME}")


def _users_fairshare(result) -> dict:
    t = result.tree
    return {(t.account[i], t.user[i]): f"{result.fairshare[i]:f}" for i in range(t.n) if t.user[i]}


def mismatches(source: SlurmCli):
    """(order kind the source used, [users whose FairShare differs from sshare's], [the same for
    ``compute --from-sshare`` on sshare's own dump (its row order is the sibling order)])."""
    snap = source.snapshot(jobs=False)
    ours = _users_fairshare(compute(snap.associations, "fair_tree"))
    text = sc.run(["sshare", "-a", "-l", "-P"]).stdout
    lines = text.splitlines()
    header = lines[0].split("|")
    theirs = {(r["Account"].strip(), r["User"]): r["FairShare"]
              for r in (dict(zip(header, ln.split("|"))) for ln in lines[1:] if ln) if r["User"]}
    assert set(ours) == set(theirs), (set(ours) ^ set(theirs))
    bad = [f"{k}: ours {ours[k]} sshare {theirs[k]}" for k in sorted(theirs) if ours[k] != theirs[k]]
    dump = parse_sshare(io.StringIO(text), "sshare -a -l -P").associations
    dumped = _users_fairshare(compute(dump, "fair_tree"))
    bad_dump = [f"{k}: from the dump {dumped[k]} sshare {theirs[k]}" for k in sorted(theirs) if dumped[k] != theirs[k]]
    return snap.sibling_order, bad, bad_dump


def test_sibling_order_in_every_state(slurm, capsys):
    sc.ensure_cluster("fair_tree")
    _cleanup()
    for u in USERS:
        sc.add_unix_user(u)
    sc.sacctmgr("add", "account", f"name={BUSY}", "parent=root", "fairshare=10", f"cluster={sc.CLUSTER_NAME}")
    for a in IDLE:
        sc.sacctmgr("add", "account", f"name={a}", "parent=root", "fairshare=10", f"cluster={sc.CLUSTER_NAME}")
    for u in ("sou1", "sou2", "sou3", "sou4", "sou5", "sou6"):
        _add_user(u)
    sc.wait_jobs([sc.submit("sou1", BUSY, 512, 4), sc.submit("sou2", BUSY, 256, 4)], timeout=300)
    source = SlurmCli(env=sc.cluster_env(), timeout=60)
    old = sc.SERIES < (23, 11)
    seen = {}

    sc.restart_ctld()  # start-up: the whole tree loaded from slurmdbd
    seen["start-up"] = mismatches(source)

    # run-time changes: add an idle account (the newest: first in lft order), move one, delete one
    sc.sacctmgr("add", "account", "name=sotzc", "parent=root", "fairshare=10", f"cluster={sc.CLUSTER_NAME}")
    _add_user("sou7")
    sc.sacctmgr("modify", "account", "name=sotzz", "set", f"parent={BUSY}")
    sc.sacctmgr("delete", "user", "name=sou6", "account=sotzb")
    sc.sacctmgr("delete", "account", "name=sotzb")
    sc.wait_next_calc()
    seen["run-time changes"] = mismatches(source)

    sc.restart_ctld()
    seen["slurmctld restart"] = mismatches(source)

    sc.sacctmgr("modify", "account", "name=sotzz", "set", "parent=root")  # 22.05: back to name order
    sc.wait_next_calc()
    seen["run-time move back"] = mismatches(source)
    sc.bounce_slurmdbd()
    sc.wait_next_calc()
    sc.wait_next_calc()  # slurmctld has re-synchronised with slurmdbd by the second one
    seen["slurmdbd away and back"] = mismatches(source)

    with capsys.disabled():  # the measurement shows in every run, not only with -s
        print(f"\nsibling order on Slurm {slurm.version}: "
              + "; ".join(f"{state}: {kind} ({len(bad)} off; from the dump {len(bad_dump)} off)"
                          for state, (kind, bad, bad_dump) in seen.items()), flush=True)
    assert {state: bad for state, (kind, bad, _) in seen.items() if bad} == {}
    # the dump alone (sshare's rows: no lft, no lineage) gives the same ranks wherever its row order is
    # slurmctld's: everywhere from 23.11, in 22.05's name-order states (not in its lft states: sshare
    # prints by name there, which the dump cannot undo; measured: 25 users off at start-up)
    dump_right = {s for s in seen if not (old and s in ("start-up", "slurmctld restart"))}
    assert {state: seen[state][2] for state in dump_right if seen[state][2]} == {}
    expected = ({"start-up": "lft", "run-time changes": "name", "slurmctld restart": "lft",
                 "run-time move back": "name"} if old else
                {state: "lineage" for state in seen})
    assert {s: seen[s][0] for s in expected} == expected
    _cleanup()
