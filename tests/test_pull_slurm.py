"""The command-line pull against a real cluster: what it asks Slurm for, cycle after cycle.

From 23.11 the association manager's tree carries its sibling order (``Lineage``), and sshare is
only a cross-check; sshare's client is quadratic in the associations (58 s at 100,000 on 25.11.7),
so the pull runs it only when the tree differs from the one sshare last confirmed.  22.05 runs it
every read: its sibling order is inferred from sshare's ranks.  The pull reads sshare by
association ID, without the Account column that makes it quadratic; what it reads must be what
the whole ``sshare -a -l -P -m`` says.
"""

from __future__ import annotations

import time

import pytest

import slurm_cluster as sc
from fairshared.sources.slurm_cli import SlurmCli, associations_from_assoc_mgr, check_same_ids

pytestmark = pytest.mark.slurm

USER, ACCOUNT = "psu1", "psacct"


def shares_of(snap, account: str):
    return next(a.shares for a in snap.associations if a.account == account and a.user is None)


def test_sshare_runs_again_only_when_the_tree_changes(slurm):
    sc.ensure_cluster("fair_tree")
    sc.remove_objects([USER], [ACCOUNT])
    sc.add_unix_user(USER)
    sc.sacctmgr("add", "account", f"name={ACCOUNT}", "parent=root", "fairshare=5",
                f"cluster={sc.CLUSTER_NAME}")
    sc.sacctmgr("add", "user", f"name={USER}", f"account={ACCOUNT}", f"cluster={sc.CLUSTER_NAME}")
    try:
        cli = SlurmCli(env=sc.cluster_env(), timeout=60)

        def sshares() -> int:
            return sum(1 for command, _ in cli.calls if command.startswith("sshare "))

        deadline = time.monotonic() + 30
        while shares_of(first := cli.snapshot(jobs=False), ACCOUNT) != 5:  # slurmdbd → slurmctld
            assert time.monotonic() < deadline
            time.sleep(0.5)
        n1 = sshares()
        again = cli.snapshot(jobs=False)
        n2 = sshares()
        assert [(a.key, a.shares, a.parent, a.order) for a in again.associations] == \
            [(a.key, a.shares, a.parent, a.order) for a in first.associations]
        sc.sacctmgr("modify", "account", f"name={ACCOUNT}", "set", "fairshare=7")
        deadline = time.monotonic() + 30
        while shares_of(changed := cli.snapshot(jobs=False), ACCOUNT) != 7:
            assert time.monotonic() < deadline, "slurmctld never got the new shares"
            time.sleep(0.5)
        n3 = sshares()
        lineage = slurm.series >= (23, 11)
        assert changed.sibling_order in (("lineage",) if lineage else ("lft", "name"))
        if lineage:
            assert n2 == n1  # the same tree: no second sshare
            assert n3 > n2  # a changed tree is checked against sshare again
        else:
            assert n2 == n1 + 1  # 22.05: every read
    finally:
        sc.remove_objects([USER], [ACCOUNT])


def test_sshare_by_id_says_what_the_whole_sshare_says(slurm):
    """Nested accounts, FairShare=parent and a user in two accounts (its own tree, beside whatever
    earlier tests left): sshare read by ID and tied to the association manager's records gives each
    association the user, partition, shares and FairShare the whole sshare gives it, and
    check_same_ids accepts it."""
    sc.ensure_cluster("fair_tree")
    users, accounts = ["psid1", "psid2"], ["psida", "psidb"]
    sc.remove_objects(users, accounts)
    for u in users:
        sc.add_unix_user(u)
    c = f"cluster={sc.CLUSTER_NAME}"
    sc.sacctmgr("add", "account", "name=psida", "parent=root", "fairshare=5", c)
    sc.sacctmgr("add", "account", "name=psidb", "parent=psida", "fairshare=parent", c)
    sc.sacctmgr("add", "user", "name=psid1", "account=psida", "fairshare=3", c)
    sc.sacctmgr("add", "user", "name=psid1", "account=psidb", "fairshare=parent", c)
    sc.sacctmgr("add", "user", "name=psid2", "account=psidb", "fairshare=2", c)
    try:
        cli = SlurmCli(env=sc.cluster_env(), timeout=60)
        deadline = time.monotonic() + 30
        while True:  # slurmdbd -> slurmctld
            with cli.one_read():
                records = cli.assoc_mgr()
                rows = cli.sshare_ids()
                whole = cli.sshare()
            if {("psidb", "psid2", None), ("psidb", "psid1", None)} <= {a.key for a in whole.associations} \
                    and len(rows) == len(records):
                break
            assert time.monotonic() < deadline, "slurmctld never got the test associations"
            time.sleep(0.5)
        assocs = associations_from_assoc_mgr(records)
        reported = check_same_ids(records, assocs, rows)
        assert len(rows) == len(records) == len(whole.associations) >= 7
        by_key = {a.key: a for a in whole.associations}
        for r, a in zip(records, assocs):
            row, w = rows[r.id], by_key[a.key]
            assert (row.user, row.partition) == (w.user, w.partition)
            if a.parent_account is not None:
                assert row.shares == w.shares == a.shares, a.label()
        assert reported == whole.reported_fairshare and ("psidb", "psid2", None) in reported
        assert {a.key: a.shares for a in assocs if a.account.startswith("psid")} == {
            ("psida", None, None): 5, ("psidb", None, None): "parent", ("psida", "psid1", None): 3,
            ("psidb", "psid1", None): "parent", ("psidb", "psid2", None): 2}
    finally:
        sc.remove_objects(users, accounts)
