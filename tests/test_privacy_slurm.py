"""Who sees what through the API, against Slurm itself (deploy/dev-cluster/up --settings private:
``PrivateData=usage,jobs``).

The daemon reads the live cluster and each user asks its API with a MUNGE credential made as that
user with the cluster's own munged; the same user runs ``sshare`` and ``squeue``.  What Slurm shows
each of them is the judge: a plain user, a user in a sub-account, a coordinator of an account with a
sub-account (``sacctmgr add coordinator``), and an operator (AdminLevel=Operator).  The API may show
more accounts than sshare (the accounts on the path above what it shows, api/identity.py), never
another user association, and exactly the pending jobs squeue lists.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import slurm_cluster as sc
from daemon_proc import Daemon, write_config
from fairshared.api.munge import HEADER, payload_for

pytestmark = pytest.mark.slurm

ACCOUNTS = [("fspa", "root"), ("fspasub", "fspa"), ("fspb", "root")]
USERS = [("fspu1", "fspa"), ("fspu2", "fspasub"), ("fspu3", "fspb"), ("fspco", "fspb"), ("fspop", "fspb")]
COORDINATOR, COORDINATED = "fspco", "fspa"
OPERATOR = "fspop"
FILLER = ("fspfill", "fspb")


@pytest.fixture(scope="module")
def private(slurm):
    info = sc.ensure_cluster("fair_tree", settings="private")
    sc.wait_quiet(300)
    names = [u for u, _ in USERS] + [FILLER[0]]
    sc.remove_objects(names, [a for a, _ in ACCOUNTS])  # a run killed half-way left them
    for u in names:
        sc.add_unix_user(u)
    for a, parent in ACCOUNTS:
        sc.sacctmgr("add", "account", f"name={a}", f"parent={parent}", f"cluster={sc.CLUSTER_NAME}")
    for u, a in [*USERS, FILLER]:
        sc.sacctmgr("add", "user", f"name={u}", f"account={a}", f"cluster={sc.CLUSTER_NAME}")
    sc.sacctmgr("add", "coordinator", f"account={COORDINATED}", f"names={COORDINATOR}")
    sc.sacctmgr("modify", "user", f"name={OPERATOR}", "set", "adminlevel=operator")
    filler = sc.submit(*FILLER, 4096, 900)  # holds the node: the others stay pending
    sc.wait_running(filler)
    jobs = {u: [sc.submit(u, a, 1, 60) for _ in range(2)] for u, a in USERS}
    work = Path(tempfile.mkdtemp(prefix="fs-private-", dir="/var/tmp"))
    cfg = write_config(work / "fs.toml", f"""
[source]
kind = "cli"
[push]
mode = "site_factor"
dry_run = true
[http]
munge_socket = "{info.dir / 'run' / 'munge.sock'}"
explain_jobs = true
[state]
directory = "{work}/state"
""")
    d = Daemon(work, "--config", str(cfg), "--period", "300", env=dict(info.env))
    try:
        d.wait_ready(60)
        first = d.wait_cycle(1, 180)
        assert first["outcome"] == "success", (first, d.log()[-3000:])
        yield {"info": info, "daemon": d, "jobs": jobs}
    finally:
        d.stop()
        sc.remove_objects(names, [a for a, _ in ACCOUNTS])
        shutil.rmtree(work, ignore_errors=True)
        sc.ensure_cluster("fair_tree")  # the default settings again for the tests after this module


def as_user(info, user: str, *argv: str) -> str:
    """``argv`` run as ``user`` (runuser), with the cluster's environment; its standard output."""
    done = subprocess.run(["runuser", "-u", user, "--", *argv], env=dict(info.env), capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, (user, argv, done.stderr)
    return done.stdout


def ask(p, user: str, path: str) -> tuple[int, dict]:
    """GET ``path`` from the daemon with a credential made as ``user`` by the cluster's munged."""
    only, _, query = path.partition("?")
    cred = as_user(p["info"], user, "munge", "--socket", str(p["info"].dir / "run" / "munge.sock"),
                   "--string", payload_for(only, query).decode()).strip()
    req = urllib.request.Request(p["daemon"].url + path, headers={HEADER: cred})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def sshare_rows(p, user: str) -> set[tuple[str, str | None]]:
    """(account, user) of every row sshare shows ``user`` (accounts are indented: stripped)."""
    out = as_user(p["info"], user, "sshare", "-a", "-n", "-P", "-o", "Account,User")
    rows = set()
    for line in out.splitlines():
        account, _, name = line.partition("|")
        rows.add((account.strip(), name.strip() or None))
    return rows


def api_rows(p, user: str) -> set[tuple[str, str | None]]:
    code, out = ask(p, user, "/api/v1/associations?limit=5000")
    assert code == 200, out
    assert out["total"] == len(out["items"])
    return {(r["account"], r["user"]) for r in out["items"]}


@pytest.mark.parametrize("user", [u for u, _ in USERS])
def test_each_user_sees_the_user_associations_sshare_shows_them(private, user):
    theirs, ours = sshare_rows(private, user), api_rows(private, user)
    assert {r for r in ours if r[1]} == {r for r in theirs if r[1]}, (user, theirs, ours)
    assert {r for r in theirs if not r[1]} <= ours  # every account row sshare shows
    if user == OPERATOR:
        assert ours == theirs and ("fspb", "fspu3") in ours  # everything, as root sees it
    if user == COORDINATOR:  # the account coordinated and its sub-account, users and all
        assert {("fspa", "fspu1"), ("fspasub", "fspu2"), ("fspa", None), ("fspasub", None)} <= theirs
    if user == "fspu1":
        assert {r for r in ours if r[1]} == {("fspa", "fspu1")}


@pytest.mark.parametrize("user", [u for u, _ in USERS])
def test_each_user_is_shown_the_pending_jobs_squeue_lists_them(private, user):
    listed = {int(x) for x in as_user(private["info"], user, "squeue", "-h", "-t", "PD", "-o", "%i").split()}
    ours = set()
    for job in (j for js in private["jobs"].values() for j in js):
        code, out = ask(private, user, f"/api/v1/jobs/{job}")
        assert code in (200, 403), out
        if code == 200:
            ours.add(job)
    mine = set(private["jobs"][user])
    assert ours == listed & {j for js in private["jobs"].values() for j in js} and mine <= ours
    if user == COORDINATOR:  # the jobs charged to fspa and fspasub besides its own
        assert set(private["jobs"]["fspu1"]) | set(private["jobs"]["fspu2"]) <= ours
        assert not set(private["jobs"]["fspu3"]) & ours
    code, me = ask(private, user, "/api/v1/whoami")
    assert (code, me["user"], me["admin"]) == (200, user, user == OPERATOR)


@pytest.mark.pyslurm
def test_the_pyslurm_source_reads_the_same_operators_and_coordinators(private, monkeypatch):
    """pyslurm 25.11 has no users API: the pyslurm source reads them with the command line too."""
    from fairshared.pyslurm_loader import import_pyslurm
    from fairshared.records import SourceError
    from fairshared.sources.pyslurm_source import PyslurmSource
    from fairshared.sources.slurm_cli import SlurmCli

    info = private["info"]
    monkeypatch.setenv("SLURM_CONF", str(info.conf))  # libslurm reads the conf SLURM_CONF names
    monkeypatch.setenv("PATH", info.env["PATH"])  # and the command line the cluster's own tools
    try:
        import_pyslurm()
    except SourceError as exc:
        if sc.must_fail_loudly():
            raise
        pytest.skip(str(exc))
    roles = SlurmCli(env=dict(info.env), timeout=60).roles()
    assert OPERATOR in roles.operators and COORDINATED in roles.coordinators[COORDINATOR]
    assert PyslurmSource(timeout=60).snapshot(jobs=False).roles == roles
