"""The push modes as objects: each mode's planning, write-ahead and after-push rules together.

Pure, no I/O (the runner does the reading and writing).  One object per ``push.mode``:

=============  ==========================  =====================  ===================================
mode           plans from                  write-ahead must land  after the push, for each action
=============  ==========================  =====================  ===================================
site_factor    the snapshot's jobs         no (SiteFactor is       what did not land is forgotten
               (:func:`plan.plan`)         absolute)               (Slurm's own value is read next time)
nice           the snapshot's jobs         yes                    the old and the new value stay ours
priority       each job's factors          yes                    the old and the new value stay ours
               (:func:`plan.plan_priority`)
off            nothing                     —                      —
=============  ==========================  =====================  ===================================

Why "the old and the new value stay ours" in nice and priority modes: a failed
update may still land (a ``scontrol update`` that timed out is carried out once
slurmctld answers again), and an applied one may be undone (a slurmctld killed
before saving its state comes back with the old value); taking either for the
owner's own would apply the contribution twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from .engine.result import Result
from .model import ClusterInfo, Job
from .plan import PushState, by_array_parent, plan, plan_priority
from .records import PushAction
from .settings import ClusterSettings

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
    adopt_since: int | None = None  # nice mode with two head nodes: see plan.plan
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

    def plan(self, inputs: PlanInputs, state: PushState) -> Planned: ...

    def after_push(self, before: PushState, ahead: PushState, planned: PushState,
                   actions: list[PushAction], failed: set[int]) -> PushState:
        """The push state to keep once ``actions`` were tried (``failed``: job ids that did not land)."""
        ...


class SiteFactorMode:
    name = "site_factor"
    job_details = False
    strict_write_ahead = False

    def plan(self, inputs: PlanInputs, state: PushState) -> Planned:
        current = {j.job_id: j.site_factor for j in inputs.jobs if j.site_factor is not None}
        actions, new, unknown = plan(inputs.jobs, inputs.result, mode=self.name, weight=inputs.weight,
                                     state=state, current_site_factor=current or None,
                                     override_fixed=inputs.override_fixed, levels=inputs.levels)
        return Planned(by_array_parent(actions, inputs.jobs), new, unknown)

    def after_push(self, before, ahead, planned, actions, failed):
        jobs = dict(planned.jobs)
        for jid in failed:  # SiteFactor is absolute: forget what did not land, read Slurm's value
            jobs.pop(jid, None)
            if jid in before.jobs:
                jobs[jid] = before.jobs[jid]
        return PushState(planned.mode, jobs)


class _BothStayOurs:
    strict_write_ahead = True

    def after_push(self, before, ahead, planned, actions, failed):
        jobs = dict(planned.jobs)
        for a in actions:  # landed or not, the old and the new value both stay ours (module docstring)
            jobs[a.job_id] = ahead.jobs[a.job_id]
        return PushState(planned.mode, jobs)


class NiceMode(_BothStayOurs):
    name = "nice"
    job_details = False

    def plan(self, inputs: PlanInputs, state: PushState) -> Planned:
        actions, new, unknown = plan(inputs.jobs, inputs.result, mode=self.name, weight=inputs.weight,
                                     state=state, override_fixed=inputs.override_fixed,
                                     adopt_since=inputs.adopt_since, levels=inputs.levels)
        return Planned(actions, new, unknown)


class PriorityMode(_BothStayOurs):
    name = "priority"
    job_details = True

    def plan(self, inputs: PlanInputs, state: PushState) -> Planned:
        from .priority import PriorityParams

        params = PriorityParams.from_settings(inputs.settings).with_weights({"fairshare": inputs.weight})
        if inputs.cluster is None:
            raise ValueError("push mode 'priority' plans from a snapshot read with details (no cluster info)")
        rows: list = []
        actions, new, unknown = plan_priority(inputs.jobs, inputs.result, cluster=inputs.cluster,
                                              params=params, now=inputs.now, state=state,
                                              override_fixed=inputs.override_fixed, priorities=rows)
        return Planned(actions, new, unknown, rows)


class OffMode:
    name = "off"
    job_details = False
    strict_write_ahead = False

    def plan(self, inputs: PlanInputs, state: PushState) -> Planned:
        return Planned([], state, [])

    def after_push(self, before, ahead, planned, actions, failed):
        return planned


MODES: dict[str, PushMode] = {m.name: m for m in (SiteFactorMode(), NiceMode(), PriorityMode(), OffMode())}


def mode_for(name: str) -> PushMode:
    try:
        return MODES[name]
    except KeyError:
        raise ValueError(f"unknown push mode {name!r}") from None
