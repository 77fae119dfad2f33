"""The push modes as objects: each mode's value, planning, write-ahead and after-push rules together.

Pure, no I/O (the runner does the reading and writing).  One object per ``push.mode``; each plans
itself from the jobs :func:`plan.candidates` yields and the contribution c = round(W · F)
(:func:`plan.contribution`):

=============  ==================================  =====================  ============================
mode           writes (each mode's ``plan``)        write-ahead must land  after the push, per action
=============  ==================================  =====================  ============================
site_factor    SiteFactor = c (Slurm adds it)      no (SiteFactor is      what did not land is
                                                   absolute)              forgotten (Slurm's is read)
nice           Nice = owner's own nice − c         yes                    old and new value stay ours
priority       Priority = P(job) with our F        yes                    old and new value stay ours
               (fixes it: slurmctld stops
               recalculating it until the next push)
assoc_priority no job: each user association's     yes                    a failed write keeps both
               Priority = c (fairshared.push_assoc)                       values ours
off            nothing                             —                      —
=============  ==================================  =====================  ============================

Why "the old and the new value stay ours" in nice and priority modes: a failed
update may still land (a ``scontrol update`` that timed out is carried out once
slurmctld answers again), and an applied one may be undone (a slurmctld killed
before saving its state comes back with the old value); taking either for the
owner's own would apply the contribution twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

from .engine.result import Result
from .model import ClusterInfo, Job
from .plan import JobState, PushState, by_array_parent, candidates, clamp, contribution
from .priority import job_priority
from .records import PushAction
from .settings import ClusterSettings

PRIORITY_MAX_PUSH = 0xFFFFFFFD  # 2^32 − 3: 0xFFFFFFFE is NO_VAL, 0xFFFFFFFF (INFINITE) means "recalculate"

__all__ = ["MODES", "PlanInputs", "Planned", "PushMode", "mode_for"]


@dataclass(frozen=True)
class PlanInputs:
    """What a cycle hands a mode to plan from.

    ``jobs`` are the snapshot's pending jobs; ``cluster`` the snapshot's ``cluster_info`` (the
    partitions, QOS and node/CPU counts each job's factors need), read only for modes with
    ``job_details`` (whose snapshot's jobs then carry their factors' inputs), else None.
    """

    jobs: list[Job]
    result: Result
    weight: int
    override_fixed: bool
    now: int
    settings: ClusterSettings = field(default_factory=ClusterSettings)
    cluster: ClusterInfo | None = None
    adopt_since: int | None = None  # nice mode with two head nodes: see NiceMode
    levels: int = 0  # push.levels: F rounded to L + 1 levels (plan.contribution); site_factor and nice


@dataclass(frozen=True)
class Planned:
    actions: list[PushAction]
    state: PushState  # the push state once every action has landed
    unknown: list  # pending jobs whose association is not in the tree (skipped)
    priorities: list = field(default_factory=list)
    """Each planned job's multifactor priority (priority.Factors, one per partition); modes that do
    not read the job details (``job_details`` False) leave it empty."""


class PushMode(Protocol):
    name: str
    job_details: bool
    """Plans from each job's priority factors (squeue + sprio), not only the snapshot's jobs."""
    strict_write_ahead: bool
    """Push nothing when the write-ahead state cannot be saved (a full disk)."""
    by_association: bool
    """Writes associations, not jobs (the runner plans it with fairshared.push_assoc)."""

    def plan(self, inputs: PlanInputs, state: PushState) -> Planned: ...

    def after_push(self, before: PushState, ahead: PushState, planned: PushState,
                   actions: list[PushAction], failed: set[int]) -> PushState:
        """The push state to keep once ``actions`` were tried (``failed``: job ids that did not land)."""
        ...

    def take_back(self, job: Job, st: JobState) -> list[PushAction] | None:
        """The way back for one pending job this mode wrote (``st``, its push-state entry): the
        updates that take our value back ([]: it already holds the owner's), or None when the value
        it holds is no longer ours (somebody changed it since: left alone).  ``release`` actions
        come first in a job's list (fairshared.takeback)."""
        ...


def _action(job: Job, field: str, new: int, old: int | None, c: int) -> PushAction:
    return PushAction(job_id=job.job_id, field=field, new=new, old=old, contribution=c,
                      user=job.user, account=job.account, partition=job.partition)


class _WritesNoJob:
    """Modes that write no job value: nothing of theirs to take back from a job."""

    def take_back(self, job: Job, st: JobState) -> list[PushAction] | None:
        return []


class _FromContribution:
    """Planning of the modes that write a value made from c = round(W · F) alone (SiteFactor, nice):
    the loop over the candidates; each mode's :meth:`value` is its rule."""

    name: str
    by_association = False

    def value(self, job: Job, prev: JobState | None, c: int, inputs: PlanInputs
              ) -> tuple[JobState, int | None] | None:
        """(The push state's entry once ``job`` holds its new value, the value it holds now), or
        None to leave the job alone."""
        raise NotImplementedError

    def plan(self, inputs: PlanInputs, state: PushState) -> Planned:
        actions: list[PushAction] = []
        new_state = PushState(self.name)
        unknown: list[Job] = []
        for job, prev, f in candidates(inputs.jobs, inputs.result, state, inputs.override_fixed, unknown,
                                       ours_fixed=False):
            c = contribution(inputs.weight, f, inputs.levels)
            out = self.value(job, prev, c, inputs)
            if out is None:
                continue
            entry, old = out
            new_state.jobs[job.job_id] = entry
            if entry.value != old:
                actions.append(_action(job, self.name, entry.value, old, c))
        return Planned(actions, new_state, unknown)


class SiteFactorMode(_FromContribution):
    """SiteFactor = clamp(c): absolute, Slurm adds it to the job's priority.

    The value held now is what slurmctld holds (``Job.site_factor``, read with the jobs) when the
    source can read it, else the push state's memory.  A pending array's parent update carries its
    split tasks (:func:`plan.by_array_parent`).
    """

    name = "site_factor"
    job_details = False
    strict_write_ahead = False

    def value(self, job, prev, c, inputs):
        old = job.site_factor if job.site_factor is not None else prev.value if prev else None
        return JobState(clamp(c)), old

    def plan(self, inputs: PlanInputs, state: PushState) -> Planned:
        planned = super().plan(inputs, state)
        return replace(planned, actions=by_array_parent(planned.actions, inputs.jobs))

    def after_push(self, before, ahead, planned, actions, failed):
        jobs = dict(planned.jobs)
        for jid in failed:  # SiteFactor is absolute: forget what did not land, read Slurm's value
            jobs.pop(jid, None)
            if jid in before.jobs:
                jobs[jid] = before.jobs[jid]
        return PushState(planned.mode, jobs)

    def take_back(self, job, st):
        """SiteFactor back to 0 (pyslurm cannot send 0: the command line does, sinks/push_pyslurm).
        A source that does not read SiteFactor: the value is taken for ours."""
        current = job.site_factor if job.site_factor is not None else st.value
        if not st.ours(current):
            return None
        return [_action(job, "site_factor", 0, current, 0)] if current != 0 else []


class _BothStayOurs:
    strict_write_ahead = True

    def after_push(self, before, ahead, planned, actions, failed):
        jobs = dict(planned.jobs)
        for a in actions:  # landed or not, the old and the new value both stay ours (module docstring)
            jobs[a.job_id] = ahead.jobs[a.job_id]
        return PushState(planned.mode, jobs)


class NiceMode(_BothStayOurs, _FromContribution):
    """Nice = clamp(base − c), base = the owner's own nice: the job's priority rises by c.

    A job whose nice is one this daemon wrote (the push state's ``value`` or ``alt``) keeps its
    recorded base; any other nice is its owner's (``scontrol update nice=``) and becomes the base.
    ``adopt_since`` (two head nodes): a job submitted before it whose nice is not one this daemon
    wrote is left alone.  Its nice may hold the other head's daemon's contribution, which this
    daemon cannot tell from its owner's own nice: taking it for the owner's would subtract a
    contribution twice.  Jobs submitted since, and jobs whose nice is ours, are planned as usual.
    None (one controller): every job's nice not ours is its owner's.
    """

    name = "nice"
    job_details = False

    def value(self, job, prev, c, inputs):
        mine = prev is not None and prev.ours(job.nice)
        if not mine and inputs.adopt_since is not None and job.submit_time < inputs.adopt_since:
            return None  # maybe the other head's daemon's value (see the docstring)
        base = prev.base if mine else job.nice
        keep = prev.alt if mine else None  # our value before an unfinished push, still ours
        return JobState(clamp(base - c), base, keep), job.nice

    def take_back(self, job, st):
        """Nice back to the owner's own (``base``)."""
        if not st.ours(job.nice):
            return None
        return [_action(job, "nice", st.base, job.nice, 0)] if job.nice != st.base else []


class PriorityMode(_BothStayOurs):
    """Priority = clamp(P(job), 1, 2^32 − 3): the job's whole multifactor priority with our F in
    its fair-share term (:func:`priority.job_priority`), weight W; this *fixes* the job's priority
    (slurmctld stops recalculating it until the next push).

    A job in several partitions gets the priority of the first one slurmctld considers (highest
    PriorityTier).  Setting a priority makes slurmctld reset the job's nice to 0 (seen on a live
    22.05.8): the owner's nice is kept in the push state (``base``) and still subtracted.  A
    priority this daemon fixed does not count as an operator's (``ours_fixed``).  ``priorities``
    of the result: each planned job's factors (one per partition), whether it changed or not.
    """

    name = "priority"
    job_details = True
    by_association = False

    def plan(self, inputs: PlanInputs, state: PushState) -> Planned:
        settings = inputs.settings.with_weights({"fairshare": inputs.weight})
        if inputs.cluster is None:
            raise ValueError("push mode 'priority' plans from a snapshot read with details (no cluster info)")
        actions: list[PushAction] = []
        new_state = PushState(self.name)
        unknown: list = []
        rows: list = []
        for job, prev, f in candidates(inputs.jobs, inputs.result, state, inputs.override_fixed, unknown,
                                       ours_fixed=True):
            # the job's factors as slurmctld would compute them with our F; a fixed job's factors
            # are zeroed by Slurm, so compute as if it were not fixed
            ours = prev is not None and prev.ours(job.priority)
            nice = prev.base if ours and job.nice == 0 else job.nice
            factors = job_priority(replace(job, direct_set_prio=False, nice=nice), f, inputs.cluster, settings,
                                   inputs.now)
            rows.extend(factors)
            new = max(1, min(PRIORITY_MAX_PUSH, int(factors[0].priority)))
            new_state.jobs[job.job_id] = JobState(new, nice, prev.alt if ours else None)
            if new != job.priority:
                actions.append(_action(job, "priority", new, job.priority,
                                       contribution(settings.weights["fairshare"], f)))
        return Planned(actions, new_state, unknown, rows)

    def take_back(self, job, st):
        """``scontrol release``: slurmctld recalculates the priority again (job_mgr.c clears
        direct_set_prio for an operator's Priority=INFINITE).  Release resets the nice to 0, so then
        the owner's own nice (``base``) where that was not 0."""
        if not (job.direct_set_prio and st.ours(job.priority)):
            return None
        back = [_action(job, "release", 0, job.priority, 0)]
        return back + [_action(job, "nice", st.base, 0, 0)] if st.base else back


class AssocPriorityMode(_WritesNoJob):
    """Writes no job: each user association's Priority = c, planned by :func:`fairshared.push_assoc.plan_assocs`
    from slurmdbd's own values, which the runner reads (``by_association``)."""

    name = "assoc_priority"
    job_details = False
    strict_write_ahead = True
    by_association = True

    def plan(self, inputs: PlanInputs, state: PushState) -> Planned:
        return Planned([], state, [])

    def after_push(self, before, ahead, planned, actions, failed):
        return planned


class OffMode(_WritesNoJob):
    name = "off"
    job_details = False
    strict_write_ahead = False
    by_association = False

    def plan(self, inputs: PlanInputs, state: PushState) -> Planned:
        return Planned([], state, [])

    def after_push(self, before, ahead, planned, actions, failed):
        return planned


MODES: dict[str, PushMode] = {m.name: m for m in (SiteFactorMode(), NiceMode(), PriorityMode(),
                                                   AssocPriorityMode(), OffMode())}


def mode_for(name: str) -> PushMode:
    try:
        return MODES[name]
    except KeyError:
        raise ValueError(f"unknown push mode {name!r}") from None
