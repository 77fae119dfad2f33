"""What every push mode shares: the push state, the contribution, the candidates, pacing. Pure, no I/O.

    contribution c = round(W · F)        W = our fair-share weight, F = the job's user factor
                 c = round(W · round(F · L) / L)   with push.levels L > 0: F on L + 1 levels, so
                                      a drift smaller than a level updates no job (see contribution)

What each mode writes for c (SiteFactor = c, Nice = owner's nice − c, Priority = P(job) with F)
is that mode's own rule, in :mod:`fairshared.push_modes`.  Every mode plans only the jobs whose
value differs from what Slurm holds, so a cycle with unchanged inputs plans nothing.  Values are
clamped to Slurm's limits (|SiteFactor|, |Nice| <= 2147483645 = NICE_OFFSET − 3; Priority in
[1, 2^32 − 3]).  Held jobs (priority 0) are left alone, and so are jobs whose priority an operator
fixed (``scontrol update priority=``) unless the config says otherwise (:func:`candidates`).

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

from dataclasses import dataclass, field

import numpy as np

from .engine.result import Result
from .model import Job
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
class AssocState:
    """Push mode ``assoc_priority``: one association's Priority as this daemon wrote it."""

    value: int  # what we last wrote
    before: int | None = None  # its own Priority before we first wrote it (None: it had none)
    alt: int | None = None  # write-ahead: the value we had written before an unfinished write

    def ours(self, current: int | None) -> bool:
        return current is not None and (current == self.value or current == self.alt)


def _int_in_range(x) -> bool:
    return type(x) is int and -2**32 < x < 2**32


def _entries(d: dict, key: str, what: str, make, required: dict, optional: tuple[str, ...]) -> dict:
    """``d[key]``, a push state file's entries by id, as ``make(*values)``: the ``required`` fields
    (their default when absent, None: none) must be integers in range, the ``optional`` ones such an
    integer or null; ValueError naming the entry otherwise."""
    raw = d.get(key, {})
    if not isinstance(raw, dict):
        raise ValueError(f"'{key}' is {type(raw).__name__}, not an object")
    out = {}
    for k, v in raw.items():
        if not (k.isascii() and k.isdigit() and len(k) <= 12) or not isinstance(v, dict):
            raise ValueError(f"{what} {k[:20]!r}: not a{'n' if what[0] in 'aeiou' else ''} {what} id with an object")
        vals = [v.get(f, default) for f, default in required.items()]
        extra = [v.get(f) for f in optional]
        if not all(_int_in_range(x) for x in vals) or not all(x is None or _int_in_range(x) for x in extra):
            raise ValueError(f"{what} {k}: values are not integers in range")
        out[int(k)] = make(*vals, *extra)
    return out


@dataclass
class PushState:
    """Per-job (and, in push mode ``assoc_priority``, per-association) memory of what was pushed,
    keyed by job id or association id (see module docstring).  ``mode`` is the mode that wrote it:
    the way back (:mod:`fairshared.takeback`) reads it for any mode."""

    mode: str
    jobs: dict[int, JobState] = field(default_factory=dict)
    assocs: dict[int, AssocState] = field(default_factory=dict)

    def __bool__(self) -> bool:  # anything left in Slurm that this state says is ours
        return bool(self.jobs or self.assocs)

    def to_dict(self) -> dict:
        d = {"version": 1, "mode": self.mode,
             "jobs": {str(k): {"value": v.value, "base": v.base, **({"alt": v.alt} if v.alt is not None else {})}
                      for k, v in self.jobs.items()}}
        if self.assocs:
            d["assocs"] = {str(k): {"value": v.value, "before": v.before,
                                    **({"alt": v.alt} if v.alt is not None else {})}
                           for k, v in self.assocs.items()}
        return d

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
        return PushState(self.mode, jobs, dict(self.assocs))

    @classmethod
    def from_dict(cls, d, mode: str) -> "PushState":
        """The state saved by :meth:`to_dict` for ``mode``: another mode's memory means nothing here
        (an empty state; :meth:`load` keeps it).  See :meth:`load` for what raises."""
        state = cls.load(d)
        return state if state.mode == mode else cls(mode)

    @classmethod
    def load(cls, d, default_mode: str = "off") -> "PushState":
        """The state saved by :meth:`to_dict`, with the mode that wrote it.  Another version's memory
        means nothing (an empty state of ``default_mode``); a file of this version in any other
        shape raises ValueError."""
        if not isinstance(d, dict):
            raise ValueError(f"a push state is a JSON object, not {type(d).__name__}")
        mode = d.get("mode")
        if d.get("version") != 1 or not isinstance(mode, str) or not mode:
            return cls(default_mode)
        jobs = _entries(d, "jobs", "job", JobState, {"value": None, "base": 0}, ("alt",))
        assocs = _entries(d, "assocs", "association", AssocState, {"value": None}, ("before", "alt"))
        return cls(mode, jobs, assocs)


def user_factors(result: Result) -> dict[tuple[str, str | None, str | None], float]:
    """Fair-share factor of every user association, keyed (account, user, partition) as
    Association.key is (the user is never None here: user rows only)."""
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
    return chosen, PushState(planned.mode, jobs, dict(planned.assocs)), len(later)

