"""Smoke test of the real Slurm dev cluster (deploy/dev-cluster/up).

Skipped outside CI when the cluster cannot be started (e.g. not root);
with CI=true that is a failure.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

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


UP = Path(__file__).resolve().parent.parent / "deploy" / "dev-cluster" / "up"


@pytest.mark.skipif(os.geteuid() != 0, reason="deploy/dev-cluster/up runs as root only")
def test_a_clone_without_the_tarballs_beside_it_uses_a_finished_build(tmp_path):
    """A clone that does not sit beside ../shared/slurm-src (root's home, CI's checkout elsewhere):
    `up --slurm 25.11` takes the newest finished build of 25.11 by this recipe and builds nothing;
    a build of an older recipe or an unfinished one does not count, and with none it names both
    places it looked."""
    builds = tmp_path / "builds"

    def build(name, recipe, done=True):
        d = builds / name
        (d / "sbin").mkdir(parents=True)
        if done:
            (d / "sbin" / "slurmctld").write_text("#!/bin/sh\n")
            (d / "sbin" / "slurmctld").chmod(0o755)
        (d / ".fairshared-build").write_text(f"0000  slurm-{name}.tar.bz2\nrecipe {recipe}\n")

    def up(version):
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "FAIRSHARED_SLURM_SOURCES": str(tmp_path / "none"),
               "FAIRSHARED_SLURM_BUILDS": str(builds)}
        return subprocess.run(["bash", str(UP), "--slurm", version, "--build-only"], env=env,
                              capture_output=True, text=True, timeout=60)

    build("25.11.2", 2)
    build("25.11.7", 2)
    build("25.11.9", 1)            # an older recipe: redone from its tarball, not used as it is
    build("25.11.10", 2, done=False)  # unfinished
    got = up("25.11")
    assert (got.returncode, got.stdout.strip()) == (0, str(builds / "25.11.7")), got.stderr
    got = up("24.11")
    assert got.returncode == 2 and got.stdout == ""
    assert got.stderr.strip() == (f"up: no slurm-24.11*.tar.* in {tmp_path / 'none'} and no finished build in "
                                  f"{builds}: pass --source TARBALL (SchedMD's release tarball) or set "
                                  "FAIRSHARED_SLURM_SOURCES")
