"""Push mode ``assoc_priority``: fair share written into each user association's ``Priority``.  Pure.

    Priority(association) = c = round(W · F)       (plan.contribution, push.levels included:
                                                    the same c push mode site_factor writes)
    job priority += PriorityWeightAssoc · Priority(job's association)     (NO_NORMAL_ASSOC)

Why it works, per Slurm's source (22.05 to 26.05, priority_multifactor.c ``set_priority_factors``):
``priority_assoc = (flags & NO_NORMAL_ASSOC) ? assoc_ptr->priority : assoc_ptr->usage->priority_norm``
and then ``priority_assoc *= weight_assoc``.  slurmdbd sends each modified association to slurmctld
when the write commits (assoc_mgr.c ``assoc_mgr_update_assocs``), a job reads its association's
value when it is submitted, and a pending job's priority is recomputed at the next decay pass
(``decay_apply_weighted_factors``, every PriorityCalcPeriod).  So with PriorityWeightAssoc=1 and
NO_NORMAL_ASSOC the job gets exactly c, at submit, with no job update at all.  Without
NO_NORMAL_ASSOC the factor is Priority / (the largest Priority of any association): the scale would
move with every write, so that cluster is refused (:func:`cluster_problem`), as is one whose own
fair-share term still counts (PriorityWeightFairshare > 0: fair share twice).

What is written is the association's own Priority in slurmdbd (``sacctmgr modify user where
ids=… set priority=c``, one request per value: :mod:`fairshared.sinks.assoc_cli`); an association
without one inherits its parent account's (as_mysql_assoc.c), so each user association is written.
The state (plan.AssocState) keeps, per association id, what we wrote and its own Priority before we
first wrote it: the way back (:mod:`fairshared.takeback`) puts that back (None: cleared, ``-1``).
An association that had a Priority of its own that this daemon did not write is *foreign*: the
plan refuses it (nothing is written) unless ``push.take_over`` says to take them over.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .engine.result import Result
from .model import Job
from .plan import AssocState, PushState, contribution, user_factors
from .records import AssocAction, AssocPriority
from .settings import ClusterSettings

ASSOC_PRIORITY_MAX = 0xFFFFFFFD  # Priority is a uint32; NO_VAL (…FE) and INFINITE (…FF) mean "unset"

__all__ = ["ASSOC_PRIORITY_MAX", "AssocPlan", "after_write", "by_value", "cluster_problem", "plan_assocs",
           "write_ahead"]


def cluster_problem(settings: ClusterSettings) -> str | None:
    """None when Slurm counts an association's Priority as fairshared's contribution c, as is;
    else one line naming the slurm.conf setting to change."""
    if settings.priority_type != "priority/multifactor":
        return f"PriorityType is {settings.priority_type}: set PriorityType=priority/multifactor in slurm.conf"
    if settings.weight_assoc != 1:
        return (f"PriorityWeightAssoc is {settings.weight_assoc}: set PriorityWeightAssoc=1 in slurm.conf "
                f"(Slurm adds PriorityWeightAssoc x the association's Priority; push.weight scales fairshared's)")
    flags = settings.flags
    if "NO_NORMAL_ASSOC" not in flags:  # NO_NORMAL_ALL counts: settings.flags expands it
        return ("PriorityFlags lacks NO_NORMAL_ASSOC: add it to PriorityFlags in slurm.conf (without it Slurm "
                "divides each association's Priority by the largest one)")
    if settings.weight_fairshare:
        return (f"PriorityWeightFairshare is {settings.weight_fairshare}: set PriorityWeightFairshare=0 in "
                f"slurm.conf (Slurm's own fair-share term would count beside fairshared's)")
    return None


@dataclass(frozen=True)
class AssocPlan:
    actions: list[AssocAction]  # associations with pending jobs first, then by value
    state: PushState  # the state once every action has landed
    foreign: list[AssocPriority] = field(default_factory=list)  # own Priority not ours: refused

    def refusal(self, limit: int = 3) -> str | None:
        """One line naming how many foreign associations and the first few, or None."""
        if not self.foreign:
            return None
        first = ", ".join(f"{a.account}/{a.user}{'/' + a.partition if a.partition else ''} (id {a.id}, "
                          f"Priority={a.priority})" for a in self.foreign[:limit])
        return (f"{len(self.foreign)} association(s) have a Priority that fairshared did not write, e.g. "
                f"{first}: nothing written; set push.take_over = true to take them over (their values are "
                f"kept for 'fairshared undo')")


def plan_assocs(rows: list[AssocPriority], result: Result, jobs: list[Job], state: PushState, *,
                weight: int, levels: int, take_over: bool) -> AssocPlan:
    """What to write so that every user association's own Priority is its c.

    ``rows``: every association of the cluster with its own Priority (slurmdbd); ``state``: what
    this daemon wrote (``state.assocs``).  An association is written when its Priority is not its c.
    Its entry keeps the Priority it had before our first write (``before``); one whose Priority is
    neither ours nor unset is foreign (refused unless ``take_over``).  An association gone from
    slurmdbd leaves the state.  Range: every value written is in [0, W]."""
    factors = user_factors(result)
    pending: dict[tuple, int] = {}
    for j in jobs:
        if j.state == "PENDING" and j.priority != 0:
            pending[(j.account, j.user)] = pending.get((j.account, j.user), 0) + 1
    actions: list[AssocAction] = []
    foreign: list[AssocPriority] = []
    assocs: dict[int, AssocState] = {}
    for row in rows:
        if row.user is None:
            continue  # an account: its jobs are its users'
        f = factors.get((row.account, row.user, row.partition))
        prev = state.assocs.get(row.id)
        if f is None:  # not in the computed tree (added since): written by a later cycle
            if prev is not None:
                assocs[row.id] = prev  # still ours in slurmdbd: the way back needs it
            continue
        c = min(contribution(weight, f, levels), ASSOC_PRIORITY_MAX)
        if prev is None and row.priority is not None and not take_over:
            foreign.append(row)
            continue
        before = prev.before if prev is not None else row.priority
        assocs[row.id] = AssocState(c, before)
        if row.priority != c:
            n = pending.get((row.account, row.user), 0)
            actions.append(AssocAction(row.id, row.account, row.user, row.partition, c, row.priority, c, n))
    actions.sort(key=lambda a: (a.pending_jobs == 0, a.new, a.id))
    return AssocPlan(actions, PushState(state.mode, {}, assocs), foreign)


def by_value(actions: list[AssocAction]) -> list[tuple[int | None, list[AssocAction]]]:
    """``actions`` as (value, its actions) groups, one slurmdbd request each (before chunking): the
    associations with pending jobs first (every value of theirs), then the rest; order kept."""
    groups: list[tuple[int | None, list[AssocAction]]] = []
    index: dict[tuple[bool, int | None], int] = {}
    for a in actions:
        key = (a.pending_jobs == 0, a.new)
        if key not in index:
            index[key] = len(groups)
            groups.append((a.new, []))
        groups[index[key]][1].append(a)
    return groups


def write_ahead(state: PushState, actions: list[AssocAction], planned: PushState) -> PushState:
    """The state to save before writing: each association's new value, its old one kept as ``alt``
    when it was ours (a write that timed out may still land; one that landed may be lost)."""
    assocs = dict(planned.assocs)
    for a in actions:
        prev = state.assocs.get(a.id)
        st = planned.assocs[a.id]
        alt = a.old if prev is not None and prev.ours(a.old) else (prev.value if prev is not None else None)
        assocs[a.id] = AssocState(st.value, st.before, alt)
    return PushState(planned.mode, dict(planned.jobs), assocs)


def after_write(ahead: PushState, planned: PushState, failed: set[int]) -> PushState:
    """After the writes: a landed association holds its new value (the old no longer ours); a failed
    one keeps both (``ahead``'s entry)."""
    assocs = dict(planned.assocs)
    for aid in failed:
        if aid in ahead.assocs:
            assocs[aid] = ahead.assocs[aid]
    return PushState(planned.mode, dict(planned.jobs), assocs)

