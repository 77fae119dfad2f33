"""Fault injection against the real test cluster: the daemon survives, and never pushes bad data.

`fairshared run` (command-line source, push mode ``nice``, Fair Tree, period 2 s, source
timeout 3 s, state directory on a 256 KiB tmpfs, audit log beside it) runs on a small tree
whose node is filled by a 0-share filler job, so six jobs stay pending.  Then, at seeded
random points of a cycle (a random delay; for slurmctld faults in turn also the moment the
daemon's child processes show it pulling, or right after its last read, when it pushes),
faults are injected one after the other:

* ``kill-slurmctld``  SIGKILL slurmctld, restart it with ``restart-ctld``;
* ``hang-slurmctld``  SIGSTOP slurmctld longer than the source timeout, then SIGCONT;
* ``kill-slurmdbd``, ``hang-slurmdbd``  the same for slurmdbd (restart with ``up``);
* ``kill-mariadb``    SIGKILL the accounting database, restart it with ``up``;
* ``disk-full``       fill the state directory's tmpfs (ENOSPC), remove the filler after a few cycles.

Before each fault (during ``disk-full``: while the disk is full) one to three pending jobs'
owners (four to six before a fault aimed at the push) change their nice, so the daemon has
something to push around the fault.
Afterwards (from the audit log, the metrics scraped all along, and the cluster):

* the daemon process never died, answered every scrape and exited 0 on SIGTERM at the end;
* no push came from a partial or inconsistent snapshot: every cycle that pushed had the whole
  reference tree (same associations, parents and shares), every job known to be pending, and
  each pushed contribution equals round(W·F) recomputed from that very snapshot and W·F from a
  `fairshared compute --source slurm` taken before the faults (Fair Tree ranks do not move
  here), and the value written equals a nice an owner set minus it (a contribution applied
  twice fails this);
* with a full disk the owners' changes were planned but nothing was pushed (nice mode refuses
  to push without saving its push state first);
* ``fairshared_stale`` was 1 exactly when the last cycle published had computed nothing
  (checked on every scrape, joined to the audit log by cycle number), it was seen at 1, and
  every SIGSTOP of slurmctld made a cycle fail (a SIGKILLed one that is back within the
  client's connection retries may be ridden out: seen);
* the first cycle that started after the service came back succeeded, its pushed values equal
  W·F from ``fairshared compute --source slurm`` read right after, and every pending job then
  holds its owner's nice − W·F.  After a SIGKILLed slurmctld that nice may be any its owner
  set: slurmctld comes back from its last saved state and forgets the updates since (seen).

The slurmdbd and MariaDB faults are expected to change nothing: the command-line source reads
only slurmctld (sacctmgr only as a fallback), so the daemon keeps succeeding through them.

The cluster is left healthy (every daemon up, node idle, accounts removed).
Seed: ``FAIRSHARED_FAULT_SEED`` (default 20240611); count: ``FAIRSHARED_FAULTS`` (default 21).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import slurm_cluster as sc
from daemon_proc import Daemon, fairshared_argv, write_config
from helpers import wait_until

from fairshared.engine import build_tree, compute
from fairshared.model import Association
from fairshared.plan import user_factors

pytestmark = pytest.mark.slurm

SEED = int(os.environ.get("FAIRSHARED_FAULT_SEED", "20240611"))
N_FAULTS = int(os.environ.get("FAIRSHARED_FAULTS", "21"))
ALL_KINDS = ("kill-slurmctld", "hang-slurmctld", "kill-slurmdbd", "hang-slurmdbd", "kill-mariadb", "disk-full")
KINDS = tuple(os.environ.get("FAIRSHARED_FAULT_KINDS", ",".join(ALL_KINDS)).split(","))
SOURCE_FAULTS = ("kill-slurmctld", "hang-slurmctld")  # the daemon reads only slurmctld
PERIOD = 2.0
TIMEOUT = 3.0  # [source] timeout: every Slurm command the daemon runs
W = 100_000
ACCOUNTS = [("fta", 50), ("ftb", 30), ("ftfill", 0)]
MEMBERS = [("ftu1", "fta", 1), ("ftu2", "fta", 2), ("ftu3", "ftb", 1), ("ftfiller", "ftfill", 1)]
STATE_FS_SIZE = "256k"


# -- the cluster's daemons --------------------------------------------------------------------------

PIDFILES = {"slurmctld": "slurmctld.pid", "slurmdbd": "slurmdbd.pid", "mariadbd": "mariadb.pid"}


def daemon_pid(name: str) -> int:
    """The pid of the cluster's NAME from its run file, checked against /proc (never another process)."""
    text = (sc.cluster_dir() / "run" / PIDFILES[name]).read_text()
    pid = int(re.sub(r"\D", "", text))
    comm = Path(f"/proc/{pid}/comm").read_text().strip()
    if comm != name:
        raise RuntimeError(f"pid {pid} from {PIDFILES[name]} is {comm!r}, not {name}")
    return pid


def up() -> None:
    """deploy/dev-cluster/up: restarts whatever of the cluster is dead (idempotent)."""
    prio = sc.current().priority if sc.current() else "fair_tree"
    sc._script([str(sc.UP), "--priority", prio, "--dir", str(sc.cluster_dir()), "--quiet"], 300)


def ctld_up() -> bool:
    return "is UP" in sc.run(["scontrol", "ping"], check=False, timeout=15).stdout


def dbd_up() -> bool:
    return sc.run(["sacctmgr", "-nP", "show", "cluster", "format=cluster"], check=False, timeout=15).returncode == 0


def node_idle_or_busy() -> bool:
    st = sc.run(["sinfo", "-h", "-N", "-o", "%t"], check=False).stdout.split()
    return bool(st) and all(s in ("idle", "mix", "alloc", "comp") for s in st)


def heal() -> None:
    """Whatever happened: nothing stopped, everything up, the node responding."""
    for name in PIDFILES:
        try:
            os.kill(daemon_pid(name), signal.SIGCONT)
        except (OSError, RuntimeError, ValueError):
            pass
    up()
    wait_until(node_idle_or_busy, 60, "node not responding after up")


# -- the daemon's children: where in its cycle it is -------------------------------------------------

def children_cmdlines(pid: int) -> list[str]:
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tasks:
        try:
            kids = Path(f"/proc/{pid}/task/{t}/children").read_text().split()
        except OSError:
            continue
        for k in kids:
            try:
                out.append(Path(f"/proc/{k}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                pass
    return out


def wait_stage(pid: int, stage: str, timeout: float = 10.0) -> bool:
    """Wait until the daemon is in a stage of its cycle; False on timeout.

    pull: it runs one of its reads (scontrol show, sshare, squeue, sprio); push: it runs
    ``scontrol update``, or its last read (sprio) has just ended (an update lives a few ms only).
    """
    deadline = time.monotonic() + timeout
    in_sprio = False
    while time.monotonic() < deadline:
        cmds = children_cmdlines(pid)
        if stage == "pull" and any(m in c for c in cmds for m in (" show ", "sshare", "squeue", "sprio")):
            return True
        if stage == "push":
            if any(" update " in c for c in cmds) or (in_sprio and not any("sprio" in c for c in cmds)):
                return True
            in_sprio = any("sprio" in c for c in cmds)
        time.sleep(0.005)
    return False


# -- the audit trail and the metrics ------------------------------------------------------------------

def audit_lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass  # a line being written
    return out


def wait_audit(path: Path, pred, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for rec in audit_lines(path):
            if pred(rec):
                return rec
        time.sleep(0.2)
    raise TimeoutError("no such cycle in the audit log")


def scrape(d: Daemon) -> dict:
    text = d.get("/metrics", timeout=10).decode()
    out = {"cycles": 0, "stale": None}
    for line in text.splitlines():
        if line.startswith("fairshared_cycles_total{"):
            out["cycles"] += int(float(line.rsplit(" ", 1)[1]))
        elif line.startswith("fairshared_stale "):
            out["stale"] = int(float(line.split()[1]))
        elif line.startswith("fairshared_consecutive_failures "):
            out["consecutive_failures"] = int(float(line.split()[1]))
    return out


class Monitor(threading.Thread):
    """Scrapes /metrics twice a second and watches that the daemon process lives."""

    def __init__(self, d: Daemon):
        super().__init__(daemon=True)
        self.d = d
        self.scrapes: list[dict] = []
        self.errors: list[str] = []
        self.died_at: float | None = None
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            if self.d.proc.poll() is not None:
                self.died_at = time.time()
                return
            try:
                s = scrape(self.d)
                s["t"] = time.time()
                self.scrapes.append(s)
            except Exception as exc:  # noqa: BLE001 - every failure is a finding
                self.errors.append(f"{time.time():.1f}: {exc!r}")
            self.halt.wait(0.5)


# -- factors -----------------------------------------------------------------------------------------

def factors_now() -> dict:
    res = subprocess.run(fairshared_argv() + ["compute", "--source", "slurm", "--algorithm", "fair_tree",
                                              "--format", "json", "--timeout", "30"],
                         capture_output=True, text=True, env=sc.cluster_env(), timeout=120)
    assert res.returncode == 0, res.stderr
    return {(r["account"], r["user"]): r["fairshare"] for r in json.loads(res.stdout)["associations"] if r["user"]}


def factors_of(assocs: list) -> dict:
    """Fair Tree F per user association, recomputed from an audit line's association list."""
    tree = [Association(a, u, p if u is None else a, s, us, part, o) for a, u, part, p, s, us, o in assocs]
    return {(a, u): f for (a, u, _), f in user_factors(compute(build_tree(tree), "fair_tree")).items()}


def structure(assocs) -> list:
    return sorted([a, u or "", part or "", p or "", str(s)] for a, u, part, p, s, *_ in assocs)


def pending_nice() -> dict[int, int]:
    out = sc.run(["squeue", "-h", "-t", "PD", "-o", "%i|%y"]).stdout.split()
    return {int(i): int(n) for i, n in (x.split("|") for x in out)}


# -- the fixture: tree, usage, a full node and pending jobs -------------------------------------------

@pytest.fixture(scope="module")
def cluster(slurm):
    sc.ensure_cluster("fair_tree")
    sc.wait_quiet(300)
    for a, _ in ACCOUNTS:
        sc.sacctmgr("delete", "account", f"name={a}", check=False)
    for u, _, _ in MEMBERS:
        sc.add_unix_user(u)
    for a, shares in ACCOUNTS:
        sc.sacctmgr("add", "account", f"name={a}", "parent=root", f"fairshare={shares}", f"cluster={sc.CLUSTER_NAME}")
    for u, a, s in MEMBERS:
        sc.sacctmgr("add", "user", f"name={u}", f"account={a}", f"fairshare={s}", f"cluster={sc.CLUSTER_NAME}")
    # usage, so that the users' factors differ
    sc.wait_jobs([sc.submit("ftu1", "fta", 1024, 4), sc.submit("ftu2", "fta", 256, 4),
                  sc.submit("ftu3", "ftb", 512, 4)], 300)
    sc.restart_ctld()
    filler = sc.submit("ftfiller", "ftfill", 4096, 1200)
    wait_until(lambda: "R" in sc.run(["squeue", "-h", "-j", str(filler), "-o", "%t"]).stdout.split(), 60,
               "filler not running")
    base: dict[int, list[int]] = {}  # job -> every nice its owner ever set
    owner: dict[int, tuple[str, str]] = {}
    for i, (u, a, _) in enumerate(MEMBERS[:3] * 2):
        nice = 50 if i == 4 else 0
        jid = sc.submit(u, a, 16, 600, extra=(f"--nice={nice}",))
        base[jid] = [nice]
        owner[jid] = (a, u)
    # slurmctld saves its job state a while after a change: a SIGKILL before that loses the jobs
    # (seen: the pending jobs gone, the filler pending again); the faults start once they are saved
    mark = time.time()
    job_state = sc.cluster_dir() / "state" / "slurmctld" / "job_state"
    wait_until(lambda: job_state.stat().st_mtime > mark + 0.05, 120, "slurmctld did not save its job state")
    try:
        yield {"filler": filler, "base": base, "owner": owner}
    finally:
        heal()
        sc.run(["scancel", str(filler), *map(str, base)], check=False)
        sc.wait_quiet(120)
        for u, _, _ in MEMBERS:
            if sc.sacctmgr("delete", "user", f"name={u}", check=False).returncode:
                # jobs a killed slurmctld forgot stay "active" in slurmdbd: end them (runaway jobs)
                sc.sacctmgr("show", "runawayjobs", check=False)
                sc.sacctmgr("delete", "user", f"name={u}", check=False)
        for a, _ in ACCOUNTS:
            sc.sacctmgr("delete", "account", f"name={a}", check=False)
        wait_until(lambda: set(sc.run(["sinfo", "-h", "-N", "-o", "%t"]).stdout.split()) == {"idle"}, 60,
                   "node not idle after the fault suite")


class StateDisk:
    """Where the daemon keeps its state, and a way to make writing there fail.

    A 256 KiB tmpfs filled with a file (ENOSPC, a full disk).  Where mount is not permitted,
    the state directory made immutable (``chattr +i``: creating a file there fails with EPERM)."""

    def __init__(self, root: Path):
        self.root = root
        self.dir = root / "state"
        root.mkdir()
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={STATE_FS_SIZE},mode=0755", "tmpfs", str(root)],
                             capture_output=True, text=True)
        self.how = "tmpfs" if res.returncode == 0 else "chattr"
        self.why = res.stderr.strip()
        self.filler = root / "fill"

    def fill(self) -> None:
        if self.how == "tmpfs":
            with open(self.filler, "wb", buffering=0) as fh:
                try:
                    while True:
                        fh.write(b"\0" * 4096)
                except OSError:  # ENOSPC: full
                    pass
        else:
            self.dir.mkdir(exist_ok=True)
            subprocess.run(["chattr", "+i", str(self.dir)], check=True, capture_output=True)

    def free(self) -> None:
        if self.how == "tmpfs":
            self.filler.unlink(missing_ok=True)
        else:
            subprocess.run(["chattr", "-i", str(self.dir)], capture_output=True)

    def close(self) -> None:
        self.free()
        if self.how == "tmpfs":
            if subprocess.run(["umount", str(self.root)], capture_output=True).returncode:
                subprocess.run(["umount", "-l", str(self.root)], capture_output=True)


@pytest.fixture
def state_disk(tmp_path):
    disk = StateDisk(tmp_path / "statefs")
    if disk.how == "chattr":
        probe = tmp_path / "probe"
        probe.mkdir()
        if subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode:
            why = f"neither a tmpfs ({disk.why}) nor chattr +i to make the state disk fail"
            if sc.must_fail_loudly():
                pytest.fail(why)  # under CI a skipped fault suite is a failure
            pytest.skip(why)
        subprocess.run(["chattr", "-i", str(probe)], capture_output=True)
        print(f"mount not permitted ({disk.why}): the state directory is made immutable instead "
              "of full (EPERM instead of ENOSPC)", flush=True)
    try:
        yield disk
    finally:
        disk.close()


# -- the suite ---------------------------------------------------------------------------------------

def test_faults(cluster, state_disk, tmp_path, capsys):
    rng = random.Random(SEED)
    base, owner = cluster["base"], cluster["owner"]
    jobs = sorted(base)
    cur = {j: base[j][-1] for j in jobs}  # the owner's nice each job holds in Slurm now
    audit = tmp_path / "audit.jsonl"
    cfg = write_config(tmp_path / "fault.toml", f"""
[source]
kind = "cli"
timeout = {TIMEOUT}
[algorithm]
name = "fair_tree"
[schedule]
max_backoff = {2 * PERIOD}
[push]
mode = "nice"
weight = {W}
levels = 0  # W·F exactly: compared with Slurm's own F
[logging]
format = "json"
[state]
directory = "{state_disk.dir}"
audit_log = "{audit}"
""")
    reference = factors_now()
    d = Daemon(tmp_path, "--config", str(cfg), "--period", str(PERIOD), env=sc.cluster_env())
    mon = Monitor(d)
    faults: list[dict] = []
    try:
        d.wait_ready()
        wait_audit(audit, lambda r: r["outcome"] == "success", 60)
        ref = next(r for r in audit_lines(audit) if r["outcome"] == "success")
        ref_structure = structure(ref["assocs"])
        mon.start()
        plan = [KINDS[i % len(KINDS)] for i in range(N_FAULTS)]
        rng.shuffle(plan)
        for n, kind in enumerate(plan, 1):
            fault = {"n": n, "kind": kind}
            # owners change their nice (during disk-full: once the disk is full)
            # slurmctld faults hit each stage in turn: the pull, the push, anywhere
            stage = ("pull", "push", "any")[plan[:n - 1].count(kind) % 3] if kind in SOURCE_FAULTS else "any"
            # a push stage long enough to be hit: several jobs to update
            changes = rng.sample(jobs, rng.randint(4, 6) if stage == "push" else rng.randint(1, 3))

            def perturb():
                for j in changes:
                    new = rng.choice([x for x in range(0, 200) if x not in base[j]])
                    sc.run(["scontrol", "update", f"JobId={j}", f"Nice={new}"])
                    base[j].append(new)
                    cur[j] = new

            fault["stage"] = stage
            if kind != "disk-full":
                perturb()
            if stage == "any":
                time.sleep(rng.uniform(0, PERIOD))
            else:
                fault["stage_seen"] = wait_stage(d.proc.pid, stage)
            fault["t0"] = time.time()
            try:
                if kind == "kill-slurmctld":
                    os.kill(daemon_pid("slurmctld"), signal.SIGKILL)
                    # Slurm's clients retry connecting for ~9 s: an outage shorter than the source
                    # timeout is ridden out (seen), a longer one breaks the pulls
                    time.sleep(rng.uniform(0.5, 5))
                    sc.restart_ctld()
                    wait_until(ctld_up, 60, "slurmctld not back")
                elif kind in ("hang-slurmctld", "hang-slurmdbd"):
                    name = kind.removeprefix("hang-")
                    pid = daemon_pid(name)
                    os.kill(pid, signal.SIGSTOP)
                    time.sleep(TIMEOUT + rng.uniform(1, 3))
                    os.kill(pid, signal.SIGCONT)
                    wait_until(ctld_up if name == "slurmctld" else dbd_up, 60, f"{name} not answering after SIGCONT")
                elif kind in ("kill-slurmdbd", "kill-mariadb"):
                    os.kill(daemon_pid("slurmdbd" if kind == "kill-slurmdbd" else "mariadbd"), signal.SIGKILL)
                    time.sleep(rng.uniform(0.5, 3))
                    up()
                    wait_until(dbd_up, 60, "slurmdbd not back")
                elif kind == "disk-full":
                    state_disk.fill()
                    perturb()
                    time.sleep(2 * PERIOD + rng.uniform(0, PERIOD))
                    fault["full_until"] = time.time()
                    state_disk.free()
            finally:
                fault["t1"] = time.time()
            # the first cycle that started once the service was back
            first = wait_audit(audit, lambda r: r["started"] >= fault["t1"], 60)
            f_now = factors_now()
            fault.update(first_cycle=first["cycle"], first_outcome=first["outcome"], first_error=first["error"],
                         first_pushed=len(first["pushed"]))
            # The owner's nice each job may hold now.  A SIGKILLed slurmctld comes back from its last
            # saved state and loses the job updates it acknowledged since (seen: the owners' changes and
            # our pushes of the last seconds, even of the fault before), so after that fault Slurm may
            # hold any nice an owner set; never a value of ours taken for one (a double contribution).
            allowed = {j: set(base[j]) if kind == "kill-slurmctld" else {cur[j]} for j in jobs}
            fault["first_ok"] = first["outcome"] == "success" and all(
                abs(p["contribution"] - round(W * f_now[owner[p["job_id"]]])) <= 1
                and p["new"] + p["contribution"] in allowed[p["job_id"]] for p in first["pushed"])
            now = pending_nice()
            fault["state_ok"] = all(j in now and now[j] + round(W * f_now[owner[j]]) in allowed[j] for j in jobs)
            for j in jobs:  # what Slurm holds is the owner's nice from now on
                if j in now and now[j] + round(W * f_now[owner[j]]) != cur[j]:
                    cur[j] = now[j] + round(W * f_now[owner[j]])
                    fault.setdefault("rolled_back", []).append(j)
            fault["alive"] = d.proc.poll() is None
            faults.append(fault)
            print(f"fault {n:2d} {kind:15s} stage={stage:4s} first cycle {first['cycle']} {first['outcome']}"
                  f" pushed {len(first['pushed'])} ok={fault['first_ok'] and fault['state_ok']}"
                  + (f" (Slurm lost the owners' nice of jobs {fault['rolled_back']})"
                     if fault.get("rolled_back") and fault["state_ok"] else ""), flush=True)
            if not (fault["first_ok"] and fault["state_ok"]):
                print(f"  pushed {[(p['job_id'], p['new'], p['contribution']) for p in first['pushed']]}; "
                      f"squeue nice {now}; owners' nice {allowed}", flush=True)
            if not fault["alive"]:
                break
        mon.halt.set()
        mon.join(10)
        alive = d.proc.poll() is None
    finally:
        mon.halt.set()
        heal()
        code = d.stop()

    lines = audit_lines(audit)
    by_cycle = {r["cycle"]: r for r in lines}
    known_bases = {j: set(v) for j, v in base.items()}

    # -- every push came from a complete, consistent snapshot -----------------------------------------
    bad = []
    for r in lines:
        if not r["pushed"]:
            continue
        why = []
        if r["outcome"] not in ("success", "push_failed") or r["assocs"] is None:
            why.append(f"pushed after outcome {r['outcome']}")
        else:
            if r["associations"] != len(ref["assocs"]) or structure(r["assocs"]) != ref_structure:
                why.append("association tree differs from the reference")
            seen = {j[0] for j in r["jobs"] if j[4] == "PENDING"}
            if not set(jobs) <= seen:
                why.append(f"pending jobs missing: {sorted(set(jobs) - seen)}")
            f = factors_of(r["assocs"])
            for p in r["pushed"]:
                a_u = owner.get(p["job_id"])
                if a_u is None or p["contribution"] != round(r["weight"] * f[a_u]):
                    why.append(f"job {p['job_id']}: contribution {p['contribution']} is not W·F of the snapshot")
                elif p["new"] + p["contribution"] not in known_bases[p["job_id"]]:
                    why.append(f"job {p['job_id']}: nice {p['new']} is no owner's nice minus {p['contribution']}")
                if a_u is not None and abs(p["contribution"] - round(W * reference[a_u])) > 1:
                    why.append(f"job {p['job_id']}: contribution {p['contribution']} differs from the reference "
                               f"{round(W * reference[a_u])}")
        if why:
            bad.append((r["cycle"], why))

    # -- nothing pushed while the state disk was full (nice mode) ------------------------------------
    for fault in faults:
        if fault["kind"] == "disk-full":
            for r in lines:
                if r["started"] >= fault["t0"] + 0.5 and r["finished"] <= fault["full_until"]:
                    assert not r["pushed"], (fault, r["cycle"])
            fault["refused"] = sum(1 for r in lines if fault["t0"] <= r["started"] <= fault["full_until"]
                                   and r["outcome"] == "push_failed" and "push state" in (r["error"] or ""))

    # -- stale exactly when the last cycle computed nothing ------------------------------------------
    stale_mismatch = [(s, by_cycle[s["cycles"]]["outcome"]) for s in mon.scrapes if s["cycles"] in by_cycle
                      and s["stale"] != int(by_cycle[s["cycles"]]["outcome"] in ("pull_failed", "compute_failed"))]
    for fault in faults:
        window = [r for r in lines if fault["t0"] - PERIOD <= r["started"] <= fault["t1"]]
        fault["failed_cycles"] = sum(r["outcome"] != "success" for r in window)
        fault["stale_seen"] = any(s["stale"] == 1 for s in mon.scrapes if fault["t0"] <= s["t"] <= fault["t1"] + PERIOD)

    injected = len(faults)
    survived = sum(1 for f in faults if f["alive"] and f["first_ok"] and f["state_ok"])
    with capsys.disabled():  # the summary shows in every run, not only with -s
        print()
        print(f"faults injected / survived / pushes from bad data: {injected} / {survived} / {len(bad)}", flush=True)
        outcomes = {}
        for r in lines:
            outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
        print(f"cycles {len(lines)} {outcomes}; scrapes {len(mon.scrapes)} (stale=1 in "
              f"{sum(s['stale'] == 1 for s in mon.scrapes)}); seed {SEED}", flush=True)
        for kind in KINDS:
            these = [f for f in faults if f["kind"] == kind]
            print(f"  {kind:15s} x{len(these)}: cycles failed around it {sum(f['failed_cycles'] for f in these)}, "
                  f"stale seen in {sum(f['stale_seen'] for f in these)}, recovery pushes "
                  f"{sum(f['first_pushed'] for f in these)}", flush=True)
    assert alive and mon.died_at is None, d.log()[-3000:]
    assert code == 0
    assert not mon.errors, mon.errors[:5]
    assert injected >= 20
    assert not bad, bad[:5]
    assert not stale_mismatch, stale_mismatch[:5]
    # a stopped slurmctld always breaks a cycle (a killed one may come back within a client's retries)
    assert all(f["failed_cycles"] >= 1 for f in faults if f["kind"] == "hang-slurmctld"), \
        [f for f in faults if f["kind"] == "hang-slurmctld" and not f["failed_cycles"]]
    assert outcomes.get("pull_failed", 0) >= 1
    # with the disk full, the owners' changes were planned and refused (nothing pushed: checked above)
    assert all(f["refused"] >= 1 for f in faults if f["kind"] == "disk-full"), \
        [f for f in faults if f["kind"] == "disk-full" and not f["refused"]]
    assert any(f["stale_seen"] for f in faults), "fairshared_stale never seen at 1"
    assert sum(f["first_pushed"] for f in faults) >= 3, "the recovery cycles pushed (almost) nothing"
    assert [f for f in faults if not f["first_ok"]] == []
    assert [f for f in faults if not f["state_ok"]] == []
    assert survived == injected
    # every fault aimed at a stage of the cycle (the pull, the push) hit it
    aimed = [f for f in faults if f["stage"] != "any"]
    assert len(aimed) >= 4 and [f for f in aimed if not f.get("stage_seen")] == [], \
        [(f["n"], f["kind"], f["stage"]) for f in aimed if not f.get("stage_seen")]


def test_a_hung_slurmctld_fails_the_read_without_the_sshare_fallback(cluster):
    """Seen in the fault suite (22.05.8 and 26.05.3): slurmctld stopped while the daemon read
    ``scontrol show assoc_mgr``; its timeout sent the read to the sshare+sacctmgr fallback, whose
    sshare waited on slurmctld again, got its answer once it was continued, and the cycle
    "succeeded" after 5.8 s: twice the source timeout on a hung slurmctld, with the fallback's
    coarser usage.  The fallback is for a *refused* assoc_mgr; a timeout fails the read at once."""
    from fairshared.records import SourceTimeout
    from fairshared.sources.slurm_cli import SlurmCli

    timeout = 2.0
    cli = SlurmCli(timeout=timeout, env=sc.cluster_env())
    pid = daemon_pid("slurmctld")
    with cli.one_read():
        cli.config()  # answered before the stop; the read takes it from its memo below
        os.kill(pid, signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            with pytest.raises(SourceTimeout, match=r"`scontrol show assoc_mgr` did not answer within 2 s"):
                cli.snapshot()
            took = time.monotonic() - t0
        finally:
            os.kill(pid, signal.SIGCONT)
    wait_until(ctld_up, 60, "slurmctld not answering after SIGCONT")
    ran = [c for c, _ in cli.calls]
    # no sshare, no sacctmgr after the timeout
    assert ran == ["scontrol show config", "scontrol show assoc_mgr flags=assoc"], ran
    assert timeout <= took < timeout + 1.5, took
    # and once it answers again, the same reader reads the whole tree from assoc_mgr
    snap = cli.snapshot()
    assert snap.source == "slurm-cli (scontrol show assoc_mgr)"
    assert {("fta", "ftu1"), ("ftb", "ftu3")} <= {(a.account, a.user) for a in snap.associations}
