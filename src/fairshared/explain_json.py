"""``fairshared explain JOBID --format json``: the figures of the explain page as one JSON object.

Pure: from the inputs, the engine's result and the evaluation time to a dict (the text page is
:func:`fairshared.commands.explain.explain_text`; ``--vs`` has its own JSON in ``explain_vs``).
The daemon's API (``api/view.py``) answers ``GET /api/v1/jobs/ID`` with it too, so it sits in the
core, below both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from .engine.ranks import AssocIndex, assoc_index, fairshare_of, job_assoc
from .engine.result import Result
from .explain_common import details, find_job, queue_entries, why
from .model import InputError, Job, Snapshot
from .priority import Factors, job_priority
from .priority_sprio import listed_by_sprio
from .settings import ClusterSettings


class QueuePlace(NamedTuple):
    """A job's place in its partition's queue: see :func:`queue_place`."""

    me: Factors
    ahead: list[Factors]  # nearest first
    behind: list[Factors]
    place: int  # 1-based
    of: int


def _num(x) -> float | str | None:
    """A JSON number: NaN (a blank sshare column) is null, infinity the string "inf"."""
    v = float(x)
    return None if math.isnan(v) else "inf" if math.isinf(v) else v


def _row(f: Factors, settings: ClusterSettings) -> dict:
    return {"partition": f.partition, "qos": f.qos, "priority": f.priority, "total": f.total,
            "operator_set": f.direct, "factors": dict(f.factors), "weights": dict(settings.weights),
            "weighted": dict(f.weighted), "tres": dict(f.tres), "tres_weighted": dict(f.tres_weighted),
            "site": f.site, "nice": f.nice}


def _path(result: Result, i: int | None) -> list[dict]:
    """Root to the job's association: each one's shares, usage and the algorithm's figures."""
    if i is None:
        return []
    t = result.tree
    chain = []
    while i >= 0:
        chain.append(i)
        i = int(t.parent[i])
    out = []
    for a in reversed(chain):
        out.append({
            "account": t.account[a], "user": t.user[a], "partition": t.partition[a],
            "raw_shares": "parent" if t.use_parent[a] else int(t.shares[a]),
            "level_shares": int(t.level_shares[a]) if a else None,
            "norm_shares": _num(result.norm_shares[a]), "raw_usage": _num(t.usage[a]),
            "norm_usage": _num(result.norm_usage[a]), "effective_usage": _num(result.effective_usage[a]),
            "level_fs": _num(result.level_fs[a]), "fairshare": _num(result.fairshare[a]),
            "fs_raw": None if result.fs_raw is None else f"{int(result.fs_raw[a]):016X}",
        })
    return out


def _neighbour(e: Factors, me: Factors, why) -> dict:
    return {"job_id": e.job.job_id, "user": e.job.user, "account": e.job.account, "priority": e.priority,
            "difference": e.priority - me.priority, "why": why(e, me)}


def queue_place(entries: Sequence[Factors], job: Job, neighbours: int = 3) -> QueuePlace | None:
    """Where ``job`` stands in ``entries`` (every (job, partition) in the scheduler's order, as
    :func:`queue_entries` gives them): its first entry, the ``neighbours`` entries just ahead of it
    in the same partition (nearest first) and just behind, its place (1-based) and how many
    entries that partition holds.  None when sprio would not list the job."""
    mine = [e for e in entries if e.job.job_id == job.job_id]
    if not mine:
        return None
    me = mine[0]
    same = [e for e in entries if e.partition == me.partition]
    pos = next(q for q, e in enumerate(same) if e.job.job_id == job.job_id)
    return QueuePlace(me, list(reversed(same[max(0, pos - neighbours):pos])),
                      same[pos + 1:pos + 1 + neighbours], pos + 1, len(same))


def explain_data(pi: Snapshot, job_ref: str, result: Result, now: int, when: str,
                 neighbours: int = 3, queue: Callable[[Job, int], QueuePlace | None] | None = None,
                 index: AssocIndex | None = None) -> dict:
    """What ``explain JOBID`` says, as data: the job, its priority per partition with every factor,
    the fair-share path from root, its place in the queue and the jobs just ahead and behind.

    ``queue(job, neighbours)`` says where the job stands; by default :func:`queue_place` over the
    whole queue of ``pi`` (the daemon's API passes its own, over an order it sorted once per cycle,
    and ``pi`` then needs to hold only the job itself).  ``index``: the associations by key, as
    :func:`~fairshared.engine.ranks.assoc_index` gives them (built here when None: ~0.1 s at 100,000)."""
    settings = pi.settings
    job = find_job(pi.jobs, job_ref)
    if job is None:
        raise InputError(f"job {job_ref} is not among the pending jobs read")
    index = assoc_index(result) if index is None else index
    i = job_assoc(job, index)
    fs = fairshare_of(result, index)
    rows = job_priority(job, fs(job), details(pi), settings, now)
    if queue is None:
        place = queue_place(queue_entries(pi, result, settings, now), job, neighbours)
    else:
        place = queue(job, neighbours)
    queue_part = None
    if place is not None:
        me = place.me
        queue_part = {"partition": me.partition, "place": place.place, "of": place.of,
                      "order": ["priority_tier", "priority", "submit_time", "job_id"],
                      "ahead": [_neighbour(e, me, why) for e in place.ahead],
                      "behind": [_neighbour(e, me, why) for e in place.behind]}
    users = int(result.tree.is_user.sum())
    return {
        "job": {"job_id": job.job_id, "display_id": job.display_id or str(job.job_id), "user": job.user,
                "account": job.account, "partitions": list(job.partitions), "qos": job.qos,
                "state": job.state, "reason": job.reason, "slurm_priority": job.priority,
                "held": job.priority == 0},
        "algorithm": result.algorithm,
        "evaluated_at": now,
        "evaluated_at_is": when,
        "listed_by_sprio": listed_by_sprio(job, settings, now),
        "priorities": [_row(f, settings) for f in rows],
        "fairshare": {"factor": fs(job), "association_found": i is not None,
                      "rank": int(result.user_ranks()[i]) if i is not None else None,
                      "user_associations": users, "path": _path(result, i)},
        "queue": queue_part,
    }


__all__ = ["QueuePlace", "explain_data", "queue_place"]
