"""A simulated cluster for ``fairshared run --demo``: no Slurm needed.

A small university tree (FairShare=parent users and accounts, a 0-share user,
a user in two accounts, the root user) whose users run jobs at their own pace;
usage decays with a half-life as in slurmctld, new jobs arrive and queued ones
start.  Every ``snapshot()`` advances the simulated clock by one calc period, so
the metrics move like a live cluster's.  :class:`DemoUpdater` applies pushes to
the simulated queue, so a cycle with nothing new pushes nothing.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import replace

from ..model import PARENT, Association, Job, Snapshot
from ..priority import ClusterInfo, PartitionInfo, PriorityInputs
from ..sinks.base import JobGone, PushAction

TREE = [
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

CONFIG = {
    "cluster_name": "demo",
    "slurm_version": "demo",
    "priority_type": "priority/multifactor",
    "priority_flags": [],
    "dampening": 1,
    "half_life_seconds": 3600,
    "calc_period_seconds": 15,
    "usage_reset_period": "NONE",
    "max_age_seconds": 86400,
    "favor_small": False,
    "weight_age": 1000,
    "weight_assoc": 0,
    "weight_fairshare": 0,
    "weight_jobsize": 0,
    "weight_partition": 1000,
    "weight_qos": 0,
    "weight_tres": {},
    "accounting_storage_enforce": ["associations", "limits"],
    "site_factor_plugin": None,
}


# What ``fairshared sprio/explain/compare --demo`` evaluate the queue with.  The daemon's CONFIG has
# PriorityWeightFairshare 0 because it pushes the factor itself (as SiteFactor); the offline
# commands show the factor inside the priority instead, beside age, job size, partition and QOS.
PRIORITY_CONFIG = {**CONFIG, "weight_fairshare": 10000, "weight_age": 1000, "weight_jobsize": 500,
                   "weight_partition": 1000, "weight_qos": 2000, "max_age_seconds": 300}
EPOCH = 1_767_225_600  # the simulated clock's 0: 2026-01-01 00:00 UTC (job times are Unix seconds)
CPUS = (1, 4, 16, 64, 8)  # a job's CPUs (and nodes: 1 per 16 CPUs), by job id


class DemoCluster:
    """The simulated cluster's state; shared by the demo source and updater."""

    def __init__(self, seed: int = 42, step: float | None = None, pending_jobs: int | None = None):
        self.rng = random.Random(seed)
        self.step = step or CONFIG["calc_period_seconds"]
        # source.demo_jobs: the queue is topped up to this many jobs every period (a big cluster's
        # queue for benchmarks); None: the small demo's own arrivals only
        self.pending_jobs = pending_jobs
        self.now = 0.0
        self.usage = {(a, u): 0.0 for a, u, _, _ in TREE if u}
        self.jobs: dict[int, Job] = {}
        self.next_id = 1000
        self.lock = threading.Lock()
        for _ in range(3):
            self.advance()

    def advance(self) -> None:
        """One calc period: decay, charge the active users, queue churn."""
        decay = 0.5 ** (self.step / CONFIG["half_life_seconds"])
        for key in self.usage:
            self.usage[key] *= decay
            rate, p = APPETITE[key[1]]
            if self.rng.random() < p:
                self.usage[key] += rate * self.step * self.rng.uniform(0.5, 1.5)
        for jid in [j for j in self.jobs if self.rng.random() < 0.25]:
            del self.jobs[jid]  # started (or cancelled)
        owners = [k for k in self.usage if k[1] != "root"]
        for acct, user in owners:
            if self.rng.random() < APPETITE[user][1] * 0.5:
                self._submit(acct, user)
        while self.pending_jobs is not None and len(self.jobs) < self.pending_jobs:
            self._submit(*self.rng.choice(owners))
        self.now += self.step

    def _submit(self, acct: str, user: str) -> None:
        self.jobs[self.next_id] = Job(
            job_id=self.next_id, display_id=str(self.next_id), user=user, account=acct,
            partition=self.rng.choice(PARTITIONS), qos="normal", priority=1000,
            nice=100 if self.rng.random() < 0.1 else 0, state="PENDING", site_factor=0,
            submit_time=EPOCH + int(self.now), eligible_time=EPOCH + int(self.now),
            accrue_time=EPOCH + int(self.now))
        self.next_id += 1

    def associations(self) -> list[Association]:
        out = []
        for i, (acct, user, parent, shares) in enumerate(TREE):
            usage = self.usage[(acct, user)] if user else None
            out.append(Association(acct, user, parent if user is None else acct, shares,
                                   None if usage is None else round(usage, 2), None, i))
        return out


class DemoSource:
    name = "demo"

    def __init__(self, cluster: DemoCluster | None = None):
        self.cluster = cluster or DemoCluster()

    def snapshot(self, *, jobs: bool = True) -> Snapshot:
        c = self.cluster
        with c.lock:
            c.advance()
            return Snapshot(associations=c.associations(), cluster="demo", source="demo", taken_at=time.time(),
                            sibling_order="lft", config=dict(CONFIG),
                            jobs=list(c.jobs.values()) if jobs else [])


def demo_priority_inputs(cluster: DemoCluster | None = None, periods: int = 20) -> PriorityInputs:
    """The simulated cluster after ``periods`` more calc periods, as ``sprio``/``explain``/``compare
    --demo`` read it: the tree, :data:`PRIORITY_CONFIG`, two partitions, two QOS and the queue.

    Deterministic (the same seed gives the same figures), evaluated at the simulated clock.
    """
    c = cluster or DemoCluster()
    with c.lock:
        for _ in range(periods):
            c.advance()
        now = EPOCH + int(c.now)
        snap = Snapshot(associations=c.associations(), cluster="demo", source="demo", taken_at=float(now),
                        sibling_order="lft", config=dict(PRIORITY_CONFIG))
        jobs = [replace(j, cpus=CPUS[j.job_id % len(CPUS)], min_nodes=1 + CPUS[j.job_id % len(CPUS)] // 16,
                        qos="high" if j.job_id % 7 == 0 else "normal") for j in c.jobs.values()]
    cluster_info = ClusterInfo(
        partitions={"batch": PartitionInfo("batch", priority_job_factor=1, priority_tier=1, max_time=None),
                    "gpu": PartitionInfo("gpu", priority_job_factor=10, priority_tier=1, max_time=None)},
        qos_priority={"normal": 0, "high": 100}, node_count=16, cpu_count=1024)
    return PriorityInputs(snapshot=snap, cluster=cluster_info, jobs=jobs, last_calc=now, evaluated_at=now)


class DemoUpdater:
    name = "demo"

    def __init__(self, cluster: DemoCluster):
        self.cluster = cluster

    def apply(self, action: PushAction) -> None:
        c = self.cluster
        with c.lock:
            job = c.jobs.get(action.job_id)
            if job is None:
                raise JobGone(f"job {action.job_id} is no longer pending")
            if action.field == "site_factor":
                c.jobs[action.job_id] = replace(job, site_factor=action.new)
            elif action.field == "nice":
                c.jobs[action.job_id] = replace(job, nice=action.new)
