"""The built-in simulated cluster: ``fairshared run --demo`` and every command's ``--demo``.

A small university tree (FairShare=parent users and accounts, a 0-share user, a user in two
accounts, the root user) whose users run jobs at their own pace.  The cluster is a **pure function
of the wall-clock time**: time is cut into calc periods of 15 s since :data:`EPOCH` (2026-01-01
00:00 UTC), and what happens in period k (who charges usage, which jobs are submitted, how long
each waits) is drawn from a hash of (seed, k, user), never from a running random generator.  So
the daemon at time T and ``fairshared sprio --demo --at T`` see the same cluster: the same usage,
the same pending job ids, the same weights.

Usage decays by slurmctld's factor per period (:meth:`fairshared.usage.UsagePolicy.period_decay`,
half-life 1 h), summed over the last :data:`WINDOW` periods (40 half-lives: what is older weighs
under 10^-12).  A job submitted in period k waits a geometric number of periods (a quarter start
each period); job ids count up by :data:`SLOTS` per period, wrapping at Slurm's MaxJobId.

The daemon's pushes are the only state: :class:`DemoCluster` keeps what the demo's job updater
(:class:`fairshared.sinks.push_demo.DemoUpdater`) wrote (SiteFactor, Nice or Priority) per job id
while the job is pending, so a cycle with nothing new pushes nothing.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import replace

import numpy as np

from ..model import PARENT, Association, ClusterInfo, Job, PartitionInfo, Shares, Snapshot
from ..records import AssocPriority
from ..settings import ClusterSettings
from ..usage import UsagePolicy
from .base import Source

# (account, user, parent account, shares) in sibling order; a user row's parent is its account
TREE: list[tuple[str, str | None, str | None, Shares]] = [
    ("root", None, None, 1),
    ("root", "root", None, 1),
    ("physics", None, "root", 40),
    ("physics", "alice", None, 10),
    ("physics", "bob", None, 10),
    ("astro", None, "physics", 20),
    ("astro", "carol", None, 1),
    ("astro", "dan", None, 1),
    ("astro", "erin", None, PARENT),
    ("theory", None, "physics", PARENT),
    ("theory", "frank", None, 1),
    ("theory", "gina", None, 3),
    ("chemistry", None, "root", 35),
    ("chemistry", "hana", None, 1),
    ("chemistry", "ivan", None, 1),
    ("chemistry", "alice", None, 1),
    ("biology", None, "root", 25),
    ("genomics", None, "biology", 3),
    ("genomics", "jo", None, 1),
    ("genomics", "kim", None, 0),
    ("imaging", None, "biology", 2),
    ("imaging", "lee", None, 1),
]
# how hungry each user is (CPU-seconds per second while active) and how often active
APPETITE = {"alice": (900, 0.6), "bob": (200, 0.3), "carol": (1500, 0.5), "dan": (50, 0.2),
            "erin": (400, 0.4), "frank": (100, 0.3), "gina": (0, 0.0), "hana": (2500, 0.7),
            "ivan": (300, 0.4), "jo": (600, 0.3), "kim": (100, 0.2), "lee": (0, 0.1), "root": (0, 0.0)}
PARTITIONS = ("batch", "gpu")

PERIOD = 15  # PriorityCalcPeriod, seconds
HALF_LIFE = 3600  # PriorityDecayHalfLife, seconds

# The demo cluster's slurm.conf, for the daemon and the commands alike.
CONFIG: dict[str, object] = {
    "cluster_name": "demo",
    "slurm_version": "25.11",  # whose sprio -l it prints (ACCOUNT and QOSNAME columns)
    "priority_type": "priority/multifactor",
    "priority_flags": [],
    "dampening": 1,
    "half_life_seconds": HALF_LIFE,
    "calc_period_seconds": PERIOD,
    "usage_reset_period": "NONE",
    "max_age_seconds": 300,
    "favor_small": False,
    "weight_age": 1000,
    "weight_assoc": 0,
    "weight_fairshare": 10000,
    "weight_jobsize": 500,
    "weight_partition": 1000,
    "weight_qos": 2000,
    "weight_tres": {},
    "accounting_storage_enforce": ["associations", "limits"],
    "site_factor_plugin": None,
}
SETTINGS = ClusterSettings.from_dict(CONFIG)
# push mode assoc_priority: the demo's slurm.conf as that mode needs it (push_assoc.cluster_problem)
ASSOC_SETTINGS = SETTINGS.with_values(weight_assoc=1, weight_fairshare=0, priority_flags=["NO_NORMAL_ASSOC"])
EPOCH = 1_767_225_600  # period 0 starts at 2026-01-01 00:00 UTC
SEED = 42
WINDOW = 40 * HALF_LIFE // PERIOD  # periods of usage history summed
MAX_WAIT = 64  # periods a job may wait at most (0.75^64: one job in 10^8 would wait longer)
FIRST_JOB_ID, MAX_JOB_ID = 1000, 67_043_328  # Slurm's FirstJobId default is 1; MaxJobId's default
USERS = [(a, u) for a, u, _, _ in TREE if u]  # the user associations, in tree order
SLOTS = len(USERS)  # job ids per period: one per user association
CPUS = (1, 4, 16, 64, 8)  # a job's CPUs (and nodes: 1 per 16 CPUs), by job id
CLUSTER = ClusterInfo(
    partitions={"batch": PartitionInfo("batch", priority_job_factor=1, priority_tier=1, max_time=None),
                "gpu": PartitionInfo("gpu", priority_job_factor=10, priority_tier=1, max_time=None)},
    qos_priority={"normal": 0, "high": 100}, node_count=16, cpu_count=1024, slurm_version=(25, 11))


def clock() -> float:
    """The demo's wall clock (tests pin it: the ``demo_now`` fixture)."""
    return time.time()


def period_at(t: float) -> int:
    """The calc period that time ``t`` (Unix seconds) falls in; the cluster at t is its state after it."""
    return math.floor((t - EPOCH) / PERIOD)


def period_start(k: int) -> int:
    return EPOCH + k * PERIOD


# --- the draws: a hash of (seed, stream, period, slot), uniform in [0, 1) -------------------------------


_M1, _M2, _M3 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _uniform(seed: int, stream: int, k: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser over the four numbers: the same inputs, the same draw, in any order."""
    with np.errstate(over="ignore"):
        x = (np.asarray(k, dtype=np.int64).view(np.uint64) * _M1) ^ (np.asarray(slot, dtype=np.uint64) * _M2)
        x ^= np.uint64((seed * 1_000_003 + stream) & 0xFFFFFFFFFFFFFFFF) * _M3
        x ^= x >> np.uint64(30)
        x *= _M2
        x ^= x >> np.uint64(27)
        x *= _M3
        x ^= x >> np.uint64(31)
    return (x >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


_ACTIVE, _AMOUNT, _SUBMIT, _WAIT, _PART, _NICE, _FILL_USER, _FILL_PART = range(8)
_RATE = np.array([APPETITE[u][0] for _, u in USERS], dtype=float)
_P = np.array([APPETITE[u][1] for _, u in USERS], dtype=float)
_DECAY = float(UsagePolicy.from_settings(SETTINGS).period_decay())


def usage_at(n: int, seed: int = SEED) -> dict[tuple[str, str], float]:
    """Each user association's raw usage after period n: Σ_j d^j · charge(n − j) over the window."""
    k = np.arange(n - WINDOW + 1, n + 1, dtype=np.int64)[:, None]
    slot = np.arange(SLOTS, dtype=np.uint64)[None, :]
    active = _uniform(seed, _ACTIVE, k, slot) < _P
    charge = np.where(active, _RATE * PERIOD * (0.5 + _uniform(seed, _AMOUNT, k, slot)), 0.0)
    weights = _DECAY ** np.arange(WINDOW - 1, -1, -1, dtype=float)[:, None]
    total = (charge * weights).sum(axis=0)
    return {key: round(float(v), 2) for key, v in zip(USERS, total)}


def jobs_at(n: int, seed: int = SEED) -> list[Job]:
    """The jobs pending after period n: submitted in period k ≤ n, waiting more than n − k periods."""
    k = np.arange(n - MAX_WAIT + 1, n + 1, dtype=np.int64)[:, None]
    slot = np.arange(SLOTS, dtype=np.uint64)[None, :]
    submitted = _uniform(seed, _SUBMIT, k, slot) < _P * 0.5
    u = _uniform(seed, _WAIT, k, slot)
    waits = 1 + np.floor(np.log1p(-u) / math.log(0.75))  # geometric: a quarter start each period
    pending = submitted & (n - k < waits)
    gpu = _uniform(seed, _PART, k, slot) < 0.5
    nice = _uniform(seed, _NICE, k, slot) < 0.1
    jobs = []
    for row, col in zip(*np.nonzero(pending)):
        kk = int(k[row, 0])
        acct, user = USERS[col]
        if user == "root":
            continue
        jid = FIRST_JOB_ID + (kk * SLOTS + int(col)) % (MAX_JOB_ID - FIRST_JOB_ID)
        cpus = CPUS[jid % len(CPUS)]
        t = period_start(kk)
        jobs.append(Job(job_id=jid, display_id=str(jid), user=user, account=acct,
                        partition=PARTITIONS[int(gpu[row, col])], qos="high" if jid % 7 == 0 else "normal",
                        priority=1000, nice=100 if nice[row, col] else 0, state="PENDING", site_factor=0,
                        submit_time=t, eligible_time=t, accrue_time=t, cpus=cpus, min_nodes=1 + cpus // 16))
    return sorted(jobs, key=lambda j: j.job_id)


FILL_FIRST = MAX_JOB_ID + 1  # the big queue's job ids: above the small demo's, which wrap at MaxJobId
FILL_LIFE = 4  # periods a filler job waits: a quarter of the big queue starts each period
FILL_USERS = [i for i, (_, u) in enumerate(USERS) if u != "root"]


def filler_jobs(n: int, count: int, seed: int = SEED) -> list[Job]:
    """``count`` more pending jobs after period n, a big queue for benchmarks (``source.demo_jobs``).

    Slot s holds one job at a time; it starts after :data:`FILL_LIFE` periods and the slot's next
    job takes its place (slots are staggered: a quarter change each period).  A pure function of
    (n, count, seed), like the rest of the demo."""
    if count <= 0:
        return []
    slot = np.arange(count, dtype=np.int64)
    phase = slot % FILL_LIFE
    gen = (n + phase) // FILL_LIFE
    who = np.asarray(FILL_USERS)[(_uniform(seed, _FILL_USER, gen, slot) * len(FILL_USERS)).astype(int)]
    gpu = _uniform(seed, _FILL_PART, gen, slot) < 0.3
    ids = FILL_FIRST + gen * count + slot
    since = EPOCH + (gen * FILL_LIFE - phase) * PERIOD
    jobs = []
    for jid, u, g, t in zip(ids.tolist(), who.tolist(), gpu.tolist(), since.tolist()):
        acct, user = USERS[u]
        jobs.append(Job(job_id=jid, display_id=str(jid), user=user, account=acct, partition=PARTITIONS[g],
                        qos="normal", priority=1000, nice=0, state="PENDING", site_factor=0,
                        submit_time=t, eligible_time=t, accrue_time=t, cpus=CPUS[jid % len(CPUS)],
                        min_nodes=1))
    return jobs


def demo_inputs(t: float, seed: int = SEED, pending_jobs: int | None = None) -> Snapshot:
    """The demo cluster at time ``t``, read with details: tree, usage, :data:`CONFIG`, partitions, QOS
    and pending jobs.

    The one function behind ``fairshared run --demo`` (through :class:`DemoSource`) and every
    command's ``--demo``; evaluated at ``t`` (slurmctld's last calculation: the period's start).
    ``pending_jobs`` (``source.demo_jobs``): the queue topped up to that many jobs (:func:`filler_jobs`).
    """
    n = period_at(t)
    usage = usage_at(n, seed)
    assocs = [Association(acct, user, parent if user is None else acct, shares,
                          usage[(acct, user)] if user else None, None, i)
              for i, (acct, user, parent, shares) in enumerate(TREE)]
    jobs = jobs_at(n, seed)
    if pending_jobs is not None:
        jobs += filler_jobs(n, pending_jobs - len(jobs), seed)
    return Snapshot(associations=assocs, cluster="demo", source="demo", taken_at=float(t), sibling_order="lft",
                    settings=SETTINGS, jobs=jobs, cluster_info=CLUSTER, last_calc=period_start(n),
                    evaluated_at=float(t))


class DemoCluster:
    """The demo for the daemon: :func:`demo_inputs` at the clock, plus what the daemon pushed."""

    def __init__(self, seed: int = SEED, clock=None, pending_jobs: int | None = None,
                 assoc_mode: bool = False, private_data: tuple[str, ...] = ()):
        self.seed = seed
        # slurm.conf's PrivateData for this demo (tests of the API's privacy set it): () = none
        self.private_data = tuple(private_data)
        # push mode assoc_priority: the demo's slurm.conf counts each association's Priority
        # (ASSOC_SETTINGS), and what DemoAssocs wrote is kept by association id (TREE's index + 1)
        self.assoc_mode = assoc_mode
        self.assoc_priority: dict[int, int] = {}
        self.clock = clock or (lambda: globals()["clock"]())  # looked up at each call: tests pin it
        # source.demo_jobs: the queue topped up to this many jobs (a big cluster's queue, for
        # benchmarks); None: the small demo's own jobs only
        self.pending_jobs = pending_jobs
        self.pushed: dict[int, dict] = {}  # job id → the fields DemoUpdater set
        self.lock = threading.Lock()
        self._period: tuple[int, Snapshot, frozenset] | None = None  # the last period's snapshot

    def _at(self, t: float) -> tuple[Snapshot, frozenset]:
        """demo_inputs at t, computed once per period (a 50,000-job queue is not rebuilt per update)."""
        n = period_at(t)
        if self._period is None or self._period[0] != n:
            snap = demo_inputs(t, self.seed, self.pending_jobs)
            self._period = (n, snap, frozenset(j.job_id for j in snap.jobs))
        return replace(self._period[1], evaluated_at=float(t), taken_at=float(t)), self._period[2]

    def pending(self, job_id: int) -> bool:
        return job_id in self._at(self.clock())[1]

    def inputs(self) -> Snapshot:
        """The cluster now, with details and what the daemon pushed."""
        snap, _ = self._at(self.clock())
        with self.lock:
            live = {j.job_id for j in snap.jobs}
            self.pushed = {jid: v for jid, v in self.pushed.items() if jid in live}  # started: forgotten
            jobs = [replace(j, **self.pushed[j.job_id]) if j.job_id in self.pushed else j for j in snap.jobs]
            if self.assoc_mode:
                prio = {(a, u): self.assoc_priority.get(i + 1, 0) for i, (a, u, _, _) in enumerate(TREE) if u}
                jobs = [replace(j, assoc_priority=prio.get((j.account, j.user), 0)) for j in jobs]
                snap = replace(snap, settings=ASSOC_SETTINGS)
            if self.private_data:
                snap = replace(snap, settings=snap.settings.with_values(private_data=list(self.private_data)))
        return replace(snap, jobs=jobs)

    def assoc_rows(self) -> list[AssocPriority]:
        """Every association with its own Priority, as ``sacctmgr show assoc WOPLimits`` gives them."""
        with self.lock:
            return [AssocPriority(i + 1, a, u, None, self.assoc_priority.get(i + 1))
                    for i, (a, u, _, _) in enumerate(TREE)]

    @property
    def jobs(self) -> dict[int, Job]:
        return {j.job_id: j for j in self.inputs().jobs}


class DemoSource(Source):
    name = "demo"
    reads_details = True

    def __init__(self, cluster: DemoCluster | None = None):
        self.cluster = cluster or DemoCluster()

    def snapshot(self, *, jobs: bool = True, details: bool = False) -> Snapshot:
        snap = self.cluster.inputs()
        if not details:
            snap = replace(snap, cluster_info=None)
        return snap if jobs else replace(snap, jobs=[])
