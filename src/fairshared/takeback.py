"""The way back: take back everything fairshared wrote, in any push mode, from its push state.  Pure.

=============== ============================================ ==========================================
the state's mode what was written                             what the way back writes
=============== ============================================ ==========================================
site_factor     SiteFactor = c on each pending job            SiteFactor = 0 (pyslurm cannot send 0:
                                                              the command line does, sinks/push_pyslurm)
nice            Nice = owner's nice − c                       Nice = the owner's own nice (``base``)
priority        Priority = P(job) (fixed)                     ``scontrol release``: recalculated again;
                                                              it resets the nice to 0, so then Nice =
                                                              the owner's own where that was not 0
assoc_priority  an association's Priority = c                 its own Priority before (``before``), or
                                                              cleared (-1) when it had none
=============== ============================================ ==========================================

A job's way back is its mode's rule (``take_back`` of each mode in :mod:`fairshared.push_modes`);
an association's is here, the only mode that writes them.

Only what still holds a value this daemon wrote is taken back (the state's ``value`` or ``alt``):
a value somebody changed since is theirs and is left alone, and a job no longer pending or an
association gone from slurmdbd has nothing to take back.  So the plan is safe to run twice: what
landed the first time is no longer ours the second.  The state left (:attr:`Takeback.left`) keeps
only the entries whose write failed, for the next try.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .model import Job
from .plan import PushState
from .push_modes import mode_for
from .records import AssocAction, AssocPriority, PushAction


@dataclass(frozen=True)
class Takeback:
    mode: str
    job_actions: list[PushAction] = field(default_factory=list)  # releases first, then values
    assoc_actions: list[AssocAction] = field(default_factory=list)
    left_alone: int = 0  # entries whose value is no longer ours (changed by somebody since): not touched
    gone: int = 0  # entries whose job ended or whose association was removed: nothing to take back

    @property
    def empty(self) -> bool:
        return not self.job_actions and not self.assoc_actions

    def left(self, state: PushState, failed_jobs: set[int], failed_assocs: set[int]) -> PushState:
        """The state once the actions were tried: only the entries whose write failed."""
        return PushState(state.mode, {k: v for k, v in state.jobs.items() if k in failed_jobs},
                         {k: v for k, v in state.assocs.items() if k in failed_assocs})


def plan_takeback(state: PushState, jobs: list[Job], rows: list[AssocPriority] | None) -> Takeback:
    """What to write to take back ``state`` from a cluster whose pending jobs are ``jobs`` and whose
    associations' own Priority are ``rows`` (None: not read; needed only for an assoc_priority state).
    Each job's way back is its mode's (:meth:`push_modes.PushMode.take_back`); releases go first."""
    mode = mode_for(state.mode)
    releases: list[PushAction] = []
    values: list[PushAction] = []
    left_alone = gone = 0
    by_id = {j.job_id: j for j in jobs if j.state == "PENDING"}
    for jid, st in state.jobs.items():
        job = by_id.get(jid)
        if job is None:
            gone += 1
            continue
        back = mode.take_back(job, st)
        if back is None:
            left_alone += 1
            continue
        releases += [a for a in back if a.field == "release"]
        values += [a for a in back if a.field != "release"]
    assoc_actions: list[AssocAction] = []
    if state.assocs:
        if rows is None:
            raise ValueError("taking back association priorities needs the associations read (rows)")
        current = {r.id: r for r in rows}
        for aid, held in sorted(state.assocs.items()):
            row = current.get(aid)
            if row is None:
                gone += 1
            elif not held.ours(row.priority):
                left_alone += 1
            elif row.priority != held.before:
                assoc_actions.append(AssocAction(aid, row.account, row.user, row.partition, held.before,
                                                 row.priority))
    return Takeback(state.mode, releases + values, assoc_actions, left_alone, gone)
