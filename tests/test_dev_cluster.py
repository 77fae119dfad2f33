"""Smoke test of the real Slurm dev cluster (deploy/dev-cluster/up).

Skipped outside CI when the cluster cannot be started (e.g. not root);
with CI=true that is a failure.
"""

from __future__ import annotations

import time
import uuid

import pytest

try:  # tests/ may or may not become a package
    from . import slurm_cluster as sc
except ImportError:
    import slurm_cluster as sc

UNIX_USER = "fsdev-smoke"
CPUS = 1000
SECONDS = 10


@pytest.mark.slurm
def test_job_usage_is_charged_to_association():
    info = sc.cluster_or_skip("fair_tree")
    assert info.conf.is_file()
    assert info.env["SLURM_CONF"] == str(info.conf)
    assert set(info.partitions) == {"debug", "high"}

    sinfo = sc.run(["sinfo", "-h", "-o", "%R %a %t"]).stdout.split("\n")
    assert any(line.startswith("debug up") for line in sinfo), sinfo

    account = "smoke" + uuid.uuid4().hex[:8]
    sc.add_unix_user(UNIX_USER)
    sc.sacctmgr("add", "account", account, "fairshare=10")
    try:
        sc.sacctmgr("add", "user", UNIX_USER, f"account={account}")

        job = sc.submit(UNIX_USER, account, CPUS, SECONDS)
        sc.wait_jobs([job], timeout=60)

        # slurmdbd learns of the job's end asynchronously: wait for the record to say so
        deadline = time.monotonic() + 30
        while True:
            acct = sc.run(
                ["sacct", "-n", "-P", "-X", "-j", str(job), "-o", "State,ElapsedRaw,AllocCPUS,User,Account"]
            ).stdout.strip()
            if acct.startswith("COMPLETED") or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        state, elapsed, alloc, user, acct_name = acct.split("|")
        assert state == "COMPLETED", acct
        assert (user, acct_name, int(alloc)) == (UNIX_USER, account, CPUS)
        assert SECONDS <= int(elapsed) <= SECONDS + 5, acct

        # The job end is charged to the association at once (no decay
        # iteration needed).  Half-life is 30 min, so decay is < ~4 %.
        rows = [
            r for r in sc.sshare_rows("-A", account)
            if r["Account"].strip() == account and r["User"] == UNIX_USER
        ]
        assert len(rows) == 1, rows
        raw = float(rows[0]["RawUsage"])
        expected = CPUS * int(elapsed)
        assert 0.85 * expected <= raw <= 1.05 * expected, (raw, expected)
    finally:
        sc.run(["scancel", f"--account={account}"], check=False)
        sc.sacctmgr("delete", "user", f"name={UNIX_USER}", f"account={account}", check=False)
        sc.sacctmgr("delete", "account", account, check=False)
