"""The daemon against the real test cluster: what it pushes is what Slurm then holds.

One tree with usage (real jobs), then the node is filled by a long job of a 0-share
"filler" account (0 shares: last at its level whatever its usage, so the others'
order does not move while it runs) and every test user queues small jobs that stay
pending.  Then:
* site_factor: after one cycle `sprio` shows W·F in SITE for every pending job, with F
  from `fairshared compute --source slurm`; with W large, squeue's pending order is our
  algorithm's order (level_based here, to differ from Slurm's own Fair Tree); a second
  cycle with no change pushes nothing;
* --dry-run changes nothing;
* nice: a job whose owner set nice 50 ends at 50 − W·F, and a second cycle keeps it.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import slurm_cluster as sc
from daemon_proc import fairshared_argv, write_config

pytestmark = pytest.mark.slurm

USERS = ["dmu1", "dmu2", "dmu3", "dmu4"]
ACCOUNTS = [("dma", 60), ("dmb", 30), ("dmfill", 0)]
W = 1_000_000
SLURM_WEIGHT = 10_000  # PriorityWeightFairshare of the dev cluster


def fairshared(*args, check=True):
    env = dict(sc.cluster_env())
    res = subprocess.run(fairshared_argv() + list(args), capture_output=True, text=True, env=env, timeout=300)
    if check and res.returncode != 0:
        raise AssertionError(f"fairshared {' '.join(args)} exited {res.returncode}:\n{res.stdout}\n{res.stderr}")
    return res


def cycle_lines(res):
    out = []
    for line in res.stdout.splitlines() + res.stderr.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if d.get("event") == "cycle":
            out.append(d)
    return out


@pytest.fixture(scope="module")
def queue(slurm, tmp_path_factory):
    sc.ensure_cluster("fair_tree")
    sc.wait_quiet(300)
    for a, _ in ACCOUNTS:
        sc.sacctmgr("delete", "account", f"name={a}", check=False)
    for u in USERS + ["dmfiller"]:
        sc.add_unix_user(u)
    for a, shares in ACCOUNTS:
        sc.sacctmgr("add", "account", f"name={a}", "parent=root", f"fairshare={shares}", f"cluster={sc.CLUSTER_NAME}")
    members = [("dmu1", "dma", 1), ("dmu2", "dma", 3), ("dmu3", "dmb", 1), ("dmu4", "dmb", 1),
               ("dmfiller", "dmfill", 1)]
    for u, a, s in members:
        sc.sacctmgr("add", "user", f"name={u}", f"account={a}", f"fairshare={s}", f"cluster={sc.CLUSTER_NAME}")
    # usage: different amounts so the users' factors differ
    jobs = [sc.submit("dmu1", "dma", 2048, 6), sc.submit("dmu2", "dma", 512, 6), sc.submit("dmu3", "dmb", 1024, 6)]
    sc.wait_jobs(jobs, 300)
    sc.restart_ctld()
    filler = sc.submit("dmfiller", "dmfill", 4096, 600)
    sc.wait_running(filler)
    pending = {}
    for u, a, _ in members[:4]:
        pending[u] = sc.submit(u, a, 16, 30)
    pending["nice"] = sc.submit("dmu4", "dmb", 16, 30, extra=("--nice=50",))
    state = tmp_path_factory.mktemp("daemon-state")
    yield {"filler": filler, "pending": pending, "state": state}
    sc.run(["scancel", str(filler), *map(str, pending.values())], check=False)
    sc.wait_quiet(120)
    for u in USERS + ["dmfiller"]:
        sc.sacctmgr("delete", "user", f"name={u}", check=False)
    for a, _ in ACCOUNTS:
        sc.sacctmgr("delete", "account", f"name={a}", check=False)


def squeue_pending():
    out = sc.run(["squeue", "-h", "-t", "PD", "-o", "%i|%Q|%y|%u"]).stdout
    return {int(i): {"priority": int(p), "nice": int(n), "user": u}
            for i, p, n, u in (ln.split("|") for ln in out.split() if ln)}


def factors(algorithm):
    res = fairshared("compute", "--source", "slurm", "--algorithm", algorithm, "--format", "json")
    return {(r["account"], r["user"]): r["fairshare"] for r in json.loads(res.stdout)["associations"] if r["user"]}


def config(tmp, state, mode, algorithm, dry_run=False):
    return write_config(tmp / f"{mode}-{algorithm}-{dry_run}.toml", f"""
[source]
kind = "cli"
[algorithm]
name = "{algorithm}"
[push]
mode = "{mode}"
weight = {W}
levels = 0  # W·F exactly: compared with Slurm's own F
dry_run = {str(dry_run).lower()}
[state]
directory = "{state}/{mode}"
""")


def test_dry_run_changes_nothing(queue, tmp_path):
    before = sc.site_factors()
    res = fairshared("run", "--once", "--config", str(config(tmp_path, queue["state"], "site_factor",
                                                                  "level_based", dry_run=True)))
    (c,) = cycle_lines(res)
    assert c["outcome"] == "success" and c["dry_run"] is True and c["planned"] >= 5 and c["pushed"] == 0
    assert sc.site_factors() == before


def test_site_factor_lands_in_sprio_and_orders_the_queue(queue, tmp_path):
    cfg = config(tmp_path, queue["state"], "site_factor", "level_based")
    first = cycle_lines(fairshared("run", "--once", "--config", str(cfg)))[0]
    assert first["outcome"] == "success" and first["pushed"] == first["planned"] >= 5
    f = factors("level_based")
    site = sc.site_factors()
    pend = squeue_pending()
    jobs = {jid: u for u, jid in queue["pending"].items()}
    for jid in jobs:
        user = pend[jid]["user"]
        acct = "dma" if user in ("dmu1", "dmu2") else "dmb"
        assert site[jid] == round(W * f[(acct, user)]), (jid, user, site[jid], f[(acct, user)])
    # W dominates Slurm's own factors (weights <= 10000): the pending order is ours
    plain = [queue["pending"][u] for u in USERS]  # same partition, QOS, size and nice
    by_prio = sorted(plain, key=lambda j: -pend[j]["priority"])
    by_ours = sorted(plain, key=lambda j: -site[j])
    assert [site[j] for j in by_prio] == [site[j] for j in by_ours]
    assert len({site[j] for j in plain}) >= 3  # the factors really differ
    # nothing changed: the next cycle pushes nothing
    second = cycle_lines(fairshared("run", "--once", "--config", str(cfg)))[0]
    assert second["outcome"] == "success" and second["planned"] == 0 and second["pushed"] == 0


def test_fair_tree_site_factor_is_slurms_own_fairshare(queue, tmp_path):
    """Slurm runs Fair Tree too: what we push must be W times sshare's FairShare, and sprio's own
    FAIRSHARE column (PriorityWeightFairshare = W) for each job."""
    cfg = config(tmp_path, queue["state"], "site_factor", "fair_tree")
    first = cycle_lines(fairshared("run", "--once", "--config", str(cfg)))[0]
    assert first["outcome"] == "success", first
    fs = {(r["Account"].strip(), r["User"]): float(r["FairShare"]) for r in sc.sshare_rows() if r["User"]}
    owner = {int(i): (a, u) for i, u, a in (ln.split("|") for ln in
             sc.run(["squeue", "-h", "-t", "PD", "-o", "%i|%u|%a"]).stdout.split() if ln)}
    rows = [ln.split("|") for ln in sc.run(["sprio", "-h", "-o", "%i|%S|%F"]).stdout.split() if ln]  # no %o in 22.05
    jobs = set(queue["pending"].values())
    checked = 0
    for jid, site, fairshare in rows:
        if int(jid) not in jobs:
            continue
        account, user = owner[int(jid)]
        # sshare prints F to 6 decimals: W·F from it is off by at most W·5e-7 before rounding
        assert abs(int(site) - W * fs[(account, user)]) <= 0.5 + W * 5e-7, (jid, site, fs[(account, user)])
        # sprio prints PriorityWeightFairshare·F (10000·F) rounded to an integer
        assert abs(int(site) * SLURM_WEIGHT / W - float(fairshare)) <= 0.5 + SLURM_WEIGHT / W, (jid, site, fairshare)
        checked += 1
    assert checked == len(jobs) >= 5


def test_nice_mode_keeps_the_owners_nice(queue, tmp_path):
    # reset what the site_factor test wrote, then push nice instead
    for jid in queue["pending"].values():
        sc.run(["scontrol", "update", f"JobId={jid}", "SiteFactor=0"])
    cfg = config(tmp_path, queue["state"], "nice", "fair_tree")
    first = cycle_lines(fairshared("run", "--once", "--config", str(cfg)))[0]
    assert first["outcome"] == "success" and first["pushed"] >= 5
    f = factors("fair_tree")
    pend = squeue_pending()
    jid = queue["pending"]["nice"]
    assert pend[jid]["nice"] == 50 - round(W * f[("dmb", "dmu4")])
    other = queue["pending"]["dmu1"]
    assert pend[other]["nice"] == 0 - round(W * f[("dma", "dmu1")])
    second = cycle_lines(fairshared("run", "--once", "--config", str(cfg)))[0]
    assert second["planned"] == 0
    assert squeue_pending()[jid]["nice"] == pend[jid]["nice"]
    # the owner changes their mind: the new nice becomes the base
    sc.run(["scontrol", "update", f"JobId={jid}", "Nice=20"])
    third = cycle_lines(fairshared("run", "--once", "--config", str(cfg)))[0]
    assert third["pushed"] == 1
    assert squeue_pending()[jid]["nice"] == 20 - round(W * f[("dmb", "dmu4")])
    assert os.path.exists(f"{queue['state']}/nice/push-state.json")


def sprio_parts():
    out = sc.run(["sprio", "-h", "-o", "%i|%Y|%F"]).stdout
    return {int(i): (int(p), int(f)) for i, p, f in (ln.split("|") for ln in out.split() if ln)}


def test_priority_mode_sets_the_whole_priority_and_spares_an_operators(queue, tmp_path):
    # undo the other modes: SiteFactor 0, the owners' own nice back
    for name, jid in queue["pending"].items():
        sc.run(["scontrol", "update", f"JobId={jid}", "SiteFactor=0", f"Nice={50 if name == 'nice' else 0}"])
    fixed = queue["pending"]["dmu3"]
    sc.run(["scontrol", "update", f"JobId={fixed}", "Priority=12345"])  # an operator's decision
    # Slurm's own priority with its fair-share term (W_slurm · F) swapped for ours (W · F): Fair Tree
    # both sides, so F is the same up to sshare's 6 decimals (W · 1e-6 = 1: tolerance 1)
    before = sprio_parts()
    f = factors("fair_tree")
    cfg = config(tmp_path, queue["state"], "priority", "fair_tree")
    first = cycle_lines(fairshared("run", "--once", "--config", str(cfg)))[0]
    assert first["outcome"] == "success" and first["pushed"] == first["planned"] >= 4
    pend = squeue_pending()
    for name, jid in queue["pending"].items():
        if jid == fixed:
            continue
        user = pend[jid]["user"]
        acct = "dma" if user in ("dmu1", "dmu2") else "dmb"
        prio, fs_slurm = before[jid]
        expected = prio - fs_slurm + round(W * f[(acct, user)])
        assert abs(pend[jid]["priority"] - expected) <= 1, (name, pend[jid]["priority"], expected)
    assert pend[fixed]["priority"] == 12345  # left alone
    # Slurm no longer recalculates our jobs (fixed), and we recognise them as ours next cycle
    second = cycle_lines(fairshared("run", "--once", "--config", str(cfg)))[0]
    assert second["outcome"] == "success"
    again = squeue_pending()
    assert all(abs(again[j]["priority"] - pend[j]["priority"]) <= 1 for j in pend), [(j, pend[j], again[j]) for j in pend if pend[j] != again[j]]
    assert again[fixed]["priority"] == 12345


def test_usage_from_the_accounting_records(queue, tmp_path):
    cfg = write_config(tmp_path / "acct.toml", f"""
[source]
kind = "cli"
[usage]
origin = "accounting"
[push]
mode = "off"
[state]
directory = "{queue['state']}/acct"
""")
    res = fairshared("run", "--once", "--config", str(cfg))
    (c,) = cycle_lines(res)
    assert c["outcome"] == "success" and c["associations"] >= 9, res.stderr
