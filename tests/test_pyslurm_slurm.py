"""pyslurm for real: the pyslurm source and updater against a live Slurm of pyslurm's release.

``tests/matrix.py`` builds pyslurm 25.11 from PyPI against the dev cluster's Slurm 25.11 and runs
this module with that interpreter (marker ``pyslurm``).  Elsewhere pyslurm cannot be built (it
needs the matching Slurm's headers), so outside CI the module skips; under CI=true a missing
pyslurm is a failure, like a missing cluster.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import slurm_cluster as sc
from daemon_proc import Daemon, fairshared_argv, write_config
from fairshared.model import PARENT
from fairshared.records import PushAction, SourceError
from fairshared.sources.slurm_cli import SlurmCli
from fairshared.slurm.config import priority_config

pytestmark = [pytest.mark.slurm, pytest.mark.pyslurm]

USERS = ("fsps1", "fsps2", "fsps3")
ACCOUNT, ACCOUNT2, NESTED = "fspsa", "fspsb", "fspsb1"


@pytest.fixture(scope="module")
def cluster():
    info = sc.cluster_or_skip("fair_tree")
    os.environ["SLURM_CONF"] = str(info.conf)  # pyslurm reads the conf that SLURM_CONF names
    try:
        from fairshared.pyslurm_loader import import_pyslurm

        ps = import_pyslurm()
    except SourceError as exc:
        if sc.must_fail_loudly():
            raise
        pytest.skip(f"pyslurm not usable here (tests/matrix.py builds it for Slurm 25.11): {exc}")
    assert ps.__version__.split(".")[:2] == info.version.split(".")[:2], \
        f"pyslurm {ps.__version__} is not built for Slurm {info.version}"
    return info


@pytest.fixture(scope="module")
def tree(cluster):
    """Two accounts and one nested under the second with FairShare=parent; a user in two accounts,
    a 0-share user and a per-partition association; usage from a finished job; pending jobs, a
    held one and an array among them (what the contract tests once checked against a double)."""
    sc.wait_quiet(300)
    for u in USERS:
        sc.add_unix_user(u)
    sc.sacctmgr("add", "account", f"name={ACCOUNT}", "parent=root", "fairshare=30", f"cluster={sc.CLUSTER_NAME}")
    sc.sacctmgr("add", "account", f"name={ACCOUNT2}", "parent=root", "fairshare=10", f"cluster={sc.CLUSTER_NAME}")
    sc.sacctmgr("add", "user", f"name={USERS[0]}", f"account={ACCOUNT}", "fairshare=5", f"cluster={sc.CLUSTER_NAME}")
    sc.sacctmgr("add", "user", f"name={USERS[1]}", f"account={ACCOUNT},{ACCOUNT2}", "fairshare=2",
                f"cluster={sc.CLUSTER_NAME}")
    sc.sacctmgr("add", "account", f"name={NESTED}", f"parent={ACCOUNT2}", "fairshare=parent",
                f"cluster={sc.CLUSTER_NAME}")
    sc.sacctmgr("add", "user", f"name={USERS[2]}", f"account={NESTED}", "fairshare=0", f"cluster={sc.CLUSTER_NAME}")
    sc.sacctmgr("add", "user", f"name={USERS[2]}", f"account={NESTED}", "partition=high", "fairshare=parent",
                f"cluster={sc.CLUSTER_NAME}")
    sc.wait_jobs([sc.submit(USERS[0], ACCOUNT, 512, 3)], timeout=120)
    sc.restart_ctld()  # one decay iteration now: usage and factors are fresh
    # the node is held by a long job of root, so the jobs below pend (for Resources: sprio lists them)
    filler = sc.submit("root", "root", 4096, 600)
    sc.wait_running(filler)
    jobs = [sc.submit(u, a, 1, 30) for u, a in ((USERS[0], ACCOUNT), (USERS[1], ACCOUNT), (USERS[1], ACCOUNT2))]
    # and jobs the tests read but do not push to: a per-partition association's, a held one, an array
    sc.submit(USERS[2], NESTED, 1, 30, "high")
    sc.submit(USERS[0], ACCOUNT, 1, 30, extra=["-H"])
    sc.submit(USERS[1], ACCOUNT2, 1, 30, extra=["--array=1-3"])
    yield jobs
    sc.run(["scancel", str(filler)], check=False)
    # the users' jobs cancelled and gone before their associations are deleted
    sc.remove_objects(USERS, (ACCOUNT, ACCOUNT2, NESTED))


def pyslurm_source():
    from fairshared.sources.pyslurm_source import PyslurmSource

    return PyslurmSource(timeout=60)


def test_snapshot_equals_the_command_line_sources(tree):
    ours = pyslurm_source().snapshot()
    cli = SlurmCli(env=sc.cluster_env(), timeout=60).snapshot()
    assert ours.cluster == cli.cluster == sc.CLUSTER_NAME
    assert ours.sibling_order == cli.sibling_order == "lineage"

    def rows(snap):
        return {a.key: (a.parent_account, a.shares, a.usage, a.order) for a in snap.associations}

    assert rows(ours) == rows(cli)
    mine = rows(ours)
    assert (ACCOUNT2, USERS[1], None) in mine
    assert mine[(NESTED, None, None)][:2] == (ACCOUNT2, PARENT)  # nested, FairShare=parent
    assert mine[(NESTED, USERS[2], None)][1] == 0 and mine[(NESTED, USERS[2], "high")][1] == PARENT
    assert mine[(ACCOUNT, USERS[0], None)][2] > 0  # the finished job's usage arrived
    for key in priority_config({}):  # every key, in the same units
        assert getattr(ours.settings, key) == getattr(cli.settings, key), key

    def jobs(snap):
        return {j.job_id: (j.user, j.account, j.partition, j.qos, j.priority, j.nice, j.state, j.display_id)
                for j in snap.jobs}

    assert set(tree) <= set(jobs(ours))
    assert jobs(ours) == jobs(cli)
    assert any("_" in j[-1] for j in jobs(ours).values()), "the array's pending tasks are listed"
    assert any(j[4] == 0 for j in jobs(ours).values()), "the held job is listed, priority 0"
    assert all(j[6] == "PENDING" for j in jobs(ours).values())  # the running filler is not


def _by_job(argv) -> dict[int, int]:
    """``JOBID|VALUE`` rows as {job id: value}; the array's rows (``673_[1-3]``, ``673_1``) are left out."""
    rows = (ln.split("|") for ln in sc.run(argv).stdout.split() if ln)
    return {int(i): int(v) for i, v in rows if i.isdigit()}


def test_pushes_show_up_in_sprio_and_squeue(tree):
    from fairshared.sinks.push_pyslurm import PyslurmUpdater

    a, b, c = tree
    upd = PyslurmUpdater(timeout=60)
    upd.apply(PushAction(a, "site_factor", 1234))
    upd.apply(PushAction(b, "site_factor", 555))
    upd.apply(PushAction(c, "nice", -77))
    site = sc.site_factors()
    nice = _by_job(["squeue", "-h", "-t", "PD", "-o", "%i|%y"])
    assert site[a] == 1234 and site[b] == 555
    assert nice[c] == -77
    # back to 0: pyslurm's Job.modify drops a 0 (``if self.site_factor:``), so 0 goes through scontrol
    upd.apply(PushAction(b, "site_factor", 0))
    upd.apply(PushAction(c, "nice", 0))
    site = sc.site_factors()
    nice = _by_job(["squeue", "-h", "-t", "PD", "-o", "%i|%y"])
    assert site[a] == 1234 and site[b] == 0 and nice[c] == 0


def test_a_daemon_on_pyslurm_runs_cycles_and_pushes_slurms_fairshare(tree, tmp_path):
    cfg = write_config(tmp_path / "fairshared.toml", f"""
[source]
kind = "pyslurm"
[push]
mode = "site_factor"
weight = 10000
levels = 0  # W·F exactly: compared with Slurm's own F
[state]
directory = "{tmp_path / 'state'}"
""")
    d = Daemon(tmp_path, "--config", str(cfg), "--period", "3600", env=dict(os.environ))
    try:
        d.wait_ready(60)
        first = d.wait_cycle(1, 120)
        assert first["outcome"] == "success", first
        code, second = d.post("/-/recompute")
        assert code == 200 and second["outcome"] == "success", second
        assert first["pushed"] >= 3 and second["planned"] == 0, (first, second)  # nothing changed since
        cycles = d.log_events("cycle")
        assert [(e["source"], e["outcome"]) for e in cycles] == [("pyslurm", "success")] * 2, cycles
    finally:
        d.stop()
    # what it pushed is round(W * F) with sshare's own FairShare of the job's association
    fs = {(r["Account"].strip(), r["User"]): float(r["FairShare"]) for r in sc.sshare_rows() if r["User"]}
    site = sc.site_factors()
    for job, key in zip(tree, ((ACCOUNT, USERS[0]), (ACCOUNT, USERS[1]), (ACCOUNT2, USERS[1]))):
        assert abs(site[job] - 10000 * fs[key]) <= 0.5 + 10000 * 5e-7, (job, key, site[job], fs[key])


def test_auto_falls_back_to_the_cli_with_a_reason_when_libslurm_cannot_use_the_config(tree, tmp_path):
    # an empty slurm.conf: libslurm's fatal() at once (a missing one is retried for 60 s by 25.11's clients)
    conf = tmp_path / "empty-slurm.conf"
    conf.write_text("")
    env = dict(os.environ, SLURM_CONF=str(conf))
    # the very import that used to end the process from inside libslurm
    probe = subprocess.run([sys.executable, "-c",
                            "from fairshared.pyslurm_loader import import_pyslurm as i\n"
                            "from fairshared.records import SourceError\n"
                            "try:\n    i()\nexcept SourceError as e:\n    print('REFUSED', e)\n"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.startswith("REFUSED pyslurm cannot initialise libslurm with SLURM_CONF="), probe.stdout
    cfg = write_config(tmp_path / "fairshared.toml", f'[source]\nkind = "auto"\n[state]\ndirectory = "{tmp_path}"\n')
    run = subprocess.run([*fairshared_argv(), "run", "--once", "--dry-run", "--config", str(cfg),
                          "--listen", "127.0.0.1:0"], env=env, capture_output=True, text=True, timeout=180)
    out = run.stdout + run.stderr
    assert "pyslurm_unavailable" in out and "empty-slurm.conf" in out and "ClusterName" in out, out
    assert '"using": "cli"' in out or "using=cli" in out, out
    assert run.returncode == 1  # the CLI cannot read that config either: a failed cycle, said in the log
    assert "pull_failed" in out, out
