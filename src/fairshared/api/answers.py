"""The API's answers computed when asked: a pending job's explanation, alone and against another job
or association, and an association's recovery.  Pure (over a :class:`~fairshared.api.view.View`).

Each is what the command gives, from the command's own function: :func:`fairshared.explain_json.
explain_data` (``explain JOBID --format json``), :func:`fairshared.explain_vs.explain_vs` (``explain
JOBID --vs OTHER``), :func:`fairshared.whatif.recovery_report` (``whatif --recovery``).  The view
hands them the one job they are about (rebuilt from its columns) and, for the job's place in the
queue, :func:`queue_order`: every listed (job, partition) in the scheduler's order, sorted once per
view (seconds at 100,000 jobs: benchmarks/api_load.py) by the first request that needs it, and kept
as arrays.  Recoveries (each a dozen
engine runs) are kept per view too, the last :data:`RECOVERIES_KEPT` asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter

import numpy as np

from ..explain_common import queue_key
from ..explain_json import QueuePlace, explain_data
from ..explain_vs import explain_vs
from ..model import InputError, Snapshot
from ..priority import Factors, job_priority
from ..priority_sprio import listed_by_sprio
from ..usage import UsagePolicy
from ..whatif import recovery_report
from .view import View

__all__ = ["explain_job", "explain_job_vs", "queue_order", "recovery_of", "RECOVERIES_KEPT"]

RECOVERIES_KEPT = 256


@dataclass(frozen=True, eq=False)
class QueueOrder:
    """The queue as arrays: entry ``e`` (in the scheduler's order) is sub-row ``sub[e]`` of
    ``job_priority`` of job row ``job[e]``; ``first[row]`` is the job's first entry (-1: sprio does not
    list it); ``same[p]`` the entries of partition ``p`` in order and ``pos[e]`` where e stands there."""

    job: np.ndarray  # int32
    sub: np.ndarray  # int16
    part: list[str]
    first: np.ndarray  # int32, per job row
    pos: np.ndarray  # int32
    same: dict[str, np.ndarray]

    def factors(self, view: View, e: int) -> Factors:
        row = int(self.job[e])
        return job_priority(view.jobs.job(row), view.fairshare_of_job(row), view.cluster, view.settings,
                            view.evaluated_at)[int(self.sub[e])]

    def place(self, view: View, row: int, neighbours: int) -> QueuePlace | None:
        """:func:`fairshared.explain_json.queue_place` of job ``row``, from the arrays."""
        e = int(self.first[row])
        if e < 0:
            return None
        same = self.same[self.part[e]]
        p = int(self.pos[e])
        ahead = same[max(0, p - neighbours):p][::-1]
        behind = same[p + 1:p + 1 + neighbours]
        return QueuePlace(self.factors(view, e), [self.factors(view, int(x)) for x in ahead],
                          [self.factors(view, int(x)) for x in behind], p + 1, len(same))


def _sorted_queue(view: View) -> QueueOrder:
    """What :func:`fairshared.explain_common.queue_entries` sorts, one job rebuilt at a time (no list of
    100,000 jobs and their Factors is ever held: only each entry's sort key)."""
    settings = view.settings
    key = queue_key(view.cluster)
    keyed: list[tuple[tuple, int, int, str]] = []  # (sort key, job row, entry of the job, partition)
    for row in range(view.jobs.n):
        one = view.jobs.job(row)
        if listed_by_sprio(one, settings, view.evaluated_at):
            rows = job_priority(one, view.fairshare_of_job(row), view.cluster, settings, view.evaluated_at)
            keyed.extend((key(f), row, sub, f.partition) for sub, f in enumerate(rows))
    keyed.sort(key=itemgetter(0))  # stable, as queue_entries' sorted()
    m = len(keyed)
    job = np.fromiter((k[1] for k in keyed), dtype=np.int32, count=m)
    sub = np.fromiter((k[2] for k in keyed), dtype=np.int16, count=m)
    part = [k[3] for k in keyed]
    del keyed
    first = np.full(view.jobs.n, -1, dtype=np.int32)
    first[job[::-1]] = np.arange(m - 1, -1, -1, dtype=np.int32)  # the last write wins: the first entry
    pos = np.zeros(m, dtype=np.int32)
    same: dict[str, np.ndarray] = {}
    names = np.array(part, dtype=object)
    for p in dict.fromkeys(part):
        entries = np.flatnonzero(names == p).astype(np.int32)
        pos[entries] = np.arange(entries.size, dtype=np.int32)
        same[p] = entries
    return QueueOrder(job, sub, part, first, pos, same)


def queue_order(view: View) -> QueueOrder:
    """The view's :class:`QueueOrder`, sorted by the first caller (the others wait for it; answers
    that need no queue, a recovery among them, do not)."""
    with view.sort_lock:
        if "queue" not in view.cache:
            order = _sorted_queue(view)
            with view.lock:
                view.cache["queue"] = order
        return view.cache["queue"]


def _snapshot(view: View, jobs: list) -> Snapshot:
    return Snapshot(associations=[], settings=view.settings, jobs=jobs, cluster_info=view.cluster,
                    sibling_order=view.sibling_order, evaluated_at=float(view.evaluated_at))


def explain_job(view: View, row: int, neighbours: int = 3) -> dict:
    """``explain JOBID --format json`` of the pending job in ``row``."""
    job = view.jobs.job(row)
    queue = queue_order(view)
    return explain_data(_snapshot(view, [job]), str(job.job_id), view.result, view.evaluated_at,
                        view.evaluated_at_is, neighbours, queue=lambda _job, k: queue.place(view, row, k),
                        index=view.index())


def explain_job_vs(view: View, row: int, other: str, other_row: int | None) -> dict:
    """``explain JOBID --vs OTHER --format json``: ``other`` is a job (``other_row``) or USER[:ACCOUNT]."""
    jobs = [view.jobs.job(row)] + ([view.jobs.job(other_row)] if other_row is not None else [])
    ref = str(jobs[0].job_id)
    other_ref = str(jobs[1].job_id) if other_row is not None else other
    return explain_vs(view.result, jobs, view.cluster, view.settings,
                      view.evaluated_at, ref, other_ref, sibling_order=view.sibling_order,
                      dampening=view.engine_params.dampening, priority_levels=view.engine_params.priority_levels,
                      index=view.index())


def recovery_of(view: View, i: int, *, target: float | None, target_rank: int | None, others: str) -> dict:
    """``whatif --recovery USER:ACCOUNT --format json`` of association ``i`` on the view's tree (no
    edits).  InputError when the cluster's usage settings give no decay to work with."""
    key = (i, target, target_rank, others)
    with view.lock:
        kept = view.cache.setdefault("recovery", {})
        if key in kept:
            return kept[key]
    try:
        policy = UsagePolicy.from_settings(view.settings)
    except ValueError as exc:
        raise InputError(f"the cluster's usage settings: {exc}") from None
    out = recovery_report(view.result.tree, view.key(i), view.algorithm, view.engine_params, policy,
                          target=target, target_rank=target_rank, others=others)
    with view.lock:
        if len(kept) >= RECOVERIES_KEPT:
            kept.pop(next(iter(kept)))
        kept[key] = out
    return out
