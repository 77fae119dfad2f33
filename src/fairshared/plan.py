"""What to write to which pending job: pure functions, no I/O.

    contribution c = round(W · F)        W = our fair-share weight, F = the job's user factor
                 c = round(W · round(F · L) / L)   with push.levels L > 0: F on L + 1 levels, so
                                      a drift smaller than a level updates no job (see contribution)
    site_factor:  SiteFactor = c                          (Slurm adds it to its own factors)
    nice:         Nice = owner's own nice − c             (priority rises by c; the owner's nice survives)
    priority:     Priority = P(job) with F in its fair-share term (priority.py), which *fixes* the
                  job's priority: slurmctld stops recalculating it until we push again

Only jobs whose value differs from what Slurm holds get an action, so a cycle
with unchanged inputs plans nothing.  Values are clamped to Slurm's limits
(|SiteFactor|, |Nice| <= 2147483645 = NICE_OFFSET − 3; Priority in
[1, 2^32 − 3]).  Held jobs (priority 0) are left alone, and so are jobs whose
priority an operator fixed (``scontrol update priority=``) unless the config
says otherwise.

The *push state* remembers, per job, the value we last wrote and (nice mode)
the owner's own nice underneath it.  It survives restarts on disk, so a
restart never applies a contribution twice: SiteFactor is absolute anyway, and
in nice mode a job whose nice still equals what we wrote keeps its recorded
base, while a job whose nice changed (its owner ran ``scontrol update nice=``)
takes the new value as its base.  Before a push the state is saved with both
the old and the new value as ours (``alt``), so a daemon killed half-way
through a push recognises either value on restart.  In nice and priority modes
both stay ours after the push too (until the next one): an update that timed out
may still be carried out later, and a slurmctld killed before saving its state
comes back with the old value.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .engine.result import Result
from .model import Job
from .priority import job_priority
from .records import PushAction

LIMIT = 2147483645  # NICE_OFFSET - 3: bound of SiteFactor and Nice


def clamp(v: int, lo: int = -LIMIT, hi: int = LIMIT) -> int:
    return max(lo, min(hi, v))


@dataclass
class JobState:
    value: int  # what we last wrote
    base: int = 0  # nice mode: the owner's own nice under it
    alt: int | None = None  # write-ahead: the value we had written before an unfinished push

    def ours(self, current: int) -> bool:
        """Is ``current`` a value this daemon wrote (the last one, or the one before an unfinished push)?"""
        return current == self.value or (self.alt is not None and current == self.alt)


@dataclass
class PushState:
    """Per-job memory of what was pushed, keyed by job id (see module docstring)."""

    mode: str
    jobs: dict[int, JobState] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"version": 1, "mode": self.mode,
                "jobs": {str(k): {"value": v.value, "base": v.base, **({"alt": v.alt} if v.alt is not None else {})}
                         for k, v in self.jobs.items()}}

    def write_ahead(self, actions: list[PushAction], new: "PushState") -> "PushState":
        """The state to save *before* pushing ``actions``: their new values, remembering the old as ``alt``."""
        jobs = dict(self.jobs)
        for a in actions:
            prev = self.jobs.get(a.job_id)
            st = new.jobs[a.job_id]
            # the value Slurm holds when it is ours (also after a failed push, whose new value we
            # already remember), else the one we last wrote
            ours_now = prev is not None and a.old is not None and prev.ours(a.old)
            jobs[a.job_id] = JobState(st.value, st.base, a.old if ours_now else (prev.value if prev else a.old))
        return PushState(self.mode, jobs)

    @classmethod
    def from_dict(cls, d, mode: str) -> "PushState":
        """The state saved by :meth:`to_dict`.  Another version's or mode's memory means nothing here
        (an empty state); a file of this version and mode in any other shape raises ValueError."""
        if not isinstance(d, dict):
            raise ValueError(f"a push state is a JSON object, not {type(d).__name__}")
        if d.get("version") != 1 or d.get("mode") != mode:
            return cls(mode)
        raw = d.get("jobs", {})
        if not isinstance(raw, dict):
            raise ValueError(f"'jobs' is {type(raw).__name__}, not an object")
        jobs = {}
        for k, v in raw.items():
            if not (k.isascii() and k.isdigit() and len(k) <= 12) or not isinstance(v, dict):
                raise ValueError(f"job {k[:20]!r}: not a job id with an object")
            vals = [v.get("value"), v.get("base", 0), v.get("alt")]
            if not all(type(x) is int and -2**32 < x < 2**32 for x in vals[:2]) or \
                    not (vals[2] is None or type(vals[2]) is int and -2**32 < vals[2] < 2**32):
                raise ValueError(f"job {k}: values are not integers in range")
            jobs[int(k)] = JobState(*vals)
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


def contribution(weight: int, factor: float, levels: int = 0) -> int:
    """c = round(W · F), in [0, W]; a NaN factor (no value) contributes 0.

    With ``levels`` L > 0, F is first rounded to the nearest of the L + 1 levels 0, 1/L, …, 1:
    c = round(W · round(F · L) / L).  The map is non-decreasing in F, so it never inverts two jobs'
    order: a user with the higher F never gets the lower contribution (two users closer than a
    level may get the same one); |c − W·F| ≤ W / 2L + 1/2.  Its point: under Slurm's continuous
    usage decay the classic F of every user drifts a little every period, and without levels each
    drift re-pushes every pending job of that user (benchmarks/push_churn.py measures it).
    """
    if not factor == factor:
        return 0
    if levels:
        factor = round(factor * levels) / levels
    return int(round(weight * factor))


def operator_fixed(job, prev: JobState | None) -> bool:
    """An operator set this job's priority (and it was not us, in priority mode)."""
    if not job.direct_set_prio:
        return False
    return not (prev is not None and prev.ours(job.priority))


def candidates(jobs, result: Result, state: PushState, override_fixed: bool, unknown: list, *,
               ours_fixed: bool):
    """The jobs every mode plans for, as (job, its push state, its user's factor).

    Skipped: jobs no longer pending or held (priority 0); jobs whose priority an
    operator fixed, unless ``override_fixed`` (``ours_fixed``: a fixed priority
    this daemon wrote, per the push state, does not count — priority mode); jobs
    whose association is unknown, which are appended to ``unknown``.
    """
    factors = user_factors(result)
    for job in jobs:
        if job.state != "PENDING" or job.priority == 0:
            continue  # held or no longer pending: leave alone
        prev = state.jobs.get(job.job_id)
        if not override_fixed and operator_fixed(job, prev if ours_fixed else None):
            continue
        f = job_factor(job, factors)
        if f is None:
            unknown.append(job)
            continue
        yield job, prev, f


def plan(jobs: list[Job], result: Result, *, mode: str, weight: int, state: PushState,
         current_site_factor: dict[int, int] | None = None,
         override_fixed: bool = False, adopt_since: int | None = None, levels: int = 0
         ) -> tuple[list[PushAction], PushState, list[Job]]:
    """Actions for the pending jobs, the push state they lead to, and the jobs skipped (no association).

    ``current_site_factor`` is what slurmctld holds per job when the source can
    read it (sprio); otherwise the push state's memory stands in for it.
    Jobs with an operator-set priority are left alone unless ``override_fixed``.

    ``adopt_since`` (nice mode, two head nodes): a job submitted before it whose nice is not one
    this daemon wrote is left alone.  Its nice may hold the other head's daemon's contribution,
    which this daemon cannot tell from its owner's own nice: taking it for the owner's would
    subtract a contribution twice.  Jobs submitted since, and jobs whose nice is ours, are planned
    as usual.  None (one controller): every job's nice not ours is its owner's.

    ``levels``: F rounded to L + 1 levels before it is weighted (:func:`contribution`).
    """
    if mode not in ("site_factor", "nice"):
        raise ValueError(f"unknown push mode {mode!r}")
    actions: list[PushAction] = []
    new_state = PushState(mode)
    unknown: list[Job] = []
    for job, prev, f in candidates(jobs, result, state, override_fixed, unknown, ours_fixed=False):
        c = contribution(weight, f, levels)
        if mode == "site_factor":
            new = clamp(c)
            if current_site_factor is not None and job.job_id in current_site_factor:
                old: int | None = current_site_factor[job.job_id]
            else:
                old = prev.value if prev else None
            new_state.jobs[job.job_id] = JobState(new)
        elif mode == "nice":
            mine = prev is not None and prev.ours(job.nice)
            if not mine and adopt_since is not None and job.submit_time < adopt_since:
                continue  # maybe the other head's daemon's value (see the docstring)
            base = prev.base if mine else job.nice
            new = clamp(base - c)
            old = job.nice
            keep = prev.alt if prev is not None and prev.ours(job.nice) else None  # our value before, still ours
            new_state.jobs[job.job_id] = JobState(new, base, keep)
        if new != old:
            actions.append(PushAction(job_id=job.job_id, field=mode, new=new, old=old, contribution=c,
                                      user=job.user, account=job.account, partition=job.partition))
    return actions, new_state, unknown


def by_array_parent(actions: list[PushAction], jobs: list[Job]) -> list[PushAction]:
    """SiteFactor actions without those an array's parent update already makes.

    A pending job array is one record until its tasks start or are changed one by one: squeue's
    row ``123_[5-9]`` whose job id is the array's own id (123).  ``scontrol update JobId=123``
    updates that record *and every task of the array*, split pending tasks (``123_4``, each with a
    job id of its own) included, in one RPC (job_mgr.c ``update_job_str``: "Update all tasks of this
    job array", 22.05 to 26.05).  So when the parent record gets SiteFactor v, a split task's own
    action to v is one RPC, one job lock and one log line too many: dropped.  Tasks planned to
    another value keep theirs (pushed after the parent's, in plan order).  SiteFactor only: it is
    absolute and the same for every task; nice carries each task's own base.  squeue shows split
    pending tasks inside their array's row when name and partition are the same (squeue/print.c
    ``_combine_pending_array_tasks``), so a split task has a row of its own, and this matters, only
    when it was moved to another partition or renamed.
    """
    parent_value: dict[int, int] = {}
    for j in jobs:
        head, sep, rest = j.display_id.partition("_")
        if sep and rest.startswith("[") and head.isdigit() and int(head) == j.job_id:
            parent_value[j.job_id] = -1  # a parent record; its planned value below
    if not parent_value:
        return actions
    for a in actions:
        if a.job_id in parent_value:
            parent_value[a.job_id] = a.new
    array_of = {}
    for j in jobs:
        head, sep, rest = j.display_id.partition("_")
        if sep and rest.isdigit() and head.isdigit() and int(head) in parent_value:
            array_of[j.job_id] = int(head)
    return [a for a in actions
            if not (a.job_id in array_of and parent_value[array_of[a.job_id]] == a.new)]


def within_budget(actions: list[PushAction], budget: int, before: PushState, planned: PushState
                  ) -> tuple[list[PushAction], PushState, int]:
    """At most ``budget`` of ``actions``, the largest changes first; the push state planned with the
    others' entries as they were (``before``), and how many were left for a later cycle.

    Used when slurmctld's rate limit (or ``push.max_rate``) allows fewer updates per calc period
    than planned.  A job left out keeps its old entry, so its current value stays one of ours in
    nice and priority modes (taking it for the owner's would subtract a contribution twice); a job
    that had none has none.  A job never pushed before (``old`` None) counts as the largest change.
    """
    if len(actions) <= budget:
        return actions, planned, 0
    ranked = sorted(actions, key=lambda a: -abs(a.new - a.old) if a.old is not None else -float("inf"))
    chosen, later = ranked[:budget], ranked[budget:]
    jobs = dict(planned.jobs)
    for a in later:
        if a.job_id in before.jobs:
            jobs[a.job_id] = before.jobs[a.job_id]
        else:
            jobs.pop(a.job_id, None)
    return chosen, PushState(planned.mode, jobs), len(later)


# --- priority mode ---------------------------------------------------------------------------------

PRIORITY_MAX_PUSH = 0xFFFFFFFD  # 2^32 − 3: 0xFFFFFFFE is NO_VAL, 0xFFFFFFFF (INFINITE) means "recalculate"


def plan_priority(jobs, result: Result, *, cluster, params, now: int, state: PushState,
                  override_fixed: bool = False, priorities: list | None = None
                  ) -> tuple[list[PushAction], PushState, list]:
    """Priority mode: every pending job's full multifactor priority with our F (priority.py).

    ``jobs`` are :class:`fairshared.model.Job` with their factors' inputs; ``params`` carries the
    fair-share weight to use.  A job in several partitions gets the priority of
    the first one slurmctld considers (highest PriorityTier).  A job whose
    priority is fixed by someone else is left alone unless ``override_fixed``.
    Setting a priority makes slurmctld reset the job's nice to 0; the owner's
    nice is kept in the push state (``base``) and still subtracted.
    ``priorities``, when given, receives each planned job's :class:`~fairshared.priority.Factors`
    (one per partition): the factors behind the priority planned, whether it changed or not.
    """
    actions: list[PushAction] = []
    new_state = PushState("priority")
    unknown: list = []
    for job, prev, f in candidates(jobs, result, state, override_fixed, unknown, ours_fixed=True):
        # the job's factors as slurmctld would compute them with our F; a fixed job's factors are
        # zeroed by Slurm, so compute as if it were not fixed
        # slurmctld resets a job's nice to 0 when its priority is set (seen on a live 22.05.8):
        # the owner's nice lives on in our push state (base) and still counts
        ours = prev is not None and prev.ours(job.priority)
        nice = prev.base if ours and job.nice == 0 else job.nice
        rows = job_priority(replace(job, direct_set_prio=False, nice=nice), f, cluster, params, now)
        if priorities is not None:
            priorities.extend(rows)
        new = max(1, min(PRIORITY_MAX_PUSH, int(rows[0].priority)))
        new_state.jobs[job.job_id] = JobState(new, nice, prev.alt if ours else None)
        if new != job.priority:
            actions.append(PushAction(job_id=job.job_id, field="priority", new=new, old=job.priority,
                                      contribution=contribution(params.weight_fairshare, f),
                                      user=job.user, account=job.account, partition=job.partition))
    return actions, new_state, unknown
