"""What to write to which pending job: pure functions, no I/O.

    contribution c = round(W · F)        W = our fair-share weight, F = the job's user factor
    site_factor:  SiteFactor = c                          (Slurm adds it to its own factors)
    nice:         Nice = owner's own nice − c             (priority rises by c; the owner's nice survives)

Only jobs whose value differs from what Slurm holds get an action, so a cycle
with unchanged inputs plans nothing.  Values are clamped to Slurm's limits
(|SiteFactor|, |Nice| <= 2147483645 = NICE_OFFSET − 3).  Held jobs (priority 0)
are left alone.

The *push state* remembers, per job, the value we last wrote and (nice mode)
the owner's own nice underneath it.  It survives restarts on disk, so a
restart never applies a contribution twice: SiteFactor is absolute anyway, and
in nice mode a job whose nice still equals what we wrote keeps its recorded
base, while a job whose nice changed (its owner ran ``scontrol update nice=``)
takes the new value as its base.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .engine.result import Result
from .model import Job
from .sinks.base import PushAction

LIMIT = 2147483645  # NICE_OFFSET - 3: bound of SiteFactor and Nice


def clamp(v: int, lo: int = -LIMIT, hi: int = LIMIT) -> int:
    return max(lo, min(hi, v))


@dataclass
class JobState:
    value: int  # what we last wrote
    base: int = 0  # nice mode: the owner's own nice under it


@dataclass
class PushState:
    """Per-job memory of what was pushed, keyed by job id (see module docstring)."""

    mode: str
    jobs: dict[int, JobState] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"version": 1, "mode": self.mode,
                "jobs": {str(k): {"value": v.value, "base": v.base} for k, v in self.jobs.items()}}

    @classmethod
    def from_dict(cls, d: dict, mode: str) -> "PushState":
        if not isinstance(d, dict) or d.get("version") != 1 or d.get("mode") != mode:
            return cls(mode)  # another mode's memory means nothing here
        jobs = {}
        for k, v in (d.get("jobs") or {}).items():
            try:
                jobs[int(k)] = JobState(int(v["value"]), int(v.get("base", 0)))
            except (KeyError, TypeError, ValueError):
                continue
        return cls(mode, jobs)


def user_factors(result: Result) -> dict[tuple[str, str, str | None], float]:
    """Fair-share factor of every user association, keyed (account, user, partition)."""
    t = result.tree
    users = np.flatnonzero(t.is_user)
    return {(t.account[i], t.user[i], t.partition[i]): float(result.fairshare[i]) for i in users}


def job_factor(job: Job, factors: dict) -> float | None:
    """The factor of the association a job charges: per-partition first, then the plain one.

    A job submitted to several partitions (``a,b``) uses the first that has a
    per-partition association.  None when the job's association is unknown.
    """
    for part in job.partition.split(","):
        f = factors.get((job.account, job.user, part or None))
        if f is not None:
            return f
    return factors.get((job.account, job.user, None))


def contribution(weight: int, factor: float) -> int:
    """c = round(W · F), in [0, W]; a NaN factor (no value) contributes 0."""
    if not factor == factor:
        return 0
    return int(round(weight * factor))


def plan(jobs: list[Job], result: Result, *, mode: str, weight: int, state: PushState,
         current_site_factor: dict[int, int] | None = None) -> tuple[list[PushAction], PushState, list[Job]]:
    """Actions for the pending jobs, the push state they lead to, and the jobs skipped (no association).

    ``current_site_factor`` is what slurmctld holds per job when the source can
    read it (sprio); otherwise the push state's memory stands in for it.
    """
    factors = user_factors(result)
    actions: list[PushAction] = []
    new_state = PushState(mode)
    unknown: list[Job] = []
    for job in jobs:
        if job.state != "PENDING" or job.priority == 0:
            continue  # held or no longer pending: leave alone
        f = job_factor(job, factors)
        if f is None:
            unknown.append(job)
            continue
        c = contribution(weight, f)
        prev = state.jobs.get(job.job_id)
        if mode == "site_factor":
            new = clamp(c)
            if current_site_factor is not None and job.job_id in current_site_factor:
                old: int | None = current_site_factor[job.job_id]
            else:
                old = prev.value if prev else None
            new_state.jobs[job.job_id] = JobState(new)
        elif mode == "nice":
            base = prev.base if prev is not None and job.nice == prev.value else job.nice
            new = clamp(base - c)
            old = job.nice
            new_state.jobs[job.job_id] = JobState(new, base)
        else:
            raise ValueError(f"unknown push mode {mode!r}")
        if new != old:
            actions.append(PushAction(job_id=job.job_id, field=mode, new=new, old=old, contribution=c,
                                      user=job.user, account=job.account, partition=job.partition))
    return actions, new_state, unknown
