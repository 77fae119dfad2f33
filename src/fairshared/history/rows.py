"""What one cycle adds to the history, and the time buckets it is rolled into: pure functions.

A cycle's rows are its *user* associations, each ``(key, factor, rank, usage, pending)``: the
fair-share factor (None where sshare prints it blank), the rank among all users (1 = best, as
:meth:`~fairshared.engine.result.Result.user_ranks`), the raw usage and the number of pending
jobs charged to the association.  Accounts are not recorded: the history answers "where do I
stand", and a rank exists only for users.

Buckets are UTC: an hour starts at a multiple of 3600 s, a day at a multiple of 86400 s of Unix
time.
"""

from __future__ import annotations

import math

HOUR = 3600
DAY = 86400
RESOLUTIONS = ("cycle", "hour", "day")  # finest first
WIDTH = {"hour": HOUR, "day": DAY}

Key = tuple[str, "str | None", "str | None"]

__all__ = ["DAY", "HOUR", "RESOLUTIONS", "WIDTH", "ceil_to", "cycle_rows", "floor_to", "pending_by_assoc"]


def floor_to(t: int, width: int) -> int:
    """The start of the bucket of ``width`` seconds that holds ``t``."""
    return t - t % width


def ceil_to(t: int, width: int) -> int:
    """The start of the first bucket of ``width`` seconds that begins at or after ``t``."""
    return -(-t // width) * width


def pending_by_assoc(jobs, keys: set) -> dict:
    """Pending jobs per user association key: a job counts once, for the first of its partitions
    (``high,debug``: slurmctld's order) that has an association of its own for the job's account and
    user, else for the association without a partition.  A job whose association is not in ``keys``
    (it left the tree between the reads) counts nowhere."""
    out: dict = {}
    for j in jobs:
        if j.state != "PENDING":
            continue
        key = next((k for p in j.partitions if (k := (j.account, j.user, p)) in keys), None)
        if key is None:
            key = (j.account, j.user, None)
            if key not in keys:
                continue
        out[key] = out.get(key, 0) + 1
    return out


def cycle_rows(res) -> tuple[int, list[tuple]] | None:
    """(time, rows) of a finished :class:`~fairshared.cycle.CycleResult`; None when it computed no
    result (a failed pull or compute records nothing).

    The time is the cycle's start, in whole Unix seconds.  Each row is ``(key, factor, rank, usage,
    pending)`` for a user association, ``key`` = (account, user, partition); a NaN factor is None
    (a blank sshare column)."""
    result = getattr(res, "result", None)
    if result is None:
        return None
    tree = result.tree
    users = [i for i, u in enumerate(tree.user) if u is not None]
    keys = [(tree.account[i], tree.user[i], tree.partition[i]) for i in users]
    jobs = res.snapshot.jobs if res.snapshot is not None else []
    pending = pending_by_assoc(jobs, set(keys))
    ranks = result.user_ranks()[users].tolist()
    factors = result.fairshare[users].tolist()
    usage = tree.usage[users].astype(float).tolist()
    rows = [(k, None if math.isnan(f) else f, r, u, pending.get(k, 0))
            for k, f, r, u in zip(keys, factors, ranks, usage)]
    return int(res.started), rows
