"""The ``slurm`` usage model against slurmctld itself, on the real dev cluster.

A workload of real jobs runs in both partitions — ``debug`` (no billing weights:
billable = CPUs) and ``high`` (TRESBillingWeights="CPU=2.0") — in a small tree
of fresh accounts (one nested), with a user in two accounts and one job under a
QOS with UsageFactor=0.5.  The jobs last 20-130 s, so most span one or more
decay iterations (PriorityCalcPeriod is 1 minute, PriorityDecayHalfLife 30
minutes, AccountingStorageEnforce=associations,limits).  Root's usage is zeroed
first (``sacctmgr modify account root set RawUsage=0``), which the model takes
as a reset at that moment (``UsagePolicy.reset_at``).  When every job has
ended, slurmctld's UsageRaw (``scontrol show assoc_mgr``, two decimals) is read
between two reads of its ``priority_last_decay_ran`` (which give the phase of
the decay iterations), and the records are read back with the sacct source,
incrementally (one fetch while the jobs run, one at the end).

Requirement: every association is within TOL_ABS + TOL_REL·u of slurmctld's figure u (0.01
for the two decimals printed, 5e-4 for one decay iteration stamped a second late, see below;
measured: under 5e-7).  What difference remains, and why:

* slurmctld schedules its iterations at start + k·60 s to the microsecond but
  stamps each with ``time(NULL)``, whole seconds; a wake-up that crosses a
  second boundary shifts that iteration by 1 s against our grid (anchor + k·P).
  One second moves a chunk boundary (≤ 1 s of a chunk at the wrong decay) and
  one decay step by d^±1 = 1 ∓ 0.693/1800 = ∓0.04 %, so errors of a few 1e-4
  are possible; none was seen.
* sacct's Start/End are the same whole seconds slurmctld charged with, and the
  job-end chunk is charged at the end (limits), so nothing else is lost.
* assoc_mgr prints UsageRaw to two decimals: ≤ 0.005 absolute, ≤ 5e-7 relative
  for the smallest association here (~9,700).  That is all that remained in
  two runs on Slurm 22.05.8: largest relative deviations 3.0e-7 and 4.3e-7
  (printed by the test, run it with -s).
* Not explained yet, seen once (2026-11-27, 22.05.8, `.ci/run` from a clone in
  /root): slurmctld held 267.82 more for one user than this model (6.9e-3; both
  of its jobs billed 200/s, so ~1.34 s of charge; sacct's times for all seven jobs
  were whole seconds as usual, every other association within 1.1e-7). The rerun
  on the same cluster passed at 1.2e-7. If it comes back, keep the slurmctld log
  (the decay iterations' times around the jobs' ends) before changing the tolerance.

The same comparison is made through the command line (``fairshared usage
--format json`` and ``fairshared compute --usage accounting``), which read the
decay phase themselves; for the fresh accounts (no records before the zeroing)
they must agree as well.
"""

from __future__ import annotations

import io
import json
import secrets
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import slurm_cluster as sc

from fairshared.cli import main
from fairshared.slurm.state_files import parse_decay_state
from fairshared.sources.sacct import SacctJobs, sacct_env, usage_settings
from fairshared.sources.slurm_cli import SlurmCli
from fairshared.usage import UsagePolicy
from fairshared.usage_charge import compute_usage

pytestmark = pytest.mark.slurm

USERS = ("usu1", "usu2", "usu3")
TOL_ABS = 0.01  # assoc_mgr prints UsageRaw to two decimals
TOL_REL = 5e-4  # one iteration stamped a whole second off our grid: d^±1 = 1 ∓ 0.693/1800 (see above)


def _decay_state(cli: SlurmCli) -> tuple[float, float]:
    from fairshared.slurm.config import parse_config

    loc = parse_config(cli.run(["scontrol", "show", "config"]))["StateSaveLocation"]
    return parse_decay_state((Path(loc) / "priority_last_decay_ran").read_bytes())


def _cleanup(accounts, qos):
    for u in USERS:
        sc.sacctmgr("delete", "user", f"name={u}", f"account={','.join(accounts)}", check=False)
    for a in accounts:  # children first
        sc.sacctmgr("delete", "account", f"name={a}", check=False)
    sc.sacctmgr("delete", "qos", f"name={qos}", check=False)


def test_slurm_model_matches_slurmctld(slurm):
    env = dict(slurm.env)
    cli = SlurmCli(env=env, timeout=60)
    cfg = cli.config()
    assert (cfg["calc_period_seconds"], cfg["half_life_seconds"]) == (60, 1800), cfg
    assert "limits" in cfg["accounting_storage_enforce"]

    tag = "us" + secrets.token_hex(3)
    A, B, B1, Q = f"{tag}a", f"{tag}b", f"{tag}b1", f"{tag}q"
    for u in USERS:
        sc.add_unix_user(u)
    sc.wait_quiet(timeout=180)
    try:
        sc.sacctmgr("add", "qos", Q, "usagefactor=0.5")
        sc.sacctmgr("add", "account", A, "fairshare=100")
        sc.sacctmgr("add", "account", B, "fairshare=50")
        sc.sacctmgr("add", "account", B1, f"parent={B}", "fairshare=10")
        sc.sacctmgr("add", "user", "usu1", f"account={A},{B1}")
        sc.sacctmgr("add", "user", "usu2", f"account={A}", f"qos=normal,{Q}")
        sc.sacctmgr("add", "user", "usu3", f"account={B1}")
        # everyone's usage to 0; with nothing running, nothing is charged around this moment
        sc.sacctmgr("modify", "account", "name=root", "set", "RawUsage=0")
        zeroed = time.time()

        src = SacctJobs(run=SlurmCli(env=sacct_env(env), timeout=60).run, overlap=120)
        jobs = []
        # t = 0 s
        jobs.append(sc.submit("usu1", A, 200, 100, "debug"))
        jobs.append(sc.submit("usu2", A, 100, 130, "high"))          # billed 2 x 100 CPUs
        jobs.append(sc.submit("usu3", B1, 300, 45, "high"))
        time.sleep(25)
        jobs.append(sc.submit("usu3", B1, 50, 110, "debug"))
        jobs.append(sc.submit("usu1", B1, 500, 20, "debug"))         # user in two accounts
        jobs.append(sc.submit("usu2", A, 400, 70, "debug", extra=(f"--qos={Q}",)))  # UsageFactor 0.5
        time.sleep(25)
        jobs.append(sc.submit("usu1", A, 150, 80, "high"))
        time.sleep(5)
        src.fetch(now=time.time(), not_before=zeroed)                # while they run: incremental state
        assert src.state.running, "the first fetch should have seen running jobs"
        sc.wait_jobs(jobs, timeout=240)

        wait_sacct_ends(src, jobs, zeroed)

        ctld, _, off, report = usage_against_slurmctld(cli, src, zeroed)
        root = ctld[("root", None, None)]
        assert root > 100_000  # the workload is ~ 160,000 billable CPU-seconds
        assert {A, B, B1} <= {k[0] for k, u in ctld.items() if u >= 0.01 * root}, report
        assert off == [], report

        # the same through the command line (decay phase read by the command itself)
        out = io.StringIO()
        with redirect_stdout(out):
            assert main(["usage", "--format", "json"]) == 0
        rows = json.loads(out.getvalue())["associations"]
        assert set(rows[0]) == {"account", "user", "partition", "slurmctld", "slurm", "exact"}
        for r in rows:
            if r["account"] in (A, B, B1):
                assert abs(r["slurm"] - r["slurmctld"]) <= TOL_ABS + TOL_REL * r["slurmctld"], r
        out = io.StringIO()
        with redirect_stdout(out):
            assert main(["compute", "--source", "slurm", "--usage", "accounting", "--format", "json"]) == 0
        comp = {(r["account"], r["user"]): r["raw_usage"] for r in json.loads(out.getvalue())["associations"]}
        for (acct, user, _), u in ctld.items():
            if acct in (A, B, B1):
                assert abs(comp[(acct, user)] - u) <= TOL_ABS + TOL_REL * u, (acct, user, comp[(acct, user)], u)
    finally:
        _cleanup([B1, A, B], Q)


def wait_sacct_ends(src: SacctJobs, jobs, zeroed: float) -> None:
    """slurmdbd learns of job ends asynchronously: wait until sacct has them all."""
    deadline = time.monotonic() + 60
    while True:
        recs, bad = src.fetch(now=time.time(), not_before=zeroed)
        ended = {r.job_id for r in recs if r.end is not None}
        if set(jobs) <= ended or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert set(jobs) <= ended, f"sacct lacks the end of {sorted(set(jobs) - ended)}"
    assert bad == []


def usage_against_slurmctld(cli: SlurmCli, src: SacctJobs, zeroed: float):
    """slurmctld's UsageRaw, read between two reads of its decay state (one iteration on both
    sides), against our ``slurm`` model over sacct's records since ``zeroed``.

    Returns (slurmctld's usage by key, ours by key, the keys off by more than TOL_ABS + TOL_REL·u,
    a printable report).
    """
    for _ in range(10):
        before = _decay_state(cli)
        snap = cli.snapshot(jobs=False)
        at = time.time()
        after = _decay_state(cli)
        if before == after and at - after[0] < 55:
            break
        time.sleep(2)
    else:
        pytest.fail("could not read slurmctld's usage between two decay iterations")
    extra = usage_settings(cli.run)
    assert extra["priority_last_decay_ran"] == after[0]
    policy = UsagePolicy.from_settings(snap.settings, extra, reset_at=zeroed)
    recs, bad = src.fetch(now=at, not_before=policy.not_before(at))
    result = compute_usage(recs, snap.associations, policy, at, ["slurm", "exact"])
    assert result.bad == [] and bad == []
    ours = result.by_key("slurm")
    exact = result.by_key("exact")
    ctld = {a.key: a.usage for a in snap.associations}
    lines, worst, off = [], 0.0, []
    for key, u in ctld.items():
        if u == 0 and ours[key] == 0:
            continue
        dev = abs(ours[key] - u) / max(u, 1e-9)
        worst = max(worst, dev)
        if abs(ours[key] - u) > TOL_ABS + TOL_REL * u:
            off.append(key)
        name = "/".join(str(k) for k in key if k)
        lines.append(f"{name:<22} slurmctld {u:12.2f}  slurm {ours[key]:12.2f}"
                     f"  exact {exact[key]:12.2f}  deviation {dev:.2e}")
    report = "\n".join(lines) + f"\nlargest relative deviation (slurm model): {worst:.3e}"
    print(report)
    return ctld, ours, off, report


@pytest.fixture(autouse=True)
def _cluster_env(slurm, monkeypatch):
    """The CLI reads the cluster through $SLURM_CONF (and no stray SLURM_* settings)."""
    for k in list(__import__("os").environ):
        if k.startswith(("SLURM_", "SACCT_", "SQUEUE_", "SSHARE_")):
            monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
